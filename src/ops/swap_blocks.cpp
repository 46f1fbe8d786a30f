// SPDX-License-Identifier: Apache-2.0
// swap_blocks: whole blocks between two caches of one layout, dtype and block shape
// (device-local <-> host-visible, either way), one vkCmdCopyBuffer per pool with a region per
// pair. A block is contiguous and the same size in every layout, so the copies are too.
#include <fmt/format.h>

#include "ops/block_transfer.hpp"
#include "vkpaged/cache_ops.hpp"

namespace vkpaged {

namespace {

bool overlap(const BufferView& a, const BufferView& b) {
  return a.buffer == b.buffer && a.offset < b.offset + b.size && b.offset < a.offset + a.size;
}

}  // namespace

void record_swap_blocks(Context& context, VkCommandBuffer cmd, Span<const LayerCacheViews> src,
                        Span<const LayerCacheViews> dst, Span<const BlockCopy> pairs) {
  auto& impl = context.impl();
  if (src.size() != dst.size())
    detail::refuse_cache_argument(fmt::format("dst: {} layers given for {} source layers", dst.size(), src.size()));
  std::vector<uint64_t> block_bytes;
  for (size_t l = 0; l < src.size(); ++l) {
    const auto s = detail::check_layer_views(impl, fmt::format("src[{}].", l), src[l]);
    const auto d = detail::check_layer_views(impl, fmt::format("dst[{}].", l), dst[l]);
    if (d.layout != s.layout)
      detail::refuse_cache_argument(fmt::format("dst[{}].layout: {} differs from src[{}]'s {}", l,
                                                kv_layout_name(d.layout), l, kv_layout_name(s.layout)));
    if (s.dtype != d.dtype || s.num_kv_heads != d.num_kv_heads || s.head_size != d.head_size ||
        s.block_size != d.block_size)
      detail::refuse_cache_argument(
          fmt::format("dst[{}].value_cache: shape {} ({}) has blocks unlike src[{}]'s {} ({})", l,
                      d.value_shape().str(), dtype_name(d.dtype), l, s.value_shape().str(), dtype_name(s.dtype)));
    for (const auto* a : {&src[l].key_cache.memory, &src[l].value_cache.memory})
      for (const auto* b : {&dst[l].key_cache.memory, &dst[l].value_cache.memory})
        if (overlap(*a, *b))
          detail::refuse_cache_argument(fmt::format("dst[{}]: its pools overlap src[{}]'s in one buffer", l, l));
    detail::check_block_pairs(pairs, s.num_blocks, d.num_blocks, false);
    block_bytes.push_back(s.block_bytes());
  }
  std::vector<VkBufferCopy> regions;
  for (size_t l = 0; l < src.size(); ++l) {
    detail::record_block_copies(impl, cmd, src[l].key_cache.memory, dst[l].key_cache.memory, block_bytes[l], pairs,
                                regions);
    detail::record_block_copies(impl, cmd, src[l].value_cache.memory, dst[l].value_cache.memory, block_bytes[l], pairs,
                                regions);
  }
}

}  // namespace vkpaged
