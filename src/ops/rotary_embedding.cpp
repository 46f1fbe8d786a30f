// SPDX-License-Identifier: Apache-2.0
// Host side of shaders/rotary_embedding.comp: argument checks, then one dispatch of tiles
// (common/rotary.glsl); and the convenience over host tensors.
#include <fmt/format.h>

#include <algorithm>
#include <array>
#include <vector>

#include "common/shader_interface.h"
#include "embedded_shaders.hpp"
#include "ops/decode_validation.hpp"  // host_index_values
#include "ops/linear_grid.hpp"
#include "ops/rotary_checks.hpp"
#include "ops/strided_rows.hpp"
#include "ops/view_checks.hpp"
#include "vkpaged/error.hpp"
#include "vkpaged/rotary.hpp"

namespace vkpaged {

void record_rotary_embedding(Context& context, VkCommandBuffer cmd, const RotaryViews& v) {
  auto& impl = context.impl();
  const auto g = detail::check_rotary_inputs(v.style, detail::spec_of(v.query), detail::spec_of(v.key),
                                             detail::spec_of(v.positions), detail::spec_of(v.cos_sin_cache));
  // Both are rotated in place: their rows (slices of one fused projection, say) must not overlap.
  detail::RowsView query, key;
  if (!v.query.empty()) query = detail::check_rows(impl, "query", v.query, true);
  if (!v.key.empty()) key = detail::check_rows(impl, "key", v.key, true);
  detail::check_disjoint_rows("query", query, "key", key, "both are rotated in place");
  detail::check_contiguous("positions", v.positions);
  detail::check_contiguous("cos_sin_cache", v.cos_sin_cache);
  detail::check_buffer(impl, "positions", v.positions.memory, v.positions.bytes(), 4);
  detail::check_buffer(impl, "cos_sin_cache", v.cos_sin_cache.memory, v.cos_sin_cache.bytes(), 4);
  if (!v.status.empty()) detail::check_buffer(impl, "status", v.status, 4, 4);
  if (g.tokens == 0) return;

  const detail::RotaryTiles tiles = detail::rotary_tiles(g);
  std::array<uint32_t, ROTARY_SC_COUNT> spec{};
  spec[ROTARY_SC_STYLE] = uint32_t(v.style);
  spec[ROTARY_SC_DTYPE] = uint32_t(g.dtype);
  spec[ROTARY_SC_COS_SIN_DTYPE] = uint32_t(g.cos_sin_dtype);
  spec[ROTARY_SC_POSITION_I64] = g.position_i64 ? 1u : 0u;
  spec[ROTARY_SC_TILE_FLOATS] = tiles.tile_floats();
  const auto& pipeline =
      impl.pipeline(vk::shader_rotary_embedding(), spec, ROTARY_BINDING_COUNT, sizeof(shader::RotaryPush));

  std::array<detail::BoundView, ROTARY_BINDING_COUNT> bound;
  bound[ROTARY_BINDING_QUERY] = impl.bind_view(v.query.memory);
  bound[ROTARY_BINDING_KEY] = impl.bind_view(v.key.memory);
  bound[ROTARY_BINDING_POSITIONS] = impl.bind_view(v.positions.memory);
  bound[ROTARY_BINDING_COS_SIN] = impl.bind_view(v.cos_sin_cache.memory);
  bound[ROTARY_BINDING_STATUS] = impl.bind_view(v.status);

  const auto grid =
      detail::linear_grid(uint64_t(tiles.query_tiles + tiles.key_tiles) * CACHE_OP_WORKGROUP, CACHE_OP_WORKGROUP);
  shader::RotaryPush push = detail::rotary_push(g, tiles);
  push.groups_x = grid.x;
  push.query_rows = detail::rows_push(query, bound[ROTARY_BINDING_QUERY]);
  push.key_rows = detail::rows_push(key, bound[ROTARY_BINDING_KEY]);
  push.positions_offset = bound[ROTARY_BINDING_POSITIONS].word_offset;
  push.cos_sin_offset = bound[ROTARY_BINDING_COS_SIN].word_offset;
  push.status_offset = bound[ROTARY_BINDING_STATUS].word_offset;
  impl.dispatch(cmd, pipeline, bound, &push, grid.x, grid.y, 1);
}

void rotary_embedding(Context& context, HostTensor& query, HostTensor& key, const HostTensor& positions,
                      const HostTensor& cos_sin_cache, RotaryStyle style) {
  const auto g = detail::check_rotary_inputs(style, detail::spec_of(query), detail::spec_of(key),
                                             detail::spec_of(positions), detail::spec_of(cos_sin_cache));
  detail::check_positions(detail::host_index_values(positions, "positions"), g.max_position);
  std::vector<DeviceBuffer> keep;
  auto upload = [&](const HostTensor& t) {
    if (t.empty()) return TensorView{};
    keep.push_back(context.create_buffer(std::max<size_t>(t.bytes(), 16)));
    if (t.bytes()) context.upload(keep.back().view(), t.data(), t.bytes());
    return keep.back().tensor(t.dtype(), t.shape());
  };
  RotaryViews v;
  v.query = upload(query);
  v.key = upload(key);
  v.positions = upload(positions);
  v.cos_sin_cache = upload(cos_sin_cache);
  v.style = style;
  context.run_and_wait([&](VkCommandBuffer cmd) { record_rotary_embedding(context, cmd, v); });
  if (!query.empty() && query.bytes()) context.download(v.query.memory, query.data(), query.bytes());
  if (!key.empty() && key.bytes()) context.download(v.key.memory, key.data(), key.bytes());
}

}  // namespace vkpaged
