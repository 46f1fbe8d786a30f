// SPDX-License-Identifier: Apache-2.0
#include "ops/rotary_checks.hpp"

#include <fmt/format.h>

#include <algorithm>

#include "common/shader_interface.h"
#include "vkpaged/error.hpp"

namespace vkpaged::detail {

static_assert(uint32_t(RotaryStyle::neox) == ROTARY_STYLE_NEOX && uint32_t(RotaryStyle::gptj) == ROTARY_STYLE_GPTJ);
static_assert(kStatusBadPosition == STATUS_BAD_POSITION);

namespace {

[[noreturn]] void refuse(const std::string& message) { throw Error(ErrorCode::invalid_argument, message); }

// One of query and key: [T, heads, D] of a float dtype.
void check_rows(const char* name, const TensorSpec& t) {
  if (!is_float_dtype(t.dtype)) refuse(fmt::format("{}: dtype {} is not f32, f16 or bf16", name, dtype_name(t.dtype)));
  if (t.shape.rank() != 3) refuse(fmt::format("{}: shape {} is not [T, heads, D]", name, t.shape.str()));
  if (t.shape[1] == 0) refuse(fmt::format("{}: shape {} has no heads", name, t.shape.str()));
  if (t.shape[2] == 0 || t.shape[2] % 2 != 0)
    refuse(fmt::format("{}: head size D = {} is not a positive even number", name, t.shape[2]));
}

}  // namespace

RotaryGeometry check_rotary_inputs(RotaryStyle style, const TensorSpec& query, const TensorSpec& key,
                                   const TensorSpec& positions, const TensorSpec& cos_sin_cache) {
  if (style != RotaryStyle::neox && style != RotaryStyle::gptj)
    refuse(fmt::format("style: {} is not a rotary style (neox, gptj)", uint32_t(style)));
  if (!query.present && !key.present) refuse("query, key: neither is given, nothing to rotate");
  if (query.present) check_rows("query", query);
  if (key.present) check_rows("key", key);
  RotaryGeometry g;
  const TensorSpec& first = query.present ? query : key;
  g.dtype = first.dtype;
  g.tokens = first.shape[0];
  g.head_size = first.shape[2];
  if (query.present) g.num_heads = query.shape[1];
  if (key.present) {
    g.num_kv_heads = key.shape[1];
    if (query.present && key.dtype != query.dtype)
      refuse(fmt::format("key: dtype {} differs from query's {}", dtype_name(key.dtype), dtype_name(query.dtype)));
    if (query.present && (key.shape[0] != g.tokens || key.shape[2] != g.head_size))
      refuse(fmt::format("key: shape {} does not match [T, Hkv, D] of query's {}", key.shape.str(), query.shape.str()));
  }
  if (positions.dtype != DType::i64 && positions.dtype != DType::i32)
    refuse(fmt::format("positions: dtype {} is not i64 or i32", dtype_name(positions.dtype)));
  if (!(positions.shape == Shape{g.tokens}))
    refuse(fmt::format("positions: shape {} is not [T] = [{}]", positions.shape.str(), g.tokens));
  g.position_i64 = positions.dtype == DType::i64;

  const char* rows = query.present ? "query" : "key";
  if (cos_sin_cache.dtype != DType::f32 && cos_sin_cache.dtype != g.dtype)
    refuse(fmt::format("cos_sin_cache: dtype {} is neither f32 nor {}'s {}", dtype_name(cos_sin_cache.dtype), rows,
                       dtype_name(g.dtype)));
  if (cos_sin_cache.shape.rank() != 2)
    refuse(fmt::format("cos_sin_cache: shape {} is not [max_position, rotary_dim]", cos_sin_cache.shape.str()));
  g.cos_sin_dtype = cos_sin_cache.dtype;
  g.max_position = cos_sin_cache.shape[0];
  g.rotary_dim = cos_sin_cache.shape[1];
  if (g.max_position == 0) refuse("cos_sin_cache: max_position (dimension 0) is 0");
  if (g.rotary_dim < 2 || g.rotary_dim % 2 != 0)
    refuse(fmt::format("cos_sin_cache: rotary_dim = {} is not an even number >= 2", g.rotary_dim));
  if (g.rotary_dim > g.head_size)
    refuse(fmt::format("cos_sin_cache: rotary_dim = {} is more than the head size D = {}", g.rotary_dim, g.head_size));
  if (g.rotary_dim > int64_t(ROTARY_MAX_TILE_FLOATS))
    refuse(fmt::format("cos_sin_cache: rotary_dim = {} is more than {}, the most the shaders stage", g.rotary_dim,
                       ROTARY_MAX_TILE_FLOATS));
  return g;
}

void check_positions(std::span<const int64_t> positions, int64_t max_position) {
  for (size_t i = 0; i < positions.size(); ++i)
    if (positions[i] < 0 || positions[i] >= max_position)
      refuse(fmt::format("positions[{}]: {} is outside [0, max_position = {})", i, positions[i], max_position));
}

uint32_t RotaryTiles::tile_floats() const noexcept { return rows_per_tile * rotary_dim; }

// The shaders keep each row's first word of a tile in shared memory (common/rotary.glsl).
static_assert(4 * CACHE_OP_WORKGROUP <= ROTARY_MAX_TILE_ROWS);

RotaryTiles rotary_tiles(const RotaryGeometry& g) {
  // About 4 words per invocation of a CACHE_OP_WORKGROUP tile (so at most ROTARY_MAX_TILE_ROWS
  // rows). Row counts fit 32 bits: the tensors were checked against maxStorageBufferRange.
  const uint32_t per_word = g.dtype == DType::f32 ? 1 : 2;
  const uint32_t words_per_row = uint32_t(g.rotary_dim) / per_word;
  RotaryTiles t;
  t.rotary_dim = uint32_t(g.rotary_dim);
  t.rows_per_tile =
      std::clamp<uint32_t>(4 * CACHE_OP_WORKGROUP / words_per_row, 1, ROTARY_MAX_TILE_FLOATS / uint32_t(g.rotary_dim));
  const auto tiles = [&](int64_t heads) {
    return uint32_t((g.tokens * heads + t.rows_per_tile - 1) / t.rows_per_tile);
  };
  t.query_tiles = tiles(g.num_heads);
  t.key_tiles = tiles(g.num_kv_heads);
  return t;
}

shader::RotaryPush rotary_push(const RotaryGeometry& g, const RotaryTiles& tiles) {
  shader::RotaryPush p{};
  p.num_tokens = uint32_t(g.tokens);
  p.num_heads = uint32_t(g.num_heads);
  p.num_kv_heads = uint32_t(g.num_kv_heads);
  p.head_size = uint32_t(g.head_size);
  p.rotary_dim = uint32_t(g.rotary_dim);
  p.max_position = uint32_t(g.max_position);
  p.rows_per_tile = tiles.rows_per_tile;
  p.query_tiles = tiles.query_tiles;
  return p;
}

}  // namespace vkpaged::detail
