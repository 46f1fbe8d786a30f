// SPDX-License-Identifier: Apache-2.0
#pragma once
// reshape_and_cache for multi-head latent attention (docs/contract.md, "Multi-head latent
// attention"; vLLM's concat_and_cache_mla): each new token's latent kv_c [Dv] and rotary key
// part k_pe [R] into its slot's row of the MLA pools, in either form (mla.hpp):
//   one pool   mla_cache [N, B, Dv + R]      the row is kv_c then k_pe
//   two pools  ckv_cache [N, B, Dv] and kpe_cache [N, B, R]
// Dv and R are multiples of x = 16 / element bytes (the shader writes 16 bytes at a time); the
// views start 16-byte aligned (pools past maxStorageBufferRange are written by device address,
// which needs a context with buffer device addresses). Optionally RoPE rotates k_pe on its
// way in (rotary.hpp's math over k_pe's first rotary_dim entries: each rotated element is
// rounded to k_pe's dtype, then to the cache's, what rotary_embedding then the write would
// store); k_pe itself is not written. fp8 caches store encode(x * (1 / scale)), one scale for
// both parts (attention then reads them with k_scale = v_scale = scale).
//
// Slots as reshape_and_cache's (cache_ops.hpp): negative = padding, skipped; one at or past
// N * B is skipped and flagged kStatusBadSlot; a position outside [0, max_position) leaves its
// token alone (slot included) and sets kStatusBadPosition. Compute shader stage: reads kv_c,
// k_pe, slot_mapping, positions, cos_sin_cache; writes the pools; atomics on status.
#include <vulkan/vulkan.h>

#include "vkpaged/context.hpp"
#include "vkpaged/export.hpp"
#include "vkpaged/rotary.hpp"
#include "vkpaged/tensor.hpp"

namespace vkpaged {

// One layer's MLA pools: mla_cache, or ckv_cache and kpe_cache. f32, f16, bf16, fp8_e4m3 or
// fp8_e5m2 (all the same).
struct MlaCacheViews {
  TensorView mla_cache;  // [N, B, Dv + R]
  TensorView ckv_cache;  // [N, B, Dv]
  TensorView kpe_cache;  // [N, B, R]
};

struct MlaReshapeAndCacheViews {
  TensorView kv_c;          // [T, Dv] f32, f16 or bf16
  TensorView k_pe;          // [T, R] of kv_c's dtype
  TensorView slot_mapping;  // [T] i64 or i32
  MlaCacheViews cache;
  BufferView status;        // optional [1] u32 (kStatusBadSlot, kStatusBadPosition)
};

// RoPE on k_pe: positions [T] i64 or i32, cos_sin_cache [max_position, rotary_dim] f32 or k_pe's
// dtype (rotary_dim even, at most R), neox or GPT-J pairs.
struct MlaRopeViews {
  TensorView positions;
  TensorView cos_sin_cache;
  RotaryStyle style = RotaryStyle::neox;
};

// Checks every view and the scale (vkpaged::Error naming the argument and the value), then
// records one dispatch; `rope` null: k_pe is written as it is.
VKPAGED_API void record_mla_reshape_and_cache(Context& context, VkCommandBuffer cmd,
                                              const MlaReshapeAndCacheViews& views, float scale = 1.0f,
                                              const MlaRopeViews* rope = nullptr);

}  // namespace vkpaged
