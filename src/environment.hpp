// SPDX-License-Identifier: Apache-2.0
#pragma once
// vkpaged's environment variables (docs/environment.md), and the one place the library reads
// the environment. Only a Context created with ContextOptions::read_environment reads them: a
// library follows what its engine asked for, not variables set for some other program.
#include <optional>
#include <string>

namespace vkpaged::detail {

inline constexpr const char* kDeviceVariable = "VKPAGED_DEVICE";
inline constexpr const char* kValidationVariable = "VKPAGED_VALIDATION";
inline constexpr const char* kPipelineStatsVariable = "VKPAGED_PIPELINE_STATS";

// The variable's text, nullopt when it is unset.
std::optional<std::string> environment_variable(const char* name);

// What a Context with read_environment takes from the environment as it is created.
// (VKPAGED_DECODE_TUNE is read later, at the context's first decode plan: ops/decode.cpp.)
struct EnvironmentSettings {
  std::string device;                // VKPAGED_DEVICE; "" when unset
  bool validation = false;           // VKPAGED_VALIDATION set to anything but "" or "0"
  bool sync_validation = false;      // VKPAGED_VALIDATION=sync: synchronization validation or refuse
  bool pipeline_statistics = false;  // VKPAGED_PIPELINE_STATS set to anything but "" or "0"
};
EnvironmentSettings read_environment_settings();

}  // namespace vkpaged::detail
