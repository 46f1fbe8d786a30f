// SPDX-License-Identifier: Apache-2.0
#include "environment.hpp"

#include <cstdlib>

namespace vkpaged::detail {

namespace {

bool flag(const std::optional<std::string>& value) { return value && !value->empty() && *value != "0"; }

}  // namespace

std::optional<std::string> environment_variable(const char* name) {
  const char* value = std::getenv(name);
  if (value == nullptr) return std::nullopt;
  return std::string(value);
}

EnvironmentSettings read_environment_settings() {
  EnvironmentSettings s;
  s.device = environment_variable(kDeviceVariable).value_or("");
  const auto validation = environment_variable(kValidationVariable);
  s.validation = flag(validation);
  s.sync_validation = validation == "sync";
  s.pipeline_statistics = flag(environment_variable(kPipelineStatsVariable));
  return s;
}

}  // namespace vkpaged::detail
