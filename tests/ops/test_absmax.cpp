// SPDX-License-Identifier: Apache-2.0
// absmax on the GPU against the CPU reference (bit for bit), fp8_scale_from_amax, and the
// calibration path: absmax -> scale -> reshape_and_cache stores the largest value at the
// format's max without saturating anything else.
#include <cmath>
#include <limits>

#include "ops/cache_test_helpers.hpp"

namespace vkpaged::test {
namespace {

using namespace cache_helpers;

class AbsmaxTest : public GpuTest {
 protected:
  // max |x| of a device tensor; amax starts at `start`.
  float device_absmax(const TensorView& x, float start = 0.0f) {
    auto amax = ctx().create_buffer(16);
    ctx().upload(amax.view(0, 4), &start, 4);
    ctx().run_and_wait([&](VkCommandBuffer cmd) { record_absmax(ctx(), cmd, x, amax.view(0, 4)); });
    float out = 0;
    ctx().download(amax.view(0, 4), &out, 4);
    return out;
  }
  static uint32_t bits(float f) {
    uint32_t b;
    std::memcpy(&b, &f, 4);
    return b;
  }
};

TEST_F(AbsmaxTest, MatchesReferenceForEveryInputDtype) {
  // 150000 elements: more words than the 1024 workgroups cover in one stride.
  for (DType t : {DType::f32, DType::f16, DType::bf16}) {
    HostTensor x = random_tensor(t, Shape{3, 50000}, 91 + uint32_t(t));
    x.set(123457, -7.25);  // the largest magnitude is negative
    x.set(7, 1e-42);       // an f32 subnormal (0 in f16, kept in bf16)
    auto d = upload(ctx(), x);
    const float got = device_absmax(d.view);
    EXPECT_EQ(bits(got), bits(reference::absmax(x))) << dtype_name(t);
    EXPECT_EQ(got, 7.25f) << dtype_name(t);
  }
}

TEST_F(AbsmaxTest, OddCountOf16BitElementsIgnoresThePaddingHalf) {
  HostTensor padded = random_tensor(DType::f16, Shape{6}, 92);
  padded.set(5, 60000.0);  // beyond the 5-element tensor, in the last word
  auto d = upload(ctx(), padded);
  TensorView x = d.view;
  x.shape = Shape{5};
  x.memory.size = 12;  // the view covers the whole last word
  HostTensor five(DType::f16, Shape{5});
  std::memcpy(five.data(), padded.data(), 10);
  EXPECT_EQ(bits(device_absmax(x)), bits(reference::absmax(five)));
  x.memory.size = 10;
  expect_refused([&] { device_absmax(x); }, "x: buffer view of 10 bytes is too small, 12 bytes needed");
}

TEST_F(AbsmaxTest, CombinesWithTheStartingValueAndPropagatesNaN) {
  HostTensor x = random_tensor(DType::f32, Shape{100}, 93);
  auto d = upload(ctx(), x);
  EXPECT_EQ(device_absmax(d.view, 5.0f), 5.0f);
  x.set(40, std::numeric_limits<float>::quiet_NaN());
  auto with_nan = upload(ctx(), x);
  EXPECT_TRUE(std::isnan(device_absmax(with_nan.view)));
  EXPECT_TRUE(std::isnan(reference::absmax(x)));
}

TEST_F(AbsmaxTest, RefusesBadArguments) {
  auto d = upload(ctx(), HostTensor(DType::f32, Shape{8}));
  TensorView x = d.view;
  x.dtype = DType::i32;
  expect_refused([&] { device_absmax(x); }, "x: dtype i32");
  auto amax = ctx().create_buffer(16);
  expect_refused(
      [&] { ctx().run_and_wait([&](VkCommandBuffer cmd) { record_absmax(ctx(), cmd, d.view, amax.view(2, 4)); }); },
      "amax_out: offset 2");
}

TEST(Fp8ScaleTest, MapsAmaxToTheFormatMax) {
  EXPECT_EQ(fp8_scale_from_amax(448.0f, DType::fp8_e4m3), 1.0f);
  EXPECT_EQ(fp8_scale_from_amax(57344.0f * 4, DType::fp8_e5m2), 4.0f);
  const float zero_scale = fp8_scale_from_amax(0.0f, DType::fp8_e4m3);
  EXPECT_GT(zero_scale, 0.0f);
  EXPECT_TRUE(std::isnormal(zero_scale) && std::isfinite(1.0f / zero_scale));
  expect_refused([] { fp8_scale_from_amax(1.0f, DType::f16); }, "fp8_format: f16");
  expect_refused([] { fp8_scale_from_amax(-1.0f, DType::fp8_e4m3); }, "amax: -1");
  expect_refused([] { fp8_scale_from_amax(std::numeric_limits<float>::quiet_NaN(), DType::fp8_e5m2); }, "amax: nan");
  expect_refused([] { fp8_scale_from_amax(std::numeric_limits<float>::infinity(), DType::fp8_e5m2); }, "amax: inf");
}

TEST_F(AbsmaxTest, CalibratedScaleStoresTheLargestValueAtTheFormatMax) {
  const int64_t T = 16, Hkv = 1, D = 64, B = 16;
  HostTensor key = random_tensor(DType::f32, Shape{T, Hkv, D}, 94);
  key.set(333, -3.5);
  auto d_key = upload(ctx(), key);
  const float scale = fp8_scale_from_amax(device_absmax(d_key.view), DType::fp8_e4m3);
  HostTensor slots(DType::i64, Shape{T});
  for (int64_t i = 0; i < T; ++i) slots.as<int64_t>()[i] = i;
  HostTensor key_cache(DType::fp8_e4m3, key_cache_shape(DType::fp8_e4m3, 1, Hkv, D, B));
  HostTensor value_cache(DType::fp8_e4m3, value_cache_shape(1, Hkv, D, B));
  auto d_slots = upload(ctx(), slots), d_key_cache = upload(ctx(), key_cache),
       d_value_cache = upload(ctx(), value_cache);
  ReshapeAndCacheViews v{d_key.view, d_key.view, d_slots.view, d_key_cache.view, d_value_cache.view, {}};
  ctx().run_and_wait([&](VkCommandBuffer cmd) { record_reshape_and_cache(ctx(), cmd, v, {scale, scale}); });
  const HostTensor got = download(ctx(), d_value_cache);
  // value element (d, offset) of token t = 333 / 64 at d = 333 % 64.
  EXPECT_EQ(got.as<uint8_t>()[(333 % 64) * B + 333 / 64], 0xfe) << "-448 in e4m3";
  size_t saturated = 0;
  for (size_t i = 0; i < got.bytes(); ++i) saturated += (got.as<uint8_t>()[i] & 0x7f) == 0x7e;
  EXPECT_EQ(saturated, 1u);
}

}  // namespace
}  // namespace vkpaged::test
