// SPDX-License-Identifier: Apache-2.0
#pragma once
// Whether a saved VkPipelineCache blob was made by this device and driver: its
// VkPipelineCacheHeaderVersionOne (sizes, version, vendorID, deviceID, pipelineCacheUUID) is
// read here, before the driver sees the data, so that a blob from elsewhere or a damaged one is
// refused with the reason instead of being dropped silently (or worse) by the driver. Host only.
#include <vulkan/vulkan.h>

#include <array>
#include <cstdint>
#include <span>
#include <string>

namespace vkpaged::vk {

// What a device writes into the header of its caches (VkPhysicalDeviceProperties).
struct PipelineCacheIdentity {
  std::string device_name;  // for messages
  uint32_t vendor_id = 0;
  uint32_t device_id = 0;
  std::array<uint8_t, VK_UUID_SIZE> uuid{};
};

// "" when `blob` starts with a version-one header of this device and driver; else why not
// ("vendorID 0x10de is not device llvmpipe's 0x10005 (a cache of another device)").
std::string pipeline_cache_refusal(std::span<const uint8_t> blob, const PipelineCacheIdentity& device);

}  // namespace vkpaged::vk
