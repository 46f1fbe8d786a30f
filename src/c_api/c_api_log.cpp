// SPDX-License-Identifier: Apache-2.0
// C API: the log callback. A C function pointer and its user data travel to the C++ callback
// (vkpaged/log.hpp) as one heap object that a forwarding function reads; set_log_callback's
// promise (once it returns, the previous callback is neither running nor called again) makes
// the previous object free to delete right after it returns.
#include <memory>
#include <mutex>

#include "c_api/c_api_convert.hpp"
#include "c_api/c_api_guard.hpp"
#include "vkpaged/log.hpp"
#include "vkpaged/vkpaged.h"

using namespace vkpaged;
using namespace vkpaged::c_api;

namespace {

struct CLogTarget {
  vkp_log_fn fn = nullptr;
  void* user_data = nullptr;
};

// Set while this thread runs the C callback: a vkp_set_log_callback from inside it is refused
// here, before the mutex below (another thread may hold it while set_log_callback waits for
// this very callback to return).
thread_local bool in_c_callback = false;

void forward(LogLevel level, const char* message, void* user_data) {
  const auto* target = static_cast<const CLogTarget*>(user_data);
  const bool outer = in_c_callback;  // a message the callback itself caused arrives nested
  in_c_callback = true;
  target->fn(uint32_t(level), message, target->user_data);
  in_c_callback = outer;
}

// Serializes vkp_set_log_callback calls, so that each frees the target the one before installed.
std::mutex& targets_mutex() {
  static std::mutex* m = new std::mutex;  // never destroyed: callable during static destruction
  return *m;
}
CLogTarget* installed = nullptr;  // the target the C++ callback now reads; under targets_mutex

}  // namespace

extern "C" {

VKP_API vkp_status VKP_CALL vkp_set_log_callback(vkp_log_fn fn, void* user_data, vkp_log_level min_level) {
  return guarded("vkp_set_log_callback", [&] {
    const LogLevel level = to_log_level(min_level, "min_level");
    if (in_c_callback)
      throw Error(ErrorCode::invalid_argument, "called from inside the log callback, which it would replace");
    std::lock_guard lock(targets_mutex());
    std::unique_ptr<CLogTarget> next = fn != nullptr ? std::make_unique<CLogTarget>(CLogTarget{fn, user_data}) : nullptr;
    set_log_callback(next != nullptr ? &forward : nullptr, next.get(), level);
    // set_log_callback has returned: the previous target is no longer read by anyone.
    const std::unique_ptr<CLogTarget> previous(installed);
    installed = next.release();
  });
}

}  // extern "C"
