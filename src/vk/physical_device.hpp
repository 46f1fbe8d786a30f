#pragma once
// Reading what a physical device offers, and choosing one.
#include <vulkan/vulkan.h>

#include <string>
#include <vector>

#include "vk/dispatch.hpp"
#include "vkpaged/context.hpp"

namespace vkpaged::vk {

std::vector<VkPhysicalDevice> enumerate_physical_devices(const Dispatch& d, VkInstance instance);
bool has_device_extension(const Dispatch& d, VkPhysicalDevice device, const char* name);
DeviceInfo query_device_info(const Dispatch& d, VkPhysicalDevice device, uint32_t index);
// Discrete GPU first, then integrated, virtual, CPU (lavapipe); ties by enumeration order.
uint32_t default_device_index(const std::vector<DeviceInfo>& devices);
// "" -> VKPAGED_DEVICE or the default; "N" -> index N; else the first name containing it
// (case-insensitive). Throws vkpaged::Error naming the choice when nothing matches.
uint32_t resolve_device_choice(const std::string& choice, const std::vector<DeviceInfo>& devices);

}  // namespace vkpaged::vk
