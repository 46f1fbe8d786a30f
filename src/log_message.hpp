// SPDX-License-Identifier: Apache-2.0
#pragma once
// How the library sends a message to the log callback (vkpaged/log.hpp). Nothing in src/
// writes to stderr or stdout: everything goes through here.
#include <string_view>

#include "vkpaged/log.hpp"

namespace vkpaged::detail {

// Whether a message of `level` would reach the callback (lets a caller skip building it).
bool log_enabled(LogLevel level) noexcept;

// Hands the message to the callback when its level passes the filter. Never throws.
void log_message(LogLevel level, std::string_view message) noexcept;

}  // namespace vkpaged::detail
