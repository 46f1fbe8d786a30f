// SPDX-License-Identifier: Apache-2.0
// Elements as f16 bits for the shared tiles of the KHR matrix kernels (attention_matrix_khr.comp,
// mla_attention_matrix_khr.comp): fp8 bytes converted (E4M3 as value / 256, folded into the
// scales), bf16 words scaled by a power of two into f16's range (a chunk in registers, or a
// staged tile in place), the non-finite tests, and the factors that undo the powers of two in a
// logit.
// Requires, from the includer: CACHE_DTYPE, FP8 (cache_element.glsl), WG and the shared
// `uvec4 s_mem[]`.
#ifndef VKPAGED_MATRIX_F16_ELEMENTS_GLSL
#define VKPAGED_MATRIX_F16_ELEMENTS_GLSL

// An fp8 byte as f16 bits: E5M2 is the top byte of an f16; E4M3 shifted into an f16 reads as
// value / 256 (fp8_scale_fix), and its NaN (S.1111.111) becomes an f16 NaN.
uint fp8_to_f16_bits(uint b) {
  if (CACHE_DTYPE == DT_FP8_E5M2) return b << 8;
  const uint sign = (b & 0x80u) << 8;
  if ((b & 0x7fu) == 0x7fu) return sign | 0x7e00u;
  return sign | ((b & 0x7fu) << 7);
}
// Whether one of the four fp8 bytes of `w` is not finite (E4M3: S.1111.111 NaN; E5M2: exponent
// 11111, Inf or NaN), a word at a time: the byte's tested bits xor the special pattern is zero.
bool fp8_word_not_finite(uint w) {
  const uint special = CACHE_DTYPE == DT_FP8_E5M2 ? 0x7c7c7c7cu : 0x7f7f7f7fu;
  const uint x = (w & special) ^ special;  // bytes below 0x80: a zero byte borrows into its own top bit
  return ((x - 0x01010101u) & ~x & 0x80808080u) != 0u;
}
bool fp8_chunk_not_finite(uvec4 w) {
  return fp8_word_not_finite(w.x) || fp8_word_not_finite(w.y) || fp8_word_not_finite(w.z) || fp8_word_not_finite(w.w);
}
// The four fp8 bytes of a word as two words of f16 pairs, in element order: both pairs of a word
// shifted at once (fp8_to_f16_bits' result, byte by byte only where an E4M3 NaN needs its f16 NaN).
uvec2 fp8_word_to_f16(uint w) {
  if (CACHE_DTYPE == DT_FP8_E5M2) return uvec2(((w & 0xffu) << 8) | ((w & 0xff00u) << 16), ((w >> 8) & 0xff00u) | (w & 0xff000000u));
  if (fp8_word_not_finite(w))
    return uvec2(fp8_to_f16_bits(w & 0xffu) | (fp8_to_f16_bits((w >> 8) & 0xffu) << 16),
                 fp8_to_f16_bits((w >> 16) & 0xffu) | (fp8_to_f16_bits(w >> 24) << 16));
  const uint lo = (w & 0xffu) | ((w & 0xff00u) << 8);          // bytes 0 and 1 in bits 0-7 and 16-23
  const uint hi = ((w >> 16) & 0xffu) | ((w >> 8) & 0xff0000u);  // bytes 2 and 3
  return uvec2(((lo & 0x007f007fu) << 7) | ((lo & 0x00800080u) << 8), ((hi & 0x007f007fu) << 7) | ((hi & 0x00800080u) << 8));
}
// Inf or NaN bf16 bits (low 16) as the f16 Inf or NaN of the same sign.
uint bf16_special_to_f16(uint b) { return (b & 0x8000u) | ((b & 0x7fu) != 0u ? 0x7e00u : 0x7c00u); }
// Two finite bf16 (a word) times `factor`, the power of two that brings the tile's largest finite
// magnitude into [2^14, 2^15), as two f16: exact down to 2^-17 of that magnitude, whatever
// packHalf2x16's rounding; only f16's subnormals may round.
uint finite_bf16_pair_to_f16(uint w, float factor) {
  return packHalf2x16(vec2(uintBitsToFloat(w << 16), uintBitsToFloat(w & 0xffff0000u)) * factor);
}
// finite_bf16_pair_to_f16 for any two bf16: Inf and NaN stay Inf and NaN.
uint bf16_pair_to_f16(uint w, float factor) {
  uint h = finite_bf16_pair_to_f16(w, factor);
  if ((w & 0x7f80u) == 0x7f80u) h = (h & 0xffff0000u) | bf16_special_to_f16(w & 0xffffu);
  if ((w & 0x7f800000u) == 0x7f800000u) h = (h & 0xffffu) | (bf16_special_to_f16(w >> 16) << 16);
  return h;
}
uvec4 finite_bf16_chunk_to_f16(uvec4 w, float factor) {
  return uvec4(finite_bf16_pair_to_f16(w.x, factor), finite_bf16_pair_to_f16(w.y, factor),
               finite_bf16_pair_to_f16(w.z, factor), finite_bf16_pair_to_f16(w.w, factor));
}
// The larger finite magnitude of the two bf16 in `w`, as f32 bits (Inf and NaN count as 0).
uint bf16_largest(uint w) {
  const uint lo = (w << 16) & 0x7fffffffu;
  const uint hi = w & 0x7fff0000u;
  return max(lo < 0x7f800000u ? lo : 0u, hi < 0x7f800000u ? hi : 0u);
}
// Raises the shared uint `slot` to the largest `value` of the workgroup: one atomic per subgroup,
// since atomics of many invocations on one address run one after another. Every invocation of
// the workgroup must reach it.
#define RAISE_SHARED_LARGEST(slot, value)                \
  {                                                      \
    const uint subgroup_largest_ = subgroupMax(value);   \
    if (subgroupElect()) atomicMax(slot, subgroup_largest_); \
  }
// The exponent of the power of two that brings a largest finite magnitude (f32 bits) into
// [2^14, 2^15); 0 when it is 0.
int range_shift(uint largest) { return largest == 0u ? 0 : clamp(14 - (int(largest >> 23) - 127), -126, 126); }
bool f16_pair_not_finite(uint w) { return (w & 0x7c00u) == 0x7c00u || (w & 0x7c000000u) == 0x7c000000u; }
bool f16_chunk_not_finite(uvec4 w) {
  return f16_pair_not_finite(w.x) || f16_pair_not_finite(w.y) || f16_pair_not_finite(w.z) || f16_pair_not_finite(w.w);
}
uint bf16_chunk_largest(uvec4 w) { return max(max(bf16_largest(w.x), bf16_largest(w.y)), max(bf16_largest(w.z), bf16_largest(w.w))); }
// A 16-byte chunk of bf16 as f16 times `factor` (bf16_pair_to_f16 word by word).
uvec4 bf16_chunk_to_f16(uvec4 w, float factor) {
  return uvec4(bf16_pair_to_f16(w.x, factor), bf16_pair_to_f16(w.y, factor), bf16_pair_to_f16(w.z, factor),
               bf16_pair_to_f16(w.w, factor));
}

// A 16-byte cache chunk written to shared memory as f16 at 16-byte word `word` (fp8: two words).
// Returns the f16 words' non-finite test (bf16 raw bits, converted later: meaningless; bf16
// converted before: the test of the converted words).
bool store_chunk(uint word, uvec4 raw) {
  if (FP8) {
    const uvec4 lo = uvec4(fp8_word_to_f16(raw.x), fp8_word_to_f16(raw.y));
    const uvec4 hi = uvec4(fp8_word_to_f16(raw.z), fp8_word_to_f16(raw.w));
    s_mem[word] = lo;
    s_mem[word + 1u] = hi;
    return fp8_chunk_not_finite(raw);
  }
  s_mem[word] = raw;
  return f16_chunk_not_finite(raw);
}

// bf16: the staged raw bits of `rows` rows of `row_words` 16-byte words (`stride` apart, from
// `first`; the pads between them never written) become f16 times `factor`. Returns whether
// one of them is not finite.
bool convert_bf16_rows(uint first, uint rows, uint row_words, uint stride, float factor) {
  bool bad = false;
  for (uint i = gl_LocalInvocationID.x; i < rows * row_words; i += WG) {
    const uint word = first + (i / row_words) * stride + i % row_words;
    const uvec4 w = s_mem[word];
    const uvec4 h = uvec4(bf16_pair_to_f16(w.x, factor), bf16_pair_to_f16(w.y, factor), bf16_pair_to_f16(w.z, factor),
                          bf16_pair_to_f16(w.w, factor));
    s_mem[word] = h;
    bad = bad || f16_chunk_not_finite(h);
  }
  return bad;
}

// mantissa x 2^exponent as two factors that take a score to its logit exactly but for the
// logit's own overflow or underflow: the first holds the mantissa and as much of the power as
// keeps it a normal f32, the second the rest (1 unless the bf16 ranges are far apart).
vec2 score_factors(float mantissa, int exponent) {
  const int first = clamp(exponent, -125, 127);
  return vec2(mantissa * exp2(float(first)), exp2(float(clamp(exponent - first, -126, 127))));
}

#endif  // VKPAGED_MATRIX_F16_ELEMENTS_GLSL
