// SPDX-License-Identifier: Apache-2.0
#include "ops/block_transfer.hpp"

#include <fmt/format.h>

#include "ops/view_checks.hpp"

namespace vkpaged::detail {

namespace {

void check_pool_view(const ContextImpl& impl, const std::string& name, const BufferView& view, uint64_t bytes) {
  if (view.buffer == VK_NULL_HANDLE) refuse_cache_argument(fmt::format("{}: no buffer given", name));
  if (view.size < bytes)
    refuse_cache_argument(
        fmt::format("{}: buffer view of {} bytes is too small, {} bytes needed", name, view.size, bytes));
  vk::check_inside_buffer(impl.device, name, view);
}

}  // namespace

CacheGeometry check_layer_views(const ContextImpl& impl, const std::string& prefix, const LayerCacheViews& layer) {
  const auto g = cache_geometry(prefix, layer.layout, layer.key_cache.dtype, layer.key_cache.shape,
                                layer.value_cache.dtype, layer.value_cache.shape, kRawCacheDtypes);
  // Whole blocks move: pools laid out as their shapes say, no strides.
  check_contiguous((prefix + "key_cache").c_str(), layer.key_cache);
  check_contiguous((prefix + "value_cache").c_str(), layer.value_cache);
  check_pool_view(impl, prefix + "key_cache", layer.key_cache.memory, g.pool_bytes());
  check_pool_view(impl, prefix + "value_cache", layer.value_cache.memory, g.pool_bytes());
  return g;
}

void record_block_copies(const ContextImpl& impl, VkCommandBuffer cmd, const BufferView& src_pool,
                         const BufferView& dst_pool, uint64_t block_bytes, std::span<const BlockCopy> pairs,
                         std::vector<VkBufferCopy>& regions) {
  const bool same_pool = src_pool.buffer == dst_pool.buffer && src_pool.offset == dst_pool.offset;
  regions.clear();
  for (const BlockCopy& p : pairs) {
    if (same_pool && p.src == p.dst) continue;
    regions.push_back({src_pool.offset + uint64_t(p.src) * block_bytes, dst_pool.offset + uint64_t(p.dst) * block_bytes,
                       block_bytes});
  }
  if (regions.empty() || block_bytes == 0) return;
  impl.d.vkCmdCopyBuffer(cmd, src_pool.buffer, dst_pool.buffer, uint32_t(regions.size()), regions.data());
}

}  // namespace vkpaged::detail
