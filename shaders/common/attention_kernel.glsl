// SPDX-License-Identifier: Apache-2.0
// Multi-query attention over the paged cache (docs/contract.md, "Multi-query attention"): the
// portable kernel, flash-attention style, with no subgroup operations and no assumption about
// the subgroup size.
//
// A workgroup takes one request, a tile of TQ of its new query tokens and GROUP query heads of
// one kv head: ROWS = TQ * GROUP (token, head) rows, so each key and value read serves every
// head of the GQA group and every token of the tile. It walks the tile's key range
// (attention_range.glsl: whole key tiles above the causal diagonal and below the window are
// never visited) in key tiles of WG positions:
//   score phase:   invocation i takes position tile + i, reads its key once in 16-byte chunks
//                  and scores it against every row's query (held in shared memory, scaled);
//   softmax phase: LANES invocations per row find the tile's max, rescale the row's running
//                  state and turn the logits into probabilities (-1: not attended);
//   value phase:   invocation (row part, dim lane) owns ROWS / ROW_PARTS rows of some dims and
//                  adds p * v for every position, each value read once per row part.
// Split (FEATURE_SPLIT): workgroup z takes partition z of the key positions and writes its
// rows' unnormalised value sums with their max and sum to the scratch for partition_merge.comp;
// otherwise the rows are finished here (attention_epilogue.glsl).
#extension GL_GOOGLE_include_directive : require
#extension GL_EXT_control_flow_attributes : require
#if VKP_ADDRESS
// Caches larger than maxStorageBufferRange are read through buffer device addresses.
#extension GL_EXT_buffer_reference2 : require
#extension GL_EXT_buffer_reference_uvec2 : require
#endif

#include "common/shader_interface.h"
#include "common/dtype.glsl"
#include "common/convert.glsl"
#include "common/kv_layout.glsl"
#include "common/strided_rows.glsl"

layout(local_size_x_id = ATTN_SC_WORKGROUP) in;
layout(constant_id = ATTN_SC_HEAD_SIZE) const uint D = 128u;
layout(constant_id = ATTN_SC_BLOCK_SIZE) const uint B = 16u;
layout(constant_id = ATTN_SC_ROWS) const uint ROWS = 16u;
layout(constant_id = ATTN_SC_HEADS_PER_WORKGROUP) const uint GROUP = 4u;
layout(constant_id = ATTN_SC_ROW_PARTS) const uint ROW_PARTS = 1u;
layout(constant_id = ATTN_SC_QUERY_DTYPE) const uint QUERY_DTYPE = DT_F16;
layout(constant_id = ATTN_SC_CACHE_DTYPE) const uint CACHE_DTYPE = DT_F16;
layout(constant_id = ATTN_SC_KV_LAYOUT) const uint KV_LAYOUT = KV_LAYOUT_VLLM;
layout(constant_id = ATTN_SC_FEATURES) const uint FEATURES = 0u;

#include "common/attention_features.glsl"  // ALIBI, SOFTCAP, SINKS, WINDOW, WRITE_LSE, SPLIT
const bool TREE_MASK = (FEATURES & FEATURE_TREE_MASK) != 0u;

#include "common/cache_element.glsl"
const uint WG = gl_WorkGroupSize.x;
const uint TK = WG;                    // key positions per tile: one per invocation in the score phase
const uint TQ = ROWS / GROUP;          // query tokens per tile
const uint LANES = WG / ROWS;          // softmax phase: invocations per row
const uint DIM_LANES = WG / ROW_PARTS; // value phase: invocations side by side over the dims
const uint DIMS_PER_INVOCATION = (D + DIM_LANES - 1u) / DIM_LANES;
const uint ROWS_PER_INVOCATION = ROWS / ROW_PARTS;
const uint KEY_CHUNKS = D / X;         // 16-byte key chunks per position
const uint NO_BLOCK = 0xffffffffu;

layout(push_constant) uniform PushBlock { AttentionPush pc; };

layout(set = 0, binding = ATTN_BINDING_QUERY) readonly buffer Query { uint query_words[]; };
// Bytes of one block of one pool: Hkv * D * B elements, a multiple of 16; the host keeps it
// within 32 bits.
uint block_bytes() { return pc.num_kv_heads * D * B * CACHE_BYTES; }
#if VKP_ADDRESS
#include "common/address.glsl"
layout(buffer_reference, std430, buffer_reference_align = 16) readonly buffer Words16 { uvec4 v[]; };
layout(buffer_reference, std430, buffer_reference_align = 4) readonly buffer Words4 { uint v[]; };
// Each block from its own 64-bit start: indices inside one block fit 32 bits. The addresses'
// low words travel in the offsets' words (shader_interface.h, AttentionPush).
#define KEY16(block, i) Words16(address_of_block(uvec2(pc.key_offset, pc.key_address_high), block, block_bytes())).v[i]
#define VALUE4(block, i) Words4(address_of_block(uvec2(pc.value_offset, pc.value_address_high), block, block_bytes())).v[i]
#else
layout(set = 0, binding = ATTN_BINDING_KEY_CACHE) readonly buffer KeyCache { uvec4 key16[]; };
layout(set = 0, binding = ATTN_BINDING_VALUE_CACHE) readonly buffer ValueCache { uint value4[]; };
#define KEY16(block, i) key16[pc.key_offset / 4u + (block) * (block_bytes() / 16u) + (i)]
#define VALUE4(block, i) value4[pc.value_offset + (block) * (block_bytes() / 4u) + (i)]
#endif
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

uint query_start_at(uint s) { return query_starts[pc.query_starts_offset + s]; }

#include "common/softmax_state.glsl"
#include "common/attention_range.glsl"

// vec4s, so that one shared load feeds four products (a scalar load per product would bound
// the phases by shared-memory issue rather than arithmetic on NVIDIA).
shared vec4 s_query[ROWS * D / 4];   // the rows' scaled queries, 4 dims a vec4; at the end their outputs
shared vec4 s_score[ROWS * TK / 4];  // the tile's logits, then probabilities (-1: not attended), 4 positions a vec4
shared float s_part[WG];          // the softmax lanes' partial maxima and sums
shared uint s_key_block[TK];      // physical block of each position of the tile (NO_BLOCK: none)
shared float s_row_factor[ROWS];  // per tile: the rows' rescale factors; at the end their output factors
shared float s_row_max[ROWS];
shared float s_row_sum[ROWS];
shared float s_row_slope[ROWS];   // ALiBi slope of each row's head
shared uint s_query_row[ROWS];    // the first word of each row in the query and in the output (strided views)
shared uint s_output_row[ROWS];
shared uint s_mask_base;          // tree mask: the request's first byte

// The workgroup's request and rows, set once in main.
uint g_tile_tokens;   // query tokens of the tile (<= TQ)
uint g_new_tokens;    // q_s
uint g_first_token;   // the tile's first token, counted over the batch (its row in query and output)
uint g_first_j;       // ... and within its request
uint g_heads;         // query heads of the group (<= GROUP)
uint g_head0;

bool row_valid(uint r) { return r / GROUP < g_tile_tokens && r % GROUP < g_heads; }
// The row's index in [T, H] (LSE, scratch).
uint row_index(uint r) { return (g_first_token + r / GROUP) * pc.num_heads + g_head0 + r % GROUP; }

#define VKP_MASK_PARTIALS s_key_block
#include "common/attention_tree_mask.glsl"
#include "common/attention_tile.glsl"
#include "common/attention_logits.glsl"
#include "common/attention_epilogue.glsl"


// Value element (kv head g, dim d, in-block offset o) of `block`, any layout.
float value_element(uint block, uint g, uint d, uint o) {
  const uint e = kv_value_offset(KV_LAYOUT, pc.num_kv_heads, D, B, X, g, d, o);
  return unpack_word(VALUE4(block, e / PER_WORD), CACHE_DTYPE)[e % PER_WORD];
}

// Dims 4i .. 4i + 3 of a 16-byte key chunk (X = 4, 8 or 16 elements).
vec4 key_quad(uvec4 w, uint i) {
  if (PER_WORD == 1u) return uintBitsToFloat(w);
  if (PER_WORD == 2u) return vec4(unpack_word(w[2u * i], CACHE_DTYPE).xy, unpack_word(w[2u * i + 1u], CACHE_DTYPE).xy);
  return unpack_word(w[i], CACHE_DTYPE);
}

void main() {
  const uint tid = gl_LocalInvocationID.x;
  const HeadGroup hg = head_group(gl_WorkGroupID.x, pc.num_heads, pc.num_kv_heads, GROUP);
  const uint kv_head = hg.kv_head;
  g_head0 = hg.head0;
  g_heads = hg.heads;
  const uint part = gl_WorkGroupID.z;
  const bool reporter = tid == 0u && gl_WorkGroupID.x == 0u && part == 0u;  // flags each request's values once

  // ---- the request and the tile (uniform: every invocation reads the same words) ----
  AttentionTile tile;
  if (!attention_tile(gl_WorkGroupID.y, part, tid, reporter, tile)) return;
  const uint request = tile.request;
  const uint len = tile.len;
  const uint window = tile.window;
  const int first_p = tile.first_p;
  const uint first_new = tile.first_new;
  const KeyRange span = tile.span;
  if (TREE_MASK) find_mask_base(request, tid);

  // ---- the rows' queries, with the scale (and an fp8 cache's k_scale and decode factor) ----
  if (tid < ROWS) {  // each row's place in the strided query and output, found once
    s_query_row[tid] = row_word(pc.query_rows, g_first_token + tid / GROUP, g_head0 + tid % GROUP);
    s_output_row[tid] = row_word(pc.output_rows, g_first_token + tid / GROUP, g_head0 + tid % GROUP);
  }
  barrier();
  const float qscale = pc.scale * (FP8 ? pc.k_scale * fp8_scale_fix(CACHE_DTYPE) : 1.0);
  for (uint i = tid; i < ROWS * D; i += WG) {
    const uint r = i / D;
    s_query[i / 4u][i % 4u] =
        row_valid(r) ? VKP_LOAD_ELEMENT(query_words, s_query_row[r], i % D, QUERY_DTYPE) * qscale : 0.0;
  }
  if (tid < ROWS) s_row_slope[tid] = ALIBI && row_valid(tid) ? alibi_slopes[pc.alibi_offset + g_head0 + tid % GROUP] : 0.0;

  // Softmax phase: this invocation's row, its running max and its share of the row's sum.
  const uint my_row = tid / LANES;
  const uint lane = tid % LANES;
  float row_max = VKP_NEG_INF;
  float row_sum = 0.0;
  bool row_poisoned = false;
  // Value phase: rows part + ROW_PARTS * k and dims dim_lane + DIM_LANES * i.
  const uint row_part = tid / DIM_LANES;
  const uint dim_lane = tid % DIM_LANES;
  float acc[DIMS_PER_INVOCATION * ROWS_PER_INVOCATION];
  for (uint i = 0u; i < DIMS_PER_INVOCATION * ROWS_PER_INVOCATION; ++i) acc[i] = 0.0;

  const uint table = pc.block_tables_offset + request * pc.max_blocks_per_seq;
  for (uint tile = span.lo; tile < span.hi; tile += TK) {
    // ---- score phase: position tile + tid against every row ----
    const uint t = tile + tid;
    uint block = NO_BLOCK;
    if (t < span.hi) {
      block = block_tables[table + t / B];
      if (block >= pc.num_blocks) {
        atomicOr(status[pc.status_offset], STATUS_BAD_BLOCK_ID);
        block = NO_BLOCK;
      }
    }
    s_key_block[tid] = block;
    barrier();  // the queries (first tile), the slopes and the mask base are in place
    float dots[ROWS];
    for (uint r = 0u; r < ROWS; ++r) dots[r] = 0.0;
    if (block != NO_BLOCK) {
      const uint o = t % B;
      for (uint c = 0u; c < KEY_CHUNKS; ++c) {
        const uvec4 w = KEY16(block, kv_key_offset(KV_LAYOUT, pc.num_kv_heads, D, B, X, kv_head, c * X, o) / X);
        for (uint i = 0u; i < X / 4u; ++i) {
          const vec4 k = key_quad(w, i);
          const uint quad = (c * X) / 4u + i;
          for (uint r = 0u; r < ROWS; ++r) dots[r] += dot(s_query[r * (D / 4u) + quad], k);
        }
      }
    }
    for (uint r = 0u; r < ROWS; ++r) {
      float logit = VKP_NEG_INF;  // not attended
      if (block != NO_BLOCK && row_valid(r)) {
        const int p = first_p + int(r / GROUP);
        const KeyRange range = row_key_range(p, len, g_new_tokens, window, TREE_MASK);
        if (attention_visible(range, t, first_new, r)) logit = attention_logit(dots[r], p, t, pc.softcap, s_row_slope[r]);
      }
      s_score[(r * TK + tid) / 4u][tid % 4u] = logit;
    }
    barrier();

    // ---- softmax phase: the tile's max per row, the rescale, the probabilities ----
    float tile_max = VKP_NEG_INF;
    bool tile_poisoned = false;
    for (uint c = lane; c < TK; c += LANES) tile_max_add(tile_max, tile_poisoned, s_score[(my_row * TK + c) / 4u][c % 4u]);
    s_part[tid] = row_state_max(tile_max, tile_poisoned);
    barrier();
    tile_max = VKP_NEG_INF;
    for (uint i = 0u; i < LANES; ++i) tile_max_add(tile_max, row_poisoned, s_part[my_row * LANES + i]);
    const float alpha = row_state_rescale(row_max, tile_max);
    const float new_max = row_max;
    float tile_sum = 0.0;
    for (uint c = lane; c < TK; c += LANES) {
      const float x = s_score[(my_row * TK + c) / 4u][c % 4u];
      const float p = x == VKP_NEG_INF || nan_bits(x) ? -1.0 : exp(x - new_max);
      s_score[(my_row * TK + c) / 4u][c % 4u] = p;
      tile_sum += max(p, 0.0);
    }
    row_sum = row_sum * alpha + tile_sum;
    if (lane == 0u) s_row_factor[my_row] = alpha;
    barrier();

    // ---- value phase: p * v over the tile's positions ----
    for (uint k = 0u; k < ROWS_PER_INVOCATION; ++k) {
      const float a = s_row_factor[row_part + ROW_PARTS * k];
      for (uint i = 0u; i < DIMS_PER_INVOCATION; ++i) acc[i * ROWS_PER_INVOCATION + k] *= a;
    }
    // Four positions at a time (positions past the tile's end have no block and p = -1).
    const uint quads = (min(TK, span.hi - tile) + 3u) / 4u;
    for (uint c4 = 0u; c4 < quads; ++c4) {
      const uvec4 vblock = uvec4(s_key_block[4u * c4], s_key_block[4u * c4 + 1u], s_key_block[4u * c4 + 2u],
                                 s_key_block[4u * c4 + 3u]);
      if (all(equal(vblock, uvec4(NO_BLOCK)))) continue;
      vec4 p[ROWS_PER_INVOCATION];
      for (uint k = 0u; k < ROWS_PER_INVOCATION; ++k) p[k] = s_score[((row_part + ROW_PARTS * k) * TK) / 4u + c4];
      for (uint i = 0u; i < DIMS_PER_INVOCATION; ++i) {
        const uint d = dim_lane + DIM_LANES * i;
        if (d >= D) break;
        vec4 v = vec4(0.0);
        for (uint j = 0u; j < 4u; ++j)
          if (vblock[j] != NO_BLOCK) v[j] = value_element(vblock[j], kv_head, d, (tile + 4u * c4 + j) % B);
        for (uint k = 0u; k < ROWS_PER_INVOCATION; ++k) {
          // Only attended positions: a hidden one may hold anything (a garbage slot, or a value
          // another row sees), and 0 * Inf would make NaN.
          const vec4 pv = mix(vec4(0.0), p[k] * v, greaterThanEqual(p[k], vec4(0.0)));
          acc[i * ROWS_PER_INVOCATION + k] += (pv.x + pv.y) + (pv.z + pv.w);
        }
      }
    }
    barrier();
  }

  // ---- the rows' states: sums over their lanes ----
  s_part[tid] = row_sum;
  barrier();
  if (lane == 0u) {
    float total = 0.0;
    for (uint i = 0u; i < LANES; ++i) total += s_part[my_row * LANES + i];
    s_row_sum[my_row] = total;
    s_row_max[my_row] = row_state_max(row_max, row_poisoned);
  }
  barrier();

  const float out_scale = FP8 ? pc.v_scale * fp8_scale_fix(CACHE_DTYPE) : 1.0;
  if (SPLIT) {
    // the scratch (softmax_state.glsl): value sums [T][H][P][D], then (max, sum) pairs [T][H][P][2]
    for (uint k = 0u; k < ROWS_PER_INVOCATION; ++k) {
      const uint r = row_part + ROW_PARTS * k;
      if (!row_valid(r)) continue;
      const uint base = pc.scratch_offset + split_sums_word(row_index(r), part, pc.num_partitions, D);
      for (uint i = 0u; i < DIMS_PER_INVOCATION; ++i) {
        const uint d = dim_lane + DIM_LANES * i;
        if (d < D) scratch[base + d] = acc[i * ROWS_PER_INVOCATION + k] * out_scale;
      }
    }
    if (tid < ROWS && row_valid(tid)) {
      const uint ml = pc.scratch_offset + split_state_word(row_index(tid), part, pc.num_tokens * pc.num_heads, pc.num_partitions, D);
      scratch[ml] = s_row_max[tid];
      scratch[ml + 1u] = s_row_sum[tid];
    }
    return;
  }

  // ---- finish: sinks, LSE, normalisation, packing ----
  if (tid < ROWS) {
    const bool valid = row_valid(tid);
    const float z = SINKS && valid ? sinks[pc.sinks_offset + g_head0 + tid % GROUP] : 0.0;
    const RowFinish f = finish_row(s_row_max[tid], s_row_sum[tid], SINKS, z);
    s_row_factor[tid] = f.factor * out_scale;
    if (WRITE_LSE && valid) lse[pc.lse_offset + row_index(tid)] = f.lse;
  }
  barrier();
  for (uint k = 0u; k < ROWS_PER_INVOCATION; ++k) {
    const uint r = row_part + ROW_PARTS * k;
    for (uint i = 0u; i < DIMS_PER_INVOCATION; ++i) {
      const uint d = dim_lane + DIM_LANES * i;
      if (d < D) s_query[(r * D + d) / 4u][d % 4u] = finish_output(acc[i * ROWS_PER_INVOCATION + k], s_row_factor[r]);
    }
  }
  barrier();
  const uint per_word = QUERY_DTYPE == DT_F32 ? 1u : 2u;
  for (uint w = tid; w < ROWS * D / per_word; w += WG) {
    const uint e = w * per_word;
    const uint r = e / D;
    if (!row_valid(r)) continue;
    const vec4 quad = s_query[e / 4u];
    const float b = per_word == 2u ? quad[(e + 1u) % 4u] : 0.0;
    output_words[s_output_row[r] + (e % D) / per_word] = pack_output(quad[e % 4u], b, QUERY_DTYPE);
  }
}
