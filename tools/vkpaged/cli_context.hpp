// SPDX-License-Identifier: Apache-2.0
#pragma once
// The Context options of every command: the device asked for, and vkpaged's environment
// variables (docs/environment.md: VKPAGED_DEVICE, VKPAGED_VALIDATION, ...), which the library
// reads only when told to.
#include <string>

#include "vkpaged/context.hpp"

namespace vkpaged::cli {

inline ContextOptions cli_context_options(const std::string& device) {
  ContextOptions options;
  options.device = device;
  options.read_environment = true;
  return options;
}

}  // namespace vkpaged::cli
