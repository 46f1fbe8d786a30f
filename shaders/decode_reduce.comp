// SPDX-License-Identifier: Apache-2.0
#version 450
// Merges the partitions of a split decode (a decode module with FEATURE_SPLIT): one
// workgroup per (query head, sequence). Each partition left an unnormalised output o_p with
// its max m_p and sum l_p; out = sum_p e^(m_p - M) o_p / (sum_p e^(m_p - M) l_p [+ e^(z - M)]).
// Sinks are counted once, here. Partitions outside [window start, len) were never written.
// A partition whose max is NaN saw a non-finite query or key (contract, Decode step 9): the
// head's outputs and LSE are NaN; any other non-finite output element is written as NaN.
//
// Why it is shaped this way: the pass is short and sits between the decode and whatever reads
// its output, so its cost is its chain of memory latencies. Each invocation takes a word of
// the output and a slice of the partitions (p = slice, slice + SLICES, ...) and merges them
// with an online softmax, UNROLL partitions' loads (max, sum, output words) issued before any
// is used, the first ones together with the context length; the slices then meet once in
// shared memory. A context of SLICES * UNROLL partitions (32 of 1024 tokens at D = 128 with 256
// invocations) costs one memory latency.
#extension GL_GOOGLE_include_directive : require
#include "common/shader_interface.h"
#include "common/dtype.glsl"
#include "common/convert.glsl"
#include "common/strided_rows.glsl"

layout(local_size_x_id = REDUCE_SC_WORKGROUP) in;
layout(constant_id = REDUCE_SC_HEAD_SIZE) const uint D = 128u;
layout(constant_id = REDUCE_SC_QUERY_DTYPE) const uint QUERY_DTYPE = DT_F16;
layout(constant_id = REDUCE_SC_FEATURES) const uint FEATURES = 0u;
const uint WG = gl_WorkGroupSize.x;
const bool SINKS = (FEATURES & FEATURE_SINKS) != 0u;
const bool WINDOW = (FEATURES & FEATURE_WINDOW) != 0u;
const bool WRITE_LSE = (FEATURES & FEATURE_LSE) != 0u;

const uint PER_WORD = QUERY_DTYPE == DT_F32 ? 1u : 2u;   // output elements per 32-bit word
const uint WORDS = D / PER_WORD;                          // output words of a head
const uint WORD_LANES = WORDS < WG ? WORDS : WG;          // invocations along the words
const uint SLICES = WG / WORD_LANES;                      // partition slices side by side
const uint WORDS_PER_LANE = (WORDS + WORD_LANES - 1u) / WORD_LANES;
const uint VALUES = WORDS_PER_LANE * PER_WORD;            // output elements per invocation
const uint UNROLL = 8u;                                   // partitions in flight per invocation
#define MERGE_ROUND_PARTS UNROLL
#define MERGE_ROUND_VALUES VALUES
#include "common/merge_round.glsl"  // softmax_state.glsl, attention_range.glsl
#include "common/attention_epilogue.glsl"

layout(push_constant) uniform PushBlock { DecodePush pc; };
layout(set = 0, binding = REDUCE_BINDING_SCRATCH) readonly buffer Scratch { float scratch[]; };
layout(set = 0, binding = REDUCE_BINDING_CONTEXT_LENS) readonly buffer ContextLens { uint context_lens[]; };
layout(set = 0, binding = REDUCE_BINDING_OUTPUT) writeonly buffer Output { uint output_words[]; };
layout(set = 0, binding = REDUCE_BINDING_SINKS) readonly buffer Sinks { float sinks[]; };
layout(set = 0, binding = REDUCE_BINDING_LSE) writeonly buffer Lse { float lse[]; };

// Each slice's running max and sum, and its outputs, for the meeting at the end.
shared float s_max[SLICES];
shared float s_sum[SLICES];
shared float s_out[SLICES * WORD_LANES * VALUES];

void main() {
  const uint head = gl_WorkGroupID.x;
  const uint seq = gl_WorkGroupID.y;
  const uint tid = gl_LocalInvocationID.x;
  const uint lane = tid % WORD_LANES;
  const uint slice = tid / WORD_LANES;  // == SLICES for the invocations left over

  // The same length, key range and partitions as the decode shader's.
  const uint len = min(context_lens[pc.context_lens_offset + seq], pc.context_cap);
  const KeyRange range = row_key_range(query_position(len, 1u, 0u), len, 1u, WINDOW ? pc.sliding_window : 0u, false);
  const uvec2 parts = key_range_partitions(range, pc.partition_tokens, pc.num_partitions);
  const uint first = parts.x;
  const uint last = parts.y;  // exclusive

  const uint row = seq * pc.num_heads + head;
  const uint rows = pc.num_seqs * pc.num_heads;
  const uint out_row = row_word(pc.output_rows, seq, head);  // the output row's first word (a strided view)
  float m = VKP_NEG_INF;  // this slice's running state and (unnormalised) outputs
  float l = 0.0;
  float o[VALUES];
  for (uint j = 0u; j < VALUES; ++j) o[j] = 0.0;

  // The first round's loads do not wait for the length: they cover partitions from 0, and
  // those outside [first, last) are dropped after the loads (their words may be garbage).
  if (slice < SLICES)
    for (uint p0 = slice; p0 < pc.num_partitions; p0 += SLICES * UNROLL) {
      float mp[UNROLL], lp[UNROLL], op[UNROLL][VALUES];
      for (uint k = 0u; k < UNROLL; ++k) {
        // Past the partitions the load repeats the last one.
        const uint part = min(p0 + k * SLICES, pc.num_partitions - 1u);
        const uint state = pc.scratch_offset + split_state_word(row, part, rows, pc.num_partitions, D);
        const uint sums = pc.scratch_offset + split_sums_word(row, part, pc.num_partitions, D);
        mp[k] = scratch[state];
        lp[k] = scratch[state + 1u];
        for (uint w = 0u; w < WORDS_PER_LANE; ++w) {
          const uint word = min(lane + w * WORD_LANES, WORDS - 1u);
          for (uint e = 0u; e < PER_WORD; ++e) op[k][w * PER_WORD + e] = scratch[sums + word * PER_WORD + e];
        }
      }
      if (p0 >= last) break;
      for (uint k = 0u; k < UNROLL; ++k) {
        const uint p = p0 + k * SLICES;
        if (p < first || p >= last) mp[k] = VKP_NEG_INF;  // dropped: its words may be garbage
      }
      merge_round(m, l, o, mp, lp, op);
    }

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
