// SPDX-License-Identifier: Apache-2.0
#pragma once
// Argument checks of the rotary embedding (rotary_embedding, its fused form in
// reshape_and_cache_rotary, their CPU references): shapes, dtypes, the cos/sin cache and
// host-known positions, and the tiles the shaders work in. Host only (no Vulkan calls).
// Failures throw vkpaged::Error(invalid_argument) naming the argument and the value.
#include <cstdint>
#include <span>
#include <string>

#include "common/shader_interface.h"
#include "vkpaged/rotary.hpp"
#include "vkpaged/tensor.hpp"

namespace vkpaged::detail {

// What a check needs of one tensor, device view or host tensor alike.
struct TensorSpec {
  bool present = false;
  DType dtype = DType::f32;
  Shape shape;
};
inline TensorSpec spec_of(const TensorView& v) { return {!v.empty(), v.dtype, v.shape}; }
inline TensorSpec spec_of(const HostTensor& t) { return {!t.empty(), t.dtype(), t.shape()}; }

struct RotaryGeometry {
  int64_t tokens = 0;
  int64_t num_heads = 0;     // 0 without a query
  int64_t num_kv_heads = 0;  // 0 without a key
  int64_t head_size = 0;
  int64_t rotary_dim = 0;
  int64_t max_position = 0;
  DType dtype = DType::f16;  // query and key
  DType cos_sin_dtype = DType::f32;
  bool position_i64 = true;
};

// query [T, H, D] and key [T, Hkv, D] (one float dtype; at least one present), positions [T]
// i64 or i32, cos_sin_cache [max_position, rotary_dim] f32 or the rows' dtype, rotary_dim
// even in [2, min(D, ROTARY_MAX_TILE_FLOATS)], D even; style neox or gptj.
RotaryGeometry check_rotary_inputs(RotaryStyle style, const TensorSpec& query, const TensorSpec& key,
                                   const TensorSpec& positions, const TensorSpec& cos_sin_cache);

// Host-known positions: each in [0, max_position).
void check_positions(std::span<const int64_t> positions, int64_t max_position);

// The tiles of one dispatch: rows (one head of one token) per workgroup, enough for every
// invocation to move a few words, within the shared tile (ROTARY_MAX_TILE_FLOATS); query
// tiles first, then key tiles.
struct RotaryTiles {
  uint32_t rows_per_tile = 0;
  uint32_t query_tiles = 0;
  uint32_t key_tiles = 0;
  uint32_t tile_floats() const noexcept;  // the shared tile's size: rows_per_tile * rotary_dim
  uint32_t rotary_dim = 0;
};
RotaryTiles rotary_tiles(const RotaryGeometry& g);

// The push constants of the geometry and tiles; the caller adds groups_x and the offsets.
shader::RotaryPush rotary_push(const RotaryGeometry& g, const RotaryTiles& tiles);

}  // namespace vkpaged::detail
