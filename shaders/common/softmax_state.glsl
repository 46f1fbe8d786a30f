// SPDX-License-Identifier: Apache-2.0
// One online-softmax state and its merge, for every kernel and pass that attends or merges
// attention (docs/contract.md steps 6-9). As FlashInfer's state_t, a state is the running max m
// of its logits, the sum l of exp(logit - m), and the value sums o = sum exp(logit - m) v; here
// the state holds m and l, and the caller keeps its o (one value per dim it owns: the layout of
// o differs from kernel to kernel) and applies the weights these functions return.
//   empty:    m = -inf, l = 0, o = 0 (no position attended)
//   poisoned: m = NaN (a non-finite query or attended key, step 9): it spreads through every
//             merge and finishes as NaN outputs and LSE.
// No function relies on max() or exp() propagating NaN (GLSL leaves that to the device, and
// NVIDIA's max() drops it): NaN is tested on the bits, which no compiler may fold away.
#ifndef VKPAGED_SOFTMAX_STATE_GLSL
#define VKPAGED_SOFTMAX_STATE_GLSL

#include "common/non_finite.glsl"  // VKP_NAN, nan_bits, non_finite_bits

#define VKP_NEG_INF uintBitsToFloat(0xff800000u)

// The factor that rescales sums made under max m once the max is m_new >= m (0 from an empty
// state, whose sums are 0).
float softmax_rescale(float m, float m_new) { return m == VKP_NEG_INF ? 0.0 : exp(m - m_new); }

// Merges state (m2, l2) into (m, l) and returns the weights of the two value sums:
// o = w.x * o + w.y * o2. The log-sum-exp merge of split partitions and of cascade attention:
// an empty side weighs 0, a poisoned side makes the result poisoned (NaN weights).
vec2 softmax_merge(inout float m, inout float l, float m2, float l2) {
  if (nan_bits(m) || nan_bits(m2)) {
    m = VKP_NAN;
    l = VKP_NAN;
    return vec2(VKP_NAN);
  }
  const float m_new = max(m, m2);
  if (m_new == VKP_NEG_INF) return vec2(1.0, 0.0);  // both empty
  const vec2 w = vec2(softmax_rescale(m, m_new), softmax_rescale(m2, m_new));
  l = l * w.x + l2 * w.y;
  m = m_new;
  return w;
}

// ---- a row's state while a kernel walks its keys ----
// Every kernel keeps, per row, the running max m, its share of the sum l, and whether the row
// attended a NaN logit (poisoned). The one poison rule: a poisoned state is stored, merged and
// finished as max NaN (row_state_max); its sum stays as it is, unread.

// A logit, or a share's tile max, into a tile's max: NaN poisons and stays out of the max.
void tile_max_add(inout float tile_max, inout bool poisoned, float x) {
  if (nan_bits(x)) poisoned = true;
  else tile_max = max(tile_max, x);
}

// A tile's max into the running max m: returns the factor of the sums made so far (the caller
// takes the tile's exps against the new m, then l = l * factor + tile sum).
float row_state_rescale(inout float m, float tile_max) {
  const float m_new = max(m, tile_max);
  const float factor = softmax_rescale(m, m_new);
  m = m_new;
  return factor;
}

// A row's max as its partial state is stored, merged and finished.
float row_state_max(float m, bool poisoned) { return poisoned ? VKP_NAN : m; }

// A split's partial states live in its scratch (split_scratch.h, which every kernel that keeps
// row states needs when it splits); partition_merge.glsl merges them.
#include "common/split_scratch.h"

#endif  // VKPAGED_SOFTMAX_STATE_GLSL
