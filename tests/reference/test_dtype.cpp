// SPDX-License-Identifier: Apache-2.0
// The scalar conversions of src/dtype.cpp against independent oracles: every fp8 code decoded,
// round trips of every fp8/f16/bf16 value, nearest-even rounding checked against a search over
// the representable values (fp8, bf16) or the compiler's _Float16 (f16), saturation, signed
// zeros and NaN. The GPU encoders are bit-exact with these (tests/ops).
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstring>
#include <limits>
#include <random>
#include <vector>

#include "vkpaged/dtype.hpp"

namespace vkpaged {
namespace {

uint32_t bits_of(float f) {
  uint32_t b;
  std::memcpy(&b, &f, 4);
  return b;
}
float float_of(uint32_t b) {
  float f;
  std::memcpy(&f, &b, 4);
  return f;
}

struct Fp8 {
  DType type;
  float (*decode)(uint8_t);
  uint8_t (*encode)(float);
  int exp_bits, mant_bits, bias;
  uint8_t max_code;
  float max;
};
const Fp8 kE4M3{DType::fp8_e4m3, fp8_e4m3_to_f32, f32_to_fp8_e4m3, 4, 3, 7, 0x7e, 448.0f};
const Fp8 kE5M2{DType::fp8_e5m2, fp8_e5m2_to_f32, f32_to_fp8_e5m2, 5, 2, 15, 0x7b, 57344.0f};

// The value of a code straight from the bit fields (no shared code with src/dtype.cpp).
double fp8_value(const Fp8& f, uint8_t code) {
  const int e = (code & 0x7f) >> f.mant_bits, m = code & ((1 << f.mant_bits) - 1);
  const double scale = std::pow(2.0, f.mant_bits);
  const double mag = e == 0 ? m / scale * std::pow(2.0, 1 - f.bias) : (1.0 + m / scale) * std::pow(2.0, e - f.bias);
  return (code & 0x80) ? -mag : mag;
}
bool fp8_is_nan(const Fp8& f, uint8_t code) {
  return f.type == DType::fp8_e4m3 ? (code & 0x7f) == 0x7f : (code & 0x7f) > 0x7c;
}

// Nearest finite code to v with ties to the even code, saturating at the max; v's sign kept.
uint8_t fp8_oracle(const Fp8& f, float v) {
  const uint8_t sign = std::signbit(v) ? 0x80 : 0;
  if (std::isnan(v)) return sign | 0x7f;
  const double a = std::fabs(double(v));
  uint8_t best = 0;
  for (uint8_t c = 1; c <= f.max_code; ++c) {
    const double d_new = std::fabs(fp8_value(f, c) - a), d_best = std::fabs(fp8_value(f, best) - a);
    if (d_new < d_best || (d_new == d_best && (c & 1) == 0)) best = c;
  }
  return sign | best;
}

// Inputs that sit on and around every rounding decision of a format, plus random ones.
std::vector<float> probe_values(const std::vector<double>& representable, uint32_t seed) {
  std::vector<float> v;
  for (size_t i = 0; i + 1 < representable.size(); ++i) {
    const float mid = float((representable[i] + representable[i + 1]) / 2);  // exact for fp8, bf16 and f16
    v.insert(v.end(), {float(representable[i]), mid, std::nextafter(mid, 0.0f), std::nextafter(mid, 1e30f)});
  }
  std::mt19937 rng(seed);
  const double top = representable.back() * 1.5;
  std::uniform_real_distribution<double> u(0.0, 1.0);
  for (int i = 0; i < 20000; ++i) v.push_back(float(std::pow(u(rng), 6.0) * top));
  for (size_t i = 0, n = v.size(); i < n; ++i) v.push_back(-v[i]);
  return v;
}

class DtypeFp8Test : public ::testing::TestWithParam<Fp8> {};

TEST_P(DtypeFp8Test, DecodesAll256Codes) {
  const Fp8 f = GetParam();
  for (int c = 0; c < 256; ++c) {
    const uint8_t code = uint8_t(c);
    const float got = f.decode(code);
    if (fp8_is_nan(f, code)) {
      EXPECT_TRUE(std::isnan(got)) << "code " << c;
    } else if (f.type == DType::fp8_e5m2 && (code & 0x7f) == 0x7c) {
      EXPECT_EQ(got, (code & 0x80) ? -INFINITY : INFINITY);
    } else {
      EXPECT_EQ(double(got), fp8_value(f, code)) << "code " << c;
      EXPECT_EQ(std::signbit(got), (code & 0x80) != 0) << "code " << c;
    }
  }
  EXPECT_EQ(f.decode(f.max_code), f.max);
  EXPECT_EQ(f.decode(0x80 | f.max_code), -f.max);
  EXPECT_EQ(f.decode(1), std::ldexp(1.0f, 1 - f.bias - f.mant_bits)) << "smallest subnormal";
}

TEST_P(DtypeFp8Test, EveryFiniteCodeRoundTrips) {
  const Fp8 f = GetParam();
  for (int c = 0; c < 256; ++c) {
    const uint8_t code = uint8_t(c);
    if (fp8_is_nan(f, code) || std::isinf(f.decode(code))) continue;
    EXPECT_EQ(int(f.encode(f.decode(code))), c) << "code " << c;  // 0x80 (negative zero) included
  }
}

TEST_P(DtypeFp8Test, RoundsToNearestEvenAndSaturates) {
  const Fp8 f = GetParam();
  std::vector<double> representable;
  for (uint8_t c = 0; c <= f.max_code; ++c) representable.push_back(fp8_value(f, c));
  size_t bad = 0;
  for (float v : probe_values(representable, 7)) {
    const uint8_t want = fp8_oracle(f, v), got = f.encode(v);
    if (got != want && bad++ < 10) ADD_FAILURE() << "encode(" << v << ") = " << int(got) << ", want " << int(want);
  }
  EXPECT_EQ(bad, 0u);
}

TEST_P(DtypeFp8Test, SaturatesNeverInfOrNaNFromFiniteInput) {
  const Fp8 f = GetParam();
  const float inf = std::numeric_limits<float>::infinity();
  for (float v : {f.max, f.max * 1.03125f, f.max * 1.0625f, f.max * 1.07f, f.max * 2, 1e30f, 3.4e38f, inf}) {
    EXPECT_EQ(f.encode(v), f.max_code) << v;
    EXPECT_EQ(f.encode(-v), 0x80 | f.max_code) << -v;
  }
}

TEST_P(DtypeFp8Test, KeepsSignedZerosAndNaN) {
  const Fp8 f = GetParam();
  EXPECT_EQ(f.encode(0.0f), 0x00);
  EXPECT_EQ(f.encode(-0.0f), 0x80);
  EXPECT_EQ(f.encode(-1e-30f), 0x80) << "underflow keeps the sign";
  EXPECT_EQ(f.encode(-std::ldexp(1.0f, -f.bias - f.mant_bits)), 0x80) << "half the smallest subnormal ties to zero";
  EXPECT_TRUE(std::isnan(f.decode(f.encode(std::numeric_limits<float>::quiet_NaN()))));
  EXPECT_EQ(f.encode(-std::numeric_limits<float>::quiet_NaN()) & 0x80, 0x80);
}

INSTANTIATE_TEST_SUITE_P(Formats, DtypeFp8Test, ::testing::Values(kE4M3, kE5M2),
                         [](const auto& info) { return std::string(dtype_name(info.param.type)); });

TEST(DtypeF16Test, DecodesEveryBitPatternAsTheCompilerDoes) {
  for (uint32_t h = 0; h < 65536; ++h) {
    _Float16 half;
    const uint16_t b = uint16_t(h);
    std::memcpy(&half, &b, 2);
    const float want = float(half), got = f16_to_f32(b);
    if (std::isnan(want)) {
      EXPECT_TRUE(std::isnan(got)) << h;
      continue;
    }
    ASSERT_EQ(bits_of(got), bits_of(want)) << "bits " << h;
    ASSERT_EQ(f32_to_f16(got), b) << "round trip of bits " << h;
  }
}

TEST(DtypeF16Test, RoundsToNearestEvenAsTheCompilerDoes) {
  std::vector<double> representable;
  for (uint32_t h = 0; h <= 0x7bff; ++h) representable.push_back(f16_to_f32(uint16_t(h)));
  std::vector<float> probes = probe_values(representable, 11);
  std::mt19937 rng(12);
  for (int i = 0; i < 200000; ++i) probes.push_back(float_of(rng()));  // any bit pattern, NaN included
  size_t bad = 0;
  for (float v : probes) {
    const _Float16 half = _Float16(v);
    uint16_t want;
    std::memcpy(&want, &half, 2);
    const uint16_t got = f32_to_f16(v);
    if (std::isnan(v) ? !std::isnan(f16_to_f32(got)) : got != want)
      if (bad++ < 10) ADD_FAILURE() << "f32_to_f16(" << v << ") = " << got << ", want " << want;
  }
  EXPECT_EQ(bad, 0u);
  EXPECT_EQ(f32_to_f16(65519.0f), 0x7bff);
  EXPECT_EQ(f32_to_f16(65520.0f), 0x7c00) << "the tie above the max rounds to Inf, as IEEE says";
  EXPECT_EQ(f32_to_f16(-0.0f), 0x8000);
  EXPECT_EQ(f32_to_f16(0x1p-25f), 0x0000) << "half the smallest subnormal ties to even (zero)";
  EXPECT_EQ(f32_to_f16(0x3p-25f), 0x0002);
}

// bf16 oracle: of the two bf16 neighbours of v (truncated and one up), the nearer, ties to the
// even one.
uint16_t bf16_oracle(float v) {
  const uint32_t b = bits_of(v);
  if (std::isnan(v)) return uint16_t((b >> 16) | 0x40);
  const uint16_t down = uint16_t(b >> 16), up = uint16_t(down + 1);
  const double dd = std::fabs(double(v) - double(bf16_to_f32(down)));
  // Past the max, the next step up is 2^128 (IEEE rounds as if the exponent were unbounded).
  const double up_value = (up & 0x7fff) == 0x7f80 ? std::copysign(0x1p128, v) : double(float_of(uint32_t(up) << 16));
  const double du = std::fabs(double(v) - up_value);
  if ((b & 0xffff) == 0) return down;
  if (du < dd || (du == dd && (up & 1) == 0)) return up;
  return down;
}

TEST(DtypeBf16Test, RoundTripsAndRoundsToNearestEven) {
  for (uint32_t h = 0; h < 65536; ++h) {
    const float f = bf16_to_f32(uint16_t(h));
    ASSERT_EQ(bits_of(f), h << 16);
    if (!std::isnan(f)) ASSERT_EQ(f32_to_bf16(f), h) << h;
  }
  std::mt19937 rng(13);
  size_t bad = 0;
  for (int i = 0; i < 300000; ++i) {
    uint32_t b = rng();
    if (i % 3 == 0) b = (b & 0xffff0000u) | 0x8000u;  // exact ties
    const float v = float_of(b);
    if (f32_to_bf16(v) != bf16_oracle(v) && bad++ < 10)
      ADD_FAILURE() << "f32_to_bf16(bits " << b << ") = " << f32_to_bf16(v) << ", want " << bf16_oracle(v);
  }
  EXPECT_EQ(bad, 0u);
  EXPECT_EQ(f32_to_bf16(float_of(0x7f7fffffu)), 0x7f80) << "rounding past the max gives Inf, as IEEE says";
  EXPECT_EQ(f32_to_bf16(-0.0f), 0x8000);
  EXPECT_TRUE(std::isnan(bf16_to_f32(f32_to_bf16(float_of(0x7f800001u)))))
      << "a NaN with only low payload bits stays NaN";
}

TEST(DtypeMaxTest, FormatMaxima) {
  EXPECT_EQ(dtype_max(DType::fp8_e4m3), 448.0f);
  EXPECT_EQ(dtype_max(DType::fp8_e5m2), 57344.0f);
  EXPECT_EQ(dtype_max(DType::f16), 65504.0f);
  EXPECT_EQ(dtype_max(DType::bf16), bf16_to_f32(0x7f7f));
}

}  // namespace
}  // namespace vkpaged
