// SPDX-License-Identifier: Apache-2.0
// The merge of a split's partial states, for every pass that merges them: the merge pass
// (partition_merge.comp, which decode, attention and MLA dispatch) and the decode's merge in its
// dispatch (split_merge.glsl). Each partition left, per row, its max m_p, sum l_p and
// unnormalised value sums o_p in the scratch (split_scratch.h); merged,
//   out = sum_p e^(m_p - M) o_p / (sum_p e^(m_p - M) l_p [+ e^(z - M)]),
// the sinks z and the LSE counted once, by the caller's finish (attention_epilogue.glsl).
// A round is softmax_state.glsl's merge (softmax_merge) taken over MERGE_ROUND_PARTS states at
// once: one max for the round and one rescale of the running sums, so that a round's loads are
// issued together and wait for one memory latency. The poison rule is the row state's: a
// partition whose max is NaN (a non-finite query or key, docs/contract.md step 9) makes m, l and
// o NaN, they stay NaN over the later rounds, and finish_row makes the row's outputs and LSE NaN.
// Requires: MERGE_ROUND_PARTS and MERGE_ROUND_VALUES (constant array sizes); for
// merge_partitions, the scratch `float scratch[]` and the push block `pc` (scratch_offset,
// num_partitions).
#ifndef VKPAGED_PARTITION_MERGE_GLSL
#define VKPAGED_PARTITION_MERGE_GLSL

#include "common/softmax_state.glsl"  // and split_scratch.h

// Folds the round's states (mp[k], lp[k], op[k]; mp[k] = -inf: a partition to skip, its sum and
// values not read) into the running state (m, l) and values o.
void merge_round(inout float m, inout float l, inout float o[MERGE_ROUND_VALUES], float mp[MERGE_ROUND_PARTS],
                 float lp[MERGE_ROUND_PARTS], float op[MERGE_ROUND_PARTS][MERGE_ROUND_VALUES]) {
  bool poisoned = nan_bits(m);  // max() would drop a NaN (NVIDIA returns the other operand)
  for (uint k = 0u; k < MERGE_ROUND_PARTS; ++k) poisoned = poisoned || nan_bits(mp[k]);
  if (poisoned) {
    m = VKP_NAN;
    l = VKP_NAN;
    for (uint j = 0u; j < MERGE_ROUND_VALUES; ++j) o[j] = VKP_NAN;
    return;
  }
  float m_new = m;
  for (uint k = 0u; k < MERGE_ROUND_PARTS; ++k) m_new = max(m_new, mp[k]);
  if (m_new == VKP_NEG_INF) return;  // nothing but empty partitions so far
  const float keep = softmax_rescale(m, m_new);
  l *= keep;
  for (uint j = 0u; j < MERGE_ROUND_VALUES; ++j) o[j] *= keep;
  for (uint k = 0u; k < MERGE_ROUND_PARTS; ++k) {
    if (mp[k] == VKP_NEG_INF) continue;  // skipped or empty: its sum and outputs are not read
    const float w = softmax_rescale(mp[k], m_new);
    l += w * lp[k];
    for (uint j = 0u; j < MERGE_ROUND_VALUES; ++j) o[j] += w * op[k][j];
  }
  m = m_new;
}

// Merges into (m, l, o) the partitions start, start + step, start + 2 step, ... of `row` (of
// `rows`, value sums d_size wide) that lie in parts = [first, last): value j is dim dims[j] of
// the value sums. A round loads MERGE_ROUND_PARTS partitions before it looks at `parts` (so
// that a caller's first loads need not wait for the row's length): loads past the scratch's
// partitions repeat its last, and partitions outside `parts`, never written, are dropped.
void merge_partitions(inout float m, inout float l, inout float o[MERGE_ROUND_VALUES], uint row, uint rows,
                      uint d_size, uint dims[MERGE_ROUND_VALUES], uvec2 parts, uint start, uint step) {
  for (uint p0 = start; p0 < pc.num_partitions; p0 += step * MERGE_ROUND_PARTS) {
    float mp[MERGE_ROUND_PARTS], lp[MERGE_ROUND_PARTS], op[MERGE_ROUND_PARTS][MERGE_ROUND_VALUES];
    for (uint k = 0u; k < MERGE_ROUND_PARTS; ++k) {
      const uint part = min(p0 + k * step, pc.num_partitions - 1u);
      const uint state = pc.scratch_offset + split_state_word(row, part, rows, pc.num_partitions, d_size);
      const uint sums = pc.scratch_offset + split_sums_word(row, part, pc.num_partitions, d_size);
      mp[k] = scratch[state];
      lp[k] = scratch[state + 1u];
      for (uint j = 0u; j < MERGE_ROUND_VALUES; ++j) op[k][j] = scratch[sums + dims[j]];
    }
    if (p0 >= parts.y) break;
    for (uint k = 0u; k < MERGE_ROUND_PARTS; ++k) {
      const uint p = p0 + k * step;
      if (p < parts.x || p >= parts.y) mp[k] = VKP_NEG_INF;  // dropped: its words may be anything
    }
    merge_round(m, l, o, mp, lp, op);
  }
}

#endif  // VKPAGED_PARTITION_MERGE_GLSL
