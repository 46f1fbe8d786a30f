// The thread-local error message behind vkp_last_error(), and the status of each ErrorCode.
#include "c_api/c_api_guard.hpp"

#include <cstdio>

namespace vkpaged::c_api {

namespace {
thread_local char last_error[1024] = "";
}

void clear_error() noexcept { last_error[0] = '\0'; }
const char* last_error_message() noexcept { return last_error; }

vkp_status set_error(vkp_status status, const char* function, const char* message) noexcept {
  std::snprintf(last_error, sizeof(last_error), "%s: %s", function, message);
  return status;
}

vkp_status status_of(ErrorCode code) noexcept {
  switch (code) {
    case ErrorCode::invalid_argument: return VKP_ERROR_INVALID_ARGUMENT;
    case ErrorCode::unsupported: return VKP_ERROR_UNSUPPORTED;
    case ErrorCode::out_of_memory: return VKP_ERROR_OUT_OF_MEMORY;
    case ErrorCode::device_error: return VKP_ERROR_DEVICE;
    case ErrorCode::io_error: return VKP_ERROR_IO;
    case ErrorCode::internal: return VKP_ERROR_INTERNAL;
  }
  return VKP_ERROR_INTERNAL;
}

// The two enums are one list; the C header spells it without C++.
static_assert(int(VKP_ERROR_INVALID_ARGUMENT) == int(ErrorCode::invalid_argument) &&
              int(VKP_ERROR_UNSUPPORTED) == int(ErrorCode::unsupported) &&
              int(VKP_ERROR_OUT_OF_MEMORY) == int(ErrorCode::out_of_memory) &&
              int(VKP_ERROR_DEVICE) == int(ErrorCode::device_error) && int(VKP_ERROR_IO) == int(ErrorCode::io_error) &&
              int(VKP_ERROR_INTERNAL) == int(ErrorCode::internal));

}  // namespace vkpaged::c_api
