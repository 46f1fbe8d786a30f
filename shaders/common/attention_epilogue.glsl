// SPDX-License-Identifier: Apache-2.0
// Finishing attention rows (docs/contract.md steps 6-9): the sinks join the denominator, the
// log-sum-exp is taken over the same logits (natural log; -inf for an empty range without a
// sink), outputs are the value sums times one factor per row, and the words written are packed
// per dtype with round-to-nearest-even conversions that match src/dtype.cpp bit for bit.
// Requires: softmax_state.glsl and convert.glsl included first.
#ifndef VKPAGED_ATTENTION_EPILOGUE_GLSL
#define VKPAGED_ATTENTION_EPILOGUE_GLSL

struct RowFinish {
  float factor;  // output = value sum * factor (0 for an empty range, NaN when poisoned)
  float lse;
};

// A row's factor and LSE from its state (m, l); `z` is the head's sink logit when has_sink.
RowFinish finish_row(float m, float l, bool has_sink, float z) {
  if (nan_bits(m)) return RowFinish(VKP_NAN, VKP_NAN);
  float keep = 1.0;  // weight of the attended positions once the sink shares the max
  if (has_sink) {
    const float m_sink = max(m, z);
    keep = softmax_rescale(m, m_sink);
    l = l * keep + exp(z - m_sink);
    m = m_sink;
  }
  if (!(l > 0.0)) return RowFinish(0.0, VKP_NEG_INF);
  return RowFinish(keep / l, m + log(l));
}

// One output element. A value sum that went non-finite came from an attended NaN or infinite
// value (whatever its probability: 0 * Inf is NaN): NaN, never Inf (step 9).
float finish_output(float value_sum, float factor) { return nan_if_non_finite(value_sum * factor); }

// Output elements a and b (b unused for f32) as the word of `dtype` (DT_F32, DT_F16, DT_BF16)
// that holds them, a in the low half.
uint pack_output(float a, float b, uint dtype) {
  if (dtype == DT_F32) return floatBitsToUint(a);
  const uint lo = f32_bits_to_float_element(floatBitsToUint(a), dtype);
  const uint hi = f32_bits_to_float_element(floatBitsToUint(b), dtype);
  return lo | (hi << 16);
}

#endif  // VKPAGED_ATTENTION_EPILOGUE_GLSL
