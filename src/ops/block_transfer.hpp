// SPDX-License-Identifier: Apache-2.0
#pragma once
// What copy_blocks and swap_blocks share: checks of one layer's pools as transfer buffers
// (no storage-buffer range limit applies to copies) and one vkCmdCopyBuffer per pool.
#include <span>
#include <string>
#include <vector>

#include "ops/cache_geometry.hpp"
#include "vk/context_impl.hpp"
#include "vkpaged/cache_ops.hpp"

namespace vkpaged::detail {

// Geometry of a layer's pools (f32/f16/bf16/fp8/u8, in the layer's layout) and views large
// enough for them, inside the buffers they name where vkpaged created those. Blocks are
// contiguous in every layout, so copies never look inside one.
CacheGeometry check_layer_views(const ContextImpl& impl, const std::string& prefix, const LayerCacheViews& layer);

// Copies whole blocks src_pool[pair.src] -> dst_pool[pair.dst] with one region per pair,
// skipping pairs with src == dst inside one pool. `regions` is reused storage.
void record_block_copies(const ContextImpl& impl, VkCommandBuffer cmd, const BufferView& src_pool,
                         const BufferView& dst_pool, uint64_t block_bytes, std::span<const BlockCopy> pairs,
                         std::vector<VkBufferCopy>& regions);

}  // namespace vkpaged::detail
