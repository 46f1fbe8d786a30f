// SPDX-License-Identifier: Apache-2.0
// Host side of shaders/reshape_and_cache_rotary.comp (and its _address variant): the cache
// write's checks (reshape_and_cache.hpp) and the rotary ones (rotary_checks.hpp), then one
// dispatch of tiles: query tiles rotate in place, key tiles rotate and write the cache.
#include <fmt/format.h>

#include <array>
#include <cstddef>
#include <utility>

#include "embedded_shaders.hpp"
#include "ops/linear_grid.hpp"
#include "ops/reshape_and_cache.hpp"
#include "ops/rotary_checks.hpp"
#include "ops/view_checks.hpp"
#include "vkpaged/error.hpp"
#include "vkpaged/rotary.hpp"

namespace vkpaged {

namespace {

bool overlap(const BufferView& a, const BufferView& b) {
  return a.buffer == b.buffer && a.offset < b.offset + b.size && b.offset < a.offset + a.size;
}

}  // namespace

void record_reshape_and_cache_rotary(Context& context, VkCommandBuffer cmd, const ReshapeAndCacheViews& v,
                                     const RotaryInputs& rotary, const CacheScales& scales) {
  auto& impl = context.impl();
  const detail::CacheWrite w = detail::check_cache_write(impl, v, scales);
  const auto g = detail::check_rotary_inputs(rotary.style, detail::spec_of(rotary.query), detail::spec_of(v.key),
                                             detail::spec_of(rotary.positions), detail::spec_of(rotary.cos_sin_cache));
  // The keys and queries are written: no view may overlap them.
  if (overlap(v.value.memory, v.key.memory))
    throw Error(ErrorCode::invalid_argument, "value: its view overlaps key's in one buffer (the keys are rotated)");
  if (!rotary.query.empty()) {
    detail::check_buffer(impl, "query", rotary.query.memory, rotary.query.bytes(), 4);
    for (const auto& [name, view] : {std::pair{"key", v.key.memory}, std::pair{"value", v.value.memory}})
      if (overlap(rotary.query.memory, view))
        throw Error(ErrorCode::invalid_argument,
                    fmt::format("query: its view overlaps {}'s in one buffer (the queries are rotated)", name));
  }
  detail::check_buffer(impl, "positions", rotary.positions.memory, rotary.positions.bytes(), 4);
  detail::check_buffer(impl, "cos_sin_cache", rotary.cos_sin_cache.memory, rotary.cos_sin_cache.bytes(), 4);
  if (w.tokens == 0) return;

  const detail::RotaryTiles tiles = detail::rotary_tiles(g);
  std::array<uint32_t, RESHAPE_ROTARY_SC_COUNT> spec{};
  detail::cache_write_spec(v, w, spec.data());
  spec[RESHAPE_SC_ROTARY_STYLE] = uint32_t(rotary.style);
  spec[RESHAPE_SC_COS_SIN_DTYPE] = uint32_t(g.cos_sin_dtype);
  spec[RESHAPE_SC_POSITION_I64] = g.position_i64 ? 1u : 0u;
  spec[RESHAPE_SC_TILE_FLOATS] = tiles.tile_floats();
  struct Push {
    shader::ReshapeAndCachePush cache;
    shader::RotaryPush rotary;
  };
  static_assert(sizeof(Push) == sizeof(shader::ReshapeAndCachePush) + sizeof(shader::RotaryPush) &&
                offsetof(Push, rotary) == 72);
  const auto& pipeline = impl.pipeline(
      w.pools.address ? vk::shader_reshape_and_cache_rotary_address() : vk::shader_reshape_and_cache_rotary(), spec,
      RESHAPE_ROTARY_BINDING_COUNT, sizeof(Push));

  std::array<detail::BoundView, RESHAPE_ROTARY_BINDING_COUNT> bound;
  detail::bind_cache_write(impl, v, w, bound.data());
  bound[RESHAPE_BINDING_QUERY] = impl.bind_view(rotary.query.memory);
  bound[RESHAPE_BINDING_POSITIONS] = impl.bind_view(rotary.positions.memory);
  bound[RESHAPE_BINDING_COS_SIN] = impl.bind_view(rotary.cos_sin_cache.memory);

  const auto grid =
      detail::linear_grid(uint64_t(tiles.query_tiles + tiles.key_tiles) * CACHE_OP_WORKGROUP, CACHE_OP_WORKGROUP);
  Push push{detail::cache_write_push(w, bound.data(), grid.x), detail::rotary_push(g, tiles)};
  push.rotary.groups_x = grid.x;
  push.rotary.query_offset = bound[RESHAPE_BINDING_QUERY].word_offset;
  push.rotary.key_offset = bound[RESHAPE_BINDING_KEY].word_offset;
  push.rotary.positions_offset = bound[RESHAPE_BINDING_POSITIONS].word_offset;
  push.rotary.cos_sin_offset = bound[RESHAPE_BINDING_COS_SIN].word_offset;
  push.rotary.status_offset = bound[RESHAPE_BINDING_STATUS].word_offset;
  impl.dispatch(cmd, pipeline, bound, &push, grid.x, grid.y, 1);
}

}  // namespace vkpaged
