// SPDX-License-Identifier: Apache-2.0
// The contract's rule for scales (docs/contract.md, "Scales"), one routine for every operator
// (src/ops/scale_validation.hpp): scale, k_scale and v_scale finite and > 0; an fp8 cache's
// k_scale and v_scale also small enough that the format's largest value times it stays finite
// in f32 (E4M3: FLT_MAX / 448, E5M2: FLT_MAX / 57344) and large enough that its reciprocal does
// (reshape_and_cache stores value * (1 / scale)). Decode, reshape_and_cache, gather, their CPU
// references and fp8 scale calibration answer the same values the same way.
#include <gtest/gtest.h>

#include <cfloat>
#include <cmath>
#include <limits>
#include <random>
#include <string>

#include "ops/scale_validation.hpp"
#include "support/decode_case.hpp"
#include "support/expect_error.hpp"
#include "support/test_context.hpp"
#include "vkpaged/cache_ops.hpp"
#include "vkpaged/reference.hpp"

namespace vkpaged::test {
namespace {

constexpr float kNaN = std::numeric_limits<float>::quiet_NaN();
constexpr float kInf = std::numeric_limits<float>::infinity();

// The largest scale whose product with the format's largest value is at most FLT_MAX, and the
// smallest whose reciprocal is: the two ends the rule allows, found without the routine.
float largest_fp8_scale(DType fp8) {
  float s = float(double(FLT_MAX) / double(dtype_max(fp8)));
  while (double(s) * double(dtype_max(fp8)) > double(FLT_MAX)) s = std::nextafter(s, 0.0f);
  while (double(std::nextafter(s, kInf)) * double(dtype_max(fp8)) <= double(FLT_MAX)) s = std::nextafter(s, kInf);
  return s;
}
float smallest_fp8_scale() {
  float s = float(1.0 / double(FLT_MAX));
  while (1.0 / double(s) > double(FLT_MAX)) s = std::nextafter(s, kInf);
  while (1.0 / double(std::nextafter(s, 0.0f)) <= double(FLT_MAX)) s = std::nextafter(s, 0.0f);
  return s;
}

TEST(ScaleRule, BoundsOfEachFormat) {
  for (DType fp8 : {DType::fp8_e4m3, DType::fp8_e5m2}) {
    SCOPED_TRACE(dtype_name(fp8));
    const float top = largest_fp8_scale(fp8), bottom = smallest_fp8_scale();
    EXPECT_EQ(detail::scale_problem(top, fp8), "");
    EXPECT_NE(detail::scale_problem(std::nextafter(top, kInf), fp8).find("is too large for an"), std::string::npos);
    EXPECT_EQ(detail::scale_problem(bottom, fp8), "");
    EXPECT_NE(detail::scale_problem(std::nextafter(bottom, 0.0f), fp8).find("is too small for an"), std::string::npos);
    EXPECT_NE(detail::scale_problem(1e38f, fp8), "");
    EXPECT_EQ(detail::scale_problem(1.0f, fp8), "");
  }
  EXPECT_NEAR(largest_fp8_scale(DType::fp8_e4m3), FLT_MAX / 448.0, 1e30);
  EXPECT_NEAR(largest_fp8_scale(DType::fp8_e5m2), FLT_MAX / 57344.0, 1e28);
  for (DType t : {DType::f32, DType::f16, DType::bf16, DType::fp8_e4m3, DType::fp8_e5m2})
    for (float bad : {0.0f, -0.0f, -1.0f, -1e-30f, kNaN, kInf, -kInf})
      EXPECT_EQ(detail::scale_problem(bad, t), "is not a finite scale > 0") << bad << " " << dtype_name(t);
  // Caches that are not fp8 take any finite positive scale (they do not use k_scale or v_scale).
  EXPECT_EQ(detail::scale_problem(1e38f, DType::f16), "");
  EXPECT_EQ(detail::scale_problem(1e-40f, DType::f32), "");
}

// fp8 calibration never returns a scale the operators refuse, even for the largest amax.
TEST(ScaleRule, CalibratedScalesAreAccepted) {
  for (DType fp8 : {DType::fp8_e4m3, DType::fp8_e5m2})
    for (float amax : {0.0f, 1e-30f, 1.0f, 448.0f, 1e30f, FLT_MAX}) {
      const float s = fp8_scale_from_amax(amax, fp8);
      EXPECT_EQ(detail::scale_problem(s, fp8), "") << dtype_name(fp8) << " amax " << amax << " scale " << s;
    }
  EXPECT_EQ(fp8_scale_from_amax(FLT_MAX, DType::fp8_e4m3), largest_fp8_scale(DType::fp8_e4m3));
}

struct Refusal {
  float value;
  DType cache;
  std::string message;  // what every operator's error says
};

// Values each operator refused only in part before: decode took negative scales, an fp8
// k_scale of 1e38 (the GPU then returned zeros), and any softmax scale but NaN and Inf.
std::vector<Refusal> refusals() {
  return {{-1.0f, DType::fp8_e4m3, "-1 is not a finite scale > 0"},
          {0.0f, DType::f16, "0 is not a finite scale > 0"},
          {-2.0f, DType::f16, "-2 is not a finite scale > 0"},
          {kNaN, DType::fp8_e5m2, "nan is not a finite scale > 0"},
          {1e38f, DType::fp8_e4m3, "1e+38 is too large for an fp8_e4m3 cache"},
          {1e34f, DType::fp8_e5m2, "1e+34 is too large for an fp8_e5m2 cache"},
          {1e-39f, DType::fp8_e4m3, "1e-39 is too small for an fp8_e4m3 cache"}};
}

DecodeCase case_for(DType cache) {
  DecodeCase c;
  c.cache_dtype = cache;
  c.lens = {3, 20};
  return c;
}

TEST(ScaleRule, ReferencesRefuseTheSameValues) {
  for (const Refusal& r : refusals()) {
    SCOPED_TRACE(r.message);
    std::mt19937 rng(1);
    DecodeCase c = case_for(r.cache);
    const DecodeInputs in = make_decode_inputs(c, rng);
    for (const char* which : {"k_scale", "v_scale"}) {
      DecodeParams params = default_params(c);
      (std::string(which) == "k_scale" ? params.k_scale : params.v_scale) = r.value;
      expect_refused([&] { reference::decode_attention(in, {}, params); }, std::string(which) + ": " + r.message);
      CacheScales scales;
      (std::string(which) == "k_scale" ? scales.k_scale : scales.v_scale) = r.value;
      HostTensor key_cache = in.key_cache, value_cache = in.value_cache;
      if (is_fp8_dtype(r.cache)) key_cache = HostTensor(r.cache, key_cache.shape()), value_cache = HostTensor(r.cache, value_cache.shape());
      const HostTensor key(DType::f16, Shape{1, c.kv_heads, c.head_size}), value = key;
      HostTensor slots(DType::i64, Shape{1});
      expect_refused([&] { reference::reshape_and_cache(key, value, slots, key_cache, value_cache, scales); },
                     std::string(which) + ": " + r.message);
      HostTensor starts(DType::i32, Shape{3});
      expect_refused([&] { reference::gather(key_cache, value_cache, in.block_tables, starts, DType::f16, scales); },
                     std::string(which) + ": " + r.message);
    }
    if (r.cache == DType::f16) {  // the softmax scale takes the rule's first part
      DecodeParams params;
      params.scale = r.value;
      expect_refused([&] { reference::decode_attention(in, {}, params); }, "scale: " + r.message);
    }
  }
}

// A view with a shape and a dtype but no buffer (refusals that come before the buffers' checks).
TensorView view(DType dtype, Shape shape) {
  TensorView v;
  v.dtype = dtype;
  v.shape = shape;
  return v;
}

class ScaleTest : public GpuTest {};

// The device paths refuse the same values before recording anything.
TEST_F(ScaleTest, DevicePathsRefuseTheSameValues) {
  for (const Refusal& r : refusals()) {
    SCOPED_TRACE(r.message);
    std::mt19937 rng(1);
    DecodeCase c = case_for(r.cache);
    const DecodeInputs in = make_decode_inputs(c, rng);
    DecodeParams params = default_params(c);
    params.k_scale = r.value;
    // Per-call values are checked when recording, before any view.
    const DecodePlan plan = DecodePlan::create(ctx(), decode_shape_of(in));
    expect_refused([&] { record_decode(ctx(), VK_NULL_HANDLE, plan, {}, params); }, "k_scale: " + r.message);
    expect_refused([&] { decode_attention(ctx(), in, {}, params); }, "k_scale: " + r.message);
    // Views with shapes and dtypes only: the scales are checked before any buffer is.
    const int64_t x = cache_pack_factor(r.cache);
    const TensorView key_cache = view(r.cache, Shape{4, 2, 64 / x, 16, x}), value_cache = view(r.cache, Shape{4, 2, 64, 16});
    CacheScales scales;
    scales.v_scale = r.value;
    ReshapeAndCacheViews rv{view(DType::f16, Shape{1, 2, 64}), view(DType::f16, Shape{1, 2, 64}),
                            view(DType::i64, Shape{1}), key_cache, value_cache, {}};
    expect_refused([&] { record_reshape_and_cache(ctx(), VK_NULL_HANDLE, rv, scales); }, "v_scale: " + r.message);
    GatherViews gv{key_cache, value_cache, view(DType::i32, Shape{1, 2}), view(DType::i32, Shape{2}),
                   view(DType::f16, Shape{3, 2, 64}), view(DType::f16, Shape{3, 2, 64}), {}};
    expect_refused([&] { record_gather(ctx(), VK_NULL_HANDLE, gv, scales); }, "v_scale: " + r.message);
  }
}

// k_scale and v_scale belong to fp8 caches: other caches read as they are on the device too,
// as the contract and the reference say.
TEST_F(ScaleTest, OtherCachesIgnoreTheFp8Scales) {
  for (DType cache : {DType::f32, DType::f16}) {
    DecodeCase c = case_for(cache);
    c.query_dtype = cache;
    std::mt19937 rng(5);
    const DecodeInputs in = make_decode_inputs(c, rng);
    DecodeParams params;
    params.k_scale = 2.0f;
    params.v_scale = 3.0f;
    const DecodeResult plain = reference::decode_attention(in);
    EXPECT_EQ(max_abs_diff(reference::decode_attention(in, {}, params).output, plain.output), 0.0);
    EXPECT_LE(max_abs_diff(decode_attention(ctx(), in, {}, params).output, plain.output), tolerance(cache, cache))
        << dtype_name(cache);
  }
}

}  // namespace
}  // namespace vkpaged::test
