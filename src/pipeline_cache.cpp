// SPDX-License-Identifier: Apache-2.0
// Context::pipeline_cache_data and Context::load_pipeline_cache: the context's VkPipelineCache
// saved and merged back, its header checked against the device before the driver reads it.
#include <fmt/format.h>

#include <cstring>
#include <mutex>
#include <shared_mutex>

#include "vk/check.hpp"
#include "vk/context_impl.hpp"
#include "vk/pipeline_cache_header.hpp"
#include "vkpaged/context.hpp"
#include "vkpaged/error.hpp"

namespace vkpaged {

namespace {

vk::PipelineCacheIdentity identity(const detail::ContextImpl& impl) {
  VkPhysicalDeviceProperties p{};
  impl.d.vkGetPhysicalDeviceProperties(impl.physical_device, &p);
  vk::PipelineCacheIdentity id;
  id.device_name = p.deviceName;
  id.vendor_id = p.vendorID;
  id.device_id = p.deviceID;
  std::memcpy(id.uuid.data(), p.pipelineCacheUUID, VK_UUID_SIZE);
  return id;
}

}  // namespace

std::vector<uint8_t> Context::pipeline_cache_data() const {
  auto& impl = *impl_;
  std::shared_lock lock(impl.pipeline_cache_mutex);  // not during a merge into it
  // Builds may add to the cache between the two calls: ask again while it grows.
  for (;;) {
    size_t size = 0;
    vk::check(impl.d.vkGetPipelineCacheData(impl.device, impl.pipeline_cache.get(), &size, nullptr),
              "vkGetPipelineCacheData");
    std::vector<uint8_t> data(size);
    const VkResult r = impl.d.vkGetPipelineCacheData(impl.device, impl.pipeline_cache.get(), &size, data.data());
    if (r == VK_INCOMPLETE) continue;
    vk::check(r, "vkGetPipelineCacheData");
    data.resize(size);
    return data;
  }
}

void Context::load_pipeline_cache(const std::vector<uint8_t>& data) {
  auto& impl = *impl_;
  if (const std::string why = vk::pipeline_cache_refusal(data, identity(impl)); !why.empty())
    throw Error(ErrorCode::invalid_argument, "pipeline_cache: " + why);
  VkPipelineCacheCreateInfo info{VK_STRUCTURE_TYPE_PIPELINE_CACHE_CREATE_INFO};
  info.initialDataSize = data.size();
  info.pInitialData = data.data();
  VkPipelineCache loaded = VK_NULL_HANDLE;
  vk::check(impl.d.vkCreatePipelineCache(impl.device, &info, nullptr, &loaded), "vkCreatePipelineCache");
  vk::UniquePipelineCache owner(&impl.d, impl.device, loaded);
  // The context's cache is the merge's destination, which no build may use meanwhile.
  std::unique_lock lock(impl.pipeline_cache_mutex);
  vk::check(impl.d.vkMergePipelineCaches(impl.device, impl.pipeline_cache.get(), 1, &loaded), "vkMergePipelineCaches");
}

}  // namespace vkpaged
