// SPDX-License-Identifier: Apache-2.0
// A split decode's merge inside the decode dispatch (DecodeOptions::merge = in_dispatch; the
// matrix kernel only): each workgroup writes its partition's unnormalised outputs o_p with
// their max m_p and sum l_p to the scratch (the layout decode_reduce.comp reads), counts itself
// in on its head group's counter, and the last workgroup to arrive merges the partitions:
//   out = sum_p e^(m_p - M) o_p / (sum_p e^(m_p - M) l_p [+ e^(z - M)]),
// sinks counted once, here. Partitions outside [window start, len) are never written or counted.
// A partition with a NaN max (a non-finite query or key, contract Decode step 9) makes the
// head's outputs and LSE NaN; any other non-finite output element is written as NaN.
//
// Why: on an H200 the reduce pass and the barrier before it cost 5 to 6 us per decode
// (bench/RESULTS.md). Why the counters are the caller's (DecodeViews::merge_counters): they must
// be zero when a decode starts, and a scratch may be shared or reused by other work between
// decodes; counters that only decodes write, each leaving them zero, stay zero. An arrival that
// finds its counter at or past the partition count (counters not zeroed, or shared by decodes
// that overlap) sets STATUS_BAD_MERGE_COUNTERS.
//
// Scratch layout (softmax_state.glsl's split_*_word), in floats from pc.scratch_offset: partial
// outputs [S][H][P][D], then (max, sum) pairs [S][H][P][2]. Counters: [S][H] u32 from
// pc.merge_counters_offset, one used per head group (its first head's). The merge and the finish
// are the shared blocks' (merge_round.glsl, attention_epilogue.glsl).
// Requires: D, WG, QUERY_DTYPE, SINKS, WRITE_LSE (const), the push block `pc`, the output_words,
// sinks, lse and status buffers, dtype.glsl and strided_rows.glsl (the output is a strided view).
#ifndef VKPAGED_SPLIT_MERGE_GLSL
#define VKPAGED_SPLIT_MERGE_GLSL

#include "common/convert.glsl"

// The partials are read back by another workgroup of the same dispatch: coherent, so that the
// reads see the writes made available by memoryBarrierBuffer (not an SM's stale cache lines).
layout(set = 0, binding = DECODE_BINDING_SCRATCH) coherent buffer Scratch { float scratch[]; };
layout(set = 0, binding = DECODE_BINDING_MERGE_COUNTERS) coherent buffer MergeCounters { uint merge_counters[]; };

shared uint s_split_arrival;  // the workgroup's place among its head group's partitions

const uint MERGE_DIMS = 4u;    // output dims per invocation
const uint MERGE_UNROLL = 8u;  // partitions whose loads are in flight together (16 measured slower)
#define MERGE_ROUND_PARTS MERGE_UNROLL
#define MERGE_ROUND_VALUES MERGE_DIMS
#include "common/merge_round.glsl"  // softmax_state.glsl, attention_range.glsl
#include "common/attention_epilogue.glsl"

// Merges partitions [first, last) of heads head0 .. head0 + heads - 1 and writes the outputs
// (and LSE). No partitions (an empty sequence) gives zeros, or the sinks' share of nothing.
void split_merge(uint seq, uint head0, uint heads, uvec2 parts) {
  const uint rows = pc.num_seqs * pc.num_heads;
  for (uint item = gl_LocalInvocationIndex; item < heads * (D / MERGE_DIMS); item += WG) {
    const uint head = head0 + item / (D / MERGE_DIMS);
    const uint dim0 = (item % (D / MERGE_DIMS)) * MERGE_DIMS;
    const uint row = seq * pc.num_heads + head;
    float m = VKP_NEG_INF;  // running state and unnormalised outputs over the partitions
    float l = 0.0;
    float o[MERGE_DIMS];
    for (uint j = 0u; j < MERGE_DIMS; ++j) o[j] = 0.0;
    for (uint p0 = parts.x; p0 < parts.y; p0 += MERGE_UNROLL) {
      float mp[MERGE_UNROLL], lp[MERGE_UNROLL], op[MERGE_UNROLL][MERGE_DIMS];
      for (uint k = 0u; k < MERGE_UNROLL; ++k) {  // past the last partition, the last again
        const uint part = min(p0 + k, parts.y - 1u);
        const uint state = pc.scratch_offset + split_state_word(row, part, rows, pc.num_partitions, D);
        const uint sums = pc.scratch_offset + split_sums_word(row, part, pc.num_partitions, D);
        mp[k] = scratch[state];
        lp[k] = scratch[state + 1u];
        for (uint j = 0u; j < MERGE_DIMS; ++j) op[k][j] = scratch[sums + dim0 + j];
      }
      for (uint k = 0u; k < MERGE_UNROLL; ++k)
        if (p0 + k >= parts.y) mp[k] = VKP_NEG_INF;
      merge_round(m, l, o, mp, lp, op);
    }
    // merge_round keeps a poisoned head's m NaN, which finish_row turns into NaN outputs and LSE.
    const RowFinish f = finish_row(m, l, SINKS, SINKS ? sinks[pc.sinks_offset + head] : 0.0);
    const uint out_row = row_word(pc.output_rows, seq, head);  // the row's first word (a strided view)
    if (QUERY_DTYPE == DT_F32) {
      for (uint j = 0u; j < MERGE_DIMS; ++j)
        output_words[out_row + dim0 + j] = pack_output(finish_output(o[j], f.factor), 0.0, DT_F32);
    } else {
      for (uint j = 0u; j < MERGE_DIMS; j += 2u)
        output_words[out_row + (dim0 + j) / 2u] =
            pack_output(finish_output(o[j], f.factor), finish_output(o[j + 1u], f.factor), QUERY_DTYPE);
    }
    if (WRITE_LSE && dim0 == 0u) lse[pc.lse_offset + row] = f.lse;
  }
}

// Called by every invocation once the workgroup's partials are written (workgroup-uniform).
void split_arrive(uint seq, uint head0, uint heads, uvec2 parts) {
  const uint counter = pc.merge_counters_offset + seq * pc.num_heads + head0;
  memoryBarrierBuffer();  // this invocation's partials, device-wide, before the count
  barrier();
  if (gl_LocalInvocationIndex == 0u) {
    const uint arrived = atomicAdd(merge_counters[counter], 1u) + 1u;
    const uint expected = parts.y - parts.x;
    if (arrived > expected) atomicOr(status[pc.status_offset], STATUS_BAD_MERGE_COUNTERS);
    if (arrived == expected) atomicExchange(merge_counters[counter], 0u);  // zero again for the next decode
    s_split_arrival = arrived;
  }
  barrier();
  if (s_split_arrival != parts.y - parts.x) return;
  memoryBarrierBuffer();  // the other workgroups' partials, now visible here
  split_merge(seq, head0, heads, parts);
}

#endif
