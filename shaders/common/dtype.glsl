// SPDX-License-Identifier: Apache-2.0
// Reading and writing packed elements from 32-bit words. Every shader loads whole words (or
// uvec4s) and unpacks here, so no 8- or 16-bit storage feature is needed on any device.
#ifndef VKPAGED_DTYPE_GLSL
#define VKPAGED_DTYPE_GLSL

float bf16_lo(uint w) { return uintBitsToFloat(w << 16); }
float bf16_hi(uint w) { return uintBitsToFloat(w & 0xffff0000u); }

// Round-to-nearest-even f32 -> bf16 bits (NaN stays NaN).
uint f32_to_bf16_bits(float f) {
  uint x = floatBitsToUint(f);
  if ((x & 0x7fffffffu) > 0x7f800000u) return (x >> 16) | 0x40u;
  return (x + 0x7fffu + ((x >> 16) & 1u)) >> 16;
}

// Two fp8 bytes held in the low 8 bits of each 16-bit half of `pair` (0x00BB00AA), as f16 pair.
// E5M2 is the top byte of an f16. E4M3FN shifted into an f16 reads as value / 256: callers fold
// that factor into their scales (fp8_scale_fix). Its NaN encoding (S.1111.111) is mapped to NaN.
vec2 fp8_pair(uint pair, uint dtype) {
  if (dtype == DT_FP8_E5M2) return unpackHalf2x16(pair << 8);
  vec2 v = unpackHalf2x16(((pair & 0x00800080u) << 8) | ((pair & 0x007f007fu) << 7));
  if ((pair & 0x007fu) == 0x007fu) v.x = uintBitsToFloat(0x7fc00000u);
  if ((pair & 0x007f0000u) == 0x007f0000u) v.y = uintBitsToFloat(0x7fc00000u);
  return v;
}
float fp8_scale_fix(uint dtype) { return dtype == DT_FP8_E4M3 ? 256.0 : 1.0; }

// Elements of one word: 1 (f32), 2 (f16, bf16) or 4 (fp8). Unused slots are 0.
vec4 unpack_word(uint w, uint dtype) {
  if (dtype == DT_F32) return vec4(uintBitsToFloat(w), 0.0, 0.0, 0.0);
  if (dtype == DT_F16) return vec4(unpackHalf2x16(w), 0.0, 0.0);
  if (dtype == DT_BF16) return vec4(bf16_lo(w), bf16_hi(w), 0.0, 0.0);
  uint lo = (w & 0xffu) | ((w & 0xff00u) << 8);
  uint hi = ((w >> 16) & 0xffu) | ((w >> 8) & 0x00ff0000u);
  return vec4(fp8_pair(lo, dtype), fp8_pair(hi, dtype));
}

uint elements_per_word(uint dtype) { return dtype == DT_F32 ? 1u : (dtype <= DT_BF16 ? 2u : 4u); }
uint element_bytes(uint dtype) { return dtype == DT_F32 ? 4u : (dtype <= DT_BF16 ? 2u : 1u); }

// Element i of a packed array in words[] (f32/f16/bf16/fp8).
#define VKP_LOAD_ELEMENT(words, base_word, i, dtype) \
  (unpack_word(words[(base_word) + (i) / elements_per_word(dtype)], dtype)[(i) % elements_per_word(dtype)])

#endif
