// SPDX-License-Identifier: Apache-2.0
// Host side of shaders/reshape_and_cache_rotary.comp (and its _address variant): the cache
// write's checks (reshape_and_cache.hpp) and the rotary ones (rotary_checks.hpp), then one
// dispatch of tiles: query tiles rotate in place, key tiles rotate and write the cache.
#include <array>

#include "ops/linear_grid.hpp"
#include "ops/reshape_and_cache.hpp"
#include "ops/rotary_checks.hpp"
#include "ops/view_checks.hpp"
#include "vkpaged/error.hpp"
#include "vkpaged/rotary.hpp"

namespace vkpaged {

namespace {

// One block of both: the cache write's fields and the rotary ones it lacks (shader_interface.h).
shader::ReshapeAndCacheRotaryPush fused_push(const shader::ReshapeAndCachePush& c, const shader::RotaryPush& r) {
  shader::ReshapeAndCacheRotaryPush p{};
  p.key_cache_address = c.key_cache_address;
  p.value_cache_address = c.value_cache_address;
  p.num_tokens = c.num_tokens;
  p.num_kv_heads = c.num_kv_heads;
  p.head_size = c.head_size;
  p.block_size = c.block_size;
  p.num_slots = c.num_slots;
  p.groups_x = c.groups_x;
  p.key_rows = c.key_rows;
  p.value_rows = c.value_rows;
  p.slot_offset = c.slot_offset;
  p.key_cache_offset = c.key_cache_offset;
  p.value_cache_offset = c.value_cache_offset;
  p.status_offset = c.status_offset;
  p.inv_k_scale = c.inv_k_scale;
  p.inv_v_scale = c.inv_v_scale;
  p.num_heads = r.num_heads;
  p.rotary_dim = r.rotary_dim;
  p.max_position = r.max_position;
  p.rows_per_tile = r.rows_per_tile;
  p.query_tiles = r.query_tiles;
  p.query_rows = r.query_rows;
  p.positions_offset = r.positions_offset;
  p.cos_sin_offset = r.cos_sin_offset;
  return p;
}

}  // namespace

void record_reshape_and_cache_rotary(Context& context, VkCommandBuffer cmd, const ReshapeAndCacheViews& v,
                                     const RotaryInputs& rotary, const CacheScales& scales) {
  auto& impl = context.impl();
  const detail::CacheWrite w = detail::check_cache_write(impl, v, scales, true);
  const auto g = detail::check_rotary_inputs(rotary.style, detail::spec_of(rotary.query), detail::spec_of(v.key),
                                             detail::spec_of(rotary.positions), detail::spec_of(rotary.cos_sin_cache));
  // The keys and queries are written: no row of another view may share their elements (slices
  // of one fused projection do not).
  detail::check_disjoint_rows("key", w.key, "value", w.value, "the keys are rotated in place");
  detail::RowsView query;
  if (!rotary.query.empty()) {
    query = detail::check_rows(impl, "query", rotary.query, true);
    detail::check_disjoint_rows("key", w.key, "query", query, "both are rotated in place");
    detail::check_disjoint_rows("value", w.value, "query", query, "the queries are rotated in place");
  }
  detail::check_contiguous("positions", rotary.positions);
  detail::check_contiguous("cos_sin_cache", rotary.cos_sin_cache);
  detail::check_buffer(impl, "positions", rotary.positions.memory, rotary.positions.bytes(), 4);
  detail::check_buffer(impl, "cos_sin_cache", rotary.cos_sin_cache.memory, rotary.cos_sin_cache.bytes(), 4);
  if (w.tokens == 0) return;

  const detail::RotaryTiles tiles = detail::rotary_tiles(g);
  detail::CacheWritePipeline described = detail::cache_write_pipeline(v, w);
  described.rotary = &g;
  described.rotary_style = rotary.style;
  const auto& pipeline = impl.pipeline(detail::cache_write_request(described));

  std::array<detail::BoundView, RESHAPE_ROTARY_BINDING_COUNT> bound;
  detail::bind_cache_write(impl, v, w, bound.data());
  bound[RESHAPE_BINDING_QUERY] = impl.bind_view(rotary.query.memory);
  bound[RESHAPE_BINDING_POSITIONS] = impl.bind_view(rotary.positions.memory);
  bound[RESHAPE_BINDING_COS_SIN] = impl.bind_view(rotary.cos_sin_cache.memory);

  const auto grid =
      detail::linear_grid(uint64_t(tiles.query_tiles + tiles.key_tiles) * CACHE_OP_WORKGROUP, CACHE_OP_WORKGROUP);
  shader::RotaryPush rotary_push = detail::rotary_push(g, tiles);
  rotary_push.query_rows = detail::rows_push(query, bound[RESHAPE_BINDING_QUERY]);
  rotary_push.positions_offset = bound[RESHAPE_BINDING_POSITIONS].word_offset;
  rotary_push.cos_sin_offset = bound[RESHAPE_BINDING_COS_SIN].word_offset;
  const shader::ReshapeAndCacheRotaryPush push = fused_push(detail::cache_write_push(w, bound.data(), grid.x), rotary_push);
  impl.dispatch(cmd, pipeline, bound, &push, grid.x, grid.y, 1);
}

}  // namespace vkpaged
