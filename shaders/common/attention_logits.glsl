// SPDX-License-Identifier: Apache-2.0
// The logits transform of every attention kernel (docs/contract.md steps 3-5 and 9, and
// "Multi-query attention"): a position's logit from its scaled dot product, the soft cap, then
// ALiBi relative to the query's position p; which positions a row sees (its key range, and a
// tree mask over the new tokens). As FlashInfer's attention variants, the hooks take the query
// position and the key position, so decode (p = len - 1) and every multi-query row share them.
// Requires: const bool SOFTCAP and ALIBI; attention_range.glsl and softmax_state.glsl. A kernel
// with tree masks defines VKP_TREE_MASK_HOOK, const bool TREE_MASK and
// `bool tree_mask_allows(uint row, uint new_key)`: whether the row's query sees new token
// new_key (0 = the request's first new token).
#ifndef VKPAGED_ATTENTION_LOGITS_GLSL
#define VKPAGED_ATTENTION_LOGITS_GLSL

// tanh without the overflow some devices meet in (e^x - e^-x) / (e^x + e^-x): past |x| = 15,
// tanh is 1 in f32.
float soft_cap(float logit, float cap) { return cap * tanh(clamp(logit / cap, -15.0, 15.0)); }

// The logit of key position t for a query at p. A non-finite dot product comes from a NaN or
// infinite query or key element (the soft cap would hide an infinite one): NaN, the poison of
// step 9, whichever of them it was.
float attention_logit(float scaled_dot, int p, uint t, float softcap, float alibi_slope) {
  if (non_finite_bits(scaled_dot)) return VKP_NAN;
  float logit = scaled_dot;
  if (SOFTCAP) logit = soft_cap(logit, softcap);
  if (ALIBI) logit += alibi_slope * float(int(t) - p);
  return logit;
}

// Whether a row with key range `row_range` sees position t, the request's new tokens starting
// at first_new.
bool attention_visible(KeyRange row_range, uint t, uint first_new, uint row) {
  if (!in_key_range(row_range, t)) return false;
#if defined(VKP_TREE_MASK_HOOK)
  if (TREE_MASK && t >= first_new) return tree_mask_allows(row, t - first_new);
#endif
  return true;
}

#endif  // VKPAGED_ATTENTION_LOGITS_GLSL
