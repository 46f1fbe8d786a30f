// SPDX-License-Identifier: Apache-2.0
#include "vk/memory_budget.hpp"

namespace vkpaged::vk {

void query_memory_budget(const Dispatch& d, VkPhysicalDevice device, DeviceInfo& info) {
  info.device_local_free_bytes = 0;
  if (!info.memory_budget || d.vkGetPhysicalDeviceMemoryProperties2 == nullptr) return;
  VkPhysicalDeviceMemoryBudgetPropertiesEXT budget{VK_STRUCTURE_TYPE_PHYSICAL_DEVICE_MEMORY_BUDGET_PROPERTIES_EXT};
  VkPhysicalDeviceMemoryProperties2 properties{VK_STRUCTURE_TYPE_PHYSICAL_DEVICE_MEMORY_PROPERTIES_2};
  properties.pNext = &budget;
  d.vkGetPhysicalDeviceMemoryProperties2(device, &properties);
  const VkPhysicalDeviceMemoryProperties& memory = properties.memoryProperties;
  for (uint32_t i = 0; i < memory.memoryHeapCount; ++i)
    if ((memory.memoryHeaps[i].flags & VK_MEMORY_HEAP_DEVICE_LOCAL_BIT) && budget.heapBudget[i] > budget.heapUsage[i])
      info.device_local_free_bytes += budget.heapBudget[i] - budget.heapUsage[i];
}

}  // namespace vkpaged::vk
