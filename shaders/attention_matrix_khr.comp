// SPDX-License-Identifier: Apache-2.0
#version 450
// Multi-query attention over the paged cache on matrix units (VK_KHR_cooperative_matrix): the
// contract and the outputs of the portable kernel (common/attention_kernel.glsl), in the
// flash-attention style, for f16 and bf16 queries over f16, bf16 and fp8 caches in every layout.
//
// A workgroup takes one request, a tile of TQ of its new query tokens and GROUP query heads of
// one kv head: ROWS = TQ * GROUP (token, head) rows, row r being token r / GROUP and head
// r % GROUP, so that the heads of a GQA group fill the rows of a request with few tokens. The
// rows come in ROWS / M blocks of M rows, one per subgroup (subgroup b < ROWS / M computes
// block b; the workgroup may hold more subgroups, which only help to stage). It walks the
// tile's key range (attention_range.glsl: whole key tiles above the causal diagonal and below
// the window are never visited) in key tiles of TK positions, starting at a multiple of TK:
//   staging:  every invocation reads the tile's keys and values from the paged cache in
//             16-byte chunks (any layout; common/attention_matrix_staging.glsl), a tile ahead
//             (the loads in flight during the tile before), and writes them to shared memory
//             as f16: keys
//             [TK][D] and values [TK][D] (nhd, hnd) or [D][TK] (vllm, whose chunks hold
//             positions); fp8 bytes become f16 (E4M3 as value / 256, folded into the scales);
//             bf16 tiles are scaled by a power of two into f16's range (below). Positions
//             outside the tile's key range are zeros, never read from the cache;
//   scores:   S [M x TK] = Q K^T with the device's M x N x K products and f32 accumulators,
//             the query's fragments loaded once (in registers, QUERY_REGISTERS) or from shared
//             memory;
//   softmax:  S goes through shared memory: the subgroup's invocations turn its elements into
//             logits (attention_logits.glsl: scale, soft cap, ALiBi, window, tree mask), move
//             each row's running max and sum on (softmax_state.glsl) and write P as f16
//             (-0 where the row does not attend the position);
//   values:   O [M x D] (f32 accumulators, in registers) is rescaled row by row and
//             O += P V.
// Why shared memory for S: which row an accumulator component holds is left to the device
// (KHR gives no layout), and a row's max and sum need every element of the row. Storing S and
// loading P costs shared-memory traffic, but needs no layout, no subgroup shuffles and no
// knowledge of the subgroup size. The row-wise rescale of O needs no layout either: the rows'
// factors are written to an [M x N] matrix in shared memory, loaded as an accumulator and
// multiplied component by component (the spec defines * between matrices of one type that
// way, so a component of each holds the same element).
// Non-finite values: a non-finite query or key element makes its scores non-finite, which the
// logit turns into NaN where the row attends the position (the row is poisoned, as in the
// portable kernel; elsewhere the score is masked). A non-finite value element must reach only
// the rows that attend its position, but P = 0 (a row that does not) times Inf is NaN in a
// product: staging flags a tile that holds one, and that tile's P V is done element by element
// with the hidden positions skipped, as the portable kernel does.
// bf16 range: a tile's bf16 keys (and, separately, its values; the workgroup's queries once)
// are multiplied by the power of two that brings the largest finite magnitude into
// [2^14, 2^15) and become f16 (exact for magnitudes down to 2^-17 of the largest, the rest
// rounded to f16's subnormals), and the products are scaled back in f32.
// Split (FEATURE_SPLIT): workgroup z takes partition z of the key positions and writes
// its rows' unnormalised value sums with their max and sum to the scratch for
// partition_merge.comp, as the portable kernel does.
#extension GL_GOOGLE_include_directive : require
#extension GL_KHR_cooperative_matrix : require
#extension GL_KHR_memory_scope_semantics : require
#extension GL_EXT_shader_explicit_arithmetic_types_float16 : require
#extension GL_KHR_shader_subgroup_basic : require
#extension GL_KHR_shader_subgroup_arithmetic : require
#extension GL_EXT_control_flow_attributes : require

#include "common/shader_interface.h"
#include "common/dtype.glsl"
#include "common/convert.glsl"
#include "common/kv_layout.glsl"
#include "common/strided_rows.glsl"

layout(local_size_x_id = ATTN_SC_WORKGROUP) in;
layout(constant_id = ATTN_SC_HEAD_SIZE) const uint D = 128u;
layout(constant_id = ATTN_SC_BLOCK_SIZE) const uint B = 16u;
layout(constant_id = ATTN_SC_ROWS) const uint ROWS = 64u;
layout(constant_id = ATTN_SC_HEADS_PER_WORKGROUP) const uint GROUP = 4u;
layout(constant_id = ATTN_SC_QUERY_DTYPE) const uint QUERY_DTYPE = DT_F16;  // f16 or bf16 (also the output's)
layout(constant_id = ATTN_SC_CACHE_DTYPE) const uint CACHE_DTYPE = DT_F16;  // f16, bf16, fp8_e4m3, fp8_e5m2
layout(constant_id = ATTN_SC_KV_LAYOUT) const uint KV_LAYOUT = KV_LAYOUT_VLLM;
layout(constant_id = ATTN_SC_FEATURES) const uint FEATURES = 0u;
layout(constant_id = ATTN_SC_MATRIX_M) const uint MM = 16u;
layout(constant_id = ATTN_SC_MATRIX_N) const uint NN = 16u;  // 8 or 16
layout(constant_id = ATTN_SC_MATRIX_K) const uint KK = 16u;  // 8 or 16
layout(constant_id = ATTN_SC_KEY_TILE) const uint TK = 32u;  // a multiple of 16, N and K
layout(constant_id = ATTN_SC_QUERY_REGISTERS) const bool QUERY_REGISTERS = true;
// Where a device runs a subgroup-scope control barrier as a workgroup barrier (Mesa's llvmpipe),
// subgroups that skip the compute phases would leave it waiting: there the workgroup holds just
// the computing subgroups, each computes its block whether or not it holds a row of the tile,
// and they synchronise with workgroup barriers.
layout(constant_id = ATTN_SC_WORKGROUP_SYNC) const bool WORKGROUP_SYNC = false;

#include "common/attention_features.glsl"  // ALIBI, SOFTCAP, SINKS, WINDOW, WRITE_LSE, SPLIT
const bool TREE_MASK = (FEATURES & FEATURE_TREE_MASK) != 0u;

#include "common/cache_element.glsl"
const bool BF16_CACHE = CACHE_DTYPE == DT_BF16;  // tiles scaled into f16's range (bf16 range, above)
const bool BF16_QUERY = QUERY_DTYPE == DT_BF16;
const uint WG = gl_WorkGroupSize.x;
const uint ROW_BLOCKS = ROWS / MM;  // subgroups that compute
const uint TQ = ROWS / GROUP;       // query tokens per tile
const uint DPAD = (D + 15u) / 16u * 16u;  // dims in the products: zeros past D
// Shared strides, padded by 16 bytes so that the rows of a fragment fall in different banks.
const uint DS = DPAD + 8u;  // f16 elements per query, key (and nhd/hnd value) row
const uint TS = TK + 8u;    // f16 elements per P row and per value row of the vllm layout
const uint SS = TK + 4u;    // f32 elements per S row
const bool VALUE_COLUMNS = KV_LAYOUT == KV_LAYOUT_VLLM;  // values staged [D][TK]
const uint NO_BLOCK = 0xffffffffu;

// Shared memory, in 16-byte words (8 f16 or 4 f32): the query rows [ROWS][DS] before the loop
// (kept there when not in registers), then per key tile the keys, the values and, per row
// block, S [M][SS] (f32; also the rows' factor matrix and the output's way out) and P [M][TS]
// (f16). src/ops/attention_planner.cpp sizes the same regions.
const uint Q_WORDS = ROWS * DS / 8u;
const uint K_WORDS = TK * DS / 8u;
const uint V_WORDS = VALUE_COLUMNS ? DPAD * TS / 8u : TK * DS / 8u;
const uint S_WORDS = MM * SS / 4u;
const uint P_WORDS = MM * TS / 8u;
const uint Q_BASE = 0u;
const uint K_BASE = QUERY_REGISTERS ? 0u : Q_WORDS;
const uint V_BASE = K_BASE + K_WORDS;
const uint SP_BASE = V_BASE + V_WORDS;
const uint LOOP_END = SP_BASE + ROW_BLOCKS * (S_WORDS + P_WORDS);
const uint MEM_WORDS = LOOP_END > Q_WORDS ? LOOP_END : Q_WORDS;
shared uvec4 s_mem[MEM_WORDS];

shared float s_row_max[ROWS];      // running max of each row (-inf: nothing attended yet)
shared float s_row_sum[ROWS];
shared uint s_row_poisoned[ROWS];  // a NaN logit was attended (step 9)
shared float s_row_slope[ROWS];    // ALiBi slope of each row's head
shared float s_row_factor[ROWS];   // per tile the rows' rescale factors; at the end their output factors
shared float s_part_max[WG];       // softmax: each lane's part of its row's max ...
shared float s_part_sum[WG];       // ... and sum
shared uint s_scan[WG];            // tree mask: partial sums of the requests' mask sizes
shared uint s_mask_base;           // tree mask: the request's first byte
shared uint s_value_bad[2];        // per tile parity: a staged value element is not finite
shared uint s_largest[3];          // bf16: largest finite magnitude (f32 bits) of the queries, keys, values

#define A_MAT coopmat<float16_t, gl_ScopeSubgroup, MM, KK, gl_MatrixUseA>
#define B_MAT coopmat<float16_t, gl_ScopeSubgroup, KK, NN, gl_MatrixUseB>
#define C_MAT coopmat<float, gl_ScopeSubgroup, MM, NN, gl_MatrixUseAccumulator>

layout(push_constant) uniform PushBlock { AttentionPush pc; };

layout(set = 0, binding = ATTN_BINDING_QUERY) readonly buffer Query { uint query_words[]; };
layout(set = 0, binding = ATTN_BINDING_KEY_CACHE) readonly buffer KeyCache { uvec4 key16[]; };
layout(set = 0, binding = ATTN_BINDING_VALUE_CACHE) readonly buffer ValueCache { uvec4 value16[]; };
layout(set = 0, binding = ATTN_BINDING_VALUE_CACHE) readonly buffer ValueWords { uint value4[]; };
layout(set = 0, binding = ATTN_BINDING_BLOCK_TABLES) readonly buffer BlockTables { uint block_tables[]; };
layout(set = 0, binding = ATTN_BINDING_CONTEXT_LENS) readonly buffer ContextLens { uint context_lens[]; };
layout(set = 0, binding = ATTN_BINDING_QUERY_STARTS) readonly buffer QueryStarts { uint query_starts[]; };
layout(set = 0, binding = ATTN_BINDING_OUTPUT) writeonly buffer Output { uint output_words[]; };
layout(set = 0, binding = ATTN_BINDING_ALIBI) readonly buffer Alibi { float alibi_slopes[]; };
layout(set = 0, binding = ATTN_BINDING_SINKS) readonly buffer Sinks { float sinks[]; };
layout(set = 0, binding = ATTN_BINDING_LSE) writeonly buffer Lse { float lse[]; };
layout(set = 0, binding = ATTN_BINDING_SCRATCH) writeonly buffer Scratch { float scratch[]; };
layout(set = 0, binding = ATTN_BINDING_STATUS) buffer Status { uint status[]; };
layout(set = 0, binding = ATTN_BINDING_TREE_MASK) readonly buffer TreeMask { uint tree_mask_words[]; };

// Bytes of one block of one pool: Hkv * D * B elements, a multiple of 16; the host keeps it
// within 32 bits and the pools within the storage-buffer range.
uint block_bytes() { return pc.num_kv_heads * D * B * CACHE_BYTES; }
#define KEY16(block, i) key16[pc.key_offset / 4u + (block) * (block_bytes() / 16u) + (i)]
#define VALUE16(block, i) value16[pc.value_offset / 4u + (block) * (block_bytes() / 16u) + (i)]
#define VALUE4(block, i) value4[pc.value_offset + (block) * (block_bytes() / 4u) + (i)]

uint query_start_at(uint s) { return query_starts[pc.query_starts_offset + s]; }

#include "common/softmax_state.glsl"
#include "common/attention_range.glsl"

// The workgroup's request and rows, set once in main.
uint g_tile_tokens;  // query tokens of the tile (<= TQ)
uint g_new_tokens;   // q_s
uint g_first_token;  // the tile's first token, counted over the batch (its row in query and output)
uint g_first_j;      // ... and within its request
uint g_heads;        // query heads of the group (<= GROUP)
uint g_head0;
uint g_table;        // the request's block-table row
uint g_kv_head;
KeyRange g_span;     // the key positions the workgroup walks

bool row_valid(uint r) { return r / GROUP < g_tile_tokens && r % GROUP < g_heads; }
// The row's index in [T, H] (LSE, scratch).
uint row_index(uint r) { return (g_first_token + r / GROUP) * pc.num_heads + g_head0 + r % GROUP; }
// The row's first word in the query and in the output (strided views).
uint query_row_word(uint r) { return row_word(pc.query_rows, g_first_token + r / GROUP, g_head0 + r % GROUP); }
uint output_row_word(uint r) { return row_word(pc.output_rows, g_first_token + r / GROUP, g_head0 + r % GROUP); }

#define VKP_TREE_MASK_HOOK
// Byte new_key of row j of the request's q_s x q_s mask (as the portable kernel).
bool tree_mask_allows(uint row, uint new_key) {
  const uint j = g_first_j + row / GROUP;
  const uint index = j * g_new_tokens + new_key;
  if (s_mask_base > pc.tree_mask_bytes || index >= pc.tree_mask_bytes - s_mask_base) {
    atomicOr(status[pc.status_offset], STATUS_BAD_QUERY_STARTS);
    return false;
  }
  const uint byte_index = s_mask_base + index;
  return ((tree_mask_words[pc.tree_mask_offset + byte_index / 4u] >> (8u * (byte_index % 4u))) & 0xffu) != 0u;
}
#include "common/attention_logits.glsl"
#include "common/attention_epilogue.glsl"

// Sum of q_{s'}^2 over the requests before `request` (as the portable kernel).
void find_mask_base(uint request, uint tid) {
  uint partial = 0u;
  for (uint r = tid; r < request; r += WG) {
    const uint q = min(query_start_at(r + 1u) - query_start_at(r), 0xffffu);
    const uint sum = partial + q * q;
    partial = sum < partial ? 0xffffffffu : sum;
  }
  s_scan[tid] = partial;
  barrier();
  if (tid == 0u) {
    uint total = 0u;
    for (uint i = 0u; i < WG; ++i) {
      const uint sum = total + s_scan[i];
      total = sum < total ? 0xffffffffu : sum;
    }
    s_mask_base = total;
  }
  barrier();
}

// Synchronises the invocations of one subgroup and their shared-memory accesses (with
// WORKGROUP_SYNC, those of the workgroup, every subgroup computing).
void subgroup_barrier() {
  if (WORKGROUP_SYNC) barrier();
  else controlBarrier(gl_ScopeSubgroup, gl_ScopeSubgroup, gl_StorageSemanticsShared, gl_SemanticsAcquireRelease);
}

#include "common/attention_matrix_staging.glsl"

// ---- per tile, per subgroup ----

// f32 element i of the 16-byte words from `base`.
float shared_float(uint base, uint i) { return uintBitsToFloat(s_mem[base + i / 4u][i % 4u]); }
void set_shared_float(uint base, uint i, float x) { s_mem[base + i / 4u][i % 4u] = floatBitsToUint(x); }
// f16 element i (as bits) of the 16-byte words from `base`.
uint shared_half(uint base, uint i) { return (s_mem[base + i / 8u][(i / 2u) % 4u] >> (16u * (i % 2u))) & 0xffffu; }

// The subgroup's S [MM][SS] at s_base becomes logits, then P [MM][TS] at p_base; the rows'
// states move on, and their rescale factors fill the [MM][NN] matrix at s_base.
void softmax_tile(uint sub, uint s_base, uint p_base, uint tile, vec2 score_factors, uint first_new, int first_p,
                  uint len, uint window) {
  const uint sg = gl_SubgroupSize;
  const uint lane = gl_SubgroupInvocationID;
  const uint lanes_per_row = sg >= MM ? sg / MM : 1u;
  const uint part = lane % lanes_per_row;
  const uint first_lane = sub * sg + lane - part;  // s_part_* of the row's first lane
  for (uint r = lane / lanes_per_row; r < MM; r += sg / lanes_per_row) {  // the same count in every lane
    const uint row = sub * MM + r;
    const bool valid = row_valid(row);
    const int p = first_p + int(row / GROUP);
    const KeyRange range = row_key_range(p, len, g_new_tokens, window, TREE_MASK);
    const float slope = s_row_slope[row];
    // Logits of the lane's column pairs (2q, 2q + 1), written back over the scores.
    float tile_max = VKP_NEG_INF;
    bool poisoned = false;
    for (uint q = part; q < TK / 2u; q += lanes_per_row) {
      const uint i = r * SS + 2u * q;
      vec2 x = vec2(shared_float(s_base, i), shared_float(s_base, i + 1u));
      for (uint h = 0u; h < 2u; ++h) {
        const uint t = tile + 2u * q + h;
        float logit = VKP_NEG_INF;  // not attended
        if (valid && in_span(t) && attention_visible(range, t, first_new, row)) logit = attention_logit(x[h] * score_factors.x * score_factors.y, p, t, pc.softcap, slope);
        x[h] = logit;
        tile_max_add(tile_max, poisoned, logit);
      }
      set_shared_float(s_base, i, x.x);
      set_shared_float(s_base, i + 1u, x.y);
    }
    s_part_max[sub * sg + lane] = row_state_max(tile_max, poisoned);
    subgroup_barrier();
    tile_max = VKP_NEG_INF;
    poisoned = false;
    for (uint k = 0u; k < lanes_per_row; ++k) tile_max_add(tile_max, poisoned, s_part_max[first_lane + k]);
    float new_max = s_row_max[row];
    const float alpha = row_state_rescale(new_max, tile_max);
    // P in f16 pairs; -0 marks a position the row does not attend.
    float tile_sum = 0.0;
    for (uint q = part; q < TK / 2u; q += lanes_per_row) {
      const uint i = r * SS + 2u * q;
      const vec2 x = vec2(shared_float(s_base, i), shared_float(s_base, i + 1u));
      const bvec2 hidden = bvec2(x.x == VKP_NEG_INF || nan_bits(x.x), x.y == VKP_NEG_INF || nan_bits(x.y));
      const vec2 pr = vec2(hidden.x ? 0.0 : exp(x.x - new_max), hidden.y ? 0.0 : exp(x.y - new_max));
      tile_sum += pr.x + pr.y;
      const uint bits = packHalf2x16(pr) | (hidden.x ? 0x8000u : 0u) | (hidden.y ? 0x80000000u : 0u);
      const uint w = (r * TS + 2u * q) / 2u;  // 32-bit word of the pair
      s_mem[p_base + w / 4u][w % 4u] = bits;
    }
    s_part_sum[sub * sg + lane] = tile_sum;
    subgroup_barrier();
    if (part == 0u) {
      float total = 0.0;
      for (uint k = 0u; k < lanes_per_row; ++k) total += s_part_sum[first_lane + k];
      s_row_sum[row] = s_row_sum[row] * alpha + total;
      s_row_max[row] = new_max;
      if (poisoned) s_row_poisoned[row] = 1u;
      s_row_factor[row] = alpha;
    }
  }
  subgroup_barrier();  // every lane is past its last S read; the factors are in place
  for (uint e = lane; e < MM * NN; e += sg) set_shared_float(s_base, e, s_row_factor[sub * MM + e / NN]);
  subgroup_barrier();
}

// The value element (position tl of the tile, dim d) as staged.
float staged_value(uint tl, uint d) {
  return unpackHalf2x16(shared_half(V_BASE, VALUE_COLUMNS ? d * TS + tl : tl * DS + d)).x;
}

void main() {
  const uint tid = gl_LocalInvocationID.x;
  const uint heads_per_kv = pc.num_heads / pc.num_kv_heads;
  const uint groups_per_kv = (heads_per_kv + GROUP - 1u) / GROUP;
  g_kv_head = gl_WorkGroupID.x / groups_per_kv;
  const uint first_in_kv = (gl_WorkGroupID.x % groups_per_kv) * GROUP;
  g_head0 = g_kv_head * heads_per_kv + first_in_kv;
  g_heads = min(GROUP, heads_per_kv - first_in_kv);
  const uint part = gl_WorkGroupID.z;
  const bool reporter = tid == 0u && gl_WorkGroupID.x == 0u && part == 0u;  // flags each request's values once

  // ---- the request and the tile (uniform: every invocation reads the same words) ----
  const uint slot = gl_WorkGroupID.y;
  const uint request = request_of_slot(slot, pc.num_requests, TQ);
  const uint q0 = query_start_at(request);
  const uint q1 = query_start_at(request + 1u);
  // q1 == q0: a padding request of a bucket's step (no new tokens): its slot stays idle below.
  if (q1 < q0 || q1 > pc.num_tokens) {
    if (reporter) atomicOr(status[pc.status_offset], STATUS_BAD_QUERY_STARTS);
    return;
  }
  g_new_tokens = q1 - q0;
  const uint first_slot = first_tile_slot(q0, request, TQ);
  if (slot < first_slot) {  // query_starts[0] is not 0 on the device
    if (tid == 0u) atomicOr(status[pc.status_offset], STATUS_BAD_QUERY_STARTS);
    return;
  }
  g_first_j = (slot - first_slot) * TQ;
  if (g_first_j >= g_new_tokens) return;  // a request's spare slot
  g_tile_tokens = min(TQ, g_new_tokens - g_first_j);
  g_first_token = q0 + g_first_j;
  uint len = context_lens[pc.context_lens_offset + request];
  if (len > pc.context_cap) {
    if (reporter && g_first_j == 0u) atomicOr(status[pc.status_offset], STATUS_BAD_CONTEXT_LEN);
    len = pc.context_cap;
  }
  if (len < g_new_tokens && reporter && g_first_j == 0u) atomicOr(status[pc.status_offset], STATUS_BAD_CONTEXT_LEN);
  const uint window = WINDOW ? pc.sliding_window : 0u;
  const int first_p = query_position(len, g_new_tokens, g_first_j);
  const uint first_new = len >= g_new_tokens ? len - g_new_tokens : 0u;
  g_span = tile_key_range(first_p, first_p + int(g_tile_tokens) - 1, len, g_new_tokens, window, TREE_MASK);
  if (SPLIT) {
    g_span = clip_key_range(g_span, part * pc.partition_tokens, (part + 1u) * pc.partition_tokens);
    if (g_span.lo >= g_span.hi) return;  // none of the tile's keys here: the merge pass reads nothing of it
  }
  g_table = pc.block_tables_offset + request * pc.max_blocks_per_seq;

  // ---- the rows' states, and this subgroup's part ----
  if (tid == 0u) {
    s_largest[0] = 0u;
    s_largest[1] = 0u;
    s_largest[2] = 0u;
    s_value_bad[0] = 0u;
    s_value_bad[1] = 0u;
  }
  for (uint r = tid; r < ROWS; r += WG) {
    s_row_max[r] = VKP_NEG_INF;
    s_row_sum[r] = 0.0;
    s_row_poisoned[r] = 0u;
    s_row_slope[r] = ALIBI && row_valid(r) ? alibi_slopes[pc.alibi_offset + g_head0 + r % GROUP] : 0.0;
  }
  if (TREE_MASK) find_mask_base(request, tid);
  barrier();
  const uint sub = gl_SubgroupID;
  bool computes = WORKGROUP_SYNC;  // the subgroup computes a row block with a row of the tile in it
  if (sub < ROW_BLOCKS)
    for (uint r = sub * MM; r < sub * MM + MM; ++r) computes = computes || row_valid(r);
  const uint s_base = SP_BASE + sub * (S_WORDS + P_WORDS);
  const uint p_base = s_base + S_WORDS;

  // ---- the rows' queries as f16 (bf16: scaled into f16's range) ----
  if (BF16_QUERY) {
    uint largest = 0u;
    for (uint i = tid; i < ROWS * D / 2u; i += WG)
      if (row_valid(i / (D / 2u)))
        largest = max(largest, bf16_largest(query_words[query_row_word(i / (D / 2u)) + i % (D / 2u)]));
    RAISE_SHARED_LARGEST(s_largest[0], largest);
    barrier();
  }
  const int query_shift = BF16_QUERY ? range_shift(s_largest[0]) : 0;
  const float query_factor = exp2(float(query_shift));
  for (uint i = tid; i < ROWS * DPAD / 2u; i += WG) {
    const uint r = i / (DPAD / 2u);
    const uint w = i % (DPAD / 2u);
    uint word = 0u;
    if (row_valid(r) && 2u * w < D) {
      word = query_words[query_row_word(r) + w];
      if (BF16_QUERY) word = bf16_pair_to_f16(word, query_factor);
    }
    const uint e = r * (DS / 2u) + w;  // 32-bit word in the query rows
    s_mem[Q_BASE + e / 4u][e % 4u] = word;
  }
  barrier();
  A_MAT query_fragments[QUERY_REGISTERS ? DPAD / KK : 1u];
  if (QUERY_REGISTERS) {
    if (computes) {
      [[unroll]] for (uint k = 0u; k < DPAD / KK; ++k)
        coopMatLoad(query_fragments[k], s_mem, Q_BASE + (sub * MM * DS + k * KK) / 8u, DS / 8u,
                    gl_CooperativeMatrixLayoutRowMajor);
    }
    barrier();  // the key tiles overwrite the query rows
  }

  // Logits = scores * the scale, an fp8 cache's k_scale and decode factor, and the bf16 ranges'
  // powers of two undone: kept as a mantissa and an exponent until each tile's factors are made
  // (score_factors), since 2^-query_shift 2^-key_shift alone may pass f32's range where no
  // logit does.
  int scale_exponent;
  const float scale_mantissa = frexp(pc.scale * (FP8 ? pc.k_scale * fp8_scale_fix(CACHE_DTYPE) : 1.0), scale_exponent);
  const float out_scale = FP8 ? pc.v_scale * fp8_scale_fix(CACHE_DTYPE) : 1.0;
  C_MAT o[DPAD / NN];
  [[unroll]] for (uint j = 0u; j < DPAD / NN; ++j) o[j] = C_MAT(0.0);

  // The staging runs a tile ahead: a tile's keys and values are loaded into registers right
  // after the staging barrier of the tile before, so that the loads are in flight while that
  // tile is computed, and stored to shared memory when its own turn comes.
  uvec4 key_raw[CHUNK_LOADS], value_raw[CHUNK_LOADS];
  const uint first_tile = g_span.lo / TK * TK;
  load_tile(first_tile, key_raw, value_raw);
  uint parity = 0u;
  for (uint tile = first_tile; tile < g_span.hi; tile += TK) {
    // ---- staging: the registers loaded during the tile before into shared memory ----
    bool bad = false;
    uint key_largest = 0u, value_largest = 0u;
    store_rows(false, key_raw, bad, key_largest);
    if (VALUE_COLUMNS) store_value_columns(tile, value_raw, bad, value_largest);
    else store_rows(true, value_raw, bad, value_largest);
    if (BF16_CACHE) {
      RAISE_SHARED_LARGEST(s_largest[1], key_largest);
      RAISE_SHARED_LARGEST(s_largest[2], value_largest);
    }
    if (bad) atomicOr(s_value_bad[parity], 1u);
    barrier();
    // The next tile's loads, in flight during this tile's products and softmax.
    if (tile + TK < g_span.hi) load_tile(tile + TK, key_raw, value_raw);
    int key_shift = 0;          // the bf16 key tile's power of two
    float value_factor = 1.0;   // the bf16 value tile's power of two, undone
    if (BF16_CACHE) {
      key_shift = range_shift(s_largest[1]);
      const int value_shift = range_shift(s_largest[2]);
      convert_bf16_rows(K_BASE, TK, DPAD / 8u, DS / 8u, exp2(float(key_shift)));
      const bool values_bad = VALUE_COLUMNS ? convert_bf16_rows(V_BASE, DPAD, TK / 8u, TS / 8u, exp2(float(value_shift)))
                                            : convert_bf16_rows(V_BASE, TK, DPAD / 8u, DS / 8u, exp2(float(value_shift)));
      if (values_bad) atomicOr(s_value_bad[parity], 1u);
      value_factor = exp2(float(-value_shift));
      barrier();
      if (tid == 0u) {  // every invocation read them before the barrier; the next tile's maxima come after the next
        s_largest[1] = 0u;
        s_largest[2] = 0u;
      }
    }
    // The other parity's flag was last read before the previous tile's end and is next raised
    // after this tile's end.
    if (tid == 0u) s_value_bad[parity ^ 1u] = 0u;

    if (computes) {
      // ---- S = Q K^T ----
      C_MAT scores[TK / NN];
      [[unroll]] for (uint n = 0u; n < TK / NN; ++n) scores[n] = C_MAT(0.0);
      [[unroll]] for (uint k = 0u; k < DPAD / KK; ++k) {
        A_MAT qa;
        if (QUERY_REGISTERS) qa = query_fragments[QUERY_REGISTERS ? k : 0u];
        else coopMatLoad(qa, s_mem, Q_BASE + (sub * MM * DS + k * KK) / 8u, DS / 8u, gl_CooperativeMatrixLayoutRowMajor);
        [[unroll]] for (uint n = 0u; n < TK / NN; ++n) {
          B_MAT kb;  // K^T [KK dims x NN positions]: column n is key row n
          coopMatLoad(kb, s_mem, K_BASE + (n * NN * DS + k * KK) / 8u, DS / 8u, gl_CooperativeMatrixLayoutColumnMajor);
          scores[n] = coopMatMulAdd(qa, kb, scores[n]);
        }
      }
      [[unroll]] for (uint n = 0u; n < TK / NN; ++n)
        coopMatStore(scores[n], s_mem, s_base + n * NN / 4u, SS / 4u, gl_CooperativeMatrixLayoutRowMajor);
      subgroup_barrier();

      // ---- softmax: logits, P, the rows' states and factors ----
      softmax_tile(sub, s_base, p_base, tile, score_factors(scale_mantissa, scale_exponent - query_shift - key_shift),
                   first_new, first_p, len, window);

      // ---- O = O * factors + P V ----
      C_MAT factors;
      coopMatLoad(factors, s_mem, s_base, NN / 4u, gl_CooperativeMatrixLayoutRowMajor);
      [[unroll]] for (uint j = 0u; j < DPAD / NN; ++j) o[j] = o[j] * factors;
      if (s_value_bad[parity] == 0u) {
        A_MAT pa[TK / KK];
        [[unroll]] for (uint k = 0u; k < TK / KK; ++k)
          coopMatLoad(pa[k], s_mem, p_base + k * KK / 8u, TS / 8u, gl_CooperativeMatrixLayoutRowMajor);
        [[unroll]] for (uint j = 0u; j < DPAD / NN; ++j) {
          C_MAT sum = C_MAT(0.0);
          [[unroll]] for (uint k = 0u; k < TK / KK; ++k) {
            B_MAT vb;  // V [KK positions x NN dims]
            if (VALUE_COLUMNS)
              coopMatLoad(vb, s_mem, V_BASE + (j * NN * TS + k * KK) / 8u, TS / 8u, gl_CooperativeMatrixLayoutColumnMajor);
            else
              coopMatLoad(vb, s_mem, V_BASE + (k * KK * DS + j * NN) / 8u, DS / 8u, gl_CooperativeMatrixLayoutRowMajor);
            if (BF16_CACHE) sum = coopMatMulAdd(pa[k], vb, sum);
            else o[j] = coopMatMulAdd(pa[k], vb, o[j]);
          }
          if (BF16_CACHE) o[j] = o[j] + sum * value_factor;
        }
      } else {
        // A non-finite value element in the tile: element by element, hidden positions
        // skipped, the sums through the S region into an accumulator.
        const uint sg = gl_SubgroupSize;
        const uint lane = gl_SubgroupInvocationID;
        subgroup_barrier();  // every lane loaded its factors
        [[unroll]] for (uint j = 0u; j < DPAD / NN; ++j) {
          for (uint e = lane; e < MM * NN; e += sg) {
            const uint r = e / NN;
            const uint d = j * NN + e % NN;
            float acc = 0.0;
            for (uint tl = 0u; tl < TK; ++tl) {
              const uint bits = shared_half(p_base, r * TS + tl);
              if ((bits & 0x8000u) != 0u) continue;  // not attended
              acc += unpackHalf2x16(bits).x * staged_value(tl, d);
            }
            set_shared_float(s_base, e, acc);
          }
          subgroup_barrier();
          C_MAT sum;
          coopMatLoad(sum, s_mem, s_base, NN / 4u, gl_CooperativeMatrixLayoutRowMajor);
          o[j] = o[j] + sum * value_factor;
          subgroup_barrier();
        }
      }
    }
    barrier();  // the next tile's staging overwrites keys, values, S and P
    parity ^= 1u;
  }

  if (!computes) return;  // no barrier follows
  // ---- finish: the rows' factors (sinks, LSE), or their states for the merge ----
  const uint sg = gl_SubgroupSize;
  const uint lane = gl_SubgroupInvocationID;
  for (uint r = lane; r < MM; r += sg) {
    const uint row = sub * MM + r;
    if (!row_valid(row)) continue;
    const float m = row_state_max(s_row_max[row], s_row_poisoned[row] != 0u);
    const float l = s_row_sum[row];
    if (SPLIT) {
      // the row's partial state (split_scratch.h); its value sums below
      const uint ml = pc.scratch_offset + split_state_word(row_index(row), part, pc.num_tokens * pc.num_heads,
                                                           pc.num_partitions, D);
      scratch[ml] = m;
      scratch[ml + 1u] = l;
      s_row_factor[row] = out_scale;
    } else {
      const float z = SINKS ? sinks[pc.sinks_offset + g_head0 + row % GROUP] : 0.0;
      const RowFinish f = finish_row(m, l, SINKS, z);
      s_row_factor[row] = f.factor * out_scale;
      if (WRITE_LSE) lse[pc.lse_offset + row_index(row)] = f.lse;
    }
  }
  subgroup_barrier();
  [[unroll]] for (uint j = 0u; j < DPAD / NN; ++j) {
    coopMatStore(o[j], s_mem, s_base, NN / 4u, gl_CooperativeMatrixLayoutRowMajor);
    subgroup_barrier();
    for (uint e = 2u * lane; e < MM * NN; e += 2u * sg) {  // element pairs (r, c), (r, c + 1)
      const uint r = e / NN;
      const uint row = sub * MM + r;
      const uint d = j * NN + e % NN;
      if (!row_valid(row) || d >= D) continue;
      const float f = s_row_factor[row];
      const float a = shared_float(s_base, e);
      const float b = shared_float(s_base, e + 1u);
      if (SPLIT) {
        const uint base = pc.scratch_offset + split_sums_word(row_index(row), part, pc.num_partitions, D) + d;
        scratch[base] = a * f;
        scratch[base + 1u] = b * f;
      } else {
        output_words[output_row_word(row) + d / 2u] =
            pack_output(finish_output(a, f), finish_output(b, f), QUERY_DTYPE);
      }
    }
    subgroup_barrier();
  }
}
