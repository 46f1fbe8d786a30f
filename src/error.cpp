// SPDX-License-Identifier: Apache-2.0
#include "vkpaged/error.hpp"

namespace vkpaged {

const char* to_string(ErrorCode code) noexcept {
  switch (code) {
    case ErrorCode::invalid_argument: return "invalid_argument";
    case ErrorCode::unsupported: return "unsupported";
    case ErrorCode::out_of_memory: return "out_of_memory";
    case ErrorCode::device_error: return "device_error";
    case ErrorCode::io_error: return "io_error";
    case ErrorCode::internal: return "internal";
  }
  return "unknown";
}

}  // namespace vkpaged
