// SPDX-License-Identifier: Apache-2.0
// copy_blocks: whole blocks within each layer's pools (copy-on-write, forks), one
// vkCmdCopyBuffer per pool with a region per pair; everything is checked before recording.
#include <fmt/format.h>

#include "ops/block_transfer.hpp"
#include "vkpaged/cache_ops.hpp"

namespace vkpaged {

void record_copy_blocks(Context& context, VkCommandBuffer cmd, Span<const LayerCacheViews> layers,
                        Span<const BlockCopy> pairs) {
  auto& impl = context.impl();
  std::vector<detail::CacheGeometry> geometry;
  for (size_t l = 0; l < layers.size(); ++l) {
    geometry.push_back(detail::check_layer_views(impl, fmt::format("layers[{}].", l), layers[l]));
    detail::check_block_pairs(pairs, geometry[l].num_blocks, geometry[l].num_blocks, true);
  }
  std::vector<VkBufferCopy> regions;
  for (size_t l = 0; l < layers.size(); ++l) {
    const uint64_t block_bytes = geometry[l].block_bytes();
    detail::record_block_copies(impl, cmd, layers[l].key_cache.memory, layers[l].key_cache.memory, block_bytes, pairs,
                                regions);
    detail::record_block_copies(impl, cmd, layers[l].value_cache.memory, layers[l].value_cache.memory, block_bytes,
                                pairs, regions);
  }
}

}  // namespace vkpaged
