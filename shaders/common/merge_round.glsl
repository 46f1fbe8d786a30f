// SPDX-License-Identifier: Apache-2.0
// Merging a split decode's partitions (decode_reduce.comp, split_merge.glsl): which partitions a
// sequence has, so that both merges agree with the decode, and one round of the merge, which folds
// MERGE_ROUND_PARTS partitions, each with its max mp[k] (-inf: a partition to skip), its sum
// lp[k] and its unnormalised outputs op[k][j], into the running state (m, l) and outputs o[j].
// It is softmax_state.glsl's merge (softmax_merge) taken over several states at once: one max
// for the round and one rescale of the running sums, so that the callers can issue a round's
// loads together and wait for one memory latency per round. A poisoned partition (max NaN: a
// non-finite query or key, contract Decode step 9) makes m, l and o NaN, and they stay NaN over
// the later rounds; the callers test m.
// Requires: MERGE_ROUND_PARTS and MERGE_ROUND_VALUES (constant array sizes).
#ifndef VKPAGED_MERGE_ROUND_GLSL
#define VKPAGED_MERGE_ROUND_GLSL

#include "common/softmax_state.glsl"
#include "common/attention_range.glsl"

// The partitions [first, last) of a decode row (its query at len - 1) whose window starts at
// window_lo: those that hold its key positions (attention_range.glsl's key_range_partitions).
uvec2 split_partitions(uint len, uint window_lo, uint partition_tokens) {
  return key_range_partitions(KeyRange(window_lo, len), partition_tokens, 0xffffffffu);
}

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

#endif
