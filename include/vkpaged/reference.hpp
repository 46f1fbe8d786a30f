// SPDX-License-Identifier: Apache-2.0
#pragma once
// CPU reference implementations of every operator: double accumulation, straight from the
// contract, written for clarity and not speed. Tests and `--device cpu` use them.

#include "vkpaged/span.hpp"
#include "vkpaged/attention.hpp"
#include "vkpaged/cache_ops.hpp"
#include "vkpaged/decode.hpp"
#include "vkpaged/export.hpp"
#include "vkpaged/mla.hpp"
#include "vkpaged/rotary.hpp"
#include "vkpaged/tensor.hpp"

namespace vkpaged::reference {

// Decode attention over host inputs. Validates as decode_shape_of does, and the options and
// params as the GPU path (its shape's softcap is params.softcap != 0, as decode_attention's).
VKPAGED_API DecodeResult decode_attention(const DecodeInputs& inputs, const DecodeOptions& options = {},
                                          const DecodeParams& params = {}, bool want_lse = false);

// Multi-query attention over host inputs (docs/contract.md, "Multi-query attention"), every
// cache layout. Validates as attention_shape_of does.
VKPAGED_API AttentionResult batch_attention(const AttentionInputs& inputs, const AttentionParams& params = {},
                                            bool want_lse = false);

// Multi-head latent attention over host inputs (docs/contract.md, "Multi-head latent
// attention"), either cache form, every request form of batch_attention: output [T, H, Dv] in
// the query's dtype, LSE [T, H]. The same math as batch_attention (one definition). Validates
// as mla_shape_of does.
VKPAGED_API AttentionResult mla_attention(const MlaInputs& inputs, const AttentionParams& params = {},
                                          bool want_lse = false);

// ---- cache operations (docs/contract.md, "Cache operations"; GPU paths in cache_ops.hpp) ----
// Same checks and the same answers as the GPU paths, bit for bit; where the device flags a bad
// slot or block id, the reference refuses it (vkpaged::Error naming it) before writing. The
// caches are in `layout` (cache_ops.hpp lists each layout's shapes).

// Writes key/value [T, Hkv, D] into the caches (in place) at slot_mapping [T] (i64 or i32;
// negative = padding). fp8 caches store encode(value * (1 / scale)).
VKPAGED_API void reshape_and_cache(const HostTensor& key, const HostTensor& value, const HostTensor& slot_mapping,
                                   HostTensor& key_cache, HostTensor& value_cache, const CacheScales& scales = {},
                                   KvLayout layout = KvLayout::vllm);
// One layer of copy_blocks (in place).
VKPAGED_API void copy_blocks(HostTensor& key_cache, HostTensor& value_cache, Span<const BlockCopy> pairs,
                             KvLayout layout = KvLayout::vllm);
// One layer of swap_blocks: src blocks pairs[i].src into dst blocks pairs[i].dst (both caches
// in `layout`).
VKPAGED_API void swap_blocks(const HostTensor& src_key_cache, const HostTensor& src_value_cache,
                             HostTensor& dst_key_cache, HostTensor& dst_value_cache, Span<const BlockCopy> pairs,
                             KvLayout layout = KvLayout::vllm);
// gather: rows [seq_starts[s], seq_starts[s + 1]) of [T, Hkv, D] outputs of `output_dtype`,
// T = seq_starts[S]. Refuses decreasing seq_starts, positions past M * B and block ids >= N.
struct GatherResult {
  HostTensor key;
  HostTensor value;
};
VKPAGED_API GatherResult gather(const HostTensor& key_cache, const HostTensor& value_cache,
                                const HostTensor& block_tables, const HostTensor& seq_starts, DType output_dtype,
                                const CacheScales& scales = {}, KvLayout layout = KvLayout::vllm);

// ---- rotary embedding (rotary.hpp), in double precision ----
// Rotates query [T, H, D] and key [T, Hkv, D] in place (either may be an empty HostTensor):
// each rotated element is computed in double from the stored inputs and cos/sin values, then
// rounded to the tensor's dtype. Refuses a position outside [0, max_position) (naming it)
// before writing anything, where the device flags it.
VKPAGED_API void rotary_embedding(HostTensor& query, HostTensor& key, const HostTensor& positions,
                                  const HostTensor& cos_sin_cache, RotaryStyle style = RotaryStyle::neox);
// The fused form: rotary_embedding(query, key, ...) then reshape_and_cache(key (rotated),
// value, ...), all arguments checked before anything is written.
VKPAGED_API void reshape_and_cache_rotary(HostTensor& query, HostTensor& key, const HostTensor& value,
                                          const HostTensor& slot_mapping, const HostTensor& positions,
                                          const HostTensor& cos_sin_cache, RotaryStyle style, HostTensor& key_cache,
                                          HostTensor& value_cache, const CacheScales& scales = {},
                                          KvLayout layout = KvLayout::vllm);
// ---- reshape_and_cache for MLA (mla_cache_ops.hpp), bit for bit the GPU path's ----
// One layer's MLA pools on the host: mla_cache [N, B, Dv + R], or ckv_cache [N, B, Dv] and
// kpe_cache [N, B, R], of the cache dtype (fp8 pools: HostTensors of the fp8 dtype).
struct MlaHostCache {
  HostTensor mla_cache;
  HostTensor ckv_cache;
  HostTensor kpe_cache;
};
// RoPE on k_pe: positions [T], cos_sin_cache [max_position, rotary_dim], the style.
struct MlaHostRope {
  HostTensor positions;
  HostTensor cos_sin_cache;
  RotaryStyle style = RotaryStyle::neox;
};
// Writes kv_c [T, Dv] and k_pe [T, R] (rotated first by rotary_embedding's reference when
// `rope` is given) into the pools at slot_mapping [T] (negative = padding); fp8 pools store
// encode(x * (1 / scale)). Every check, the positions' and slots' included, before anything is
// written.
VKPAGED_API void mla_reshape_and_cache(const HostTensor& kv_c, const HostTensor& k_pe, const HostTensor& slot_mapping,
                                       MlaHostCache& cache, float scale = 1.0f, const MlaHostRope* rope = nullptr);
// max |x| (NaN if x holds one), as record_absmax.
VKPAGED_API float absmax(const HostTensor& x);

}  // namespace vkpaged::reference
