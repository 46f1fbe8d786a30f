// Merging a split decode's partitions (decode_reduce.comp, split_merge.glsl): which partitions a
// sequence has, so that both merges agree with the decode, and one round of the merge, which folds
// MERGE_ROUND_PARTS partitions, each with its max mp[k] (NEG_INF: a partition to skip), its sum
// lp[k] and its unnormalised outputs op[k][j], into the running max m, sum l and outputs o[j]
// (an online softmax). The callers issue a round's loads together, so a round waits for one
// memory latency. A poisoned partition (max NaN: a non-finite query or key, contract Decode
// step 9) makes m, l and o NaN, and they stay NaN over the later rounds; the callers test m.
// Requires: MERGE_ROUND_PARTS and MERGE_ROUND_VALUES (constant array sizes), NEG_INF.
#ifndef VKPAGED_MERGE_ROUND_GLSL
#define VKPAGED_MERGE_ROUND_GLSL

#include "common/non_finite.glsl"

// The partitions [first, last) of a sequence: those that hold tokens of [window_lo, len).
uvec2 split_partitions(uint len, uint window_lo, uint partition_tokens) {
  const uint first = window_lo / partition_tokens;
  return uvec2(first, len == 0u ? first : (len - 1u) / partition_tokens + 1u);
}

void merge_round(inout float m, inout float l, inout float o[MERGE_ROUND_VALUES], float mp[MERGE_ROUND_PARTS],
                 float lp[MERGE_ROUND_PARTS], float op[MERGE_ROUND_PARTS][MERGE_ROUND_VALUES]) {
  bool poisoned = is_nan_bits(m);  // max() would drop a NaN (NVIDIA returns the other operand)
  for (uint k = 0u; k < MERGE_ROUND_PARTS; ++k) poisoned = poisoned || is_nan_bits(mp[k]);
  if (poisoned) {
    m = VKP_QUIET_NAN;
    l = VKP_QUIET_NAN;
    for (uint j = 0u; j < MERGE_ROUND_VALUES; ++j) o[j] = VKP_QUIET_NAN;
    return;
  }
  float m_new = m;
  for (uint k = 0u; k < MERGE_ROUND_PARTS; ++k) m_new = max(m_new, mp[k]);
  if (m_new == NEG_INF) return;  // nothing but empty partitions so far
  const float keep = exp(m - m_new);  // 0 while m is -inf
  l *= keep;
  for (uint j = 0u; j < MERGE_ROUND_VALUES; ++j) o[j] *= keep;
  for (uint k = 0u; k < MERGE_ROUND_PARTS; ++k) {
    if (mp[k] == NEG_INF) continue;  // skipped or empty: its sum and outputs are not read
    const float w = exp(mp[k] - m_new);
    l += w * lp[k];
    for (uint j = 0u; j < MERGE_ROUND_VALUES; ++j) o[j] += w * op[k][j];
  }
  m = m_new;
}

#endif
