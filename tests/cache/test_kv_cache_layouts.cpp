// SPDX-License-Identifier: Apache-2.0
// KvCache in each layout (vllm, nhd, hnd): its views' shapes, its per-layer cache writes (with
// and without rotary) against the CPU references byte for byte, copies and swaps, and the
// DecodeShape it makes (which decode plans, in every layout).
#include <gtest/gtest.h>

#include <cstring>
#include <numeric>
#include <random>
#include <utility>
#include <vector>

#include "ops/cache_test_helpers.hpp"
#include "support/buffer_test.hpp"
#include "support/expect_error.hpp"
#include "support/kv_cache_shapes.hpp"
#include "support/test_context.hpp"
#include "vkpaged/kv_cache.hpp"
#include "vkpaged/reference.hpp"
#include "vkpaged/utilities.hpp"

namespace vkpaged::test {
namespace {

using cache_helpers::random_tensor;

class KvCacheLayoutTest : public BufferTest, public ::testing::WithParamInterface<KvLayout> {
 protected:
  KvCacheShape shape(DType dtype) {
    KvCacheShape s = shape_of(2, 2, 64, 8, dtype);
    s.layout = GetParam();
    return s;
  }
  // Fills both layers' pools with reproducible values (layer l's keys from key_seed + l, its
  // values from value_seed + l) and returns them as stored: keys, then values, by layer.
  std::pair<std::vector<HostTensor>, std::vector<HostTensor>> fill_layers(const KvCache& cache, uint32_t key_seed,
                                                                          uint32_t value_seed) {
    ctx().run_and_wait([&](VkCommandBuffer cmd) {
      for (uint32_t l = 0; l < 2; ++l) {
        record_fill_random(ctx(), cmd, cache.key_cache(l), key_seed + l);
        record_fill_random(ctx(), cmd, cache.value_cache(l), value_seed + l);
      }
    });
    std::vector<HostTensor> keys, values;
    for (uint32_t l = 0; l < 2; ++l) {
      keys.push_back(fetch(cache.key_cache(l)));
      values.push_back(fetch(cache.value_cache(l)));
    }
    return {std::move(keys), std::move(values)};
  }
};

TEST_P(KvCacheLayoutTest, ViewsHaveTheLayoutsShapesAndTheSameSizes) {
  const KvLayout layout = GetParam();
  KvCacheOptions o;
  o.num_blocks = 6;
  o.num_host_blocks = 3;
  const KvCache cache(ctx(), shape(DType::bf16), o);
  const Shape want = layout == KvLayout::nhd   ? Shape{6, 8, 2, 64}
                     : layout == KvLayout::hnd ? Shape{6, 2, 8, 64}
                                               : Shape{6, 2, 64, 8};
  EXPECT_EQ(cache.value_cache(1).shape, want);
  EXPECT_EQ(cache.key_cache(1).shape, layout == KvLayout::vllm ? (Shape{6, 2, 8, 8, 8}) : want);
  EXPECT_EQ(cache.host_key_cache(0).shape[0], 3);
  EXPECT_EQ(cache.sizing().block_bytes, 2u * 64 * 8 * 2) << "a block costs the same in every layout";
  for (const auto& l : cache.layers()) EXPECT_EQ(l.layout, layout);
  for (const auto& l : cache.host_layers()) EXPECT_EQ(l.layout, layout);
  EXPECT_EQ(cache.shape().layout, layout);
}

TEST_P(KvCacheLayoutTest, PerLayerCacheWritesMatchTheReference) {
  const KvLayout layout = GetParam();
  for (DType dtype : {DType::f16, DType::fp8_e4m3}) {
    SCOPED_TRACE(std::string(dtype_name(dtype)));
    KvCacheOptions o;
    o.num_blocks = 5;
    const KvCache cache(ctx(), shape(dtype), o);
    auto [key_pools, value_pools] = fill_layers(cache, 10, 20);
    const int64_t T = 9;
    const HostTensor key = random_tensor(DType::f16, Shape{T, 2, 64}, 1);
    const HostTensor value = random_tensor(DType::f16, Shape{T, 2, 64}, 2);
    const HostTensor query = random_tensor(DType::f16, Shape{T, 4, 64}, 3);
    HostTensor slots(DType::i64, Shape{T}), positions(DType::i64, Shape{T});
    const int64_t slot_values[] = {39, 0, -1, 17, 8, 9, 23, 31, 2};  // the last slot, a padding
    std::copy(std::begin(slot_values), std::end(slot_values), slots.as<int64_t>());
    std::iota(positions.as<int64_t>(), positions.as<int64_t>() + T, 100);
    const HostTensor cos_sin = rotary_cos_sin_cache(128, 64);
    const CacheScales scales{0.5f, 0.25f};
    const NewTokens plain{put(key), put(value), put(slots), {}};
    const NewTokens rotated{put(key), put(value), put(slots), {}};
    const RotaryInputs rotary{put(query), put(positions), put(cos_sin), RotaryStyle::gptj};
    ctx().run_and_wait([&](VkCommandBuffer cmd) {
      cache.record_reshape_and_cache(cmd, 1, plain, scales);
      cache.record_reshape_and_cache(cmd, 0, rotated, rotary, scales);
    });

    reference::reshape_and_cache(key, value, slots, key_pools[1], value_pools[1], scales, layout);
    EXPECT_EQ(std::memcmp(fetch(cache.key_cache(1)).data(), key_pools[1].data(), key_pools[1].bytes()), 0);
    EXPECT_EQ(std::memcmp(fetch(cache.value_cache(1)).data(), value_pools[1].data(), value_pools[1].bytes()), 0);
    // Layer 0 holds what reshape_and_cache stores from the keys the GPU rotated; those are the
    // reference's rotation to within an f16 step.
    const HostTensor gpu_key = fetch(rotated.key);
    reference::reshape_and_cache(gpu_key, value, slots, key_pools[0], value_pools[0], scales, layout);
    EXPECT_EQ(std::memcmp(fetch(cache.key_cache(0)).data(), key_pools[0].data(), key_pools[0].bytes()), 0);
    EXPECT_EQ(std::memcmp(fetch(cache.value_cache(0)).data(), value_pools[0].data(), value_pools[0].bytes()), 0);
    HostTensor want_q = query, want_k = key;
    reference::rotary_embedding(want_q, want_k, positions, cos_sin, RotaryStyle::gptj);
    for (int64_t i = 0; i < want_k.numel(); ++i) ASSERT_NEAR(gpu_key.get(size_t(i)), want_k.get(size_t(i)), 2e-3) << i;

    ctx().run_and_wait([&](VkCommandBuffer cmd) {
      expect_refused([&] { cache.record_reshape_and_cache(cmd, 2, plain, scales); }, ErrorCode::invalid_argument,
                     {"record_reshape_and_cache", "layer 2"});
    });
  }
}

TEST_P(KvCacheLayoutTest, CopyAndSwapMoveBlocksOfEveryLayer) {
  const KvLayout layout = GetParam();
  KvCacheOptions o;
  o.num_blocks = 6;
  o.num_host_blocks = 2;
  const KvCache cache(ctx(), shape(DType::f32), o);
  auto [keys, values] = fill_layers(cache, 30, 40);
  const std::vector<BlockCopy> copies = {{0, 4}, {5, 1}}, out = {{4, 1}, {2, 0}};
  ctx().run_and_wait([&](VkCommandBuffer cmd) {
    cache.record_copy_blocks(cmd, copies);
    record_compute_barrier(ctx(), cmd);  // (transfer to transfer too)
    cache.record_swap_out(cmd, out);
  });
  for (uint32_t l = 0; l < 2; ++l) {
    reference::copy_blocks(keys[l], values[l], copies, layout);
    EXPECT_EQ(std::memcmp(fetch(cache.key_cache(l)).data(), keys[l].data(), keys[l].bytes()), 0) << "layer " << l;
    HostTensor host_key(DType::f32, cache.host_key_cache(l).shape),
        host_value(DType::f32, cache.host_value_cache(l).shape);
    reference::swap_blocks(keys[l], values[l], host_key, host_value, out, layout);
    EXPECT_EQ(std::memcmp(fetch(cache.host_key_cache(l)).data(), host_key.data(), host_key.bytes()), 0)
        << "layer " << l;
    EXPECT_EQ(std::memcmp(fetch(cache.host_value_cache(l)).data(), host_value.data(), host_value.bytes()), 0)
        << "layer " << l;
  }
}

TEST_P(KvCacheLayoutTest, DecodeShapeComesFromTheCache) {
  const KvLayout layout = GetParam();
  KvCacheOptions o;
  o.num_blocks = 7;
  const KvCache cache(ctx(), shape(DType::fp8_e5m2), o);
  DecodeShape batch;
  batch.num_seqs = 3;
  batch.num_heads = 8;
  batch.max_blocks_per_seq = 4;
  batch.query_dtype = DType::bf16;
  batch.num_kv_heads = 99;  // the cache's own values win
  batch.lse = true;
  const DecodeShape s = cache.decode_shape(batch);
  EXPECT_EQ(s.num_seqs, 3u);
  EXPECT_EQ(s.num_heads, 8u);
  EXPECT_EQ(s.max_blocks_per_seq, 4u);
  EXPECT_EQ(s.query_dtype, DType::bf16);
  EXPECT_TRUE(s.lse);
  EXPECT_EQ(s.num_kv_heads, 2u);
  EXPECT_EQ(s.head_size, 64u);
  EXPECT_EQ(s.block_size, 8u);
  EXPECT_EQ(s.num_blocks, 7u);
  EXPECT_EQ(s.cache_dtype, DType::fp8_e5m2);
  EXPECT_EQ(s.kv_layout, layout);
  EXPECT_NO_THROW(DecodePlan::create(ctx(), s));  // the scalar kernel reads every layout
}

INSTANTIATE_TEST_SUITE_P(Layouts, KvCacheLayoutTest, ::testing::Values(KvLayout::vllm, KvLayout::nhd, KvLayout::hnd),
                         [](const auto& info) { return std::string(kv_layout_name(info.param)); });

TEST(KvCacheLayoutSizing, RefusesUnknownLayoutsAndDecodeShapesNamingThem) {
  KvCacheShape s = shape_of(1, 2, 64, 16, DType::f16);
  s.layout = KvLayout(3);
  expect_refused([&] { KvCache::validate(s); }, "layout 3 is not a cache layout (vllm, nhd, hnd)");
  DecodeShape d;
  d.num_seqs = 1;
  d.num_heads = d.num_kv_heads = 1;
  d.head_size = 64;
  d.block_size = 16;
  d.num_blocks = 1;
  d.max_blocks_per_seq = 1;
  d.kv_layout = KvLayout(9);
  expect_refused([&] { DecodePlan::create(shared_context(), d); }, "kv_layout: 9 is not a cache layout");
}

}  // namespace
}  // namespace vkpaged::test
