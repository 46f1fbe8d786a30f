// SPDX-License-Identifier: Apache-2.0
// A split decode's merge inside the decode dispatch (DecodeOptions::merge = in_dispatch; the
// matrix kernel only): each workgroup writes its partition's unnormalised outputs o_p with
// their max m_p and sum l_p to the scratch (split_scratch.h), counts itself in on its head
// group's counter, and the last workgroup to arrive merges the partitions as the merge pass
// would (partition_merge.glsl: the same merge and poison rule), sinks counted once, here.
// Partitions outside [window start, len) are never written or counted.
//
// Why: on an H200 the reduce pass and the barrier before it cost 5 to 6 us per decode
// (bench/RESULTS.md). Why the counters are the caller's (DecodeViews::merge_counters): they must
// be zero when a decode starts, and a scratch may be shared or reused by other work between
// decodes; counters that only decodes write, each leaving them zero, stay zero. An arrival that
// finds its counter at or past the partition count (counters not zeroed, or shared by decodes
// that overlap) sets STATUS_BAD_MERGE_COUNTERS.
//
// Counters: [S][H] u32 from pc.merge_counters_offset, one used per head group (its first
// head's). The merge and the finish are the shared blocks' (partition_merge.glsl,
// attention_epilogue.glsl).
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
#include "common/partition_merge.glsl"  // softmax_state.glsl, split_scratch.h
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
    uint dims[MERGE_DIMS];
    for (uint j = 0u; j < MERGE_DIMS; ++j) {
      o[j] = 0.0;
      dims[j] = dim0 + j;
    }
    merge_partitions(m, l, o, row, rows, D, dims, parts, parts.x, 1u);
    // A poisoned head's m is NaN, which finish_row turns into NaN outputs and LSE.
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
