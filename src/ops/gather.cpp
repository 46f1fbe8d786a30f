// SPDX-License-Identifier: Apache-2.0
// Host side of shaders/gather.comp (and its _address variant for pools past
// maxStorageBufferRange): argument checks, then one dispatch.
#include <fmt/format.h>

#include <array>
#include <limits>

#include "common/shader_interface.h"
#include "embedded_shaders.hpp"
#include "ops/cache_geometry.hpp"
#include "ops/cache_pool_access.hpp"
#include "ops/linear_grid.hpp"
#include "ops/scale_validation.hpp"
#include "ops/strided_rows.hpp"
#include "ops/view_checks.hpp"
#include "vkpaged/cache_ops.hpp"
#include "vkpaged/error.hpp"

namespace vkpaged {

static_assert(kStatusBadBlockId == STATUS_BAD_BLOCK_ID && kStatusBadContextLen == STATUS_BAD_CONTEXT_LEN);

void record_gather(Context& context, VkCommandBuffer cmd, const GatherViews& v, const CacheScales& scales) {
  auto& impl = context.impl();
  const auto cache =
      detail::cache_geometry("", v.layout, v.key_cache.dtype, v.key_cache.shape, v.value_cache.dtype,
                             v.value_cache.shape);
  const auto g = detail::check_gather_inputs(cache, v.block_tables.dtype, v.block_tables.shape, v.seq_starts.dtype,
                                             v.seq_starts.shape, v.key_out.dtype, v.key_out.shape, v.value_out.dtype,
                                             v.value_out.shape);
  detail::check_scale("k_scale", scales.k_scale, cache.dtype);
  detail::check_scale("v_scale", scales.v_scale, cache.dtype);
  // Only the outputs take strides; the caches and page tables are read as their shapes lay them out.
  for (const auto& [name, view] : {std::pair{"key_cache", &v.key_cache}, std::pair{"value_cache", &v.value_cache},
                                   std::pair{"block_tables", &v.block_tables}, std::pair{"seq_starts", &v.seq_starts}})
    detail::check_contiguous(name, *view);
  const auto pools =
      detail::cache_pool_access(impl, v.key_cache.memory, v.value_cache.memory, cache.pool_bytes(), cache.block_bytes());
  detail::check_buffer(impl, "block_tables", v.block_tables.memory, v.block_tables.bytes(), 4);
  detail::check_buffer(impl, "seq_starts", v.seq_starts.memory, v.seq_starts.bytes(), 4);
  // Written: rows that never overlap, in each output and between them.
  const detail::RowsView key_out = detail::check_rows(impl, "key_out", v.key_out, true);
  const detail::RowsView value_out = detail::check_rows(impl, "value_out", v.value_out, true);
  detail::check_disjoint_rows("key_out", key_out, "value_out", value_out, "both are written");
  if (!v.status.empty()) detail::check_buffer(impl, "status", v.status, 4, 4);
  if (uint64_t(cache.num_blocks) > std::numeric_limits<uint32_t>::max())  // pools past 4 GiB only
    throw Error(ErrorCode::unsupported, fmt::format("value_cache: N = {} blocks is more than the shader's 32-bit "
                                                    "block ids hold ({})",
                                                    cache.num_blocks, std::numeric_limits<uint32_t>::max()));
  if (g.num_rows == 0 || g.num_seqs == 0) return;

  std::array<uint32_t, GATHER_SC_COUNT> spec{};
  spec[GATHER_SC_CACHE_DTYPE] = uint32_t(cache.dtype);
  spec[GATHER_SC_OUTPUT_DTYPE] = uint32_t(g.output_dtype);
  spec[GATHER_SC_LAYOUT] = uint32_t(cache.layout);
  const auto& pipeline = impl.pipeline(pools.address ? vk::shader_gather_address() : vk::shader_gather(), spec,
                                       GATHER_BINDING_COUNT, sizeof(shader::GatherPush));

  std::array<detail::BoundView, GATHER_BINDING_COUNT> bound;
  bound[GATHER_BINDING_KEY_CACHE] = pools.key;
  bound[GATHER_BINDING_VALUE_CACHE] = pools.value;
  bound[GATHER_BINDING_BLOCK_TABLES] = impl.bind_view(v.block_tables.memory);
  bound[GATHER_BINDING_SEQ_STARTS] = impl.bind_view(v.seq_starts.memory);
  bound[GATHER_BINDING_KEY_OUT] = impl.bind_view(v.key_out.memory);
  bound[GATHER_BINDING_VALUE_OUT] = impl.bind_view(v.value_out.memory);
  bound[GATHER_BINDING_STATUS] = impl.bind_view(v.status);

  // Sizes fit 32 bits: the other views were checked against maxStorageBufferRange (< 4 GiB);
  // pools past it are addressed per block (cache_pool_access).
  const uint64_t invocations =
      uint64_t(g.num_rows) * uint64_t(cache.num_kv_heads) * uint64_t(cache.head_size / cache.pack());
  const auto grid = detail::linear_grid(invocations, CACHE_OP_WORKGROUP);
  shader::GatherPush push{};
  push.key_cache_address = pools.key_address;
  push.value_cache_address = pools.value_address;
  push.num_rows = uint32_t(g.num_rows);
  push.num_seqs = uint32_t(g.num_seqs);
  push.num_kv_heads = uint32_t(cache.num_kv_heads);
  push.head_size = uint32_t(cache.head_size);
  push.block_size = uint32_t(cache.block_size);
  push.num_blocks = uint32_t(cache.num_blocks);
  push.max_blocks_per_seq = uint32_t(g.max_blocks_per_seq);
  push.groups_x = grid.x;
  push.key_cache_offset = bound[GATHER_BINDING_KEY_CACHE].word_offset;
  push.value_cache_offset = bound[GATHER_BINDING_VALUE_CACHE].word_offset;
  push.block_tables_offset = bound[GATHER_BINDING_BLOCK_TABLES].word_offset;
  push.seq_starts_offset = bound[GATHER_BINDING_SEQ_STARTS].word_offset;
  push.key_out_rows = detail::rows_push(key_out, bound[GATHER_BINDING_KEY_OUT]);
  push.value_out_rows = detail::rows_push(value_out, bound[GATHER_BINDING_VALUE_OUT]);
  push.status_offset = bound[GATHER_BINDING_STATUS].word_offset;
  push.k_scale = scales.k_scale;
  push.v_scale = scales.v_scale;
  impl.dispatch(cmd, pipeline, bound, &push, grid.x, grid.y, 1);
}

}  // namespace vkpaged
