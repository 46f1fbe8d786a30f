// SPDX-License-Identifier: Apache-2.0
#include "engine_vulkan.hpp"

#include <cstring>
#include <stdexcept>
#include <vector>

void vk_check(VkResult result, const char* call) {
  if (result != VK_SUCCESS) throw std::runtime_error(std::string(call) + " failed: VkResult " + std::to_string(result));
}

namespace {

bool has_push_descriptor(VkPhysicalDevice physical) {
  uint32_t count = 0;
  vkEnumerateDeviceExtensionProperties(physical, nullptr, &count, nullptr);
  std::vector<VkExtensionProperties> extensions(count);
  vkEnumerateDeviceExtensionProperties(physical, nullptr, &count, extensions.data());
  for (const auto& e : extensions)
    if (std::strcmp(e.extensionName, VK_KHR_PUSH_DESCRIPTOR_EXTENSION_NAME) == 0) return true;
  return false;
}

uint32_t compute_queue_family(VkPhysicalDevice physical) {
  uint32_t count = 0;
  vkGetPhysicalDeviceQueueFamilyProperties(physical, &count, nullptr);
  std::vector<VkQueueFamilyProperties> families(count);
  vkGetPhysicalDeviceQueueFamilyProperties(physical, &count, families.data());
  for (uint32_t i = 0; i < count; ++i)
    if (families[i].queueFlags & VK_QUEUE_COMPUTE_BIT) return i;
  throw std::runtime_error("the device has no compute queue");
}

}  // namespace

EngineDevice::EngineDevice(uint32_t physical_index) {
  VkApplicationInfo app{VK_STRUCTURE_TYPE_APPLICATION_INFO};
  app.pApplicationName = "vkpaged C++ example";
  app.apiVersion = VK_API_VERSION_1_2;
  VkInstanceCreateInfo iinfo{VK_STRUCTURE_TYPE_INSTANCE_CREATE_INFO};
  iinfo.pApplicationInfo = &app;
  vk_check(vkCreateInstance(&iinfo, nullptr, &instance), "vkCreateInstance");

  uint32_t count = 0;
  vkEnumeratePhysicalDevices(instance, &count, nullptr);
  std::vector<VkPhysicalDevice> physical(count);
  vkEnumeratePhysicalDevices(instance, &count, physical.data());
  if (physical_index >= count) throw std::runtime_error("no Vulkan device " + std::to_string(physical_index));
  physical_device = physical[physical_index];
  VkPhysicalDeviceProperties props;
  vkGetPhysicalDeviceProperties(physical_device, &props);
  name = props.deviceName;
  if (!has_push_descriptor(physical_device)) throw std::runtime_error(name + " lacks VK_KHR_push_descriptor");
  queue_family = compute_queue_family(physical_device);

  const float priority = 1.0f;
  VkDeviceQueueCreateInfo qinfo{VK_STRUCTURE_TYPE_DEVICE_QUEUE_CREATE_INFO};
  qinfo.queueFamilyIndex = queue_family;
  qinfo.queueCount = 1;
  qinfo.pQueuePriorities = &priority;
  const char* extensions[] = {VK_KHR_PUSH_DESCRIPTOR_EXTENSION_NAME};
  VkDeviceCreateInfo dinfo{VK_STRUCTURE_TYPE_DEVICE_CREATE_INFO};
  dinfo.queueCreateInfoCount = 1;
  dinfo.pQueueCreateInfos = &qinfo;
  dinfo.enabledExtensionCount = 1;
  dinfo.ppEnabledExtensionNames = extensions;
  vk_check(vkCreateDevice(physical_device, &dinfo, nullptr, &device), "vkCreateDevice");
  vkGetDeviceQueue(device, queue_family, 0, &queue);
}

EngineDevice::~EngineDevice() {
  if (device) vkDestroyDevice(device, nullptr);
  if (instance) vkDestroyInstance(instance, nullptr);
}

EngineBuffer::EngineBuffer(const EngineDevice& d, size_t bytes) : device(d.device), size(bytes) {
  VkBufferCreateInfo binfo{VK_STRUCTURE_TYPE_BUFFER_CREATE_INFO};
  binfo.size = bytes;
  binfo.usage = VK_BUFFER_USAGE_STORAGE_BUFFER_BIT | VK_BUFFER_USAGE_TRANSFER_SRC_BIT | VK_BUFFER_USAGE_TRANSFER_DST_BIT;
  vk_check(vkCreateBuffer(device, &binfo, nullptr, &buffer), "vkCreateBuffer");
  VkMemoryRequirements req;
  vkGetBufferMemoryRequirements(device, buffer, &req);
  VkPhysicalDeviceMemoryProperties mem;
  vkGetPhysicalDeviceMemoryProperties(d.physical_device, &mem);
  const VkMemoryPropertyFlags want = VK_MEMORY_PROPERTY_HOST_VISIBLE_BIT | VK_MEMORY_PROPERTY_HOST_COHERENT_BIT;
  uint32_t type = UINT32_MAX;
  for (uint32_t i = 0; i < mem.memoryTypeCount && type == UINT32_MAX; ++i)
    if ((req.memoryTypeBits & (1u << i)) && (mem.memoryTypes[i].propertyFlags & want) == want) type = i;
  if (type == UINT32_MAX) throw std::runtime_error("no host-visible coherent memory");
  VkMemoryAllocateInfo ainfo{VK_STRUCTURE_TYPE_MEMORY_ALLOCATE_INFO};
  ainfo.allocationSize = req.size;
  ainfo.memoryTypeIndex = type;
  vk_check(vkAllocateMemory(device, &ainfo, nullptr, &memory), "vkAllocateMemory");
  vk_check(vkBindBufferMemory(device, buffer, memory, 0), "vkBindBufferMemory");
  vk_check(vkMapMemory(device, memory, 0, VK_WHOLE_SIZE, 0, &mapped), "vkMapMemory");
}

EngineBuffer::~EngineBuffer() {
  if (buffer) vkDestroyBuffer(device, buffer, nullptr);
  if (memory) vkFreeMemory(device, memory, nullptr);
}

EngineCommands::EngineCommands(const EngineDevice& device) : device_(device) {
  VkCommandPoolCreateInfo pinfo{VK_STRUCTURE_TYPE_COMMAND_POOL_CREATE_INFO};
  pinfo.flags = VK_COMMAND_POOL_CREATE_RESET_COMMAND_BUFFER_BIT;
  pinfo.queueFamilyIndex = device.queue_family;
  vk_check(vkCreateCommandPool(device.device, &pinfo, nullptr, &pool_), "vkCreateCommandPool");
  VkCommandBufferAllocateInfo ainfo{VK_STRUCTURE_TYPE_COMMAND_BUFFER_ALLOCATE_INFO};
  ainfo.commandPool = pool_;
  ainfo.level = VK_COMMAND_BUFFER_LEVEL_PRIMARY;
  ainfo.commandBufferCount = 1;
  vk_check(vkAllocateCommandBuffers(device.device, &ainfo, &cmd_), "vkAllocateCommandBuffers");
  VkFenceCreateInfo finfo{VK_STRUCTURE_TYPE_FENCE_CREATE_INFO};
  vk_check(vkCreateFence(device.device, &finfo, nullptr, &fence_), "vkCreateFence");
}

EngineCommands::~EngineCommands() {
  vkDestroyFence(device_.device, fence_, nullptr);
  vkDestroyCommandPool(device_.device, pool_, nullptr);
}

VkCommandBuffer EngineCommands::begin() {
  vk_check(vkResetCommandBuffer(cmd_, 0), "vkResetCommandBuffer");
  VkCommandBufferBeginInfo binfo{VK_STRUCTURE_TYPE_COMMAND_BUFFER_BEGIN_INFO};
  binfo.flags = VK_COMMAND_BUFFER_USAGE_ONE_TIME_SUBMIT_BIT;
  vk_check(vkBeginCommandBuffer(cmd_, &binfo), "vkBeginCommandBuffer");
  return cmd_;
}

void EngineCommands::submit_and_wait() {
  vk_check(vkEndCommandBuffer(cmd_), "vkEndCommandBuffer");
  vk_check(vkResetFences(device_.device, 1, &fence_), "vkResetFences");
  VkSubmitInfo sinfo{VK_STRUCTURE_TYPE_SUBMIT_INFO};
  sinfo.commandBufferCount = 1;
  sinfo.pCommandBuffers = &cmd_;
  vk_check(vkQueueSubmit(device_.queue, 1, &sinfo, fence_), "vkQueueSubmit");
  vk_check(vkWaitForFences(device_.device, 1, &fence_, VK_TRUE, UINT64_MAX), "vkWaitForFences");
}
