// SPDX-License-Identifier: Apache-2.0
// Multi-head latent attention over the paged MLA cache (docs/contract.md, "Multi-head latent
// attention"), the portable kernel: no subgroup operations, no assumed subgroup size.
//
// MLA is multi-query attention with one kv head whose value is the key's first DV entries.
// A workgroup takes one request, a tile of TQ of its new tokens and GROUP of the H query heads
// (all share the one kv head): ROWS = TQ * GROUP (token, head) rows. It walks the tile's key
// range (attention_range.glsl) in key tiles of TK positions, each tile in four phases:
//   load phase:    the TK cached rows (DK entries: the one pool's row, or ckv's then kpe's)
//                  are copied once, as raw cache words, into shared memory;
//   score phase:   WG / TK invocations per position score its row against the rows' queries
//                  (held in shared memory, scaled), each taking every (WG / TK)-th row;
//   softmax phase: WG / ROWS invocations per row find the tile's max, rescale the row's
//                  running state (softmax_state.glsl) and turn logits into probabilities;
//   value phase:   invocation (row part, dim lane) adds p * v over the tile for its rows and
//                  dims, v being the staged row's first DV entries: the key's row read once
//                  from memory serves both products.
// The loops within the tile loop take UNROLL steps per iteration (and the softmax phase's
// position loop all of them): Mesa 22.3's lavapipe ends every loop of an invocation once its
// loops have run 65535 iterations together (gallivm's loop limiter), so a key tile must cost
// few. Unrolled fully, the score phase's DK / 4 steps run many times slower there.
// Split (FEATURE_SPLIT): workgroup z takes partition z of the key positions and writes
// its rows' value sums (DV wide) with their max and sum to the scratch, which
// partition_merge.comp (value width DV) merges; otherwise the rows finish here.
#extension GL_GOOGLE_include_directive : require
#extension GL_EXT_control_flow_attributes : require

#include "common/mla_interface.h"
#include "common/dtype.glsl"
#include "common/convert.glsl"

layout(local_size_x_id = MLA_ATTN_SC_WORKGROUP) in;
layout(constant_id = MLA_ATTN_SC_KEY_HEAD_SIZE) const uint DK = 576u;
layout(constant_id = MLA_ATTN_SC_VALUE_HEAD_SIZE) const uint DV = 512u;
layout(constant_id = MLA_ATTN_SC_BLOCK_SIZE) const uint B = 16u;
layout(constant_id = MLA_ATTN_SC_ROWS) const uint ROWS = 16u;
layout(constant_id = MLA_ATTN_SC_HEADS_PER_WORKGROUP) const uint GROUP = 16u;
layout(constant_id = MLA_ATTN_SC_ROW_PARTS) const uint ROW_PARTS = 1u;
layout(constant_id = MLA_ATTN_SC_KEY_TILE) const uint TK = 16u;
layout(constant_id = MLA_ATTN_SC_QUERY_DTYPE) const uint QUERY_DTYPE = DT_F16;
layout(constant_id = MLA_ATTN_SC_CACHE_DTYPE) const uint CACHE_DTYPE = DT_F16;
layout(constant_id = MLA_ATTN_SC_FEATURES) const uint FEATURES = 0u;
layout(constant_id = MLA_ATTN_SC_TWO_POOLS) const uint TWO_POOLS = 0u;

const bool ALIBI = (FEATURES & FEATURE_ALIBI) != 0u;
const bool SOFTCAP = (FEATURES & FEATURE_SOFTCAP) != 0u;
const bool SINKS = (FEATURES & FEATURE_SINKS) != 0u;
const bool WINDOW = (FEATURES & FEATURE_WINDOW) != 0u;
const bool WRITE_LSE = (FEATURES & FEATURE_LSE) != 0u;
const bool SPLIT = (FEATURES & FEATURE_SPLIT) != 0u;
const bool TREE_MASK = (FEATURES & FEATURE_TREE_MASK) != 0u;

#include "common/cache_element.glsl"
const uint WG = gl_WorkGroupSize.x;
const uint TQ = ROWS / GROUP;              // query tokens per tile
const uint ROW_WORDS = DK / PER_WORD;      // cache words of a row (DK and DV are multiples of 8)
const uint VALUE_WORDS = DV / PER_WORD;    // ... of its value (two pools: of its ckv row)
const uint ROPE_WORDS = ROW_WORDS - VALUE_WORDS;
const uint SCORE_LANES = WG / TK;          // score phase: invocations per position
const uint SCORE_ROWS = (ROWS + SCORE_LANES - 1u) / SCORE_LANES;
const uint LANES = WG / ROWS;              // softmax phase: invocations per row
const uint DIM_LANES = WG / ROW_PARTS;     // value phase: invocations side by side over the dims
const uint DIMS_PER_INVOCATION = (DV + DIM_LANES - 1u) / DIM_LANES;
const uint ROWS_PER_INVOCATION = ROWS / ROW_PARTS;
const uint SOFTMAX_STEPS = (TK + LANES - 1u) / LANES;  // softmax phase: positions per invocation
const uint UNROLL = 8u;
const uint NO_BLOCK = 0xffffffffu;

layout(push_constant) uniform PushBlock { AttentionPush pc; };

layout(set = 0, binding = ATTN_BINDING_QUERY) readonly buffer Query { uint query_words[]; };
// The one pool [N, B, DK], or ckv [N, B, DV]; kpe [N, B, DK - DV] (two pools only).
layout(set = 0, binding = ATTN_BINDING_KEY_CACHE) readonly buffer Pool { uint pool_words[]; };
layout(set = 0, binding = ATTN_BINDING_VALUE_CACHE) readonly buffer Kpe { uint kpe_words[]; };
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

shared vec4 s_query[ROWS * DK / 4];  // the rows' scaled queries; at the end their outputs (DV wide)
shared uint s_rows[TK * ROW_WORDS];  // the tile's cached rows, raw cache words
shared float s_score[ROWS * TK];     // the tile's logits, then probabilities (-1: not attended)
shared float s_part[WG];             // the softmax lanes' partial maxima and sums
shared uint s_lane_words[WG];        // the tree mask's partial sums
shared uint s_key_block[TK];         // physical block of each position of the tile (NO_BLOCK: none)
shared float s_row_factor[ROWS];     // per tile: the rows' rescale factors; at the end their output factors
shared float s_row_max[ROWS];
shared float s_row_sum[ROWS];
shared float s_row_slope[ROWS];      // ALiBi slope of each row's head
shared uint s_mask_base;             // tree mask: the request's first byte

// The workgroup's request and rows, set once in main.
uint g_tile_tokens;   // query tokens of the tile (<= TQ)
uint g_new_tokens;    // q_s
uint g_first_token;   // the tile's first token, counted over the batch
uint g_first_j;       // ... and within its request
uint g_heads;         // query heads of the group (<= GROUP)
uint g_head0;

bool row_valid(uint r) { return r / GROUP < g_tile_tokens && r % GROUP < g_heads; }
// The row's index in [T, H] (query, output, LSE, scratch).
uint row_index(uint r) { return (g_first_token + r / GROUP) * pc.num_heads + g_head0 + r % GROUP; }

#define VKP_MASK_PARTIALS s_lane_words
#include "common/attention_tree_mask.glsl"
#include "common/attention_tile.glsl"
#include "common/attention_logits.glsl"
#include "common/strided_rows.glsl"
#include "common/attention_epilogue.glsl"

float query_element(uint token, uint head, uint d) {
  return VKP_LOAD_ELEMENT(query_words, row_word(pc.query_rows, token, head), d, QUERY_DTYPE);
}

// Word j of cache row `row` (block * B + offset): the one pool's, or ckv's then kpe's.
uint cache_word(uint row, uint j) {
  if (TWO_POOLS == 0u) return pool_words[pc.key_offset + row * ROW_WORDS + j];
  if (j < VALUE_WORDS) return pool_words[pc.key_offset + row * VALUE_WORDS + j];
  return kpe_words[pc.value_offset + row * ROPE_WORDS + (j - VALUE_WORDS)];
}

// Entries 4q .. 4q + 3 of staged row c.
vec4 row_quad(uint c, uint q) {
  const uint base = c * ROW_WORDS;
  if (PER_WORD == 1u)
    return uintBitsToFloat(uvec4(s_rows[base + 4u * q], s_rows[base + 4u * q + 1u], s_rows[base + 4u * q + 2u],
                                 s_rows[base + 4u * q + 3u]));
  if (PER_WORD == 2u)
    return vec4(unpack_word(s_rows[base + 2u * q], CACHE_DTYPE).xy, unpack_word(s_rows[base + 2u * q + 1u], CACHE_DTYPE).xy);
  return unpack_word(s_rows[base + q], CACHE_DTYPE);
}

// Entry d of staged row c (d < DV: a value entry).
float row_entry(uint c, uint d) { return unpack_word(s_rows[c * ROW_WORDS + d / PER_WORD], CACHE_DTYPE)[d % PER_WORD]; }

void main() {
  const uint tid = gl_LocalInvocationID.x;
  const HeadGroup hg = head_group(gl_WorkGroupID.x, pc.num_heads, 1u, GROUP);
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
  const float qscale = pc.scale * (FP8 ? pc.k_scale * fp8_scale_fix(CACHE_DTYPE) : 1.0);
  for (uint i = tid; i < ROWS * DK; i += WG) {
    const uint r = i / DK;
    s_query[i / 4u][i % 4u] = row_valid(r) ? query_element(g_first_token + r / GROUP, g_head0 + r % GROUP, i % DK) * qscale : 0.0;
  }
  if (tid < ROWS) s_row_slope[tid] = ALIBI && row_valid(tid) ? alibi_slopes[pc.alibi_offset + g_head0 + tid % GROUP] : 0.0;

  // Softmax phase: this invocation's row, its running max and its share of the row's sum.
  const uint my_row = tid / LANES;
  const uint lane = tid % LANES;
  float row_max = VKP_NEG_INF;
  float row_sum = 0.0;
  bool row_poisoned = false;
  // Score phase: position tid % TK, rows score_lane + SCORE_LANES * k.
  const uint score_c = tid % TK;
  const uint score_lane = tid / TK;
  // Value phase: rows row_part + ROW_PARTS * k and dims dim_lane + DIM_LANES * i.
  const uint row_part = tid / DIM_LANES;
  const uint dim_lane = tid % DIM_LANES;
  float acc[DIMS_PER_INVOCATION * ROWS_PER_INVOCATION];
  for (uint i = 0u; i < DIMS_PER_INVOCATION * ROWS_PER_INVOCATION; ++i) acc[i] = 0.0;

  const uint table = pc.block_tables_offset + request * pc.max_blocks_per_seq;
  for (uint tile = span.lo; tile < span.hi; tile += TK) {
    // ---- load phase: the tile's blocks, then its rows, each word read once ----
    if (tid < TK) {
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
    }
    barrier();  // also: the queries (first tile), the slopes and the mask base are in place
    for (uint w0 = tid; w0 < TK * ROW_WORDS; w0 += WG * UNROLL) {
      [[unroll]] for (uint j = 0u; j < UNROLL; ++j) {
        const uint w = w0 + WG * j;
        if (w < TK * ROW_WORDS) {
          const uint c = w / ROW_WORDS;
          const uint block = s_key_block[c];
          s_rows[w] = block == NO_BLOCK ? 0u : cache_word(block * B + (tile + c) % B, w % ROW_WORDS);
        }
      }
    }
    barrier();

    // ---- score phase: position score_c against rows score_lane + SCORE_LANES * k ----
    float dots[SCORE_ROWS];
    for (uint k = 0u; k < SCORE_ROWS; ++k) dots[k] = 0.0;
    const bool scoring = score_lane < ROWS && s_key_block[score_c] != NO_BLOCK;
    if (scoring) {
      for (uint q0 = 0u; q0 < DK / 4u; q0 += UNROLL) {
        [[unroll]] for (uint j = 0u; j < UNROLL; ++j) {
          const uint q = q0 + j;
          if (q < DK / 4u) {
            const vec4 key = row_quad(score_c, q);
            for (uint k = 0u; k < SCORE_ROWS; ++k) {
              const uint r = score_lane + SCORE_LANES * k;
              if (r < ROWS) dots[k] += dot(s_query[r * (DK / 4u) + q], key);
            }
          }
        }
      }
    }
    if (score_lane < ROWS) {
      const uint t = tile + score_c;
      for (uint k = 0u; k < SCORE_ROWS; ++k) {
        const uint r = score_lane + SCORE_LANES * k;
        if (r >= ROWS) break;
        float logit = VKP_NEG_INF;  // not attended
        if (scoring && row_valid(r)) {
          const int p = first_p + int(r / GROUP);
          const KeyRange range = row_key_range(p, len, g_new_tokens, window, TREE_MASK);
          if (attention_visible(range, t, first_new, r)) logit = attention_logit(dots[k], p, t, pc.softcap, s_row_slope[r]);
        }
        s_score[r * TK + score_c] = logit;
      }
    }
    barrier();

    // ---- softmax phase: the tile's max per row, the rescale, the probabilities ----
    float tile_max = VKP_NEG_INF;
    bool tile_poisoned = false;
    [[unroll]] for (uint i = 0u; i < SOFTMAX_STEPS; ++i) {
      const uint c = lane + LANES * i;
      if (c < TK) tile_max_add(tile_max, tile_poisoned, s_score[my_row * TK + c]);
    }
    s_part[tid] = tile_poisoned ? VKP_NAN : tile_max;
    barrier();
    tile_max = VKP_NEG_INF;
    for (uint i0 = 0u; i0 < LANES; i0 += UNROLL) {
      [[unroll]] for (uint j = 0u; j < UNROLL; ++j) {
        if (i0 + j < LANES) tile_max_add(tile_max, row_poisoned, s_part[my_row * LANES + i0 + j]);
      }
    }
    const float new_max = max(row_max, tile_max);
    const float alpha = softmax_rescale(row_max, new_max);
    row_max = new_max;
    float tile_sum = 0.0;
    [[unroll]] for (uint i = 0u; i < SOFTMAX_STEPS; ++i) {
      const uint c = lane + LANES * i;
      if (c < TK) {
        const float x = s_score[my_row * TK + c];
        const float p = x == VKP_NEG_INF || nan_bits(x) ? -1.0 : exp(x - new_max);
        s_score[my_row * TK + c] = p;
        tile_sum += max(p, 0.0);
      }
    }
    row_sum = row_sum * alpha + tile_sum;
    if (lane == 0u) s_row_factor[my_row] = alpha;
    barrier();

    // ---- value phase: p * v over the tile's staged rows ----
    for (uint k = 0u; k < ROWS_PER_INVOCATION; ++k) {
      const float a = s_row_factor[row_part + ROW_PARTS * k];
      for (uint i = 0u; i < DIMS_PER_INVOCATION; ++i) acc[i * ROWS_PER_INVOCATION + k] *= a;
    }
    const uint positions = min(TK, span.hi - tile);
    for (uint c0 = 0u; c0 < positions; c0 += UNROLL / 2u) {
      [[unroll]] for (uint j = 0u; j < UNROLL / 2u; ++j) {
        const uint c = c0 + j;
        if (c < positions && s_key_block[c] != NO_BLOCK) {
          for (uint i = 0u; i < DIMS_PER_INVOCATION; ++i) {
            const uint d = dim_lane + DIM_LANES * i;
            if (d >= DV) break;
            const float v = row_entry(c, d);
            for (uint k = 0u; k < ROWS_PER_INVOCATION; ++k) {
              const float p = s_score[(row_part + ROW_PARTS * k) * TK + c];
              // Only attended positions: a hidden one may hold anything, and 0 * Inf would make NaN.
              if (p >= 0.0) acc[i * ROWS_PER_INVOCATION + k] += p * v;
            }
          }
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
    s_row_max[my_row] = row_poisoned ? VKP_NAN : row_max;
  }
  barrier();

  const float out_scale = FP8 ? pc.v_scale * fp8_scale_fix(CACHE_DTYPE) : 1.0;
  if (SPLIT) {
    // the scratch (softmax_state.glsl): value sums [T][H][P][DV], then (max, sum) pairs [T][H][P][2]
    for (uint k = 0u; k < ROWS_PER_INVOCATION; ++k) {
      const uint r = row_part + ROW_PARTS * k;
      if (!row_valid(r)) continue;
      const uint base = pc.scratch_offset + split_sums_word(row_index(r), part, pc.num_partitions, DV);
      for (uint i = 0u; i < DIMS_PER_INVOCATION; ++i) {
        const uint d = dim_lane + DIM_LANES * i;
        if (d < DV) scratch[base + d] = acc[i * ROWS_PER_INVOCATION + k] * out_scale;
      }
    }
    if (tid < ROWS && row_valid(tid)) {
      const uint ml =
          pc.scratch_offset + split_state_word(row_index(tid), part, pc.num_tokens * pc.num_heads, pc.num_partitions, DV);
      scratch[ml] = s_row_max[tid];
      scratch[ml + 1u] = s_row_sum[tid];
    }
    return;
  }

  // ---- finish: sinks, LSE, normalisation, packing (outputs DV wide, staged in s_query) ----
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
      if (d < DV) s_query[(r * DV + d) / 4u][d % 4u] = finish_output(acc[i * ROWS_PER_INVOCATION + k], s_row_factor[r]);
    }
  }
  barrier();
  const uint per_word = QUERY_DTYPE == DT_F32 ? 1u : 2u;
  for (uint w = tid; w < ROWS * DV / per_word; w += WG) {
    const uint e = w * per_word;
    const uint r = e / DV;
    if (!row_valid(r)) continue;
    const vec4 quad = s_query[e / 4u];
    const float b = per_word == 2u ? quad[(e + 1u) % 4u] : 0.0;
    output_words[row_word(pc.output_rows, g_first_token + r / GROUP, g_head0 + r % GROUP) + (e % DV) / per_word] =
        pack_output(quad[e % 4u], b, QUERY_DTYPE);
  }
}
