// SPDX-License-Identifier: Apache-2.0
#pragma once
// Free device-local memory as VK_EXT_memory_budget reports it, for sizing a KV cache by a
// fraction of what is free rather than of the heaps' size.
#include <vulkan/vulkan.h>

#include "vk/dispatch.hpp"
#include "vkpaged/context.hpp"

namespace vkpaged::vk {

// Where info.memory_budget says the device has the extension, sets info.device_local_free_bytes
// to the sum over device-local heaps of heapBudget - heapUsage (this process's usage included
// in both, so the difference is what it can still allocate); else leaves it 0. The figures are
// of the moment of the call: query again before sizing from them.
void query_memory_budget(const Dispatch& d, VkPhysicalDevice device, DeviceInfo& info);

}  // namespace vkpaged::vk
