// SPDX-License-Identifier: Apache-2.0
#include "vk/pipeline_statistics.hpp"

#include <fmt/format.h>

#include <vector>

#include "log_message.hpp"

namespace vkpaged::vk {

namespace {

std::string value_of(const VkPipelineExecutableStatisticKHR& s) {
  switch (s.format) {
    case VK_PIPELINE_EXECUTABLE_STATISTIC_FORMAT_BOOL32_KHR: return s.value.b32 ? "true" : "false";
    case VK_PIPELINE_EXECUTABLE_STATISTIC_FORMAT_INT64_KHR: return fmt::format("{}", s.value.i64);
    case VK_PIPELINE_EXECUTABLE_STATISTIC_FORMAT_UINT64_KHR: return fmt::format("{}", s.value.u64);
    case VK_PIPELINE_EXECUTABLE_STATISTIC_FORMAT_FLOAT64_KHR: return fmt::format("{}", s.value.f64);
    default: return "?";
  }
}

}  // namespace

void log_pipeline_statistics(const Dispatch& d, VkDevice device, VkPipeline pipeline, const std::string& name) {
  if (!detail::log_enabled(LogLevel::info)) return;
  if (d.vkGetPipelineExecutablePropertiesKHR == nullptr || d.vkGetPipelineExecutableStatisticsKHR == nullptr) return;
  VkPipelineInfoKHR info{VK_STRUCTURE_TYPE_PIPELINE_INFO_KHR};
  info.pipeline = pipeline;
  uint32_t count = 0;
  if (d.vkGetPipelineExecutablePropertiesKHR(device, &info, &count, nullptr) != VK_SUCCESS) return;
  std::vector<VkPipelineExecutablePropertiesKHR> executables(count, {VK_STRUCTURE_TYPE_PIPELINE_EXECUTABLE_PROPERTIES_KHR});
  d.vkGetPipelineExecutablePropertiesKHR(device, &info, &count, executables.data());
  for (uint32_t e = 0; e < count; ++e) {
    VkPipelineExecutableInfoKHR exec{VK_STRUCTURE_TYPE_PIPELINE_EXECUTABLE_INFO_KHR};
    exec.pipeline = pipeline;
    exec.executableIndex = e;
    uint32_t n = 0;
    d.vkGetPipelineExecutableStatisticsKHR(device, &exec, &n, nullptr);
    std::vector<VkPipelineExecutableStatisticKHR> stats(n, {VK_STRUCTURE_TYPE_PIPELINE_EXECUTABLE_STATISTIC_KHR});
    d.vkGetPipelineExecutableStatisticsKHR(device, &exec, &n, stats.data());
    std::string line = fmt::format("pipeline {} [{}]:", name, executables[e].name);
    for (uint32_t i = 0; i < n; ++i) line += fmt::format(" {}={}", stats[i].name, value_of(stats[i]));
    detail::log_message(LogLevel::info, line);
  }
}

}  // namespace vkpaged::vk
