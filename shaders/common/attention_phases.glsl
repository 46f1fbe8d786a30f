// SPDX-License-Identifier: Apache-2.0
// What the portable multi-query kernels (attention_kernel.glsl, mla_attention_kernel.glsl) do
// alike around their own score and value loops: the workgroup's tile and queries, the tile's
// blocks, the softmax phase, and the end of the walk (the rows' states, then the split's
// scratch or the finished outputs).
//   softmax phase: LANES invocations per row, row tid / LANES, positions lane + LANES * i;
//   value phase:   invocation (row part, dim lane) owns rows row_part + ROW_PARTS * k and dims
//                  dim_lane + DIM_LANES * i of the DV value dims, their sums in acc.
// Requires: ROWS, ROW_PARTS, TK (key positions per tile), DK and DV (key and value widths),
// TREE_MASK and attention_constants.glsl's (const); the push block `pc` (AttentionPush) and the
// buffers (attention_bindings.glsl, query_starts, scratch, tree_mask_words); query_start_at;
// VKP_MASK_PARTIALS (attention_tree_mask.glsl); s_query (ROWS * DK / 4 vec4s: the scaled
// queries, at the end the outputs); the kernel's `float score(uint r, uint c)` and
// `void set_score(uint r, uint c, float x)`, row r's logit and then probability of position c;
// softmax_state.glsl, attention_range.glsl, strided_rows.glsl, cache_element.glsl, convert.glsl.
#ifndef VKPAGED_ATTENTION_PHASES_GLSL
#define VKPAGED_ATTENTION_PHASES_GLSL

const uint TQ = ROWS / GROUP;           // query tokens per tile
const uint LANES = WG / ROWS;           // softmax phase: invocations per row
const uint SOFTMAX_STEPS = (TK + LANES - 1u) / LANES;  // ... and positions per invocation
const uint DIM_LANES = WG / ROW_PARTS;  // value phase: invocations side by side over the dims
const uint DIMS_PER_INVOCATION = (DV + DIM_LANES - 1u) / DIM_LANES;
const uint ROWS_PER_INVOCATION = ROWS / ROW_PARTS;
// Loops within the tile loop take UNROLL steps an iteration: Mesa 22.3's lavapipe ends every
// loop of an invocation once its loops have run 65535 iterations together (gallivm's limiter).
const uint UNROLL = 8u;
const uint NO_BLOCK = 0xffffffffu;

shared float s_part[WG];          // the softmax lanes' partial maxima and sums
shared uint s_key_block[TK];      // physical block of each position of the tile (NO_BLOCK: none)
shared float s_row_factor[ROWS];  // per tile: the rows' rescale factors; at the end their output factors
shared float s_row_max[ROWS];
shared float s_row_sum[ROWS];
shared float s_row_slope[ROWS];   // ALiBi slope of each row's head
shared uint s_mask_base;          // tree mask: the request's first byte

float acc[DIMS_PER_INVOCATION * ROWS_PER_INVOCATION];  // value sums: dim i of row k at i * ROWS_PER_INVOCATION + k

#include "common/attention_rows.glsl"
#include "common/attention_tree_mask.glsl"
#include "common/attention_tile.glsl"
#include "common/attention_logits.glsl"
#include "common/attention_epilogue.glsl"

// Workgroup (x, y, z) takes head group x (of the kv head, one of num_kv_heads), tile slot y
// and partition z: its tile, the tree mask's base; false: nothing to do (attention_tile).
bool attention_workgroup(uint num_kv_heads, out HeadGroup hg, out AttentionTile tile) {
  const uint tid = gl_LocalInvocationID.x;
  hg = head_group(gl_WorkGroupID.x, pc.num_heads, num_kv_heads, GROUP);
  g_head0 = hg.head0;
  g_heads = hg.heads;
  const uint part = gl_WorkGroupID.z;
  const bool reporter = tid == 0u && gl_WorkGroupID.x == 0u && part == 0u;  // flags each request's values once
  // uniform: every invocation reads the same words
  if (!attention_tile(gl_WorkGroupID.y, part, tid, reporter, tile)) return false;
  if (TREE_MASK) find_mask_base(tile.request, tid);
  return true;
}

// The rows' queries into s_query, scaled (and, for an fp8 cache, by k_scale and its decode
// factor), and their heads' ALiBi slopes; the value sums start at 0.
void load_queries() {
  const uint tid = gl_LocalInvocationID.x;
  const float qscale = pc.scale * (FP8 ? pc.k_scale * fp8_scale_fix(CACHE_DTYPE) : 1.0);
  for (uint i = tid; i < ROWS * DK; i += WG) {
    const uint r = i / DK;
    s_query[i / 4u][i % 4u] = row_valid(r) ? VKP_LOAD_ELEMENT(query_words, query_row_word(r), i % DK, QUERY_DTYPE) * qscale : 0.0;
  }
  if (tid < ROWS) s_row_slope[tid] = ALIBI && row_valid(tid) ? alibi_slopes[pc.alibi_offset + g_head0 + tid % GROUP] : 0.0;
  for (uint i = 0u; i < DIMS_PER_INVOCATION * ROWS_PER_INVOCATION; ++i) acc[i] = 0.0;
}

// The physical block of key position t in the block table from `table`: NO_BLOCK past `end`
// and for a block id >= N (flagged).
uint key_block(uint table, uint t, uint end) {
  if (t >= end) return NO_BLOCK;
  const uint block = block_tables[table + t / B];
  if (block < pc.num_blocks) return block;
  atomicOr(status[pc.status_offset], STATUS_BAD_BLOCK_ID);
  return NO_BLOCK;
}

// Row r's logit of key position t from its scaled dot product; -inf where the row does not
// see t (its key range, its tree mask).
float row_logit(AttentionTile tile, uint r, uint t, float scaled_dot) {
  const int p = tile.first_p + int(r / GROUP);
  const KeyRange range = row_key_range(p, tile.len, g_new_tokens, tile.window, TREE_MASK);
  if (!attention_visible(range, t, tile.first_new, r)) return VKP_NEG_INF;
  return attention_logit(scaled_dot, p, t, pc.softcap, s_row_slope[r]);
}

// The softmax phase: the tile's max of each row into its running state, its logits into
// probabilities (-1: not attended), and the value sums rescaled to the new maxima.
void softmax_phase(inout float row_max, inout float row_sum, inout bool row_poisoned) {
  const uint tid = gl_LocalInvocationID.x;
  const uint my_row = tid / LANES;
  const uint lane = tid % LANES;
  float tile_max = VKP_NEG_INF;
  bool tile_poisoned = false;
  [[unroll]] for (uint i = 0u; i < SOFTMAX_STEPS; ++i) {
    const uint c = lane + LANES * i;
    if (c < TK) tile_max_add(tile_max, tile_poisoned, score(my_row, c));
  }
  s_part[tid] = row_state_max(tile_max, tile_poisoned);
  barrier();
  tile_max = VKP_NEG_INF;
  for (uint i0 = 0u; i0 < LANES; i0 += UNROLL) {
    [[unroll]] for (uint j = 0u; j < UNROLL; ++j) {
      if (i0 + j < LANES) tile_max_add(tile_max, row_poisoned, s_part[my_row * LANES + i0 + j]);
    }
  }
  const float alpha = row_state_rescale(row_max, tile_max);
  float tile_sum = 0.0;
  [[unroll]] for (uint i = 0u; i < SOFTMAX_STEPS; ++i) {
    const uint c = lane + LANES * i;
    if (c < TK) {
      const float x = score(my_row, c);
      const float p = x == VKP_NEG_INF || nan_bits(x) ? -1.0 : exp(x - row_max);
      set_score(my_row, c, p);
      tile_sum += max(p, 0.0);
    }
  }
  row_sum = row_sum * alpha + tile_sum;
  if (lane == 0u) s_row_factor[my_row] = alpha;
  barrier();
  const uint row_part = tid / DIM_LANES;
  for (uint k = 0u; k < ROWS_PER_INVOCATION; ++k) {
    const float a = s_row_factor[row_part + ROW_PARTS * k];
    for (uint i = 0u; i < DIMS_PER_INVOCATION; ++i) acc[i * ROWS_PER_INVOCATION + k] *= a;
  }
}

// The end of the walk: the rows' states from their lanes; split, the value sums and states to
// partition `part` of the scratch (softmax_state.glsl); otherwise the rows finished (sinks, LSE,
// normalisation) and packed into the output, staged in s_query.
void finish_rows(uint part, float row_max, float row_sum, bool row_poisoned) {
  const uint tid = gl_LocalInvocationID.x;
  const uint my_row = tid / LANES;
  const uint row_part = tid / DIM_LANES;
  const uint dim_lane = tid % DIM_LANES;
  s_part[tid] = row_sum;
  barrier();
  if (tid % LANES == 0u) {
    float total = 0.0;
    for (uint i = 0u; i < LANES; ++i) total += s_part[my_row * LANES + i];
    s_row_sum[my_row] = total;
    s_row_max[my_row] = row_state_max(row_max, row_poisoned);
  }
  barrier();

  const float out_scale = FP8 ? pc.v_scale * fp8_scale_fix(CACHE_DTYPE) : 1.0;
  if (SPLIT) {
    // value sums [T][H][P][DV], then (max, sum) pairs [T][H][P][2]
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
    output_words[output_row_word(r) + (e % DV) / per_word] = pack_output(quad[e % 4u], b, QUERY_DTYPE);
  }
}

#endif  // VKPAGED_ATTENTION_PHASES_GLSL
