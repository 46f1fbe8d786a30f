// SPDX-License-Identifier: Apache-2.0
// Strided views (TensorView::strides) in the cache operations, rotary embedding and the cascade
// merge, as an engine passes them: q, k and v slices of one fused projection [T, (H + 2 Hkv) * D]
// (reshape_and_cache, its fused rotary form, rotary_embedding rotating q and k in place in one
// buffer), gather writing into part of each row of one [T, 2 Hkv D] buffer, merge_attention over
// head-major states into a slice. Each against the CPU reference bit for bit (the cache
// operations are exact) or the contiguous run's bits (rotary, merge), with every byte outside the
// rows a call may write unchanged. Every layout, input dtype and cache dtype.
#include <gtest/gtest.h>

#include <algorithm>
#include <cstring>
#include <iterator>
#include <numeric>
#include <random>
#include <string>
#include <vector>

#include "ops/cache_test_helpers.hpp"
#include "support/strided_views.hpp"
#include "vkpaged/kv_cache.hpp"
#include "vkpaged/merge.hpp"
#include "vkpaged/rotary.hpp"

namespace vkpaged::test {
namespace {

using namespace cache_helpers;

struct WriteCase {
  DType input;
  DType cache;
  KvLayout layout;
};

std::string write_case_name(const ::testing::TestParamInfo<WriteCase>& info) {
  return std::string(dtype_name(info.param.input)) + "_" + std::string(dtype_name(info.param.cache)) + "_" +
         std::string(kv_layout_name(info.param.layout));
}

constexpr int64_t kTokens = 7, kHeads = 4, kKvHeads = 2, kHeadSize = 32, kBlocks = 6, kBlockSize = 4;

// Distinct slots over the cache, two of them padding (-1).
HostTensor slots_of(std::mt19937& rng) {
  std::vector<int64_t> all(kBlocks * kBlockSize);
  std::iota(all.begin(), all.end(), 0);
  std::shuffle(all.begin(), all.end(), rng);
  HostTensor slots(DType::i64, Shape{kTokens});
  for (int64_t t = 0; t < kTokens; ++t) slots.as<int64_t>()[t] = t == 2 || t == 5 ? -1 : all[size_t(t)];
  return slots;
}

HostTensor positions_of(std::mt19937& rng, int64_t max_position) {
  HostTensor p(DType::i64, Shape{kTokens});
  for (int64_t t = 0; t < kTokens; ++t) p.as<int64_t>()[t] = int64_t(rng() % uint32_t(max_position));
  return p;
}

CacheScales scales_of(DType cache) { return is_fp8_dtype(cache) ? CacheScales{0.03f, 0.02f} : CacheScales{}; }

class StridedCacheWriteTest : public GpuTest, public ::testing::WithParamInterface<WriteCase> {};

// reshape_and_cache with the new keys and values slices of a fused projection: the caches the
// reference writes from the same rows, bit for bit; the projection unchanged.
TEST_P(StridedCacheWriteTest, ReshapeAndCacheFromTheFusedProjection) {
  const WriteCase c = GetParam();
  std::mt19937 rng(uint32_t(int(c.input) * 31 + int(c.cache) * 7 + int(c.layout)));
  const Shape kv_shape{kTokens, kKvHeads, kHeadSize}, q_shape{kTokens, kHeads, kHeadSize};
  const HostTensor key = random_tensor(c.input, kv_shape, rng()), value = random_tensor(c.input, kv_shape, rng());
  const HostTensor slots = slots_of(rng);
  const HostTensor key_cache =
      random_tensor(c.cache, key_cache_shape(c.layout, c.cache, kBlocks, kKvHeads, kHeadSize, kBlockSize), rng());
  const HostTensor value_cache =
      random_tensor(c.cache, value_cache_shape(c.layout, kBlocks, kKvHeads, kHeadSize, kBlockSize), rng());

  const FusedProjection f = fused_projection(kTokens, kHeads, kKvHeads, kHeadSize, c.input, 12);
  DeviceImage fused(ctx(), f.bytes);
  fused.put(f.q, random_tensor(c.input, q_shape, rng()));
  fused.put(f.k, key);
  fused.put(f.v, value);
  fused.upload();
  const std::vector<uint8_t> before = fused.bytes();
  DeviceTensor d_slots = upload(ctx(), slots), d_key_cache = upload(ctx(), key_cache),
               d_value_cache = upload(ctx(), value_cache);
  const ReshapeAndCacheViews views{fused.view(f.k, c.input, kv_shape), fused.view(f.v, c.input, kv_shape),
                                   d_slots.view,                       d_key_cache.view,
                                   d_value_cache.view,                 {},
                                   c.layout};
  ctx().run_and_wait([&](VkCommandBuffer cmd) { record_reshape_and_cache(ctx(), cmd, views, scales_of(c.cache)); });

  HostTensor want_key_cache = key_cache, want_value_cache = value_cache;
  reference::reshape_and_cache(key, value, slots, want_key_cache, want_value_cache, scales_of(c.cache), c.layout);
  EXPECT_TRUE(bytes_equal(download(ctx(), d_key_cache), want_key_cache)) << "key cache";
  EXPECT_TRUE(bytes_equal(download(ctx(), d_value_cache), want_value_cache)) << "value cache";
  fused.download();
  EXPECT_TRUE(fused.bytes() == before) << "reshape_and_cache wrote into the projection";
}

// The fused rotary form over q, k and v of one projection: q and k rotated in place as the
// contiguous run rotates them, the caches its bits, the values and every other byte unchanged.
TEST_P(StridedCacheWriteTest, ReshapeAndCacheRotaryInPlaceInTheFusedProjection) {
  const WriteCase c = GetParam();
  std::mt19937 rng(uint32_t(int(c.input) * 17 + int(c.cache) * 5 + int(c.layout) + 100));
  const Shape kv_shape{kTokens, kKvHeads, kHeadSize}, q_shape{kTokens, kHeads, kHeadSize};
  const HostTensor query = random_tensor(c.input, q_shape, rng()), key = random_tensor(c.input, kv_shape, rng()),
                   value = random_tensor(c.input, kv_shape, rng());
  const int64_t max_position = 32;
  const HostTensor slots = slots_of(rng), positions = positions_of(rng, max_position);
  const HostTensor cos_sin = rotary_cos_sin_cache(uint32_t(max_position), 16, 10000.0, DType::f32);  // partial rotary
  const HostTensor key_cache =
      random_tensor(c.cache, key_cache_shape(c.layout, c.cache, kBlocks, kKvHeads, kHeadSize, kBlockSize), rng());
  const HostTensor value_cache =
      random_tensor(c.cache, value_cache_shape(c.layout, kBlocks, kKvHeads, kHeadSize, kBlockSize), rng());
  DeviceTensor d_slots = upload(ctx(), slots), d_positions = upload(ctx(), positions), d_cos_sin = upload(ctx(), cos_sin);

  // Contiguous run: its own q, k, v and caches.
  DeviceTensor cq = upload(ctx(), query), ck = upload(ctx(), key), cv = upload(ctx(), value);
  DeviceTensor c_key_cache = upload(ctx(), key_cache), c_value_cache = upload(ctx(), value_cache);
  ctx().run_and_wait([&](VkCommandBuffer cmd) {
    record_reshape_and_cache_rotary(
        ctx(), cmd, {ck.view, cv.view, d_slots.view, c_key_cache.view, c_value_cache.view, {}, c.layout},
        {cq.view, d_positions.view, d_cos_sin.view, RotaryStyle::neox}, scales_of(c.cache));
  });

  // Strided run: q, k, v of one projection.
  const FusedProjection f = fused_projection(kTokens, kHeads, kKvHeads, kHeadSize, c.input, 4);
  DeviceImage fused(ctx(), f.bytes + 8);
  fused.put(f.q, query);
  fused.put(f.k, key);
  fused.put(f.v, value);
  fused.upload();
  const std::vector<uint8_t> before = fused.outside({{f.q, c.input, q_shape}, {f.k, c.input, kv_shape}});
  DeviceTensor s_key_cache = upload(ctx(), key_cache), s_value_cache = upload(ctx(), value_cache);
  ctx().run_and_wait([&](VkCommandBuffer cmd) {
    record_reshape_and_cache_rotary(ctx(), cmd,
                                    {fused.view(f.k, c.input, kv_shape), fused.view(f.v, c.input, kv_shape),
                                     d_slots.view, s_key_cache.view, s_value_cache.view, {}, c.layout},
                                    {fused.view(f.q, c.input, q_shape), d_positions.view, d_cos_sin.view,
                                     RotaryStyle::neox},
                                    scales_of(c.cache));
  });
  fused.download();
  EXPECT_TRUE(same_bits(fused.get(f.q, c.input, q_shape), download(ctx(), cq))) << "queries";
  EXPECT_TRUE(same_bits(fused.get(f.k, c.input, kv_shape), download(ctx(), ck))) << "keys";
  EXPECT_TRUE(same_bits(fused.get(f.v, c.input, kv_shape), value)) << "values";
  EXPECT_TRUE(bytes_equal(download(ctx(), s_key_cache), download(ctx(), c_key_cache))) << "key cache";
  EXPECT_TRUE(bytes_equal(download(ctx(), s_value_cache), download(ctx(), c_value_cache))) << "value cache";
  // Outside the q and k rows (the values, the offset, the tail), nothing changed.
  EXPECT_TRUE(fused.outside({{f.q, c.input, q_shape}, {f.k, c.input, kv_shape}}) == before)
      << "bytes outside the queries' and keys' rows changed";
}

// gather into key_out and value_out interleaved in one [T, 2 Hkv D] buffer (each token's keys,
// then its values, 8 bytes in): the reference's rows bit for bit, nothing else written.
TEST_P(StridedCacheWriteTest, GatherIntoSlicesOfOneBuffer) {
  const WriteCase c = GetParam();
  std::mt19937 rng(uint32_t(int(c.input) * 3 + int(c.cache) * 11 + int(c.layout) + 200));
  const HostTensor key_cache =
      random_tensor(c.cache, key_cache_shape(c.layout, c.cache, kBlocks, kKvHeads, kHeadSize, kBlockSize), rng());
  const HostTensor value_cache =
      random_tensor(c.cache, value_cache_shape(c.layout, kBlocks, kKvHeads, kHeadSize, kBlockSize), rng());
  // Two sequences of 5 and 9 positions over shuffled blocks.
  HostTensor tables(DType::i32, Shape{2, 3});
  const int32_t ids[] = {4, 1, 5, 0, 3, 2};
  std::copy(std::begin(ids), std::end(ids), tables.as<int32_t>());
  HostTensor starts(DType::i32, Shape{3});
  starts.as<int32_t>()[0] = 0;
  starts.as<int32_t>()[1] = 5;
  starts.as<int32_t>()[2] = 14;
  const int64_t rows = 14;
  const Shape out_shape{rows, kKvHeads, kHeadSize};
  const reference::GatherResult want =
      reference::gather(key_cache, value_cache, tables, starts, c.input, scales_of(c.cache), c.layout);

  const int64_t width = 2 * kKvHeads * kHeadSize;
  const Slice keys{8, width, kHeadSize}, values{8 + size_t(kKvHeads * kHeadSize) * dtype_size(c.input), width, kHeadSize};
  DeviceImage out(ctx(), 8 + size_t(rows * width) * dtype_size(c.input) + 8, 0x5a);
  const std::vector<uint8_t> before = out.outside({{keys, c.input, out_shape}, {values, c.input, out_shape}});
  DeviceTensor d_key_cache = upload(ctx(), key_cache), d_value_cache = upload(ctx(), value_cache);
  DeviceTensor d_tables = upload(ctx(), tables), d_starts = upload(ctx(), starts);
  const GatherViews views{d_key_cache.view, d_value_cache.view, d_tables.view, d_starts.view,
                          out.view(keys, c.input, out_shape), out.view(values, c.input, out_shape), {}, c.layout};
  ctx().run_and_wait([&](VkCommandBuffer cmd) { record_gather(ctx(), cmd, views, scales_of(c.cache)); });
  out.download();
  EXPECT_TRUE(same_bits(out.get(keys, c.input, out_shape), want.key)) << "key_out";
  EXPECT_TRUE(same_bits(out.get(values, c.input, out_shape), want.value)) << "value_out";
  EXPECT_TRUE(out.outside({{keys, c.input, out_shape}, {values, c.input, out_shape}}) == before)
      << "bytes outside the output rows changed";
}

// KvCache::record_reshape_and_cache (NewTokens and RotaryInputs, the docs' engine step) with q,
// k and v of one projection: the cache's pools and the rotated queries those of the same call on
// contiguous views, the values and every other byte of the projection unchanged.
TEST_P(StridedCacheWriteTest, KvCacheNewTokensFromTheFusedProjection) {
  const WriteCase c = GetParam();
  std::mt19937 rng(uint32_t(int(c.input) * 13 + int(c.cache) * 3 + int(c.layout) + 300));
  const Shape kv_shape{kTokens, kKvHeads, kHeadSize}, q_shape{kTokens, kHeads, kHeadSize};
  const HostTensor query = random_tensor(c.input, q_shape, rng()), key = random_tensor(c.input, kv_shape, rng()),
                   value = random_tensor(c.input, kv_shape, rng());
  const int64_t max_position = 32;
  const HostTensor slots = slots_of(rng), positions = positions_of(rng, max_position);
  const HostTensor cos_sin = rotary_cos_sin_cache(uint32_t(max_position), uint32_t(kHeadSize), 10000.0, DType::f32);
  DeviceTensor d_slots = upload(ctx(), slots), d_positions = upload(ctx(), positions), d_cos_sin = upload(ctx(), cos_sin);
  KvCacheShape shape;
  shape.num_kv_heads = uint32_t(kKvHeads);
  shape.head_size = uint32_t(kHeadSize);
  shape.block_size = uint32_t(kBlockSize);
  shape.dtype = c.cache;
  shape.layout = c.layout;
  KvCacheOptions options;
  options.num_blocks = uint32_t(kBlocks);
  // Both caches start from the same bytes.
  const HostTensor key_pool = random_tensor(c.cache, key_cache_shape(c.layout, c.cache, kBlocks, kKvHeads, kHeadSize, kBlockSize), rng());
  const HostTensor value_pool = random_tensor(c.cache, value_cache_shape(c.layout, kBlocks, kKvHeads, kHeadSize, kBlockSize), rng());
  auto make_cache = [&] {
    KvCache cache(ctx(), shape, options);
    ctx().upload(cache.key_cache(0).memory, key_pool.data(), key_pool.bytes());
    ctx().upload(cache.value_cache(0).memory, value_pool.data(), value_pool.bytes());
    return cache;
  };
  auto pool = [&](const TensorView& t) {
    std::vector<uint8_t> bytes(t.memory.size);
    ctx().download(t.memory, bytes.data(), bytes.size());
    return bytes;
  };

  const KvCache contiguous_cache = make_cache();
  DeviceTensor cq = upload(ctx(), query), ck = upload(ctx(), key), cv = upload(ctx(), value);
  ctx().run_and_wait([&](VkCommandBuffer cmd) {
    contiguous_cache.record_reshape_and_cache(cmd, 0, NewTokens{ck.view, cv.view, d_slots.view, {}},
                                              RotaryInputs{cq.view, d_positions.view, d_cos_sin.view, RotaryStyle::gptj},
                                              scales_of(c.cache));
  });

  const KvCache strided_cache = make_cache();
  const FusedProjection f = fused_projection(kTokens, kHeads, kKvHeads, kHeadSize, c.input, 8);
  DeviceImage fused(ctx(), f.bytes + 12);
  fused.put(f.q, query);
  fused.put(f.k, key);
  fused.put(f.v, value);
  fused.upload();
  const std::vector<uint8_t> before = fused.outside({{f.q, c.input, q_shape}, {f.k, c.input, kv_shape}});
  ctx().run_and_wait([&](VkCommandBuffer cmd) {
    strided_cache.record_reshape_and_cache(
        cmd, 0, NewTokens{fused.view(f.k, c.input, kv_shape), fused.view(f.v, c.input, kv_shape), d_slots.view, {}},
        RotaryInputs{fused.view(f.q, c.input, q_shape), d_positions.view, d_cos_sin.view, RotaryStyle::gptj},
        scales_of(c.cache));
  });
  fused.download();
  EXPECT_TRUE(pool(strided_cache.key_cache(0)) == pool(contiguous_cache.key_cache(0))) << "key pool";
  EXPECT_TRUE(pool(strided_cache.value_cache(0)) == pool(contiguous_cache.value_cache(0))) << "value pool";
  EXPECT_NE(std::memcmp(pool(strided_cache.key_cache(0)).data(), key_pool.data(), key_pool.bytes()), 0)
      << "the call wrote no key";
  EXPECT_TRUE(same_bits(fused.get(f.q, c.input, q_shape), download(ctx(), cq))) << "queries";
  EXPECT_TRUE(same_bits(fused.get(f.k, c.input, kv_shape), download(ctx(), ck))) << "keys";
  EXPECT_TRUE(fused.outside({{f.q, c.input, q_shape}, {f.k, c.input, kv_shape}}) == before)
      << "bytes outside the queries' and keys' rows changed";
}

INSTANTIATE_TEST_SUITE_P(
    DtypesAndLayouts, StridedCacheWriteTest,
    ::testing::Values(WriteCase{DType::f16, DType::f16, KvLayout::vllm}, WriteCase{DType::bf16, DType::bf16, KvLayout::nhd},
                      WriteCase{DType::f32, DType::f32, KvLayout::hnd}, WriteCase{DType::f16, DType::fp8_e4m3, KvLayout::hnd},
                      WriteCase{DType::bf16, DType::fp8_e5m2, KvLayout::vllm},
                      WriteCase{DType::f32, DType::f16, KvLayout::nhd}),
    write_case_name);

}  // namespace
}  // namespace vkpaged::test
