// SPDX-License-Identifier: Apache-2.0
#include "vk/pipeline_cache_header.hpp"

#include <fmt/format.h>

#include <cstring>

namespace vkpaged::vk {

namespace {

std::string hex(std::span<const uint8_t> bytes) {
  std::string s;
  for (uint8_t b : bytes) s += fmt::format("{:02x}", b);
  return s;
}

}  // namespace

std::string pipeline_cache_refusal(std::span<const uint8_t> blob, const PipelineCacheIdentity& device) {
  VkPipelineCacheHeaderVersionOne h{};
  static_assert(sizeof(h) == 32, "VkPipelineCacheHeaderVersionOne: 4 words and a UUID");
  if (blob.size() < sizeof(h))
    return fmt::format("{} bytes are fewer than the {} of a VkPipelineCacheHeaderVersionOne (not a pipeline cache, "
                       "or a truncated one)",
                       blob.size(), sizeof(h));
  std::memcpy(&h, blob.data(), sizeof(h));  // the header's words are in the host's byte order, as the driver wrote them
  if (h.headerSize < sizeof(h) || h.headerSize > blob.size())
    return fmt::format("headerSize {} is not within [{}, {}] (the blob's size): a damaged or truncated cache",
                       h.headerSize, sizeof(h), blob.size());
  if (h.headerVersion != VK_PIPELINE_CACHE_HEADER_VERSION_ONE)
    return fmt::format("headerVersion {} is not VK_PIPELINE_CACHE_HEADER_VERSION_ONE (1): not a pipeline cache, or a "
                       "damaged one",
                       uint32_t(h.headerVersion));
  if (h.vendorID != device.vendor_id)
    return fmt::format("vendorID {:#x} is not device {}'s {:#x} (a cache of another device)", h.vendorID,
                       device.device_name, device.vendor_id);
  if (h.deviceID != device.device_id)
    return fmt::format("deviceID {:#x} is not device {}'s {:#x} (a cache of another device)", h.deviceID,
                       device.device_name, device.device_id);
  if (std::memcmp(h.pipelineCacheUUID, device.uuid.data(), VK_UUID_SIZE) != 0)
    return fmt::format("pipelineCacheUUID {} is not device {}'s {} (a cache of another driver or driver version)",
                       hex(h.pipelineCacheUUID), device.device_name, hex(device.uuid));
  return "";
}

}  // namespace vkpaged::vk
