// SPDX-License-Identifier: Apache-2.0
// KvCache holding MLA pools on the GPU: both forms in every dtype the issue names (f16, bf16,
// fp8 E4M3 with a scale), their views, new tokens written through the cache (with and without
// RoPE) bit for bit as the reference writes them, whole blocks copied and swapped out and back,
// and the refusals between the two kinds of cache.
#include <gtest/gtest.h>

#include <cstring>
#include <limits>
#include <random>
#include <string>

#include "ops/cache_test_helpers.hpp"
#include "support/kv_cache_shapes.hpp"
#include "vkpaged/kv_cache.hpp"
#include "vkpaged/utilities.hpp"

namespace vkpaged::test {
namespace {

using namespace cache_helpers;

KvCacheShape mla_shape(KvCacheKind kind, DType dtype) {
  KvCacheShape s = shape_of(2, 1, 64, 16, dtype);  // Dv 64, R 32: small rows, both multiples of x = 16
  s.layout = KvLayout::nhd;
  s.kind = kind;
  s.rope_head_size = 32;
  return s;
}

std::vector<TensorView> pools_of(const MlaCacheViews& v) {
  std::vector<TensorView> out;
  for (const TensorView* t : {&v.mla_cache, &v.ckv_cache, &v.kpe_cache})
    if (!t->empty()) out.push_back(*t);
  return out;
}

class KvCacheMlaTest : public GpuTest {
 protected:
  HostTensor fetch(const TensorView& v) { return download(ctx(), v); }
  reference::MlaHostCache fetch_layer(const MlaCacheViews& v) {
    reference::MlaHostCache h;
    if (!v.mla_cache.empty()) h.mla_cache = fetch(v.mla_cache);
    if (!v.ckv_cache.empty()) h.ckv_cache = fetch(v.ckv_cache);
    if (!v.kpe_cache.empty()) h.kpe_cache = fetch(v.kpe_cache);
    return h;
  }
};

bool same_block(const HostTensor& a, int32_t block_a, const HostTensor& b, int32_t block_b) {
  const uint64_t block_bytes = a.bytes() / uint64_t(a.shape()[0]);
  return std::memcmp(static_cast<const uint8_t*>(a.data()) + block_a * block_bytes,
                     static_cast<const uint8_t*>(b.data()) + block_b * block_bytes, block_bytes) == 0;
}

TEST_F(KvCacheMlaTest, PoolsAreTheFormsRows) {
  for (KvCacheKind kind : {KvCacheKind::mla_one_pool, KvCacheKind::mla_two_pools}) {
    KvCacheOptions o;
    o.num_blocks = 10;
    o.num_host_blocks = 3;
    KvCache cache(ctx(), mla_shape(kind, DType::fp8_e4m3), o);
    const MlaCacheViews d = cache.mla_cache(1), h = cache.host_mla_cache(1);
    if (kind == KvCacheKind::mla_one_pool) {
      EXPECT_EQ(d.mla_cache.shape, (Shape{10, 16, 96}));
      EXPECT_EQ(h.mla_cache.shape, (Shape{3, 16, 96}));
      EXPECT_TRUE(d.ckv_cache.empty() && d.kpe_cache.empty());
    } else {
      EXPECT_EQ(d.ckv_cache.shape, (Shape{10, 16, 64}));
      EXPECT_EQ(d.kpe_cache.shape, (Shape{10, 16, 32}));
      EXPECT_EQ(h.kpe_cache.shape, (Shape{3, 16, 32}));
      EXPECT_TRUE(d.mla_cache.empty());
    }
    for (const TensorView& v : pools_of(d)) {
      EXPECT_EQ(v.dtype, DType::fp8_e4m3);
      EXPECT_EQ(v.memory.size, v.bytes());
    }
    EXPECT_EQ(cache.sizing().total_bytes, 10u * 2 * 16 * 96);
    EXPECT_TRUE(cache.layers().empty());
    EXPECT_NE(pools_of(cache.mla_cache(0))[0].memory.buffer, pools_of(d)[0].memory.buffer);  // a pool per layer
  }
}

// New tokens through the cache, then copies and swaps of whole blocks, every dtype and form.
TEST_F(KvCacheMlaTest, WritesCopiesAndSwapsBitExactly) {
  for (DType dtype : {DType::f16, DType::bf16, DType::fp8_e4m3}) {
    for (KvCacheKind kind : {KvCacheKind::mla_one_pool, KvCacheKind::mla_two_pools}) {
      SCOPED_TRACE(std::string(dtype_name(dtype)) + (kind == KvCacheKind::mla_one_pool ? " one pool" : " two pools"));
      KvCacheOptions o;
      o.num_blocks = 8;
      o.num_host_blocks = 4;
      KvCache cache(ctx(), mla_shape(kind, dtype), o);
      ctx().run_and_wait([&](VkCommandBuffer cmd) {
        for (uint32_t l = 0; l < 2; ++l)
          for (const TensorView& v : pools_of(cache.mla_cache(l))) record_fill_random(ctx(), cmd, v, 11 + l);
      });
      // 21 tokens into layer 1, ragged over blocks, two of them padding; RoPE (GPT-J) on k_pe.
      std::mt19937 rng(uint32_t(dtype) * 3 + uint32_t(kind));
      const DType input = dtype == DType::fp8_e4m3 ? DType::bf16 : dtype;
      const HostTensor kv_c = random_tensor(input, Shape{21, 64}, rng());
      const HostTensor k_pe = random_tensor(input, Shape{21, 32}, rng());
      HostTensor slots(DType::i32, Shape{21}), positions(DType::i64, Shape{21});
      for (int64_t t = 0; t < 21; ++t) {
        slots.set(size_t(t), t % 9 == 4 ? -1.0 : double((t * 37) % 128));
        positions.set(size_t(t), double(t + 100));
      }
      const HostTensor cos_sin = rotary_cos_sin_cache(512, 32);
      auto d_kv_c = upload(ctx(), kv_c), d_k_pe = upload(ctx(), k_pe), d_slots = upload(ctx(), slots);
      auto d_positions = upload(ctx(), positions), d_cos_sin = upload(ctx(), cos_sin);
      const reference::MlaHostCache before = fetch_layer(cache.mla_cache(1));
      const float scale = dtype == DType::fp8_e4m3 ? 0.02f : 1.0f;
      const MlaRopeViews rope{d_positions.view, d_cos_sin.view, RotaryStyle::gptj};
      ctx().run_and_wait([&](VkCommandBuffer cmd) {
        cache.record_mla_reshape_and_cache(cmd, 1, {d_kv_c.view, d_k_pe.view, d_slots.view, {}}, scale, &rope);
      });
      // What rotary_embedding then the write would store.
      HostTensor rotated(input, Shape{21, 1, 32}), no_query;
      std::memcpy(rotated.data(), k_pe.data(), k_pe.bytes());
      rotary_embedding(ctx(), no_query, rotated, positions, cos_sin, RotaryStyle::gptj);
      HostTensor rows(input, k_pe.shape());
      std::memcpy(rows.data(), rotated.data(), rotated.bytes());
      reference::MlaHostCache want = before;
      reference::mla_reshape_and_cache(kv_c, rows, slots, want, scale);
      const reference::MlaHostCache got = fetch_layer(cache.mla_cache(1));
      for (const auto& [g, w] : {std::pair{&got.mla_cache, &want.mla_cache}, std::pair{&got.ckv_cache, &want.ckv_cache},
                                 std::pair{&got.kpe_cache, &want.kpe_cache}})
        if (!w->empty()) EXPECT_TRUE(bytes_equal(*g, *w));

      // Copies: every pool of every layer moves whole blocks.
      std::vector<std::vector<HostTensor>> was(2);
      for (uint32_t l = 0; l < 2; ++l)
        for (const TensorView& v : pools_of(cache.mla_cache(l))) was[l].push_back(fetch(v));
      const std::vector<BlockCopy> copies = {{2, 5}, {0, 7}};
      ctx().run_and_wait([&](VkCommandBuffer cmd) { cache.record_copy_blocks(cmd, copies); });
      for (uint32_t l = 0; l < 2; ++l) {
        const auto pools = pools_of(cache.mla_cache(l));
        for (size_t p = 0; p < pools.size(); ++p) {
          const HostTensor now = fetch(pools[p]);
          for (int32_t b = 0; b < 8; ++b) {
            const int32_t from = b == 5 ? 2 : b == 7 ? 0 : b;
            EXPECT_TRUE(same_block(now, b, was[l][p], from)) << "layer " << l << " pool " << p << " block " << b;
          }
        }
      }
      // Swap out to the host pools, overwrite, swap back to other blocks.
      const std::vector<BlockCopy> out = {{3, 0}, {6, 2}}, in = {{0, 1}, {2, 4}};
      ctx().run_and_wait([&](VkCommandBuffer cmd) { cache.record_swap_out(cmd, out); });
      for (uint32_t l = 0; l < 2; ++l) {
        const auto host = pools_of(cache.host_mla_cache(l));
        for (size_t p = 0; p < host.size(); ++p) {
          const HostTensor h = fetch(host[p]);
          EXPECT_TRUE(same_block(h, 0, was[l][p], 3) && same_block(h, 2, was[l][p], 6)) << "layer " << l;
        }
      }
      ctx().run_and_wait([&](VkCommandBuffer cmd) { cache.record_swap_in(cmd, in); });
      for (uint32_t l = 0; l < 2; ++l) {
        const auto pools = pools_of(cache.mla_cache(l));
        for (size_t p = 0; p < pools.size(); ++p) {
          const HostTensor now = fetch(pools[p]);
          EXPECT_TRUE(same_block(now, 1, was[l][p], 3) && same_block(now, 4, was[l][p], 6)) << "layer " << l;
        }
      }
    }
  }
}

TEST_F(KvCacheMlaTest, RefusesTheOtherKindsOperations) {
  KvCacheOptions o;
  o.num_blocks = 4;
  KvCache mla(ctx(), mla_shape(KvCacheKind::mla_two_pools, DType::f16), o);
  KvCache kv(ctx(), shape_of(1, 2, 64, 16, DType::f16), o);
  expect_refused([&] { (void)mla.key_cache(0); }, "key_cache: the cache holds MLA pools (kind 2)");
  expect_refused([&] { (void)mla.host_value_cache(0); }, "host_value_cache: the cache holds MLA pools");
  expect_refused([&] { (void)kv.mla_cache(0); }, "mla_cache: the cache holds key and value pools");
  expect_refused([&] { (void)mla.mla_cache(2); }, "mla_cache: layer 2 is outside [0, 2) layers");
  expect_refused([&] { (void)mla.host_mla_cache(0); }, "host_mla_cache: the cache has no host pool");
  expect_refused_recording(ctx(), [&](VkCommandBuffer cmd) { mla.record_reshape_and_cache(cmd, 0, NewTokens{}); },
                           "record_reshape_and_cache: the cache holds MLA pools");
  expect_refused_recording(
      ctx(), [&](VkCommandBuffer cmd) { kv.record_mla_reshape_and_cache(cmd, 0, MlaNewTokens{}); },
      "record_mla_reshape_and_cache: the cache holds key and value pools");
  expect_refused_recording(
      ctx(), [&](VkCommandBuffer cmd) { mla.record_mla_reshape_and_cache(cmd, 5, MlaNewTokens{}); },
      "record_mla_reshape_and_cache: layer 5 is outside [0, 2) layers");
}

// A host pool is one allocation as a device pool is: past maxMemoryAllocationSize it is refused
// before anything is allocated, naming num_host_blocks and the pool (no range applies to it: it
// is only copied to and from).
TEST_F(KvCacheMlaTest, HostPoolsPastMaxMemoryAllocationSizeAreRefused) {
  const uint64_t allocation = ctx().device_info().max_memory_allocation_size;
  if (allocation == 0) GTEST_SKIP() << "the device reports no maxMemoryAllocationSize";
  for (KvCacheKind kind : {KvCacheKind::mla_one_pool, KvCacheKind::mla_two_pools}) {
    const KvCacheShape s = mla_shape(kind, DType::f16);
    const uint32_t fit = KvCache::max_blocks_per_pool(s, allocation);  // blocks of the largest pool
    if (fit == uint32_t(std::numeric_limits<int32_t>::max())) GTEST_SKIP() << "the limit is past int32 blocks";
    KvCacheOptions o;
    o.num_blocks = 4;
    o.num_host_blocks = fit + 1;
    expect_refused([&] { KvCache c(ctx(), s, o); }, ErrorCode::out_of_memory,
                   {"num_host_blocks " + std::to_string(fit + 1), "largest host MLA pool", "maxMemoryAllocationSize",
                    "at most " + std::to_string(fit) + " blocks"});
  }
}

}  // namespace
}  // namespace vkpaged::test
