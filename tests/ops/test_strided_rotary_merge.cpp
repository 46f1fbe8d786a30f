// SPDX-License-Identifier: Apache-2.0
// Strided views (TensorView::strides) in rotary_embedding and merge_attention: q and k of one
// fused projection rotated in place (the values between them untouched), and the cascade merge
// over head-major states into part of each row of a larger buffer, or in place of one of its
// inputs. Each gives the contiguous run's bits, with every byte outside the written rows unchanged.
#include <gtest/gtest.h>

#include <limits>
#include <random>
#include <string>
#include <vector>

#include "ops/cache_test_helpers.hpp"
#include "support/strided_views.hpp"
#include "vkpaged/merge.hpp"
#include "vkpaged/rotary.hpp"

namespace vkpaged::test {
namespace {

using namespace cache_helpers;

class StridedRotaryTest : public GpuTest, public ::testing::WithParamInterface<DType> {};

TEST_P(StridedRotaryTest, QueriesAndKeysOfOneProjectionInPlace) {
  const DType dt = GetParam();
  constexpr int64_t T = 9, H = 6, Hkv = 2, D = 64, max_position = 40;
  std::mt19937 rng(uint32_t(dt) + 7);
  const Shape q_shape{T, H, D}, k_shape{T, Hkv, D};
  const HostTensor query = random_tensor(dt, q_shape, rng()), key = random_tensor(dt, k_shape, rng()),
                   value = random_tensor(dt, k_shape, rng());
  HostTensor positions(DType::i32, Shape{T});
  for (int64_t t = 0; t < T; ++t) positions.as<int32_t>()[t] = int32_t(rng() % max_position);
  const HostTensor cos_sin = rotary_cos_sin_cache(uint32_t(max_position), uint32_t(D), 10000.0, dt);
  DeviceTensor d_positions = upload(ctx(), positions), d_cos_sin = upload(ctx(), cos_sin);

  for (const RotaryStyle style : {RotaryStyle::neox, RotaryStyle::gptj}) {
    SCOPED_TRACE(std::string(rotary_style_name(style)) + " " + std::string(dtype_name(dt)));
    DeviceTensor cq = upload(ctx(), query), ck = upload(ctx(), key);
    ctx().run_and_wait([&](VkCommandBuffer cmd) {
      record_rotary_embedding(ctx(), cmd, {cq.view, ck.view, d_positions.view, d_cos_sin.view, {}, style});
    });

    const FusedProjection f = fused_projection(T, H, Hkv, D, dt, 20);
    DeviceImage fused(ctx(), f.bytes + 4);
    fused.put(f.q, query);
    fused.put(f.k, key);
    fused.put(f.v, value);
    fused.upload();
    const std::vector<uint8_t> before = fused.outside({{f.q, dt, q_shape}, {f.k, dt, k_shape}});
    ctx().run_and_wait([&](VkCommandBuffer cmd) {
      record_rotary_embedding(ctx(), cmd,
                              {fused.view(f.q, dt, q_shape), fused.view(f.k, dt, k_shape), d_positions.view,
                               d_cos_sin.view, {}, style});
    });
    fused.download();
    EXPECT_TRUE(same_bits(fused.get(f.q, dt, q_shape), download(ctx(), cq))) << "queries";
    EXPECT_TRUE(same_bits(fused.get(f.k, dt, k_shape), download(ctx(), ck))) << "keys";
    EXPECT_TRUE(fused.outside({{f.q, dt, q_shape}, {f.k, dt, k_shape}}) == before) << "values or padding changed";
  }
}

INSTANTIATE_TEST_SUITE_P(Dtypes, StridedRotaryTest, ::testing::Values(DType::f32, DType::f16, DType::bf16),
                         [](const auto& info) { return std::string(dtype_name(info.param)); });

class StridedMergeTest : public GpuTest, public ::testing::WithParamInterface<DType> {};

// States with LSEs that favour either side, -inf (an empty side) on some rows.
HostTensor lse_of(std::mt19937& rng, int64_t S, int64_t H) {
  HostTensor l(DType::f32, Shape{S, H});
  for (int64_t i = 0; i < S * H; ++i)
    l.as<float>()[i] = i % 7 == 3 ? -std::numeric_limits<float>::infinity() : float(int(rng() % 400) - 200) / 50.0f;
  return l;
}

TEST_P(StridedMergeTest, HeadMajorStatesIntoASlice) {
  const DType dt = GetParam();
  constexpr int64_t S = 5, H = 3, D = 48;
  const Shape shape{S, H, D};
  std::mt19937 rng(uint32_t(dt) + 3);
  const HostTensor a = random_tensor(dt, shape, rng()), b = random_tensor(dt, shape, rng());
  const HostTensor lse_a = lse_of(rng, S, H), lse_b = lse_of(rng, S, H);
  DeviceTensor d_lse_a = upload(ctx(), lse_a), d_lse_b = upload(ctx(), lse_b);

  // Contiguous.
  DeviceTensor ca = upload(ctx(), a), cb = upload(ctx(), b), cout = upload(ctx(), HostTensor(dt, shape));
  DeviceTensor clse = upload(ctx(), HostTensor(DType::f32, Shape{S, H}));
  ctx().run_and_wait([&](VkCommandBuffer cmd) {
    record_merge_attention(ctx(), cmd, {ca.view, d_lse_a.view, cb.view, d_lse_b.view, cout.view, clse.view});
  });
  const HostTensor want = download(ctx(), cout), want_lse = download(ctx(), clse);

  // a and b head-major ([H, S, D]) in one buffer, the output in part of each row of another.
  const size_t e = dtype_size(dt);
  const Slice sa{4, D, S * D}, sb{4 + size_t(S * H * D) * e, D, S * D};
  DeviceImage states(ctx(), 4 + 2 * size_t(S * H * D) * e);
  states.put(sa, a);
  states.put(sb, b);
  states.upload();
  const Slice so{size_t(D) * e, (H + 2) * D, D};
  DeviceImage out(ctx(), size_t(S * (H + 2) * D) * e, 0x5a);
  const std::vector<uint8_t> before = out.outside({{so, dt, shape}});
  DeviceTensor slse = upload(ctx(), HostTensor(DType::f32, Shape{S, H}));
  ctx().run_and_wait([&](VkCommandBuffer cmd) {
    record_merge_attention(ctx(), cmd, {states.view(sa, dt, shape), d_lse_a.view, states.view(sb, dt, shape),
                                        d_lse_b.view, out.view(so, dt, shape), slse.view});
  });
  out.download();
  EXPECT_TRUE(same_bits(out.get(so, dt, shape), want)) << "output";
  EXPECT_TRUE(same_bits(download(ctx(), slse), want_lse)) << "lse";
  EXPECT_TRUE(out.outside({{so, dt, shape}}) == before) << "bytes outside the output rows changed";

  // In place of output_b's strided view itself: each row is read before it is written.
  ctx().run_and_wait([&](VkCommandBuffer cmd) {
    record_merge_attention(ctx(), cmd, {states.view(sa, dt, shape), d_lse_a.view, states.view(sb, dt, shape),
                                        d_lse_b.view, states.view(sb, dt, shape), {}});
  });
  states.download();
  EXPECT_TRUE(same_bits(states.get(sb, dt, shape), want)) << "output in place of output_b";
  EXPECT_TRUE(same_bits(states.get(sa, dt, shape), a)) << "output_a";
}

INSTANTIATE_TEST_SUITE_P(Dtypes, StridedMergeTest, ::testing::Values(DType::f32, DType::f16, DType::bf16),
                         [](const auto& info) { return std::string(dtype_name(info.param)); });

}  // namespace
}  // namespace vkpaged::test
