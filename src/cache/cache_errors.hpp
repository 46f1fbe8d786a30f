// SPDX-License-Identifier: Apache-2.0
#pragma once
// Errors of the cache manager: argument refusals and running out of blocks.
#include <fmt/format.h>

#include <utility>

#include "vkpaged/error.hpp"

namespace vkpaged::cache {

template <typename... Args>
[[noreturn]] void refuse(fmt::format_string<Args...> format, Args&&... args) {
  throw Error(ErrorCode::invalid_argument, fmt::format(format, std::forward<Args>(args)...));
}

template <typename... Args>
[[noreturn]] void out_of_blocks(fmt::format_string<Args...> format, Args&&... args) {
  throw Error(ErrorCode::out_of_memory, fmt::format(format, std::forward<Args>(args)...));
}

}  // namespace vkpaged::cache
