// SPDX-License-Identifier: Apache-2.0
#pragma once
// Every Vulkan entry point vkpaged calls, loaded once per instance and device through
// vkGetInstanceProcAddr / vkGetDeviceProcAddr. Calls go through this table, so a context
// can adopt an engine's instance and device with the engine's own loader.
#include <vulkan/vulkan.h>

#include "vk/cooperative_matrix_khr.hpp"

#define VKPAGED_INSTANCE_FUNCTIONS(X)           \
  X(vkDestroyInstance)                          \
  X(vkEnumeratePhysicalDevices)                 \
  X(vkGetPhysicalDeviceProperties)              \
  X(vkGetPhysicalDeviceProperties2)             \
  X(vkGetPhysicalDeviceFeatures2)               \
  X(vkGetPhysicalDeviceCooperativeMatrixPropertiesNV) \
  X(vkGetPhysicalDeviceCooperativeMatrixPropertiesKHR) \
  X(vkGetPhysicalDeviceMemoryProperties)        \
  X(vkGetPhysicalDeviceMemoryProperties2)       \
  X(vkGetPhysicalDeviceQueueFamilyProperties)   \
  X(vkEnumerateDeviceExtensionProperties)       \
  X(vkCreateDevice)                             \
  X(vkGetDeviceProcAddr)                        \
  X(vkCreateDebugUtilsMessengerEXT)             \
  X(vkDestroyDebugUtilsMessengerEXT)

#define VKPAGED_DEVICE_FUNCTIONS(X)       \
  X(vkDestroyDevice)                      \
  X(vkGetDeviceQueue)                     \
  X(vkDeviceWaitIdle)                     \
  X(vkQueueSubmit)                        \
  X(vkQueueWaitIdle)                      \
  X(vkCreateBuffer)                       \
  X(vkDestroyBuffer)                      \
  X(vkGetBufferMemoryRequirements)        \
  X(vkAllocateMemory)                     \
  X(vkFreeMemory)                         \
  X(vkBindBufferMemory)                   \
  X(vkMapMemory)                          \
  X(vkUnmapMemory)                        \
  X(vkCreateShaderModule)                 \
  X(vkDestroyShaderModule)                \
  X(vkCreateDescriptorSetLayout)          \
  X(vkDestroyDescriptorSetLayout)         \
  X(vkCreatePipelineLayout)               \
  X(vkDestroyPipelineLayout)              \
  X(vkCreatePipelineCache)                \
  X(vkDestroyPipelineCache)               \
  X(vkGetPipelineCacheData)               \
  X(vkMergePipelineCaches)                \
  X(vkCreateComputePipelines)             \
  X(vkDestroyPipeline)                    \
  X(vkCreateCommandPool)                  \
  X(vkDestroyCommandPool)                 \
  X(vkAllocateCommandBuffers)             \
  X(vkFreeCommandBuffers)                 \
  X(vkBeginCommandBuffer)                 \
  X(vkEndCommandBuffer)                   \
  X(vkCreateFence)                        \
  X(vkDestroyFence)                       \
  X(vkWaitForFences)                      \
  X(vkResetFences)                        \
  X(vkCreateQueryPool)                    \
  X(vkDestroyQueryPool)                   \
  X(vkGetQueryPoolResults)                \
  X(vkCmdResetQueryPool)                  \
  X(vkCmdWriteTimestamp)                  \
  X(vkCmdBindPipeline)                    \
  X(vkCmdPushConstants)                   \
  X(vkCmdDispatch)                        \
  X(vkCmdPipelineBarrier)                 \
  X(vkCmdCopyBuffer)                      \
  X(vkCmdFillBuffer)                      \
  X(vkCmdPushDescriptorSetKHR)             \
  X(vkGetBufferDeviceAddress)             \
  X(vkGetPipelineExecutablePropertiesKHR) \
  X(vkGetPipelineExecutableStatisticsKHR)

namespace vkpaged::vk {

struct Dispatch {
#define VKPAGED_DECLARE(name) PFN_##name name = nullptr;
  VKPAGED_INSTANCE_FUNCTIONS(VKPAGED_DECLARE)
  VKPAGED_DEVICE_FUNCTIONS(VKPAGED_DECLARE)
#undef VKPAGED_DECLARE

  // Loads the instance-level entries; unknown extension entries stay null.
  void load_instance(PFN_vkGetInstanceProcAddr get_instance_proc, VkInstance instance);
  // Loads the device-level entries through the instance table's vkGetDeviceProcAddr.
  void load_device(VkDevice device);
};

}  // namespace vkpaged::vk
