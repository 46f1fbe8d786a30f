// SPDX-License-Identifier: Apache-2.0
#version 450
// Merges the partitions of a split multi-query attention (attention.comp with
// FEATURE_SPLIT): one workgroup per (query head, query token). The row's own key range
// (common/attention_range.glsl, from the same device values the attention read) names the
// partitions that hold its positions; the attention wrote each of them, with its value sums,
// max and sum, and none other is read. Sinks and the LSE are counted once, here.
// The same pass merges MLA attention's partitions (mla_attention.comp): its head size D is then
// the value width Dv, the width of the value sums and of the output.
#extension GL_GOOGLE_include_directive : require
#include "common/shader_interface.h"
#include "common/dtype.glsl"
#include "common/convert.glsl"
#include "common/strided_rows.glsl"

layout(local_size_x_id = ATTN_MERGE_SC_WORKGROUP) in;
layout(constant_id = ATTN_MERGE_SC_HEAD_SIZE) const uint D = 128u;  // the value width
layout(constant_id = ATTN_MERGE_SC_QUERY_DTYPE) const uint QUERY_DTYPE = DT_F16;
layout(constant_id = ATTN_MERGE_SC_FEATURES) const uint FEATURES = 0u;
const bool SINKS = (FEATURES & FEATURE_SINKS) != 0u;
const bool WINDOW = (FEATURES & FEATURE_WINDOW) != 0u;
const bool WRITE_LSE = (FEATURES & FEATURE_LSE) != 0u;
const bool TREE_MASK = (FEATURES & FEATURE_TREE_MASK) != 0u;
const uint WG = gl_WorkGroupSize.x;
const uint PAIRS = D / 2u;  // output elements in pairs: one word of an f16 or bf16 output
const uint PAIRS_PER_INVOCATION = (PAIRS + WG - 1u) / WG;

layout(push_constant) uniform PushBlock { AttentionPush pc; };
layout(set = 0, binding = ATTN_MERGE_BINDING_SCRATCH) readonly buffer Scratch { float scratch[]; };
layout(set = 0, binding = ATTN_MERGE_BINDING_CONTEXT_LENS) readonly buffer ContextLens { uint context_lens[]; };
layout(set = 0, binding = ATTN_MERGE_BINDING_QUERY_STARTS) readonly buffer QueryStarts { uint query_starts[]; };
layout(set = 0, binding = ATTN_MERGE_BINDING_OUTPUT) writeonly buffer Output { uint output_words[]; };
layout(set = 0, binding = ATTN_MERGE_BINDING_SINKS) readonly buffer Sinks { float sinks[]; };
layout(set = 0, binding = ATTN_MERGE_BINDING_LSE) writeonly buffer Lse { float lse[]; };

uint query_start_at(uint s) { return query_starts[pc.query_starts_offset + s]; }

#include "common/softmax_state.glsl"
#include "common/attention_range.glsl"
#include "common/attention_epilogue.glsl"

void main() {
  const uint head = gl_WorkGroupID.x;
  const uint token = gl_WorkGroupID.y;
  const uint tid = gl_LocalInvocationID.x;

  // The row's request, position and key range, as the attention found them (it flagged what
  // was wrong with them; rows it skipped are skipped here).
  const uint request = request_of_token(token, pc.num_requests);
  const uint q0 = query_start_at(request);
  const uint q1 = query_start_at(request + 1u);
  if (q1 <= q0 || q1 > pc.num_tokens || token < q0 || token >= q1) return;
  const uint len = min(context_lens[pc.context_lens_offset + request], pc.context_cap);
  const int p = query_position(len, q1 - q0, token - q0);
  const KeyRange range = row_key_range(p, len, q1 - q0, WINDOW ? pc.sliding_window : 0u, TREE_MASK);
  const uvec2 parts = key_range_partitions(range, pc.partition_tokens, pc.num_partitions);

  const uint row = token * pc.num_heads + head;
  const uint rows = pc.num_tokens * pc.num_heads;
  float m = VKP_NEG_INF;
  float l = 0.0;
  float o[2u * PAIRS_PER_INVOCATION];
  for (uint i = 0u; i < 2u * PAIRS_PER_INVOCATION; ++i) o[i] = 0.0;
  for (uint part = parts.x; part < parts.y; ++part) {
    const uint state = pc.scratch_offset + split_state_word(row, part, rows, pc.num_partitions, D);
    const vec2 w = softmax_merge(m, l, scratch[state], scratch[state + 1u]);
    for (uint i = 0u; i < PAIRS_PER_INVOCATION; ++i) {
      const uint pair = tid + WG * i;
      if (pair >= PAIRS) break;
      const uint base = pc.scratch_offset + split_sums_word(row, part, pc.num_partitions, D) + 2u * pair;
      o[2u * i] = o[2u * i] * w.x + scratch[base] * w.y;
      o[2u * i + 1u] = o[2u * i + 1u] * w.x + scratch[base + 1u] * w.y;
    }
  }

  const RowFinish f = finish_row(m, l, SINKS, SINKS ? sinks[pc.sinks_offset + head] : 0.0);
  const uint out_row = row_word(pc.output_rows, token, head);  // the output row's first word (a strided view)
  for (uint i = 0u; i < PAIRS_PER_INVOCATION; ++i) {
    const uint pair = tid + WG * i;
    if (pair >= PAIRS) break;
    const float a = finish_output(o[2u * i], f.factor);
    const float b = finish_output(o[2u * i + 1u], f.factor);
    if (QUERY_DTYPE == DT_F32) {
      output_words[out_row + 2u * pair] = floatBitsToUint(a);
      output_words[out_row + 2u * pair + 1u] = floatBitsToUint(b);
    } else {
      output_words[out_row + pair] = pack_output(a, b, QUERY_DTYPE);
    }
  }
  if (WRITE_LSE && tid == 0u) lse[pc.lse_offset + row] = f.lse;
}
