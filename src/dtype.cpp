// SPDX-License-Identifier: Apache-2.0
#include "vkpaged/dtype.hpp"

#include <bit>
#include <cmath>
#include <cstring>
#include <limits>

namespace vkpaged {

size_t dtype_size(DType t) noexcept {
  switch (t) {
    case DType::f32: case DType::i32: case DType::u32: return 4;
    case DType::f16: case DType::bf16: return 2;
    case DType::fp8_e4m3: case DType::fp8_e5m2: case DType::u8: return 1;
    case DType::i64: return 8;
  }
  return 0;
}

std::string_view dtype_name(DType t) noexcept {
  switch (t) {
    case DType::f32: return "f32";
    case DType::f16: return "f16";
    case DType::bf16: return "bf16";
    case DType::fp8_e4m3: return "fp8_e4m3";
    case DType::fp8_e5m2: return "fp8_e5m2";
    case DType::i32: return "i32";
    case DType::u32: return "u32";
    case DType::i64: return "i64";
    case DType::u8: return "u8";
  }
  return "?";
}

std::optional<DType> parse_dtype(std::string_view name) noexcept {
  for (DType t : {DType::f32, DType::f16, DType::bf16, DType::fp8_e4m3, DType::fp8_e5m2, DType::i32, DType::u32,
                  DType::i64, DType::u8})
    if (dtype_name(t) == name) return t;
  return std::nullopt;
}

float f16_to_f32(uint16_t h) noexcept {
  const uint32_t sign = uint32_t(h & 0x8000u) << 16;
  const uint32_t exp = (h >> 10) & 0x1fu;
  const uint32_t mant = h & 0x3ffu;
  if (exp == 0x1f) return std::bit_cast<float>(sign | 0x7f800000u | (mant << 13));
  if (exp != 0) return std::bit_cast<float>(sign | ((exp + 112u) << 23) | (mant << 13));
  // zero or subnormal: mant * 2^-24, exact in float
  float v = float(mant) * 0x1p-24f;
  return sign ? -v : v;
}

uint16_t f32_to_f16(float f) noexcept {
  const uint32_t x = std::bit_cast<uint32_t>(f);
  const uint16_t sign = uint16_t((x >> 16) & 0x8000u);
  const uint32_t ax = x & 0x7fffffffu;
  if (ax >= 0x7f800000u) return uint16_t(sign | 0x7c00u | (ax > 0x7f800000u ? 0x200u : 0u));  // Inf/NaN
  if (ax >= 0x477ff000u) return uint16_t(sign | 0x7c00u);  // rounds to >= 65536: Inf, as IEEE does
  if (ax < 0x38800000u) {
    // below the smallest normal half (2^-14): subnormal result, quantum 2^-24
    float a = std::bit_cast<float>(ax);
    uint32_t q = uint32_t(std::nearbyint(double(a) * 0x1p24));
    return uint16_t(sign | q);  // q == 0x400 becomes the smallest normal, as wanted
  }
  uint32_t mant = ax & 0x7fffffu;
  uint32_t exp = (ax >> 23) - 112u;
  uint32_t half = (exp << 10) | (mant >> 13);
  const uint32_t rest = mant & 0x1fffu;
  if (rest > 0x1000u || (rest == 0x1000u && (half & 1u))) ++half;
  return uint16_t(sign | half);
}

float bf16_to_f32(uint16_t b) noexcept { return std::bit_cast<float>(uint32_t(b) << 16); }

uint16_t f32_to_bf16(float f) noexcept {
  uint32_t x = std::bit_cast<uint32_t>(f);
  if ((x & 0x7fffffffu) > 0x7f800000u) return uint16_t((x >> 16) | 0x40u);  // quiet NaN
  x += 0x7fffu + ((x >> 16) & 1u);
  return uint16_t(x >> 16);
}

namespace {

// An 8-bit float: 1 sign, E exponent and M mantissa bits, `bias`, largest finite encoding
// `max_bits` (magnitude), `nan_bits` (magnitude) for NaN.
struct Fp8Format {
  int exp_bits, mant_bits, bias;
  uint8_t max_bits, nan_bits;
  bool ieee_specials;  // exponent all ones means Inf/NaN (e5m2); else only S.1111.111 is NaN (e4m3fn)
};
constexpr Fp8Format kE4M3{4, 3, 7, 0x7e, 0x7f, false};
constexpr Fp8Format kE5M2{5, 2, 15, 0x7b, 0x7f, true};

float fp8_decode(uint8_t bits, const Fp8Format& f) noexcept {
  const bool neg = bits & 0x80u;
  const uint32_t mag = bits & 0x7fu;
  const uint32_t exp = mag >> f.mant_bits;
  const uint32_t mant = mag & ((1u << f.mant_bits) - 1u);
  const uint32_t exp_max = (1u << f.exp_bits) - 1u;
  float v;
  if (f.ieee_specials && exp == exp_max) {
    v = mant ? std::numeric_limits<float>::quiet_NaN() : std::numeric_limits<float>::infinity();
  } else if (!f.ieee_specials && mag == f.nan_bits) {
    v = std::numeric_limits<float>::quiet_NaN();
  } else if (exp == 0) {
    v = std::ldexp(float(mant), 1 - f.bias - f.mant_bits);
  } else {
    v = std::ldexp(float((1u << f.mant_bits) | mant), int(exp) - f.bias - f.mant_bits);
  }
  return neg ? -v : v;
}

uint8_t fp8_encode(float value, const Fp8Format& f) noexcept {
  const uint8_t sign = std::signbit(value) ? 0x80u : 0u;
  if (std::isnan(value)) return uint8_t(sign | f.nan_bits);
  const double a = std::fabs(double(value));
  if (std::isinf(a)) return uint8_t(sign | f.max_bits);  // saturating
  const int emin = 1 - f.bias;  // exponent of the smallest normal
  uint32_t mag;
  if (a < std::ldexp(1.0, emin)) {
    mag = uint32_t(std::nearbyint(std::ldexp(a, f.mant_bits - emin)));  // subnormal quanta (2^M = smallest normal)
  } else {
    int e = std::ilogb(a);
    double m = std::ldexp(a, -e) - 1.0;  // [0, 1)
    uint32_t q = uint32_t(std::nearbyint(std::ldexp(m, f.mant_bits)));
    if (q == (1u << f.mant_bits)) { q = 0; ++e; }
    const long ef = long(e) + f.bias;
    if (ef >= (1L << f.exp_bits)) return uint8_t(sign | f.max_bits);
    mag = uint32_t(ef) << f.mant_bits | q;
  }
  if (mag > f.max_bits) mag = f.max_bits;
  return uint8_t(sign | mag);
}

}  // namespace

float fp8_e4m3_to_f32(uint8_t bits) noexcept { return fp8_decode(bits, kE4M3); }
uint8_t f32_to_fp8_e4m3(float value) noexcept { return fp8_encode(value, kE4M3); }
float fp8_e5m2_to_f32(uint8_t bits) noexcept { return fp8_decode(bits, kE5M2); }
uint8_t f32_to_fp8_e5m2(float value) noexcept { return fp8_encode(value, kE5M2); }

float dtype_max(DType t) noexcept {
  switch (t) {
    case DType::f32: return 3.40282347e38f;
    case DType::f16: return 65504.0f;
    case DType::bf16: return 3.38953139e38f;
    case DType::fp8_e4m3: return 448.0f;
    case DType::fp8_e5m2: return 57344.0f;
    default: return 0.0f;
  }
}

float load_element(const void* data, DType t, size_t i) noexcept {
  switch (t) {
    case DType::f32: return static_cast<const float*>(data)[i];
    case DType::f16: return f16_to_f32(static_cast<const uint16_t*>(data)[i]);
    case DType::bf16: return bf16_to_f32(static_cast<const uint16_t*>(data)[i]);
    case DType::fp8_e4m3: return fp8_e4m3_to_f32(static_cast<const uint8_t*>(data)[i]);
    case DType::fp8_e5m2: return fp8_e5m2_to_f32(static_cast<const uint8_t*>(data)[i]);
    default: return 0.0f;
  }
}

void store_element(void* data, DType t, size_t i, float value) noexcept {
  switch (t) {
    case DType::f32: static_cast<float*>(data)[i] = value; break;
    case DType::f16: static_cast<uint16_t*>(data)[i] = f32_to_f16(value); break;
    case DType::bf16: static_cast<uint16_t*>(data)[i] = f32_to_bf16(value); break;
    case DType::fp8_e4m3: static_cast<uint8_t*>(data)[i] = f32_to_fp8_e4m3(value); break;
    case DType::fp8_e5m2: static_cast<uint8_t*>(data)[i] = f32_to_fp8_e5m2(value); break;
    default: break;
  }
}

}  // namespace vkpaged
