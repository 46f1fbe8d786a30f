// SPDX-License-Identifier: Apache-2.0
#version 450
// Merges the partitions of a split (a decode, attention or MLA module with FEATURE_SPLIT):
// one workgroup per (query head, row token), the row's partial states merged by
// common/partition_merge.glsl and finished once, sinks and LSE included. The row's own key range
// (common/attention_range.glsl, from the same device values the kernel read) names the
// partitions that hold its positions; none other is read. A decode's rows are one token per
// request (QUERY_STARTS off); attention's and MLA's find their request in query_starts and skip
// the rows the kernel skipped. MLA's value width D is Dv, the width of its value sums.
//
// Why it is shaped this way: the pass is short and sits between the kernel and whatever reads
// its output, so its cost is its chain of memory latencies. Each invocation takes a word of
// the output and a slice of the partitions (p = slice, slice + SLICES, ...) and merges them
// a round of UNROLL partitions' loads (max, sum, output words) at a time, the first round's
// loads issued together with the context length's; the slices then meet once in shared memory.
// A context of SLICES * UNROLL partitions (32 of 1024 tokens at D = 128 with 256 invocations)
// costs one memory latency.
#extension GL_GOOGLE_include_directive : require
#include "common/shader_interface.h"
#include "common/dtype.glsl"
#include "common/convert.glsl"
#include "common/strided_rows.glsl"

layout(local_size_x_id = PARTITION_MERGE_SC_WORKGROUP) in;
layout(constant_id = PARTITION_MERGE_SC_VALUE_WIDTH) const uint D = 128u;
layout(constant_id = PARTITION_MERGE_SC_QUERY_DTYPE) const uint QUERY_DTYPE = DT_F16;
layout(constant_id = PARTITION_MERGE_SC_FEATURES) const uint FEATURES = 0u;
layout(constant_id = PARTITION_MERGE_SC_QUERY_STARTS) const bool QUERY_STARTS = true;
const uint WG = gl_WorkGroupSize.x;
const bool SINKS = (FEATURES & FEATURE_SINKS) != 0u;
const bool WINDOW = (FEATURES & FEATURE_WINDOW) != 0u;
const bool WRITE_LSE = (FEATURES & FEATURE_LSE) != 0u;
const bool TREE_MASK = (FEATURES & FEATURE_TREE_MASK) != 0u;

const uint PER_WORD = QUERY_DTYPE == DT_F32 ? 1u : 2u;   // output elements per 32-bit word
const uint WORDS = D / PER_WORD;                          // output words of a head
const uint WORD_LANES = WORDS < WG ? WORDS : WG;          // invocations along the words
const uint SLICES = WG / WORD_LANES;                      // partition slices side by side
const uint WORDS_PER_LANE = (WORDS + WORD_LANES - 1u) / WORD_LANES;
const uint VALUES = WORDS_PER_LANE * PER_WORD;            // output elements per invocation
const uint UNROLL = 8u;                                   // partitions in flight per invocation

layout(push_constant) uniform PushBlock { AttentionPush pc; };
layout(set = 0, binding = PARTITION_MERGE_BINDING_SCRATCH) readonly buffer Scratch { float scratch[]; };
layout(set = 0, binding = PARTITION_MERGE_BINDING_CONTEXT_LENS) readonly buffer ContextLens { uint context_lens[]; };
layout(set = 0, binding = PARTITION_MERGE_BINDING_QUERY_STARTS) readonly buffer QueryStarts { uint query_starts[]; };
layout(set = 0, binding = PARTITION_MERGE_BINDING_OUTPUT) writeonly buffer Output { uint output_words[]; };
layout(set = 0, binding = PARTITION_MERGE_BINDING_SINKS) readonly buffer Sinks { float sinks[]; };
layout(set = 0, binding = PARTITION_MERGE_BINDING_LSE) writeonly buffer Lse { float lse[]; };

uint query_start_at(uint s) { return query_starts[pc.query_starts_offset + s]; }

#define MERGE_ROUND_PARTS UNROLL
#define MERGE_ROUND_VALUES VALUES
#include "common/partition_merge.glsl"  // softmax_state.glsl, split_scratch.h
#include "common/attention_range.glsl"
#include "common/attention_epilogue.glsl"

// Each slice's running max and sum, and its outputs, for the meeting at the end.
shared float s_max[SLICES];
shared float s_sum[SLICES];
shared float s_out[SLICES * WORD_LANES * VALUES];

void main() {
  const uint head = gl_WorkGroupID.x;
  const uint token = gl_WorkGroupID.y;
  const uint tid = gl_LocalInvocationID.x;
  const uint lane = tid % WORD_LANES;
  const uint slice = tid / WORD_LANES;  // == SLICES for the invocations left over

  // The row's request, position and key range, as the kernel found them (it flagged what was
  // wrong with them; rows it skipped are skipped here, by the whole workgroup).
  uint request = token, q0 = token, q1 = token + 1u;
  if (QUERY_STARTS) {
    request = request_of_token(token, pc.num_requests);
    q0 = query_start_at(request);
    q1 = query_start_at(request + 1u);
    if (q1 <= q0 || q1 > pc.num_tokens || token < q0 || token >= q1) return;
  }
  const uint len = min(context_lens[pc.context_lens_offset + request], pc.context_cap);
  const int p = query_position(len, q1 - q0, token - q0);
  const KeyRange range = row_key_range(p, len, q1 - q0, WINDOW ? pc.sliding_window : 0u, TREE_MASK);
  const uvec2 parts = key_range_partitions(range, pc.partition_tokens, pc.num_partitions);

  const uint row = token * pc.num_heads + head;
  const uint rows = pc.num_tokens * pc.num_heads;
  const uint out_row = row_word(pc.output_rows, token, head);  // the output row's first word (a strided view)
  float m = VKP_NEG_INF;  // this slice's running state and (unnormalised) outputs
  float l = 0.0;
  float o[VALUES];
  for (uint j = 0u; j < VALUES; ++j) o[j] = 0.0;
  uint dims[VALUES];  // this lane's output elements (past the words, the last word again)
  for (uint w = 0u; w < WORDS_PER_LANE; ++w)
    for (uint e = 0u; e < PER_WORD; ++e) dims[w * PER_WORD + e] = min(lane + w * WORD_LANES, WORDS - 1u) * PER_WORD + e;
  if (slice < SLICES) merge_partitions(m, l, o, row, rows, D, dims, parts, slice, SLICES);

  // The slices meet: every invocation of a slice holds the same state.
  if (slice < SLICES) {
    if (lane == 0u) {
      s_max[slice] = m;
      s_sum[slice] = l;
    }
    for (uint j = 0u; j < VALUES; ++j) s_out[(slice * WORD_LANES + lane) * VALUES + j] = o[j];
  }
  barrier();
  if (slice != 0u) return;

  m = VKP_NEG_INF;
  l = 0.0;
  float merged[VALUES];
  for (uint j = 0u; j < VALUES; ++j) merged[j] = 0.0;
  for (uint s = 0u; s < SLICES; ++s) {
    const vec2 w = softmax_merge(m, l, s_max[s], s_sum[s]);
    for (uint j = 0u; j < VALUES; ++j) merged[j] = merged[j] * w.x + s_out[(s * WORD_LANES + lane) * VALUES + j] * w.y;
  }
  const RowFinish f = finish_row(m, l, SINKS, SINKS ? sinks[pc.sinks_offset + head] : 0.0);

  for (uint w = 0u; w < WORDS_PER_LANE; ++w) {
    const uint i = lane + w * WORD_LANES;
    if (i >= WORDS) break;
    const float a = finish_output(merged[w * PER_WORD], f.factor);
    const float b = PER_WORD == 2u ? finish_output(merged[w * PER_WORD + 1u], f.factor) : 0.0;
    output_words[out_row + i] = pack_output(a, b, QUERY_DTYPE);
  }
  if (WRITE_LSE && lane == 0u) lse[pc.lse_offset + row] = f.lse;
}
