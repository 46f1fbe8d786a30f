// SPDX-License-Identifier: Apache-2.0
#pragma once
// Rotary position embedding (RoPE) as vLLM's `rotary_embedding` computes it, alone or fused
// into reshape_and_cache (the keys rotated on their way into the cache).
//
// A token at position p rotates the first rotary_dim elements of each of its query and key
// heads in pairs, with c = cos_sin_cache[p][i] and s = cos_sin_cache[p][rotary_dim / 2 + i]
// (the cache as vLLM builds it: per position, rotary_dim / 2 cosines then as many sines):
//   RotaryStyle::neox  pair i = (i, i + rotary_dim / 2)   (GPT-NeoX, Llama, most models)
//   RotaryStyle::gptj  pair i = (2i, 2i + 1)              (GPT-J, interleaved)
//   x' = x c - y s,  y' = y c + x s,  computed in f32 and rounded (nearest even) to the
//   tensor's dtype. Elements past rotary_dim (partial rotary) stay as they are.
//
//   record_rotary_embedding(ctx, cmd, {.query = q, .key = k, .positions = pos, .cos_sin_cache = cs});
//   // or, one dispatch instead of two:
//   record_reshape_and_cache_rotary(ctx, cmd, cache_views, {.query = q, .positions = pos, .cos_sin_cache = cs});
//
// Both record one dispatch into the caller's command buffer, allocate nothing and never wait;
// arguments are checked before anything is recorded (vkpaged::Error naming the argument and
// its value). Compute shader stage; the caller places the barriers.
#include <vulkan/vulkan.h>

#include <cstdint>
#include <optional>
#include <string_view>

#include "vkpaged/cache_ops.hpp"
#include "vkpaged/context.hpp"
#include "vkpaged/export.hpp"
#include "vkpaged/tensor.hpp"

namespace vkpaged {

enum class RotaryStyle : uint32_t {
  neox = 0,  // rotate halves: vLLM's is_neox_style = True
  gptj = 1,  // rotate interleaved pairs: is_neox_style = False
};

constexpr std::string_view rotary_style_name(RotaryStyle style) noexcept {
  switch (style) {
    case RotaryStyle::neox: return "neox";
    case RotaryStyle::gptj: return "gptj";
  }
  return "?";
}
constexpr std::optional<RotaryStyle> parse_rotary_style(std::string_view name) noexcept {
  if (name == "neox") return RotaryStyle::neox;
  if (name == "gptj") return RotaryStyle::gptj;
  return std::nullopt;
}

// Bit of the optional status word: a position outside [0, max_position) met on the device.
// Its token is left as it was (queries, keys and, in the fused form, its cache slot).
constexpr uint32_t kStatusBadPosition = 64u;

// ---- rotary_embedding: queries and keys rotated in place ----
// query [T, H, D] and key [T, Hkv, D]: f32, f16 or bf16, one dtype; either may be empty (the
// other alone is rotated). positions [T] i64 (or i32). cos_sin_cache [max_position, rotary_dim]:
// f32 or the query's dtype; rotary_dim even, 2 <= rotary_dim <= D. D even. Query and key must
// not overlap.
struct RotaryViews {
  TensorView query;
  TensorView key;
  TensorView positions;
  TensorView cos_sin_cache;
  BufferView status;  // optional [1] u32: kStatusBadPosition
  RotaryStyle style = RotaryStyle::neox;
};
VKPAGED_API void record_rotary_embedding(Context& context, VkCommandBuffer cmd, const RotaryViews& views);

// ---- reshape_and_cache with rotary embedding, in one dispatch ----
// What rotary_embedding then reshape_and_cache would do, bit for bit: the keys
// (ReshapeAndCacheViews::key) are rotated in place and written rotated into the cache, the
// queries (optional) rotated in place; values and slots as reshape_and_cache. Every token is
// rotated, padding tokens (negative slots) included, as the two-kernel path does. A token
// whose position is out of range is left as it was, cache slot included, and flagged
// (kStatusBadPosition in ReshapeAndCacheViews::status, beside kStatusBadSlot).
struct RotaryInputs {
  TensorView query;          // [T, H, D] of the key's dtype and D, or empty
  TensorView positions;      // [T] i64 or i32
  TensorView cos_sin_cache;  // [max_position, rotary_dim] f32 or the key's dtype
  RotaryStyle style = RotaryStyle::neox;
};
VKPAGED_API void record_reshape_and_cache_rotary(Context& context, VkCommandBuffer cmd,
                                                 const ReshapeAndCacheViews& views, const RotaryInputs& rotary,
                                                 const CacheScales& scales = {});

// ---- host side ----
// The cos/sin cache vLLM's RotaryEmbedding builds (computed in double here, then rounded):
// row p holds cos(p * f_i) for i < rotary_dim / 2, then sin(p * f_i), f_i = base^(-2i / rotary_dim).
// dtype f32, f16 or bf16.
VKPAGED_API HostTensor rotary_cos_sin_cache(uint32_t max_position, uint32_t rotary_dim, double base = 10000.0,
                                            DType dtype = DType::f32);

// Convenience: uploads, rotates on the device, waits and downloads query and key in place (either
// may be an empty HostTensor). Positions out of [0, max_position) are refused here, naming the
// first one and its value, before anything runs. Throws vkpaged::Error.
VKPAGED_API void rotary_embedding(Context& context, HostTensor& query, HostTensor& key, const HostTensor& positions,
                                  const HostTensor& cos_sin_cache, RotaryStyle style = RotaryStyle::neox);

}  // namespace vkpaged
