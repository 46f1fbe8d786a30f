// SPDX-License-Identifier: Apache-2.0
#pragma once
// Where vkpaged's messages go. The library never writes to stderr or stdout itself: every
// message (validation-layer reports of a Context created with validation on, pipeline
// statistics asked for with VKPAGED_PIPELINE_STATS=1 by a Context that reads the environment,
// ContextOptions::read_environment) goes to the log callback, one call per
// message, with its level, the text (no trailing newline) and the user pointer given with it.
//
// Until a callback is set, the default one writes messages of level info and above to stderr
// as "vkpaged: <message>", which is what vkpaged printed before there was a callback. Set a
// callback that does nothing to silence vkpaged.
//
// One callback per process, as llama.cpp's llama_log_set: a validation message belongs to the
// instance of the Context that caused it, but the engine has one log, messages also arise
// while a Context is being created (before the caller holds it), and the host-only parts
// (BlockManager, the CPU references) have no Context at all. Messages read the callback when
// they are sent, so one set after a Context exists receives that Context's messages.
//
// Threads: messages may come from any thread that calls vkpaged (or calls Vulkan on a device
// vkpaged validates), but calls of the callback never overlap: it needs no lock of its own.
// Once set_log_callback returns, the previous callback is neither running nor called again,
// so its user data may be freed. The callback must not call set_log_callback (that throws
// vkpaged::Error), and what it throws is dropped.
#include <cstdint>

#include "vkpaged/export.hpp"

namespace vkpaged {

enum class LogLevel : uint32_t {
  debug = 0,    // details for whoever debugs vkpaged itself
  info = 1,     // asked-for reports (pipeline statistics)
  warning = 2,  // validation-layer warnings, performance warnings
  error = 3,    // validation-layer errors: the application or vkpaged broke a Vulkan rule
};

// "debug", "info", "warning", "error"; "unknown" for other values.
VKPAGED_API const char* to_string(LogLevel level) noexcept;

using LogCallback = void (*)(LogLevel level, const char* message, void* user_data);

// Sends every message of `min_level` and above to `callback` with `user_data`, from now on and
// instead of the previous callback. A null callback restores the default (stderr, the given
// level and above).
VKPAGED_API void set_log_callback(LogCallback callback, void* user_data, LogLevel min_level = LogLevel::info);

}  // namespace vkpaged
