// SPDX-License-Identifier: Apache-2.0
#pragma once
// The one exception type of the C++ API. Every public entry point validates its arguments
// before recording any GPU work and throws vkpaged::Error naming the argument and the value.
#include <stdexcept>
#include <string>

#include "vkpaged/export.hpp"

namespace vkpaged {

enum class ErrorCode : int {
  invalid_argument = 1,  // a shape, dtype, index or size that the contract refuses
  unsupported = 2,       // valid by the contract but not available on this device/build
  out_of_memory = 3,     // a device or host allocation failed or would not fit
  device_error = 4,      // a Vulkan call failed (device lost, driver error)
  io_error = 5,          // a file could not be read or written
  internal = 6,          // a bug in vkpaged
};

class VKPAGED_API Error : public std::runtime_error {
 public:
  Error(ErrorCode code, const std::string& message) : std::runtime_error(message), code_(code) {}
  ErrorCode code() const noexcept { return code_; }

 private:
  ErrorCode code_;
};

// Name of an error code, as the C API and the CLI print it.
VKPAGED_API const char* to_string(ErrorCode code) noexcept;

}  // namespace vkpaged
