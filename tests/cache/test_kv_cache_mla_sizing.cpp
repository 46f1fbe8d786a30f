// SPDX-License-Identifier: Apache-2.0
// KvCache's sizing of MLA caches (one pool [N, B, Dv + R] or ckv [N, B, Dv] and kpe [N, B, R]
// per layer), without a device: the bytes a block costs in each form and dtype, and the
// refusals of MLA shapes. Also in the sanitizer build.
#include <gtest/gtest.h>

#include <string>

#include "support/expect_error.hpp"
#include "support/kv_cache_shapes.hpp"
#include "vkpaged/kv_cache.hpp"

namespace vkpaged::test {
namespace {

KvCacheShape mla_shape(KvCacheKind kind, DType dtype, uint32_t layers = 61, uint32_t latent = 512, uint32_t rope = 64,
                       uint32_t block = 64) {
  KvCacheShape s = shape_of(layers, 1, latent, block, dtype);
  s.layout = KvLayout::nhd;
  s.kind = kind;
  s.rope_head_size = rope;
  return s;
}

// DeepSeek-V3: 61 layers, Dv 512, R 64, blocks of 64 tokens: a block is 64 * 576 elements per
// layer in either form, where a key_value cache of one 576-wide head would cost twice that.
TEST(KvCacheMlaSizing, DeepSeekRowsInEitherForm) {
  struct Case {
    DType dtype;
    uint64_t element;
  };
  for (const Case c : {Case{DType::f16, 2}, Case{DType::bf16, 2}, Case{DType::fp8_e4m3, 1}, Case{DType::f32, 4}}) {
    SCOPED_TRACE(std::string(dtype_name(c.dtype)));
    const auto one = mla_shape(KvCacheKind::mla_one_pool, c.dtype);
    const auto two = mla_shape(KvCacheKind::mla_two_pools, c.dtype);
    const uint64_t per_layer = 64 * 576 * c.element;
    EXPECT_EQ(KvCache::bytes_per_block(one), 61 * per_layer);
    EXPECT_EQ(KvCache::bytes_per_block(two), 61 * per_layer);
    const KvCacheSizing z1 = KvCache::sizing(one, 1000), z2 = KvCache::sizing(two, 1000);
    EXPECT_EQ(z1.block_bytes, per_layer);               // the one pool
    EXPECT_EQ(z2.block_bytes, 64 * 512 * c.element);    // ckv, the larger of the two
    EXPECT_EQ(z1.pool_bytes, 1000 * per_layer);
    EXPECT_EQ(z2.pool_bytes, 1000 * 64 * 512 * c.element);
    EXPECT_EQ(z1.total_bytes, 1000 * 61 * per_layer);
    EXPECT_EQ(z2.total_bytes, z1.total_bytes);
    EXPECT_EQ(z1.num_tokens, 64000u);
    EXPECT_EQ(KvCache::blocks_for_budget(one, 10 * kGiB), uint32_t(10 * kGiB / (61 * per_layer)));
  }
  // fp8 holds twice the blocks of f16 in the same budget.
  EXPECT_EQ(KvCache::blocks_for_budget(mla_shape(KvCacheKind::mla_one_pool, DType::fp8_e4m3), 8 * kGiB),
            2 * KvCache::blocks_for_budget(mla_shape(KvCacheKind::mla_one_pool, DType::f16), 8 * kGiB) + 1);
}

TEST(KvCacheMlaSizing, RefusesShapesThatAreNotMla) {
  auto refused = [](KvCacheShape s, const std::string& needle) {
    expect_refused([&] { KvCache::validate(s); }, needle);
  };
  KvCacheShape s = mla_shape(KvCacheKind::mla_one_pool, DType::f16);
  s.num_kv_heads = 2;
  refused(s, "num_kv_heads 2 for an MLA cache: MLA has one shared kv head (Hkv = 1)");
  s = mla_shape(KvCacheKind::mla_two_pools, DType::f16);
  s.layout = KvLayout::vllm;
  refused(s, "layout vllm for an MLA cache: its pools are rows [N, B, width], layout nhd");
  s = mla_shape(KvCacheKind::mla_two_pools, DType::f16);
  s.rope_head_size = 0;
  refused(s, "rope_head_size R = 0 is not a positive multiple of x = 8 for dtype f16");
  s = mla_shape(KvCacheKind::mla_one_pool, DType::fp8_e4m3, 2, 512, 8);
  refused(s, "rope_head_size R = 8 is not a positive multiple of x = 16 for dtype fp8_e4m3");
  s = mla_shape(KvCacheKind::mla_one_pool, DType::fp8_e4m3, 2, 520, 16);
  refused(s, "head size D = 520 is not a positive multiple of x = 16 for dtype fp8_e4m3");
  s = shape_of(2, 1, 64, 16, DType::f16);
  s.rope_head_size = 64;
  refused(s, "rope_head_size 64 is for MLA caches: a key_value cache takes 0");
  s = mla_shape(KvCacheKind::mla_one_pool, DType::f16);
  s.kind = KvCacheKind(7);
  refused(s, "kind 7 is not key_value (0), mla_one_pool (1) or mla_two_pools (2)");
}

// MLA pools past maxStorageBufferRange are reached by device address, as the key and value
// pools are: planned where the device has buffer device addresses, refused where it has not,
// naming the size, the largest pool and how many blocks would fit.
TEST(KvCacheMlaSizing, PoolsPastTheStorageBufferRangeNeedDeviceAddresses) {
  for (const KvCacheKind kind : {KvCacheKind::mla_one_pool, KvCacheKind::mla_two_pools}) {
    const bool one = kind == KvCacheKind::mla_one_pool;
    SCOPED_TRACE(one ? "one pool" : "two pools");
    const auto s = mla_shape(kind, DType::f16, 4);
    const uint64_t block_bytes = one ? 73728 : 65536;  // [64, 576] f16, or ckv's [64, 512]
    const uint32_t fit = uint32_t(128 * kMiB / block_bytes);  // 1820 or 2048 blocks
    DeviceInfo device = fake_device(64 * kGiB, 128 * kMiB);
    KvCacheOptions o;
    for (const bool addresses : {true, false}) {
      device.buffer_device_address = addresses;
      o.num_blocks = fit;
      EXPECT_EQ(KvCache::plan(device, s, o).pool_bytes, fit * block_bytes);
      o.num_blocks = fit + 1;
      if (addresses) {
        EXPECT_EQ(KvCache::plan(device, s, o).pool_bytes, (fit + 1) * block_bytes);
      } else {
        expect_refused([&] { KvCache::plan(device, s, o); }, ErrorCode::unsupported,
                       {"num_blocks " + std::to_string(fit + 1), "largest MLA pool", "maxStorageBufferRange",
                        "buffer device addresses", "at most " + std::to_string(fit) + " blocks"});
      }
    }
  }
}

TEST(KvCacheMlaSizing, PoolsPastMaxMemoryAllocationSizeAreRefused) {
  DeviceInfo device = fake_device(64 * kGiB, 0xffffffffull);
  device.max_memory_allocation_size = 1 * kGiB;
  const auto s = mla_shape(KvCacheKind::mla_one_pool, DType::f16, 4);  // 73728 bytes a pool block
  KvCacheOptions o;
  o.num_blocks = uint32_t(kGiB / 73728);
  EXPECT_EQ(KvCache::plan(device, s, o).num_blocks, o.num_blocks);
  o.num_blocks += 1;
  expect_refused([&] { KvCache::plan(device, s, o); }, ErrorCode::out_of_memory,
                 {"num_blocks 14564", "largest MLA pool", "maxMemoryAllocationSize", "at most 14563 blocks"});
}

}  // namespace
}  // namespace vkpaged::test
