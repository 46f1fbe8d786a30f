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
// The loops within the tile loop take UNROLL steps per iteration, the softmax phase's position
// loop all of them (lavapipe's loop limiter, attention_phases.glsl), so that a key tile costs
// few iterations; unrolled fully, the score phase's DK / 4 steps run many times slower there.
// Split (FEATURE_SPLIT): workgroup z takes partition z of the key positions and writes
// its rows' value sums (DV wide) with their max and sum to the scratch, which
// partition_merge.comp (value width DV) merges; otherwise the rows finish here.
// Included by mla_attention.comp (VKP_ADDRESS 0: the pools bound as storage buffers) and
// mla_attention_address.comp (VKP_ADDRESS 1: pools past maxStorageBufferRange, by device address;
// common/mla_pools.glsl is where the two differ).
#extension GL_GOOGLE_include_directive : require
#extension GL_EXT_control_flow_attributes : require
#include "common/address_extensions.glsl"

#include "common/mla_interface.h"
#include "common/dtype.glsl"
#include "common/convert.glsl"

#define VKP_SC(name) MLA_ATTN_SC_##name
#include "common/multi_query_constants.glsl"  // WG, B, GROUP, ROWS, ROW_PARTS, dtypes, FEATURES
layout(constant_id = MLA_ATTN_SC_KEY_HEAD_SIZE) const uint DK = 576u;
layout(constant_id = MLA_ATTN_SC_VALUE_HEAD_SIZE) const uint DV = 512u;
layout(constant_id = MLA_ATTN_SC_KEY_TILE) const uint TK = 16u;
layout(constant_id = MLA_ATTN_SC_TWO_POOLS) const uint TWO_POOLS = 0u;

#include "common/cache_element.glsl"
const uint ROW_WORDS = DK / PER_WORD;      // cache words of a row (DK and DV are multiples of 8)
const uint VALUE_WORDS = DV / PER_WORD;    // ... of its value (two pools: of its ckv row)
const uint ROPE_WORDS = ROW_WORDS - VALUE_WORDS;
const uint CW = 1u;                        // cache words per read (common/mla_pools.glsl)
const uint SCORE_LANES = WG / TK;          // score phase: invocations per position
const uint SCORE_ROWS = (ROWS + SCORE_LANES - 1u) / SCORE_LANES;

layout(push_constant) uniform PushBlock { AttentionPush pc; };

// The one pool [N, B, DK], or ckv [N, B, DV]; kpe [N, B, DK - DV] (two pools only): cache_chunk.
#include "common/mla_pools.glsl"
#define VKP_BINDING(name) ATTN_BINDING_##name
#include "common/attention_bindings.glsl"
layout(set = 0, binding = ATTN_BINDING_QUERY_STARTS) readonly buffer QueryStarts { uint query_starts[]; };
layout(set = 0, binding = ATTN_BINDING_SCRATCH) writeonly buffer Scratch { float scratch[]; };
layout(set = 0, binding = ATTN_BINDING_TREE_MASK) readonly buffer TreeMask { uint tree_mask_words[]; };

uint query_start_at(uint s) { return query_starts[pc.query_starts_offset + s]; }

#include "common/softmax_state.glsl"
#include "common/attention_range.glsl"

shared vec4 s_query[ROWS * DK / 4];  // the rows' scaled queries; at the end their outputs (DV wide)
shared uint s_rows[TK * ROW_WORDS];  // the tile's cached rows, raw cache words
shared float s_score[ROWS * TK];     // the tile's logits, then probabilities (-1: not attended)
shared uint s_lane_words[WG];        // the tree mask's partial sums
float score(uint r, uint c) { return s_score[r * TK + c]; }
void set_score(uint r, uint c, float x) { s_score[r * TK + c] = x; }

#define VKP_MASK_PARTIALS s_lane_words
#include "common/attention_phases.glsl"

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
  HeadGroup hg;
  AttentionTile tile;
  if (!attention_workgroup(1u, hg, tile)) return;
  const KeyRange span = tile.span;
  load_queries();

  // Softmax phase: this invocation's row's running max and its share of the row's sum.
  float row_max = VKP_NEG_INF;
  float row_sum = 0.0;
  bool row_poisoned = false;
  // Score phase: position tid % TK, rows score_lane + SCORE_LANES * k.
  const uint score_c = tid % TK;
  const uint score_lane = tid / TK;
  // Value phase: rows row_part + ROW_PARTS * k and dims dim_lane + DIM_LANES * i.
  const uint row_part = tid / DIM_LANES;
  const uint dim_lane = tid % DIM_LANES;

  const uint table = pc.block_tables_offset + tile.request * pc.max_blocks_per_seq;
  for (uint key_tile = span.lo; key_tile < span.hi; key_tile += TK) {
    // ---- load phase: the tile's blocks, then its rows, each word read once ----
    if (tid < TK) s_key_block[tid] = key_block(table, key_tile + tid, span.hi);
    barrier();  // also: the queries (first tile), the slopes and the mask base are in place
    for (uint w0 = tid; w0 < TK * ROW_WORDS; w0 += WG * UNROLL) {
      [[unroll]] for (uint j = 0u; j < UNROLL; ++j) {
        const uint w = w0 + WG * j;
        if (w < TK * ROW_WORDS) {
          const uint c = w / ROW_WORDS;
          const uint block = s_key_block[c];
          s_rows[w] = block == NO_BLOCK ? 0u : cache_chunk(block, (key_tile + c) % B, w % ROW_WORDS).x;
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
      const uint t = key_tile + score_c;
      for (uint k = 0u; k < SCORE_ROWS; ++k) {
        const uint r = score_lane + SCORE_LANES * k;
        if (r >= ROWS) break;
        set_score(r, score_c, scoring && row_valid(r) ? row_logit(tile, r, t, dots[k]) : VKP_NEG_INF);
      }
    }
    barrier();

    softmax_phase(row_max, row_sum, row_poisoned);

    // ---- value phase: p * v over the tile's staged rows ----
    const uint positions = min(TK, span.hi - key_tile);
    for (uint c0 = 0u; c0 < positions; c0 += UNROLL / 2u) {
      [[unroll]] for (uint j = 0u; j < UNROLL / 2u; ++j) {
        const uint c = c0 + j;
        if (c < positions && s_key_block[c] != NO_BLOCK) {
          for (uint i = 0u; i < DIMS_PER_INVOCATION; ++i) {
            const uint d = dim_lane + DIM_LANES * i;
            if (d >= DV) break;
            const float v = row_entry(c, d);
            for (uint k = 0u; k < ROWS_PER_INVOCATION; ++k) {
              const float p = score(row_part + ROW_PARTS * k, c);
              // Only attended positions: a hidden one may hold anything, and 0 * Inf would make NaN.
              if (p >= 0.0) acc[i * ROWS_PER_INVOCATION + k] += p * v;
            }
          }
        }
      }
    }
    barrier();
  }
  finish_rows(gl_WorkGroupID.z, row_max, row_sum, row_poisoned);
}
