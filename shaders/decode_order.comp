// SPDX-License-Identifier: Apache-2.0
#version 450
// Lists the (sequence, partition) items of a decode in order of decreasing tokens, for a
// decode with FEATURE_ORDERED (common/decode_order.glsl): each of its workgroups takes
// the item at its grid y.
//
// Why: the hardware starts workgroups in grid order and a decode's time is its last
// workgroup's end. With lengths spread over a batch, grid order can start the longest items
// last, and they run on alone after the rest have finished; longest first, the short items
// fill the gaps at the end (list scheduling).
//
// One workgroup, ORDER_ITEMS_PER_INVOCATION items per invocation: each invocation loads its
// items' lengths at once (one memory latency), then a counting sort over ORDER_BUCKETS sizes
// (tokens rounded up to a power-of-two step that fits the longest item in the buckets): count,
// scan, place. Items of one bucket land in any order, which changes no result.
#extension GL_GOOGLE_include_directive : require
#extension GL_EXT_control_flow_attributes : require
#include "common/shader_interface.h"

layout(local_size_x = ORDER_WORKGROUP) in;
layout(constant_id = ORDER_SC_FEATURES) const uint FEATURES = 0u;
const uint WG = ORDER_WORKGROUP;
const uint PER = ORDER_ITEMS_PER_INVOCATION;
const uint BUCKETS = ORDER_BUCKETS;
const bool WINDOW = (FEATURES & FEATURE_WINDOW) != 0u;
const bool SPLIT = (FEATURES & FEATURE_SPLIT) != 0u;

layout(push_constant) uniform PushBlock { DecodePush pc; };
layout(set = 0, binding = ORDER_BINDING_CONTEXT_LENS) readonly buffer ContextLens { uint context_lens[]; };
layout(set = 0, binding = ORDER_BINDING_LIST) writeonly buffer OrderList { uint order_list[]; };

shared uint s_bucket[BUCKETS];  // counts, then each bucket's next place
shared uint s_total[WG];        // the scan's per-invocation sums

// Tokens of partition `part` of a sequence of length `len`: the decode shaders' range arithmetic.
uint item_tokens(uint len, uint part) {
  len = min(len, pc.context_cap);
  uint lo = 0u;
  if (WINDOW && pc.sliding_window > 0u && len > pc.sliding_window) lo = len - pc.sliding_window;
  uint hi = len;
  if (SPLIT) {
    lo = max(lo, part * pc.partition_tokens);
    hi = min(hi, (part + 1u) * pc.partition_tokens);
  }
  return hi > lo ? hi - lo : 0u;
}

void main() {
  const uint tid = gl_LocalInvocationID.x;
  const uint parts = SPLIT ? pc.num_partitions : 1u;
  const uint items = pc.num_seqs * parts;
  // Sizes are tokens >> shift, rounded up, so that the longest possible item fits the buckets.
  const uint longest = SPLIT ? pc.partition_tokens : pc.context_cap;
  const uint shift = longest < BUCKETS ? 0u : uint(findMSB(longest)) + 1u - uint(findMSB(BUCKETS));

  // Item i is sequence i % S of partition i / S; bucket 0 holds the longest.
  uint bucket[PER];
  [[unroll]] for (uint k = 0u; k < PER; ++k) {
    const uint i = tid + k * WG;
    const uint tokens = i < items ? item_tokens(context_lens[pc.context_lens_offset + i % pc.num_seqs], i / pc.num_seqs) : 0u;
    bucket[k] = BUCKETS - 1u - min(BUCKETS - 1u, (tokens + (1u << shift) - 1u) >> shift);
  }
  for (uint b = tid; b < BUCKETS; b += WG) s_bucket[b] = 0u;
  barrier();
  [[unroll]] for (uint k = 0u; k < PER; ++k)
    if (tid + k * WG < items) atomicAdd(s_bucket[bucket[k]], 1u);
  barrier();

  // Exclusive scan of the counts: each invocation sums its run of buckets, the runs' sums are
  // scanned (Hillis-Steele), and each run is then placed after the ones before it.
  const uint RUN = (BUCKETS + WG - 1u) / WG;
  uint run_sum = 0u;
  for (uint b = tid * RUN; b < min(BUCKETS, tid * RUN + RUN); ++b) run_sum += s_bucket[b];
  s_total[tid] = run_sum;
  barrier();
  for (uint step = 1u; step < WG; step *= 2u) {
    const uint add = tid >= step ? s_total[tid - step] : 0u;
    barrier();
    s_total[tid] += add;
    barrier();
  }
  uint place = s_total[tid] - run_sum;
  for (uint b = tid * RUN; b < min(BUCKETS, tid * RUN + RUN); ++b) {
    const uint count = s_bucket[b];
    s_bucket[b] = place;
    place += count;
  }
  barrier();

  [[unroll]] for (uint k = 0u; k < PER; ++k) {
    const uint i = tid + k * WG;
    if (i < items) order_list[pc.order_offset + atomicAdd(s_bucket[bucket[k]], 1u)] = (i % pc.num_seqs) | ((i / pc.num_seqs) << 16);
  }
}
