// SPDX-License-Identifier: Apache-2.0
// KvCache's sizing, without a device: the arithmetic (budget -> blocks -> tokens) for several
// dtypes, and every refusal before allocation (bad shapes, no size, budgets and counts over
// memory, pools over the storage-buffer range). Also in the sanitizer build.
#include <gtest/gtest.h>

#include <string>

#include "support/expect_error.hpp"
#include "support/kv_cache_shapes.hpp"
#include "vkpaged/error.hpp"
#include "vkpaged/kv_cache.hpp"

namespace vkpaged::test {
namespace {

// ---- sizing, no device ----

TEST(KvCacheSizing, SmallShapeBudgetToBlocksToTokens) {
  // Hkv 2, D 64, B 16: one pool's block is 2 * 64 * 16 elements.
  struct Case {
    DType dtype;
    uint64_t block_bytes;
  };
  for (const Case c : {Case{DType::f32, 8192}, Case{DType::f16, 4096}, Case{DType::bf16, 4096},
                       Case{DType::fp8_e4m3, 2048}, Case{DType::fp8_e5m2, 2048}}) {
    SCOPED_TRACE(std::string(dtype_name(c.dtype)));
    const auto s = shape_of(2, 2, 64, 16, c.dtype);
    EXPECT_EQ(KvCache::bytes_per_block(s), 2 * 2 * c.block_bytes);  // 2 layers, keys and values
    const uint32_t blocks = KvCache::blocks_for_budget(s, kMiB);
    EXPECT_EQ(blocks, kMiB / (4 * c.block_bytes));
    EXPECT_EQ(KvCache::blocks_for_budget(s, kMiB + 4 * c.block_bytes - 1), blocks);  // rounds down
    const KvCacheSizing z = KvCache::sizing(s, blocks);
    EXPECT_EQ(z.num_blocks, blocks);
    EXPECT_EQ(z.num_tokens, uint64_t(blocks) * 16);
    EXPECT_EQ(z.block_bytes, c.block_bytes);
    EXPECT_EQ(z.pool_bytes, blocks * c.block_bytes);
    EXPECT_EQ(z.total_bytes, kMiB);
  }
  // Exact figures for f16 and fp8: 64 and 128 blocks, 1024 and 2048 tokens in 1 MiB.
  EXPECT_EQ(KvCache::sizing(shape_of(2, 2, 64, 16, DType::f16), 64).num_tokens, 1024u);
  EXPECT_EQ(KvCache::blocks_for_budget(shape_of(2, 2, 64, 16, DType::fp8_e4m3), kMiB), 128u);
  EXPECT_EQ(KvCache::blocks_for_budget(shape_of(2, 2, 64, 16, DType::f32), kMiB), 32u);
}

TEST(KvCacheSizing, Llama8BShapeInSixteenGiB) {
  // 32 layers, 8 kv heads of 128, blocks of 16: a block is 32 KiB per pool, 2 MiB in all (f16).
  const auto f16 = shape_of(32, 8, 128, 16, DType::f16);
  EXPECT_EQ(KvCache::bytes_per_block(f16), 2 * kMiB);
  EXPECT_EQ(KvCache::blocks_for_budget(f16, 16 * kGiB), 8192u);
  EXPECT_EQ(KvCache::sizing(f16, 8192).num_tokens, 131072u);
  const auto fp8 = shape_of(32, 8, 128, 16, DType::fp8_e5m2);
  EXPECT_EQ(KvCache::blocks_for_budget(fp8, 16 * kGiB), 16384u);
  EXPECT_EQ(KvCache::sizing(fp8, 16384).num_tokens, 262144u);
  const auto f32 = shape_of(32, 8, 128, 32, DType::f32);
  EXPECT_EQ(KvCache::bytes_per_block(f32), 8 * kMiB);
  EXPECT_EQ(KvCache::blocks_for_budget(f32, 16 * kGiB), 2048u);
  EXPECT_EQ(KvCache::sizing(f32, 2048).num_tokens, 65536u);
  // A budget below one block holds nothing.
  EXPECT_EQ(KvCache::blocks_for_budget(f16, 2 * kMiB - 1), 0u);
}

TEST(KvCacheSizing, MaxBlocksPerPool) {
  const auto s = shape_of(32, 8, 128, 16, DType::f16);  // 32 KiB per pool block
  EXPECT_EQ(KvCache::max_blocks_per_pool(s, 128 * kMiB), 4096u);
  EXPECT_EQ(KvCache::max_blocks_per_pool(s, 0xffffffffull), 131071u);  // NVIDIA: 4 GiB - 1
  EXPECT_EQ(KvCache::max_blocks_per_pool(shape_of(1, 8, 128, 16, DType::fp8_e4m3), 128 * kMiB), 8192u);
}

TEST(KvCacheSizing, PlanResolvesEachKindOfSize) {
  const auto s = shape_of(2, 2, 64, 16, DType::f16);  // 16 KiB per block
  const DeviceInfo device = fake_device(kGiB);
  KvCacheOptions o;
  o.num_blocks = 100;
  EXPECT_EQ(KvCache::plan(device, s, o).num_blocks, 100u);
  o = {};
  o.budget_bytes = 10 * kMiB + 5;
  EXPECT_EQ(KvCache::plan(device, s, o).num_blocks, 640u);
  o = {};
  o.budget_fraction = 0.0625;  // 64 MiB of 1 GiB
  const KvCacheSizing z = KvCache::plan(device, s, o);
  EXPECT_EQ(z.num_blocks, 4096u);
  EXPECT_EQ(z.num_tokens, 65536u);
  EXPECT_EQ(z.total_bytes, 64 * kMiB);
}

// ---- refusals, no device ----

TEST(KvCacheRefusals, BadShapes) {
  auto refused = [](KvCacheShape s, std::initializer_list<std::string> parts) {
    expect_refused([&] { KvCache::validate(s); }, ErrorCode::invalid_argument, parts);
    expect_refused([&] { (void)KvCache::bytes_per_block(s); }, ErrorCode::invalid_argument, parts);
  };
  refused(shape_of(0, 2, 64, 16, DType::f16), {"num_layers"});
  refused(shape_of(1, 0, 64, 16, DType::f16), {"num_kv_heads"});
  refused(shape_of(1, 2, 64, 0, DType::f16), {"block_size"});
  refused(shape_of(1, 2, 64, 16, DType::i32), {"dtype i32"});
  refused(shape_of(1, 2, 64, 16, DType::u8), {"dtype u8"});
  refused(shape_of(1, 2, 12, 16, DType::f16), {"D = 12", "x = 8"});
  refused(shape_of(1, 2, 8, 16, DType::fp8_e4m3), {"D = 8", "x = 16"});
  refused(shape_of(1, 2, 0, 16, DType::f32), {"D = 0"});
  EXPECT_NO_THROW(KvCache::validate(shape_of(1, 2, 4, 16, DType::f32)));
}

// A key and a value pool of 2^63 bytes a block each: the layer's block would wrap to 0 bytes
// (which the fuzzer turned into a division by zero in blocks_for_budget).
TEST(KvCacheRefusals, LayerBlockOverSixtyFourBits) {
  const KvCacheShape s = shape_of(1, uint32_t(1) << 30, uint32_t(1) << 28, 16, DType::f16);  // 2^63 bytes a pool
  expect_refused([&] { (void)KvCache::bytes_per_block(s); }, ErrorCode::invalid_argument,
                 {"a block of a layer overflows 64 bits", "9223372036854775808 + 9223372036854775808"});
  expect_refused([&] { (void)KvCache::blocks_for_budget(s, uint64_t(1) << 40); }, ErrorCode::invalid_argument,
                 {"overflows 64 bits"});
}

TEST(KvCacheRefusals, NoSizeZeroBlocksOrTwoSizes) {
  const auto s = shape_of(2, 2, 64, 16, DType::f16);
  const DeviceInfo device = fake_device(kGiB);
  expect_refused([&] { KvCache::plan(device, s, {}); }, ErrorCode::invalid_argument, {"no size given"});
  KvCacheOptions o;
  o.budget_bytes = 16383;  // one block is 16384 bytes
  expect_refused([&] { KvCache::plan(device, s, o); }, ErrorCode::invalid_argument,
                 {"16383", "holds no block", "16384"});
  o = {};
  o.budget_fraction = 1e-9;
  expect_refused([&] { KvCache::plan(device, s, o); }, ErrorCode::invalid_argument, {"holds no block"});
  o = {};
  o.num_blocks = 4;
  o.budget_bytes = kMiB;
  expect_refused([&] { KvCache::plan(device, s, o); }, ErrorCode::invalid_argument, {"give only one"});
  for (double f : {1.5, -0.5}) {
    o = {};
    o.budget_fraction = f;
    expect_refused([&] { KvCache::plan(device, s, o); }, ErrorCode::invalid_argument, {"outside (0, 1]"});
  }
}

TEST(KvCacheRefusals, BudgetOrBlocksOverDeviceMemory) {
  const auto s = shape_of(2, 2, 64, 16, DType::f16);  // 16 KiB per block
  const DeviceInfo device = fake_device(64 * kMiB);
  KvCacheOptions o;
  o.budget_bytes = 64 * kMiB + 1;
  expect_refused([&] { KvCache::plan(device, s, o); }, ErrorCode::out_of_memory,
                 {"67108865", "larger than", "67108864", "device-local"});
  o = {};
  o.num_blocks = 4097;  // 64 MiB + one block
  expect_refused([&] { KvCache::plan(device, s, o); }, ErrorCode::out_of_memory, {"4097 blocks", "device-local"});
  o.num_blocks = 4096;
  EXPECT_EQ(KvCache::plan(device, s, o).total_bytes, 64 * kMiB);
}

TEST(KvCacheRefusals, PoolOverStorageBufferRangeWithoutDeviceAddresses) {
  const auto s = shape_of(1, 8, 128, 16, DType::f16);  // 32 KiB per pool block: 4096 fit 128 MiB
  DeviceInfo device = fake_device(16 * kGiB);
  KvCacheOptions o;
  o.num_blocks = 4096;
  EXPECT_EQ(KvCache::plan(device, s, o).pool_bytes, 128 * kMiB);
  o.num_blocks = 4097;
  expect_refused([&] { KvCache::plan(device, s, o); }, ErrorCode::unsupported,
                 {"num_blocks 4097", "maxStorageBufferRange", "134217728", "buffer device addresses",
                  "at most 4096 blocks"});
  o = {};
  o.budget_bytes = 512 * kMiB;  // 8192 blocks: 256 MiB per pool
  expect_refused([&] { KvCache::plan(device, s, o); }, ErrorCode::unsupported, {"maxStorageBufferRange"});
  // The same budget fits a device with NVIDIA's range, and one that reaches pools by address.
  EXPECT_EQ(KvCache::plan(fake_device(16 * kGiB, 0xffffffffull), s, o).num_blocks, 8192u);
  device.buffer_device_address = true;
  const KvCacheSizing z = KvCache::plan(device, s, o);
  EXPECT_EQ(z.num_blocks, 8192u);
  EXPECT_EQ(z.pool_bytes, 256 * kMiB);
}

// A pool is one allocation: past maxMemoryAllocationSize it is refused on every device alike,
// buffer device addresses or not (NVIDIA's H200 promises 4 GiB - 2 MiB and lets larger ones
// through, which the validation layer flags).
TEST(KvCacheRefusals, PoolOverMaxMemoryAllocationSize) {
  const auto s = shape_of(1, 8, 128, 16, DType::f16);  // 32 KiB per pool block
  DeviceInfo device = fake_device(256 * kGiB, 0xffffffffull);
  device.buffer_device_address = true;
  device.max_memory_allocation_size = 4292870144ull;  // the H200's, 131008 blocks of 32 KiB
  KvCacheOptions o;
  o.num_blocks = 131008;
  EXPECT_EQ(KvCache::plan(device, s, o).num_blocks, 131008u);
  o.num_blocks = 131009;
  expect_refused([&] { KvCache::plan(device, s, o); }, ErrorCode::out_of_memory,
                 {"num_blocks 131009", "key or value pool", "maxMemoryAllocationSize of 4292870144",
                  "at most 131008 blocks"});
  // Unknown (0): no limit applies.
  device.max_memory_allocation_size = 0;
  EXPECT_EQ(KvCache::plan(device, s, o).num_blocks, 131009u);
}

// budget_fraction: of the free memory where VK_EXT_memory_budget reports it, else of the heaps.
TEST(KvCacheSizing, BudgetFractionOfFreeMemoryWhereReported) {
  const auto s = shape_of(2, 2, 64, 16, DType::f16);  // 16 KiB per block
  DeviceInfo device = fake_device(kGiB);
  KvCacheOptions o;
  o.budget_fraction = 0.5;
  KvCacheSizing z = KvCache::plan(device, s, o);
  EXPECT_EQ(z.fraction_of, MemorySource::heap_size);
  EXPECT_EQ(z.fraction_of_bytes, kGiB);
  EXPECT_EQ(z.num_blocks, 32768u);  // 512 MiB
  device.memory_budget = true;
  device.device_local_free_bytes = 256 * kMiB;  // others hold the rest
  z = KvCache::plan(device, s, o);
  EXPECT_EQ(z.fraction_of, MemorySource::memory_budget);
  EXPECT_EQ(z.fraction_of_bytes, 256 * kMiB);
  EXPECT_EQ(z.num_blocks, 8192u);  // 128 MiB
  EXPECT_EQ(z.total_bytes, 128 * kMiB);
  // Block counts and byte budgets say nothing about a fraction.
  o = {};
  o.num_blocks = 10;
  EXPECT_EQ(KvCache::plan(device, s, o).fraction_of, MemorySource::none);
  // Nothing free: refused naming the fraction and the source.
  device.device_local_free_bytes = 0;
  o = {};
  o.budget_fraction = 0.5;
  expect_refused([&] { KvCache::plan(device, s, o); }, ErrorCode::out_of_memory,
                 {"budget_fraction 0.5", "VK_EXT_memory_budget"});
  device.device_local_free_bytes = 16383;  // less than a block
  expect_refused([&] { KvCache::plan(device, s, o); }, ErrorCode::invalid_argument,
                 {"budget_fraction 0.5", "free device-local memory", "holds no block"});
}

}  // namespace
}  // namespace vkpaged::test
