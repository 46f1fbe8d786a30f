// SPDX-License-Identifier: Apache-2.0
#pragma once
// Compiler statistics of a pipeline (registers, spills, shared memory...), sent to the log
// (level info, vkpaged/log.hpp) when a Context that reads the environment meets
// VKPAGED_PIPELINE_STATS=1 (environment.hpp) and the device has
// VK_KHR_pipeline_executable_properties: what performance work reads to see why a kernel
// variant is slow.
#include <vulkan/vulkan.h>

#include <string>

#include "vk/dispatch.hpp"

namespace vkpaged::vk {

// Logs every statistic of every executable of `pipeline`: one message per executable.
void log_pipeline_statistics(const Dispatch& d, VkDevice device, VkPipeline pipeline, const std::string& name);

}  // namespace vkpaged::vk
