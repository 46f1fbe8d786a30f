// SPDX-License-Identifier: Apache-2.0
#include <fmt/format.h>

#include <atomic>
#include <cstdio>
#include <mutex>
#include <string>

#include "log_message.hpp"
#include "vkpaged/error.hpp"
#include "vkpaged/log.hpp"

namespace vkpaged {

namespace {

// What vkpaged printed before there was a callback.
void write_to_stderr(LogLevel, const char* message, void*) { std::fprintf(stderr, "vkpaged: %s\n", message); }

struct Sink {
  LogCallback callback = &write_to_stderr;
  void* user_data = nullptr;
  // Read without the lock by log_enabled; written under it.
  std::atomic<uint32_t> min_level{uint32_t(LogLevel::info)};
  // Held while the callback runs: calls never overlap, and set_log_callback waits for a call
  // under way to end before it replaces the callback.
  std::mutex mutex;
};

Sink& sink() {
  static Sink instance;  // constructed on first use, whatever the order of static initialisation
  return instance;
}

// Set while this thread runs the callback: a message sent from inside it (the callback calls
// vkpaged) goes to the same callback without taking the lock again.
thread_local bool in_callback = false;

struct InCallback {
  InCallback() { in_callback = true; }
  ~InCallback() { in_callback = false; }
};

}  // namespace

const char* to_string(LogLevel level) noexcept {
  switch (level) {
    case LogLevel::debug: return "debug";
    case LogLevel::info: return "info";
    case LogLevel::warning: return "warning";
    case LogLevel::error: return "error";
  }
  return "unknown";
}

void set_log_callback(LogCallback callback, void* user_data, LogLevel min_level) {
  if (uint32_t(min_level) > uint32_t(LogLevel::error))
    throw Error(ErrorCode::invalid_argument,
                fmt::format("min_level: {} is not a log level (debug 0, info 1, warning 2, error 3)", uint32_t(min_level)));
  if (in_callback)
    throw Error(ErrorCode::invalid_argument, "set_log_callback: called from inside the log callback, which it would replace");
  Sink& s = sink();
  std::lock_guard lock(s.mutex);
  s.callback = callback != nullptr ? callback : &write_to_stderr;
  s.user_data = callback != nullptr ? user_data : nullptr;
  s.min_level.store(uint32_t(min_level));
}

namespace detail {

bool log_enabled(LogLevel level) noexcept { return uint32_t(level) >= sink().min_level.load(); }

void log_message(LogLevel level, std::string_view message) noexcept {
  try {
    Sink& s = sink();
    const std::string text(message);  // the callback gets a terminated string
    if (in_callback) {
      // This thread holds the lock already (the callback sent it through vkpaged).
      if (uint32_t(level) >= s.min_level.load()) s.callback(level, text.c_str(), s.user_data);
      return;
    }
    std::lock_guard lock(s.mutex);
    if (uint32_t(level) < s.min_level.load()) return;
    InCallback guard;
    s.callback(level, text.c_str(), s.user_data);
  } catch (...) {
    // A log message must never change what the caller sees; the callback's exception, or a
    // failed allocation of the text, loses the message only.
  }
}

}  // namespace detail
}  // namespace vkpaged
