// SPDX-License-Identifier: Apache-2.0
#pragma once
// The example engine's own Vulkan objects, created without vkpaged: an instance, the device
// vkpaged's default choice would pick (with VK_KHR_push_descriptor, which vkpaged needs), a
// queue, host-visible buffers and one command buffer it records and submits itself.
#include <vulkan/vulkan.h>

#include <cstddef>
#include <cstdint>
#include <string>

struct EngineDevice {
  VkInstance instance = VK_NULL_HANDLE;
  VkPhysicalDevice physical_device = VK_NULL_HANDLE;
  VkDevice device = VK_NULL_HANDLE;
  uint32_t queue_family = 0;
  VkQueue queue = VK_NULL_HANDLE;
  std::string name;

  // physical_index: which of vkEnumeratePhysicalDevices' devices to open.
  explicit EngineDevice(uint32_t physical_index);
  ~EngineDevice();
  EngineDevice(const EngineDevice&) = delete;
  EngineDevice& operator=(const EngineDevice&) = delete;
};

// A host-visible, coherent, persistently mapped storage buffer: the engine writes inputs and
// reads outputs through `mapped`, no staging copies.
struct EngineBuffer {
  EngineBuffer(const EngineDevice& device, size_t bytes);
  ~EngineBuffer();
  EngineBuffer(const EngineBuffer&) = delete;
  EngineBuffer& operator=(const EngineBuffer&) = delete;

  VkDevice device = VK_NULL_HANDLE;
  VkBuffer buffer = VK_NULL_HANDLE;
  VkDeviceMemory memory = VK_NULL_HANDLE;
  void* mapped = nullptr;
  size_t size = 0;
};

// One command buffer from the engine's pool, recorded, submitted and waited for with a fence.
class EngineCommands {
 public:
  explicit EngineCommands(const EngineDevice& device);
  ~EngineCommands();
  EngineCommands(const EngineCommands&) = delete;
  EngineCommands& operator=(const EngineCommands&) = delete;

  VkCommandBuffer begin();
  void submit_and_wait();

 private:
  const EngineDevice& device_;
  VkCommandPool pool_ = VK_NULL_HANDLE;
  VkCommandBuffer cmd_ = VK_NULL_HANDLE;
  VkFence fence_ = VK_NULL_HANDLE;
};

// Throws std::runtime_error naming the call when a Vulkan call fails.
void vk_check(VkResult result, const char* call);
