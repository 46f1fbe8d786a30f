// SPDX-License-Identifier: Apache-2.0
// Paged decode attention (docs/contract.md), one pass with an online softmax.
//
// A workgroup takes one sequence, HEADS query heads that share one kv head (so each key and
// value is read once for the whole GQA group), and one partition of the context (all of it
// when not split). It walks the context in tiles of WG tokens:
//   key phase:   invocation i scores token tile+i against the group's queries, reading the
//                token's keys as 16-byte chunks. vllm layout ([D/x][B][x] per kv head):
//                neighbouring invocations read neighbouring chunks of a block, so the reads
//                coalesce. nhd and hnd (a token's D elements contiguous): each invocation reads
//                its token's row front to back, every 32-byte sector whole over two loads.
//   softmax:     tile max per head (workgroup reduction), running max and rescale.
//   value phase: vllm ([D][B] per kv head): invocation (row, lane) accumulates p * v for dims
//                row, row+ROWS, ... over LANES_PER_ROW interleaved 16-byte chunks of each
//                block's value rows. nhd and hnd: invocation (token lane, dim chunk) adds
//                p * v for VDIMS dims of tokens tl, tl + TOKEN_LANES, ...: the DIM_LANES
//                invocations of a token lane read the token's row in one coalesced sweep, and
//                each probability read serves VDIMS dims. The layout is a specialization
//                constant: the other layouts' code is not in a pipeline.
// Variants for the portable path's measurements (DECODE_SC_SCALAR_VARIANT, VKPAGED_DECODE_TUNE's
// fp8conv and f16math; the defaults are the kernel above, and each variant gives the contract's
// results):
//   fp8 pairs (fp8conv=1): fp8 words become f16 pairs by a shift and masks (alternate bytes, the
//                matrix kernel's conversion) instead of byte moves and a per-element fix; E4M3's
//                NaN (which that conversion leaves finite) is found by a probe on the raw words:
//                a key word with one poisons its token's logits, a value load with one is
//                converted again exactly.
//   f16 keys (f16math bit 1, f16 query and cache, the *_f16 modules): the products of a
//                16-byte key chunk in packed f16 (f16vec2 fma, the chunk's 8 products summed in
//                f16), the chunks' sums in f32.
//   f16 values (f16math bit 2, vllm layout): the 8 tokens of a value load times their
//                probabilities (kept in f16 in shared memory) in packed f16, summed in f32.
//   batched value loads (vloads=2|4|8): each invocation issues that many of its value loads
//                before it uses any (in the default kernel each load waits for the last one's
//                products, and for its checks), so that more of them are in flight per
//                invocation, for more registers.
// Every intermediate stays in registers: measured on an H200, variants that held query slices,
// several keys or hoisted probabilities in registers lost more to occupancy than they saved
// in shared-memory loads (bench/RESULTS.md, "What was tried").
// Split mode writes unnormalised partial outputs with their max and sum to scratch for
// partition_merge.comp; single pass normalises and writes the output.
// The shared attention blocks give the work item and its key range (attention_range.glsl), the
// logits (attention_logits.glsl), the softmax state (softmax_state.glsl) and the finish
// (attention_epilogue.glsl); this file is the decode-specific walk over the cache.
// Non-finite inputs (contract, Decode step 9; common/non_finite.glsl): a query or key element
// that is NaN or infinite makes its token's logit NaN (attention_logit); that token is kept out
// of the softmax and its head marked poisoned (NaN outputs and LSE; a split partition stores NaN
// as its max). A non-finite value element reaches its dim's accumulators through p * v (0 * Inf
// is NaN too), and the outputs turn any non-finite element into NaN.
#extension GL_GOOGLE_include_directive : require
#ifndef VKP_F16_MATH
#define VKP_F16_MATH 0  // the *_f16 modules: packed f16 arithmetic (needs shaderFloat16)
#endif
#if VKP_F16_MATH
#extension GL_EXT_shader_explicit_arithmetic_types_float16 : require
#endif
#if VKP_SUBGROUP
#extension GL_KHR_shader_subgroup_basic : require
#extension GL_KHR_shader_subgroup_arithmetic : require
#endif
#include "common/address_extensions.glsl"

#include "common/shader_interface.h"
#include "common/dtype.glsl"
#include "common/convert.glsl"
#include "common/kv_layout.glsl"
#include "common/softmax_state.glsl"
#include "common/attention_range.glsl"

#define VKP_SC(name) DECODE_SC_##name
#include "common/attention_constants.glsl"  // WG, B, GROUP, QUERY_DTYPE, CACHE_DTYPE, FEATURES
layout(constant_id = DECODE_SC_HEAD_SIZE) const uint D = 128u;
layout(constant_id = DECODE_SC_LANES_PER_ROW) const uint LANES = 2u;
layout(constant_id = DECODE_SC_KV_LAYOUT) const uint KV_LAYOUT = KV_LAYOUT_VLLM;
layout(constant_id = DECODE_SC_VALUE_DIMS) const uint VALUE_DIMS = 0u;
layout(constant_id = DECODE_SC_SCALAR_VARIANT) const uint VARIANT = 0u;

const bool ORDERED = (FEATURES & FEATURE_ORDERED) != 0u;

#include "common/cache_element.glsl"
const uint KEY_CHUNKS = D / X;              // 16-byte key chunks per token
const uint VEC = B < X ? B : X;             // tokens per value load
const uint VEC_BYTES = VEC * CACHE_BYTES;   // 16, 8, 4, 2 or 1
const uint ROW_LOADS = B / VEC;             // value loads per dim row of one block
const uint TILE = WG;                       // tokens per tile: one per invocation in the key phase
const uint TILE_BLOCKS = TILE / B;
const uint ROWS = WG / LANES;               // dim rows processed at once in the value phase
const uint DIMS_PER_INVOCATION = (D + ROWS - 1u) / ROWS;
const uint LANE_LOADS = (TILE / VEC) / LANES;  // value loads per lane per dim row per tile
const uint NO_BLOCK = 0xffffffffu;
// nhd and hnd: a token's keys and values are D contiguous elements.
const bool TOKEN_MAJOR = KV_LAYOUT != KV_LAYOUT_VLLM;
const uint KEY_CHUNK_STRIDE = TOKEN_MAJOR ? 1u : B;  // 16-byte units from a token's key chunk to its next
const uint VDIMS = VALUE_DIMS == 0u ? PER_WORD : VALUE_DIMS;  // dims per value load (4, 8 or 16 bytes)
const uint VDIM_BYTES = VDIMS * CACHE_BYTES;
const uint DIM_LANES = D / VDIMS;                           // value loads across one token's row
const uint TOKEN_LANES = DIM_LANES < WG ? WG / DIM_LANES : 1u;  // tokens whose rows are read at once
const uint VALUE_ITEMS = (DIM_LANES + WG - 1u) / WG;        // dim chunks per invocation (1 unless D / VDIMS > WG)
// Accumulators per head: the dims an invocation owns.
const uint ACC_DIMS = TOKEN_MAJOR ? VALUE_ITEMS * VDIMS : DIMS_PER_INVOCATION;
// The variants (header); the planner asks for each only where it applies. Each is a product of
// 0/1 terms of the specialization constants themselves: glslc's optimizer lost booleans made
// with && of them (or of other derived booleans) in some orders.
const uint FP8_PAIRS_ON = ((VARIANT & DECODE_SCALAR_FP8_PAIRS) / DECODE_SCALAR_FP8_PAIRS) *
                          uint(CACHE_DTYPE == DT_FP8_E4M3 || CACHE_DTYPE == DT_FP8_E5M2);
const bool FP8_PAIRS = FP8_PAIRS_ON != 0u;
const bool E4M3_PROBE = FP8_PAIRS_ON * uint(CACHE_DTYPE == DT_FP8_E4M3) != 0u;
#if VKP_F16_MATH
const uint F16_KEYS_BIT = (VARIANT & DECODE_SCALAR_F16_KEYS) / DECODE_SCALAR_F16_KEYS;        // 0 or 1
const uint F16_VALUES_BIT = (VARIANT & DECODE_SCALAR_F16_VALUES) / DECODE_SCALAR_F16_VALUES;  // 0 or 1
const bool F16_KEYS = F16_KEYS_BIT * uint(CACHE_DTYPE == DT_F16) != 0u;
// Loads of 8 tokens (16 bytes): blocks of 8 tokens or more.
const bool F16_VALUES = F16_VALUES_BIT * uint(CACHE_DTYPE == DT_F16) * uint(KV_LAYOUT == KV_LAYOUT_VLLM) * uint(B >= 8u) != 0u;
#else
const bool F16_KEYS = false;
const bool F16_VALUES = false;
#endif
// Value loads issued together (DECODE_SCALAR_VALUE_LOADS_SHIFT's field: 0 or 1 for one at a time).
const uint VLOADS_FIELD = (VARIANT >> DECODE_SCALAR_VALUE_LOADS_SHIFT) & 0xffu;
const uint VLOADS = VLOADS_FIELD + uint(VLOADS_FIELD == 0u);

layout(push_constant) uniform PushBlock { DecodePush pc; };

// Bytes of one block of one pool: Hkv * D * B elements, a multiple of 16 (D is a multiple of
// x = 16 / CACHE_BYTES); the host keeps it within 32 bits.
uint block_bytes() { return pc.num_kv_heads * D * B * CACHE_BYTES; }

// KEY16(block, i), VALUE16 / VALUE8 / VALUE4(block, i): element i (16, 8 or 4 bytes) of a
// block of the key or value pool, counted from the block's start.
#if VKP_ADDRESS
#include "common/address.glsl"
layout(buffer_reference, std430, buffer_reference_align = 16) readonly buffer Words16 { uvec4 v[]; };
layout(buffer_reference, std430, buffer_reference_align = 8) readonly buffer Words8 { uvec2 v[]; };
layout(buffer_reference, std430, buffer_reference_align = 4) readonly buffer Words4 { uint v[]; };
// Each block from its own 64-bit start (the views' offsets are 0): an index counted from the
// pool's start would pass 32 bits in a pool past 4 GiB (of 4-byte words) or 16 GiB.
#define KEY16(block, i) Words16(address_of_block(pc.key_address, block, block_bytes())).v[i]
#define VALUE16(block, i) Words16(address_of_block(pc.value_address, block, block_bytes())).v[i]
#define VALUE8(block, i) Words8(address_of_block(pc.value_address, block, block_bytes())).v[i]
#define VALUE4(block, i) Words4(address_of_block(pc.value_address, block, block_bytes())).v[i]
#else
layout(set = 0, binding = DECODE_BINDING_KEY_CACHE) readonly buffer KeyCache { uvec4 key16[]; };
layout(set = 0, binding = DECODE_BINDING_VALUE_CACHE) readonly buffer ValueCache16 { uvec4 value16[]; };
layout(set = 0, binding = DECODE_BINDING_VALUE_CACHE) readonly buffer ValueCache8 { uvec2 value8[]; };
layout(set = 0, binding = DECODE_BINDING_VALUE_CACHE) readonly buffer ValueCache4 { uint value4[]; };
// The bound range is within maxStorageBufferRange, so 32-bit indices reach all of it.
#define KEY16(block, i) key16[pc.key_offset / 4u + (block) * (block_bytes() / 16u) + (i)]
#define VALUE16(block, i) value16[pc.value_offset / 4u + (block) * (block_bytes() / 16u) + (i)]
#define VALUE8(block, i) value8[pc.value_offset / 2u + (block) * (block_bytes() / 8u) + (i)]
#define VALUE4(block, i) value4[pc.value_offset + (block) * (block_bytes() / 4u) + (i)]
#endif
#define VKP_BINDING(name) DECODE_BINDING_##name
#include "common/attention_bindings.glsl"
layout(set = 0, binding = DECODE_BINDING_SCRATCH) writeonly buffer Scratch { float scratch[]; };
#include "common/decode_order.glsl"
#include "common/attention_logits.glsl"
#include "common/attention_epilogue.glsl"

shared float s_query[GROUP * D];       // scaled queries; reused for the final output
shared float s_prob[GROUP * TILE];     // exp(logit - running max) of the tile's tokens
#if VKP_F16_MATH
// Sized by the variant's bits alone (arithmetic, not a select of the booleans above: glslc).
shared uint s_query16[1u + F16_KEYS_BIT * (GROUP * D / 2u - 1u)];      // f16 keys: the scaled queries as f16 pairs
shared float16_t s_prob16[1u + F16_VALUES_BIT * (GROUP * TILE - 1u)];  // f16 values: the probabilities in f16
#endif
shared float s_reduce[GROUP * WG];
shared uint s_block[TILE_BLOCKS];      // physical block of each block slot of the tile
shared uint s_query_row[GROUP];        // the first words of the group's query rows (strided views) ...
shared uint s_output_row[GROUP];       // ... and of its output rows

#include "common/reduce.glsl"

// Element d of the query row of group head g (< heads).
float query_element(uint g, uint d) { return VKP_LOAD_ELEMENT(query_words, s_query_row[g], d, QUERY_DTYPE); }

// The elements of cache word w, in order: unpack_word's, or with FP8_PAIRS two f16 pairs made
// of alternate bytes by a shift and masks (E4M3 reads as value / 256, as unpack_word's, and its
// NaN as a finite number: E4M3_PROBE finds it).
vec4 cache_word(uint w) {
  if (FP8_PAIRS) {
    uvec2 v = uvec2((w << 8) & 0xff00ff00u, w & 0xff00ff00u);  // bytes 0, 2 and 1, 3 in each half's high byte
    if (CACHE_DTYPE == DT_FP8_E4M3) v = ((v >> 1) & 0x3f803f80u) | (v & 0x80008000u);
    const vec2 even = unpackHalf2x16(v.x), odd = unpackHalf2x16(v.y);
    return vec4(even.x, odd.x, even.y, odd.y);
  }
  return unpack_word(w, CACHE_DTYPE);
}

// E4M3's NaN probe (decode_coopmat_kernel.glsl's): some bit of E4M3_NAN_BITS is set in
// e4m3_nan_probe(w) exactly where w holds a NaN byte (S.1111.111). Probes OR together.
const uint E4M3_NAN_BITS = 0x80808080u;
uint e4m3_nan_probe(uint w) { return (w + 0x01010101u) ^ w; }

// FP8_PAIRS: the elements of a value load's words w (16 fp8 at most), in order. With E4M3_PROBE a
// load with a NaN byte is converted exactly (unpack_word keeps NaN).
void fp8_load_elements(uvec4 w, out float e[16]) {
  if (E4M3_PROBE && ((e4m3_nan_probe(w.x) | e4m3_nan_probe(w.y) | e4m3_nan_probe(w.z) | e4m3_nan_probe(w.w)) &
                     E4M3_NAN_BITS) != 0u) {
    for (uint i = 0u; i < 16u; ++i) e[i] = unpack_word(w[i / 4u], CACHE_DTYPE)[i % 4u];
    return;
  }
  for (uint i = 0u; i < 16u; ++i) e[i] = cache_word(w[i / 4u])[i % 4u];
}

// The 16, 8 or 4 bytes of value load `index` (in units of `bytes`) of `block` (unused words 0).
uvec4 value_words(uint block, uint index, uint bytes) {
  if (bytes == 16u) return VALUE16(block, index);
  if (bytes == 8u) return uvec4(VALUE8(block, index), 0u, 0u);
  return uvec4(VALUE4(block, index), 0u, 0u, 0u);
}

// The VEC value elements of dim row `row` (= kv_head * D + d) of `block`, load `c`.
void load_values(uint block, uint row, uint c, out float v[VEC]) {
  const uint chunk = row * ROW_LOADS + c;  // in units of VEC_BYTES from the block's start
  if (FP8_PAIRS) {
    float e[16];
    const uint byte_offset = chunk * VEC_BYTES;
    fp8_load_elements(value_words(block, VEC_BYTES >= 4u ? chunk : byte_offset / 4u, max(VEC_BYTES, 4u)), e);
    const uint first = VEC_BYTES >= 4u ? 0u : byte_offset % 4u;
    for (uint i = 0u; i < VEC; ++i) v[i] = e[first + i];
  } else if (VEC_BYTES == 16u) {
    uvec4 w = VALUE16(block, chunk);
    for (uint i = 0u; i < VEC; ++i) v[i] = unpack_word(w[i / elements_per_word(CACHE_DTYPE)], CACHE_DTYPE)[i % elements_per_word(CACHE_DTYPE)];
  } else if (VEC_BYTES == 8u) {
    uvec2 w = VALUE8(block, chunk);
    for (uint i = 0u; i < VEC; ++i) v[i] = unpack_word(w[i / elements_per_word(CACHE_DTYPE)], CACHE_DTYPE)[i % elements_per_word(CACHE_DTYPE)];
  } else {
    // 4, 2 or 1 bytes: inside one word
    const uint byte_offset = chunk * VEC_BYTES;
    const uint w = VALUE4(block, byte_offset / 4u);
    const uint first = (byte_offset % 4u) / CACHE_BYTES;
    vec4 e = unpack_word(w, CACHE_DTYPE);
    for (uint i = 0u; i < VEC; ++i) v[i] = e[first + i];
  }
}

// Batched value loads: the words of load `c` of dim row `row` (= kv_head * D + d) of `block`,
// and their VEC elements.
uvec4 value_load_words(uint block, uint row, uint c) {
  const uint chunk = row * ROW_LOADS + c;
  if (VEC_BYTES >= 4u) return value_words(block, chunk, VEC_BYTES);
  return uvec4(VALUE4(block, (chunk * VEC_BYTES) / 4u), 0u, 0u, 0u);
}
void values_of_words(uvec4 w, uint row, uint c, out float v[VEC]) {
  float e[16];
  if (FP8_PAIRS) fp8_load_elements(w, e);
  else
    for (uint i = 0u; i < X; ++i) e[i] = unpack_word(w[i / PER_WORD], CACHE_DTYPE)[i % PER_WORD];
  const uint first = VEC_BYTES >= 4u ? 0u : (((row * ROW_LOADS + c) * VEC_BYTES) % 4u) / CACHE_BYTES;
  for (uint i = 0u; i < VEC; ++i) v[i] = e[first + i];
}

// Where a token's key starts in its block (in 16-byte chunks); chunk c of it is
// KEY_CHUNK_STRIDE * c further.
uint key_first_chunk(uint kv_head, uint offset) {
  if (!TOKEN_MAJOR) return kv_head * KEY_CHUNKS * B + offset;  // [Hkv][D/x][B][x]
  return kv_key_offset(KV_LAYOUT, pc.num_kv_heads, D, B, X, kv_head, 0u, offset) / X;
}

// nhd and hnd: the words of the value load of dims dim0 .. dim0 + VDIMS - 1 of token `offset`
// of `block`, and their elements.
uvec4 value_dims_words(uint block, uint kv_head, uint dim0, uint offset) {
  return value_words(block, kv_value_offset(KV_LAYOUT, pc.num_kv_heads, D, B, X, kv_head, dim0, offset) / VDIMS, VDIM_BYTES);
}
void value_dims_of_words(uvec4 w, out float v[VDIMS]) {
  if (FP8_PAIRS) {
    float e[16];
    fp8_load_elements(w, e);
    for (uint i = 0u; i < VDIMS; ++i) v[i] = e[i];
  } else {
    for (uint i = 0u; i < VDIMS; ++i) v[i] = unpack_word(w[i / PER_WORD], CACHE_DTYPE)[i % PER_WORD];
  }
}

// nhd and hnd: the VDIMS value elements from dim `dim0` of token `offset` of `block`.
void load_value_dims(uint block, uint kv_head, uint dim0, uint offset, out float v[VDIMS]) {
  value_dims_of_words(value_dims_words(block, kv_head, dim0, offset), v);
}

// vllm: adds one value load's products to the accumulators of its dim (acc[j * GROUP + g]):
// p * v over its VEC tokens from tile position tok0; with `partial`, the tokens outside the range
// count 0 (their slots may hold garbage, even NaN, and 0 * NaN is NaN). A macro: main's
// accumulators, sized by a product of specialization constants, cannot be passed to a function
// (glslc's optimizer fails on the copy).
#define ADD_VALUE_LOAD(v, tok0, partial, j)                                                 \
  {                                                                                         \
    if (partial)                                                                            \
      for (uint i_ = 0u; i_ < VEC; ++i_)                                                    \
        if (!in_key_range(range, tile + (tok0) + i_)) v[i_] = 0.0;                          \
    for (uint g_ = 0u; g_ < GROUP; ++g_) {                                                  \
      float sum_ = 0.0;                                                                     \
      for (uint i_ = 0u; i_ < VEC; ++i_) sum_ += s_prob[g_ * TILE + (tok0) + i_] * v[i_];   \
      acc[(j) * GROUP + g_] += sum_;                                                        \
    }                                                                                       \
  }

#if VKP_F16_MATH
// The same for f16 values (F16_VALUES): the load's 8 tokens as 4 pairs, the products in packed
// f16 with the probabilities of s_prob16, their sum in f32.
void f16_value_load_sums(uvec4 w, uint tile, uint tok0, bool partial, KeyRange range, out float sums[GROUP]) {
  uint keep[4];  // the halves of tokens in the range
  for (uint k = 0u; k < 4u; ++k)
    keep[k] = !partial ? 0xffffffffu
                       : (in_key_range(range, tile + tok0 + 2u * k) ? 0x0000ffffu : 0u) |
                             (in_key_range(range, tile + tok0 + 2u * k + 1u) ? 0xffff0000u : 0u);
  for (uint g = 0u; g < GROUP; ++g) {
    f16vec2 part = f16vec2(0.0);
    for (uint k = 0u; k < 4u; ++k)
      part = fma(f16vec2(s_prob16[g * TILE + tok0 + 2u * k], s_prob16[g * TILE + tok0 + 2u * k + 1u]),
                 unpackFloat2x16(w[k] & keep[k]), part);
    sums[g] = float(part.x) + float(part.y);
  }
}
#endif

// The workgroup's heads from their states (running max, sum, poisoned) and value sums (in
// s_query): split, the partial state to the scratch for the merges; else the finished outputs.
void finish_decode(uint seq, uint part, uint head0, uint heads, float running_max[GROUP], float thread_sum[GROUP],
                   float poisoned[GROUP]) {
  const uint tid = gl_LocalInvocationID.x;
  const float out_scale = pc.v_scale * fp8_scale_fix(CACHE_DTYPE);
  if (SPLIT) {
    const uint rows = pc.num_seqs * pc.num_heads;
    for (uint i = tid; i < heads * D; i += WG) {
      const uint row = seq * pc.num_heads + head0 + i / D;
      scratch[pc.scratch_offset + split_sums_word(row, part, pc.num_partitions, D) + i % D] = s_query[i] * out_scale;
    }
    if (tid < heads) {
      const uint ml = pc.scratch_offset + split_state_word(seq * pc.num_heads + head0 + tid, part, rows, pc.num_partitions, D);
      for (uint g = 0u; g < GROUP; ++g)
        if (g == tid) {
          scratch[ml] = row_state_max(running_max[g], poisoned[g] > 0.0);  // NaN: the merges make the head NaN
          scratch[ml + 1u] = thread_sum[g];
        }
    }
    return;
  }

  // Single pass: normalise (sinks join the denominator) and write.
  float out_factor[GROUP];
  for (uint g = 0u; g < GROUP; ++g) {
    const float z = SINKS && g < heads ? sinks[pc.sinks_offset + head0 + g] : 0.0;
    const RowFinish f = finish_row(row_state_max(running_max[g], poisoned[g] > 0.0), thread_sum[g], SINKS, z);
    out_factor[g] = f.factor * out_scale;
    if (WRITE_LSE && g < heads && tid == 0u) lse[pc.lse_offset + seq * pc.num_heads + head0 + g] = f.lse;
  }
  const uint per_word = QUERY_DTYPE == DT_F32 ? 1u : 2u;
  for (uint i = tid; i < heads * D / per_word; i += WG) {
    const uint e = i * per_word;
    const uint g = e / D;
    float f = 0.0;
    for (uint gg = 0u; gg < GROUP; ++gg)
      if (gg == g) f = out_factor[gg];
    const float a = finish_output(s_query[e], f);
    const float b = per_word == 2u ? finish_output(s_query[e + 1u], f) : 0.0;
    output_words[s_output_row[g] + (e % D) / per_word] = pack_output(a, b, QUERY_DTYPE);
  }
}

void main() {
  const uint tid = gl_LocalInvocationID.x;
  const uvec2 item = decode_item(ORDERED);
  const uint seq = item.x;
  const uint part = item.y;
  if (ORDERED && seq >= pc.num_seqs) return;  // a bad list (flagged)
  const HeadGroup hg = head_group(gl_WorkGroupID.x, pc.num_heads, pc.num_kv_heads, GROUP);
  const uint kv_head = hg.kv_head;
  const uint head0 = hg.head0;
  const uint heads = hg.heads;

  uint len = context_lens[pc.context_lens_offset + seq];
  if (len > pc.context_cap) {
    if (tid == 0u && gl_WorkGroupID.x == 0u && part == 0u) atomicOr(status[pc.status_offset], STATUS_BAD_CONTEXT_LEN);
    len = pc.context_cap;
  }
  // The query stands at p = len - 1 and attends [window start, len).
  const int p = query_position(len, 1u, 0u);
  KeyRange range = row_key_range(p, len, 1u, WINDOW ? pc.sliding_window : 0u, false);
  if (SPLIT) {
    range = clip_key_range(range, part * pc.partition_tokens, (part + 1u) * pc.partition_tokens);
    if (range.lo >= range.hi) return;  // the merges skip partitions outside the row's range
  }
  const uint lo = range.lo;
  const uint hi = range.hi;

  // The group's rows in the strided query and output, found once per row.
  for (uint g = tid; g < heads; g += WG) {
    s_query_row[g] = row_word(pc.query_rows, seq, head0 + g);
    s_output_row[g] = row_word(pc.output_rows, seq, head0 + g);
  }
  barrier();

  // Queries of the group, with scale, k_scale and the fp8 decode factor folded in.
  const float qscale = pc.scale * pc.k_scale * fp8_scale_fix(CACHE_DTYPE);
#if VKP_F16_MATH
  if (F16_KEYS)
    for (uint i = tid; i < GROUP * D / 2u; i += WG) {
      const uint g = (2u * i) / D, d = (2u * i) % D;
      const vec2 q = g < heads ? vec2(query_element(g, d), query_element(g, d + 1u)) * qscale : vec2(0.0);
      s_query16[i] = packHalf2x16(q);
    }
  else
#endif
  for (uint i = tid; i < GROUP * D; i += WG) {
    const uint g = i / D;
    s_query[i] = g < heads ? query_element(g, i % D) * qscale : 0.0;
  }

  float slope[GROUP];     // ALiBi slope of each head
  float running_max[GROUP];
  float thread_sum[GROUP];
  float poisoned[GROUP];  // 1: this invocation saw a non-finite logit of the head
  float acc[ACC_DIMS * GROUP];
  for (uint g = 0u; g < GROUP; ++g) {
    slope[g] = ALIBI && g < heads ? alibi_slopes[pc.alibi_offset + head0 + g] : 0.0;
    running_max[g] = VKP_NEG_INF;
    thread_sum[g] = 0.0;
    poisoned[g] = 0.0;
  }
  for (uint i = 0u; i < ACC_DIMS * GROUP; ++i) acc[i] = 0.0;

  const uint lane = tid % LANES;
  const uint row0 = tid / LANES;
  const uint table = pc.block_tables_offset + seq * pc.max_blocks_per_seq;

  for (uint tile = (lo / B) * B; tile < hi; tile += TILE) {
    if (tid < TILE_BLOCKS) {
      const uint slot = tile / B + tid;
      uint block = NO_BLOCK;
      if (slot * B < hi) {
        block = block_tables[table + slot];
        if (block >= pc.num_blocks) {
          atomicOr(status[pc.status_offset], STATUS_BAD_BLOCK_ID);
          block = NO_BLOCK;
        }
      }
      s_block[tid] = block;
    }
    barrier();

    // ---- key phase: one token per invocation ----
    const uint t = tile + tid;
    const uint block = s_block[tid / B];
    const bool valid = in_key_range(range, t) && block != NO_BLOCK;
    float logit[GROUP];
    for (uint g = 0u; g < GROUP; ++g) logit[g] = VKP_NEG_INF;
    if (valid) {
      float dot_product[GROUP];
      for (uint g = 0u; g < GROUP; ++g) dot_product[g] = 0.0;
      const uint first = key_first_chunk(kv_head, tid % B);  // this token's first chunk in the block
      uint nan_probe = 0u;  // E4M3_PROBE: over the token's key words
      for (uint c = 0u; c < KEY_CHUNKS; ++c) {
        const uvec4 w = KEY16(block, first + c * KEY_CHUNK_STRIDE);
#if VKP_F16_MATH
        if (F16_KEYS) {  // 8 dims: 4 pairs
          for (uint g = 0u; g < GROUP; ++g) {
            f16vec2 part = f16vec2(0.0);
            for (uint j = 0u; j < 4u; ++j) part = fma(unpackFloat2x16(s_query16[g * (D / 2u) + c * 4u + j]), unpackFloat2x16(w[j]), part);
            dot_product[g] += float(part.x) + float(part.y);
          }
          continue;
        }
#endif
        for (uint j = 0u; j < 4u; ++j) {
          if (E4M3_PROBE) nan_probe |= e4m3_nan_probe(w[j]);
          const vec4 k = cache_word(w[j]);
          const uint per_word = elements_per_word(CACHE_DTYPE);
          for (uint e = 0u; e < per_word; ++e) {
            const uint d = c * X + j * per_word + e;
            for (uint g = 0u; g < GROUP; ++g) dot_product[g] += s_query[g * D + d] * k[e];
          }
        }
      }
      if (E4M3_PROBE && (nan_probe & E4M3_NAN_BITS) != 0u)  // a NaN key element: the token's logits are NaN
        for (uint g = 0u; g < GROUP; ++g) dot_product[g] = VKP_NAN;
      for (uint g = 0u; g < GROUP; ++g) {
        const float l = attention_logit(dot_product[g], p, t, pc.softcap, slope[g]);
        if (nan_bits(l)) poisoned[g] = 1.0;  // the logit stays -inf: out of the softmax
        else logit[g] = l;
      }
    }

    // ---- online softmax over the tile ----
    float tile_max[GROUP];
    for (uint g = 0u; g < GROUP; ++g) tile_max[g] = logit[g];
    workgroup_reduce(tile_max, true);
    for (uint g = 0u; g < GROUP; ++g) {
      const float alpha = row_state_rescale(running_max[g], tile_max[g]);
      const float new_max = running_max[g];
      const float weight = softmax_rescale(logit[g], new_max);  // 0 where not attended
      thread_sum[g] = thread_sum[g] * alpha + weight;
#if VKP_F16_MATH
      if (F16_VALUES) s_prob16[g * TILE + tid] = float16_t(weight);
      else
#endif
      s_prob[g * TILE + tid] = weight;
      for (uint j = 0u; j < ACC_DIMS; ++j) acc[j * GROUP + g] *= alpha;
    }
    barrier();

    // ---- value phase ----
    if (TOKEN_MAJOR) {
      for (uint it = 0u; it < VALUE_ITEMS; ++it) {
        const uint item = tid + WG * it;
        const uint chunk = item % DIM_LANES;  // dims chunk * VDIMS ...
        const uint token_lane = item / DIM_LANES;
        if (token_lane >= TOKEN_LANES) break;  // invocations past the lanes' last
        if (VLOADS > 1u) {  // batched value loads: VLOADS tokens' loads, then their products
          for (uint i0 = token_lane; i0 < TILE; i0 += TOKEN_LANES * VLOADS) {
            uvec4 w[VLOADS];
            for (uint k = 0u; k < VLOADS; ++k) {
              const uint i = i0 + TOKEN_LANES * k;
              const uint vblock = i < TILE ? s_block[i / B] : NO_BLOCK;
              w[k] = uvec4(0u);
              if (vblock != NO_BLOCK && in_key_range(range, tile + i)) w[k] = value_dims_words(vblock, kv_head, chunk * VDIMS, i % B);
            }
            for (uint k = 0u; k < VLOADS; ++k) {
              const uint i = i0 + TOKEN_LANES * k;
              if (i >= TILE || s_block[i / B] == NO_BLOCK || !in_key_range(range, tile + i)) continue;
              float v[VDIMS];
              value_dims_of_words(w[k], v);
              for (uint g = 0u; g < GROUP; ++g) {
                const float weight = s_prob[g * TILE + i];
                for (uint e = 0u; e < VDIMS; ++e) acc[(it * VDIMS + e) * GROUP + g] += weight * v[e];
              }
            }
          }
          continue;
        }
        for (uint i = token_lane; i < TILE; i += TOKEN_LANES) {
          const uint vblock = s_block[i / B];
          // Outside the range a slot may hold garbage (even NaN), which 0 * NaN would spread.
          if (vblock == NO_BLOCK || !in_key_range(range, tile + i)) continue;
          float v[VDIMS];
          load_value_dims(vblock, kv_head, chunk * VDIMS, i % B, v);
          for (uint g = 0u; g < GROUP; ++g) {
            const float weight = s_prob[g * TILE + i];
            for (uint e = 0u; e < VDIMS; ++e) acc[(it * VDIMS + e) * GROUP + g] += weight * v[e];
          }
        }
      }
    } else if (VLOADS > 1u) {  // batched value loads: VLOADS of a row's loads, then their products
      for (uint j = 0u; j < DIMS_PER_INVOCATION; ++j) {
        const uint d = row0 + ROWS * j;
        if (d >= D) break;
        for (uint li0 = 0u; li0 < LANE_LOADS; li0 += VLOADS) {
          uvec4 w[VLOADS];
          for (uint k = 0u; k < VLOADS; ++k) {
            const uint q = lane + LANES * (li0 + k);
            const uint vblock = li0 + k < LANE_LOADS ? s_block[q / ROW_LOADS] : NO_BLOCK;
            const uint tok0 = (q / ROW_LOADS) * B + (q % ROW_LOADS) * VEC;
            w[k] = uvec4(0u);
            if (vblock != NO_BLOCK && tile + tok0 + VEC > lo && tile + tok0 < hi)
              w[k] = value_load_words(vblock, kv_head * D + d, q % ROW_LOADS);
          }
          for (uint k = 0u; k < VLOADS; ++k) {
            const uint q = lane + LANES * (li0 + k);
            const uint c = q % ROW_LOADS;
            const uint tok0 = (q / ROW_LOADS) * B + c * VEC;
            if (li0 + k >= LANE_LOADS || s_block[q / ROW_LOADS] == NO_BLOCK || tile + tok0 + VEC <= lo || tile + tok0 >= hi)
              continue;
            const bool partial = tile + tok0 < lo || tile + tok0 + VEC > hi;
#if VKP_F16_MATH
            if (F16_VALUES) {
              float sums[GROUP];
              f16_value_load_sums(w[k], tile, tok0, partial, range, sums);
              for (uint g = 0u; g < GROUP; ++g) acc[j * GROUP + g] += sums[g];
              continue;
            }
#endif
            float v[VEC];
            values_of_words(w[k], kv_head * D + d, c, v);
            ADD_VALUE_LOAD(v, tok0, partial, j)
          }
        }
      }
    } else
    for (uint li = 0u; li < LANE_LOADS; ++li) {
      const uint q = lane + LANES * li;  // load index along the tile's row
      const uint slot = q / ROW_LOADS;
      const uint c = q % ROW_LOADS;
      const uint vblock = s_block[slot];
      const uint tok0 = slot * B + c * VEC;  // tile-local first token of the load
      if (vblock == NO_BLOCK || tile + tok0 + VEC <= lo || tile + tok0 >= hi) continue;
      const bool partial = tile + tok0 < lo || tile + tok0 + VEC > hi;
      for (uint j = 0u; j < DIMS_PER_INVOCATION; ++j) {
        const uint d = row0 + ROWS * j;
        if (d >= D) break;
#if VKP_F16_MATH
        if (F16_VALUES) {
          float sums[GROUP];
          f16_value_load_sums(VALUE16(vblock, (kv_head * D + d) * ROW_LOADS + c), tile, tok0, partial, range, sums);
          for (uint g = 0u; g < GROUP; ++g) acc[j * GROUP + g] += sums[g];
          continue;
        }
#endif
        float v[VEC];
        load_values(vblock, kv_head * D + d, c, v);
        ADD_VALUE_LOAD(v, tok0, partial, j)
      }
    }
    barrier();
  }

  // ---- finish: sums over the workgroup, accumulators over the lanes of each row ----
  workgroup_reduce(thread_sum, false);
  workgroup_reduce(poisoned, true);
  if (TOKEN_MAJOR && TOKEN_LANES == 1u) {  // nhd, hnd: every dim chunk has one invocation
    for (uint it = 0u; it < VALUE_ITEMS; ++it) {
      const uint chunk = tid + WG * it;
      if (chunk < DIM_LANES)
        for (uint e = 0u; e < VDIMS; ++e)
          for (uint g = 0u; g < GROUP; ++g) s_query[g * D + chunk * VDIMS + e] = acc[(it * VDIMS + e) * GROUP + g];
    }
    barrier();
  } else if (TOKEN_MAJOR) {  // nhd, hnd: summed over the token lanes that share a dim chunk
    for (uint e = 0u; e < VDIMS; ++e) {
      for (uint g = 0u; g < GROUP; ++g) s_reduce[g * WG + tid] = acc[e * GROUP + g];
      barrier();
      if (tid < DIM_LANES)
        for (uint g = 0u; g < GROUP; ++g) {
          float total = 0.0;
          for (uint l = 0u; l < TOKEN_LANES; ++l) total += s_reduce[g * WG + l * DIM_LANES + tid];
          s_query[g * D + tid * VDIMS + e] = total;
        }
      barrier();
    }
  } else
  for (uint j = 0u; j < DIMS_PER_INVOCATION; ++j) {
    for (uint g = 0u; g < GROUP; ++g) s_reduce[g * WG + tid] = acc[j * GROUP + g];
    barrier();
    const uint d = row0 + ROWS * j;
    if (lane == 0u && d < D)
      for (uint g = 0u; g < GROUP; ++g) {
        float total = 0.0;
        for (uint l = 0u; l < LANES; ++l) total += s_reduce[g * WG + tid + l];
        s_query[g * D + d] = total;
      }
    barrier();
  }
  finish_decode(seq, part, head0, heads, running_max, thread_sum, poisoned);
}
