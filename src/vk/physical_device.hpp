// SPDX-License-Identifier: Apache-2.0
#pragma once
// Reading what a physical device offers, and choosing one.
#include <vulkan/vulkan.h>

#include <string>
#include <vector>

#include "vk/dispatch.hpp"
#include "vk/instance.hpp"
#include "vkpaged/context.hpp"

namespace vkpaged::vk {

std::vector<VkPhysicalDevice> enumerate_physical_devices(const Dispatch& d, VkInstance instance);
bool has_device_extension(const Dispatch& d, VkPhysicalDevice device, const char* name);
// `khr_cooperative_matrix`: whether to query VK_KHR_cooperative_matrix (its feature and
// properties structures, its shapes) where the device has it; see DeviceInfo.
DeviceInfo query_device_info(const Dispatch& d, VkPhysicalDevice device, uint32_t index, bool khr_cooperative_matrix);

// Whether the instance's Khronos validation layer, if any, knows VK_KHR_cooperative_matrix's
// structures and SPIR-V (cooperative_matrix_khr.hpp); an older one reports each as an error.
bool layers_accept_cooperative_matrix_khr(const Instance& instance);
// Why VK_KHR_cooperative_matrix stays off on `device` because of that layer, "" when it does not.
std::string layers_refusing_cooperative_matrix_khr(const Instance& instance, const Dispatch& d, VkPhysicalDevice device);

// VK_EXT_subgroup_size_control's computeFullSubgroups (and the largest subgroup size, which a
// full-subgroups dispatch's workgroup width must be a multiple of), for KHR matrix pipelines.
struct FullSubgroupSupport {
  bool available = false;  // the extension with computeFullSubgroups
  uint32_t max_subgroup_size = 0;
};
FullSubgroupSupport query_full_subgroups(const Dispatch& d, VkPhysicalDevice device);
// Discrete GPU first, then integrated, virtual, CPU (lavapipe); ties by enumeration order.
uint32_t default_device_index(const std::vector<DeviceInfo>& devices);
// "" -> the default; "N" -> index N; else the first name containing it (case-insensitive).
// Throws vkpaged::Error naming `name` (where the choice came from) and the choice when nothing
// matches.
uint32_t resolve_device_choice(const std::string& choice, const std::vector<DeviceInfo>& devices, const char* name);

}  // namespace vkpaged::vk
