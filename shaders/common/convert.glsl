// SPDX-License-Identifier: Apache-2.0
// Bit-exact conversions between f32 and the storage types, done on bit patterns with integer
// arithmetic only. The spec leaves packHalf2x16's rounding and every denormal to the driver,
// so float-based conversions may differ from src/dtype.cpp; these match it on every device.
// Values travel as f32 bit patterns (uint) so nothing is flushed on the way.
#ifndef VKPAGED_CONVERT_GLSL
#define VKPAGED_CONVERT_GLSL

// v >> s rounded to nearest, ties to even; 1 <= s <= 24 and v < 2^31.
uint shift_right_rne(uint v, uint s) {
  return (v + (1u << (s - 1u)) - 1u + ((v >> s) & 1u)) >> s;
}

// ---- to f32 bits ----

uint f16_to_f32_bits(uint h) {
  const uint sign = (h & 0x8000u) << 16;
  const uint e = (h >> 10) & 0x1fu;
  const uint m = h & 0x3ffu;
  if (e == 0x1fu) return sign | 0x7f800000u | (m << 13);
  if (e != 0u) return sign | ((e + 112u) << 23) | (m << 13);
  if (m == 0u) return sign;
  const int p = findMSB(m);  // subnormal m * 2^-24 = 2^(p-24) * (m / 2^p): normal in f32
  return sign | (uint(p + 103) << 23) | ((m << uint(23 - p)) & 0x7fffffu);
}

uint bf16_to_f32_bits(uint b) { return b << 16; }

// OCP E4M3FN (0x7f/0xff are NaN, no infinities) or E5M2 (the top byte of an f16).
uint fp8_to_f32_bits(uint b, uint dtype) {
  if (dtype == DT_FP8_E5M2) return f16_to_f32_bits(b << 8);
  const uint sign = (b & 0x80u) << 24;
  const uint mag = b & 0x7fu;
  if (mag == 0x7fu) return sign | 0x7fc00000u;
  const uint e = mag >> 3;
  const uint m = mag & 7u;
  if (e != 0u) return sign | ((e + 120u) << 23) | (m << 20);
  if (m == 0u) return sign;
  const int p = findMSB(m);  // subnormal m * 2^-9
  return sign | (uint(p + 118) << 23) | ((m << uint(23 - p)) & 0x7fffffu);
}

// Element bits of any storage dtype (the element right-aligned in `e`) as f32 bits.
uint element_to_f32_bits(uint e, uint dtype) {
  if (dtype == DT_F32) return e;
  if (dtype == DT_F16) return f16_to_f32_bits(e);
  if (dtype == DT_BF16) return bf16_to_f32_bits(e);
  return fp8_to_f32_bits(e, dtype);
}

// ---- from f32 bits: round to nearest even ----

// IEEE half: overflow gives Inf, NaN stays NaN (quiet, sign kept), as f32_to_f16.
uint f32_bits_to_f16(uint x) {
  const uint sign = (x >> 16) & 0x8000u;
  const uint ax = x & 0x7fffffffu;
  if (ax > 0x7f800000u) return sign | 0x7e00u;
  if (ax >= 0x477ff000u) return sign | 0x7c00u;  // Inf, and all that rounds past 65504
  if (ax >= 0x38800000u) return sign | shift_right_rne(ax - 0x38000000u, 13u);  // rebias 127 -> 15
  // Subnormal half, quantum 2^-24: m * 2^(e-150) is m >> (126 - e) quanta.
  const uint e = ax >> 23;
  if (e < 102u) return sign;  // below 2^-25: rounds to zero (f32 subnormals included)
  return sign | shift_right_rne((ax & 0x7fffffu) | 0x800000u, 126u - e);
}

uint f32_bits_to_bf16(uint x) {
  if ((x & 0x7fffffffu) > 0x7f800000u) return (x >> 16) | 0x40u;
  return (x + 0x7fffu + ((x >> 16) & 1u)) >> 16;
}

// Saturating: finite values past the format's max and infinities give the max; NaN gives NaN.
uint f32_bits_to_fp8(uint x, uint dtype) {
  const bool e4m3 = dtype == DT_FP8_E4M3;
  const uint mant_bits = e4m3 ? 3u : 2u;
  const int bias = e4m3 ? 7 : 15;
  const uint max_code = e4m3 ? 0x7eu : 0x7bu;
  const uint sign = (x >> 24) & 0x80u;
  const uint ax = x & 0x7fffffffu;
  if (ax > 0x7f800000u) return sign | 0x7fu;
  const int e = int(ax >> 23) - 127;
  const int emin = 1 - bias;  // exponent of the smallest normal
  uint code;
  if (e >= emin) {
    // Rebias the exponent and round the mantissa; a carry moves into the exponent, and
    // anything past the max (including the e4m3 NaN code and e5m2 Inf) is clamped below.
    code = shift_right_rne(ax - (uint(127 - bias) << 23), 23u - mant_bits);
  } else {
    // Subnormal quanta of 2^(emin - mant_bits); f32 subnormals give a shift past 24: zero.
    const uint shift = uint(23 - int(mant_bits) + emin - e);
    code = shift > 24u ? 0u : shift_right_rne((ax & 0x7fffffu) | 0x800000u, shift);
  }
  return sign | min(code, max_code);
}

// fp8 cache store: encode(|x| * inv_scale) with x's sign. The sign is taken from the bits so a
// product flushed to zero still gives the right signed zero; inv_scale > 0.
uint quantize_fp8(uint x, float inv_scale, uint dtype) {
  const uint ax = x & 0x7fffffffu;
  if (ax > 0x7f800000u) return f32_bits_to_fp8(x, dtype);
  const uint scaled = floatBitsToUint(uintBitsToFloat(ax) * inv_scale) & 0x7fffffffu;
  return f32_bits_to_fp8((x & 0x80000000u) | scaled, dtype);
}

// f32 bits to the element bits of a float storage dtype (f32, f16, bf16).
uint f32_bits_to_float_element(uint x, uint dtype) {
  if (dtype == DT_F32) return x;
  if (dtype == DT_F16) return f32_bits_to_f16(x);
  return f32_bits_to_bf16(x);
}

#endif
