// SPDX-License-Identifier: Apache-2.0
// KvCache on the GPU: views in the contract's layouts, copy_blocks over every layer and swap
// out -> overwrite -> swap in, byte for byte, refusals that allocate nothing, pools past the
// storage-buffer range. Its sizing without a device: test_kv_cache_sizing.cpp.
#include <gtest/gtest.h>

#include <cstring>
#include <random>
#include <string>
#include <vector>

#include "support/buffer_test.hpp"
#include "support/decode_case.hpp"
#include "support/expect_error.hpp"
#include "support/kv_cache_shapes.hpp"
#include "support/pool_window.hpp"
#include "support/test_context.hpp"
#include "vkpaged/error.hpp"
#include "vkpaged/kv_cache.hpp"
#include "vkpaged/reference.hpp"
#include "vkpaged/utilities.hpp"

namespace vkpaged::test {
namespace {

// ---- on the GPU ----

class KvCacheTest : public BufferTest {
 protected:
  // Fills every device pool with reproducible random bytes of its dtype (seed per pool).
  void fill_device(const KvCache& cache, uint32_t seed) {
    ctx().run_and_wait([&](VkCommandBuffer cmd) {
      for (uint32_t l = 0; l < cache.shape().num_layers; ++l) {
        record_fill_random(ctx(), cmd, cache.key_cache(l), seed + 2 * l);
        record_fill_random(ctx(), cmd, cache.value_cache(l), seed + 2 * l + 1);
      }
    });
  }
  struct Pools {
    std::vector<HostTensor> key, value;
  };
  // Every layer's pools: the device ones, or the host-visible swap pools where `host`.
  Pools fetch_pools(const KvCache& cache, bool host) {
    Pools p;
    for (uint32_t l = 0; l < cache.shape().num_layers; ++l) {
      p.key.push_back(fetch_pool(host ? cache.host_key_cache(l) : cache.key_cache(l)));
      p.value.push_back(fetch_pool(host ? cache.host_value_cache(l) : cache.value_cache(l)));
    }
    return p;
  }
  Pools fetch_device(const KvCache& cache) { return fetch_pools(cache, false); }
  Pools fetch_host(const KvCache& cache) { return fetch_pools(cache, true); }
};

const uint8_t* block_of(const HostTensor& pool, uint64_t block_bytes, int32_t block) {
  return static_cast<const uint8_t*>(pool.data()) + uint64_t(block) * block_bytes;
}

bool same_block(const HostTensor& a, int32_t block_a, const HostTensor& b, int32_t block_b, uint64_t block_bytes) {
  return std::memcmp(block_of(a, block_bytes, block_a), block_of(b, block_bytes, block_b), block_bytes) == 0;
}

TEST_F(KvCacheTest, ViewsAreTheContractLayouts) {
  const auto s = shape_of(3, 2, 64, 16, DType::fp8_e4m3);
  KvCacheOptions o;
  o.num_blocks = 10;
  o.num_host_blocks = 4;
  KvCache cache(ctx(), s, o);
  EXPECT_EQ(cache.num_blocks(), 10u);
  EXPECT_EQ(cache.num_host_blocks(), 4u);
  EXPECT_EQ(cache.num_tokens(), 160u);
  EXPECT_EQ(cache.sizing().total_bytes, 10u * 6 * 2048);
  EXPECT_EQ(cache.host_bytes(), 4u * 6 * 2048);
  ASSERT_EQ(cache.layers().size(), 3u);
  ASSERT_EQ(cache.host_layers().size(), 3u);
  for (uint32_t l = 0; l < 3; ++l) {
    EXPECT_EQ(cache.key_cache(l).shape, (Shape{10, 2, 4, 16, 16}));
    EXPECT_EQ(cache.value_cache(l).shape, (Shape{10, 2, 64, 16}));
    EXPECT_EQ(cache.key_cache(l).dtype, DType::fp8_e4m3);
    EXPECT_EQ(cache.key_cache(l).memory.size, 10u * 2048);
    EXPECT_EQ(cache.host_value_cache(l).shape, (Shape{4, 2, 64, 16}));
    EXPECT_EQ(cache.layers()[l].key_cache.memory.buffer, cache.key_cache(l).memory.buffer);
    EXPECT_NE(cache.key_cache(l).memory.buffer, cache.value_cache(l).memory.buffer);
  }
  expect_refused([&] { cache.key_cache(3); }, ErrorCode::invalid_argument, {"layer 3", "[0, 3)"});

  KvCache moved = std::move(cache);
  EXPECT_EQ(moved.num_blocks(), 10u);

  o.num_host_blocks = 0;
  KvCache device_only(ctx(), s, o);
  EXPECT_TRUE(device_only.host_layers().empty());
  expect_refused([&] { device_only.host_key_cache(0); }, ErrorCode::invalid_argument, {"no host pool"});
  const BlockCopy pair{0, 0};
  auto swap_out = [&] {
    ctx().run_and_wait([&](VkCommandBuffer cmd) { device_only.record_swap_out(cmd, std::span(&pair, 1)); });
  };
  expect_refused(swap_out, ErrorCode::invalid_argument, {"record_swap_out", "no host pool"});
}

TEST_F(KvCacheTest, BudgetFractionOnTheDevice) {
  const DeviceInfo& device = ctx().device_info();
  ASSERT_GT(device.device_local_bytes, 0u);
  // What the device reports is consistent: free memory only with the extension, at most the heaps.
  if (device.memory_budget) {
    EXPECT_GT(device.device_local_free_bytes, 0u);
    EXPECT_LE(device.device_local_free_bytes, device.device_local_bytes);
  } else {
    EXPECT_EQ(device.device_local_free_bytes, 0u);
  }
  const auto s = shape_of(2, 2, 64, 16, DType::f16);
  // A fraction of about 16 MiB of the memory it is taken of (free memory where reported, which
  // the constructor queries again; else the heaps).
  const uint64_t base = device.memory_budget ? device.device_local_free_bytes : device.device_local_bytes;
  KvCacheOptions o;
  o.budget_fraction = double(16 * kMiB) / double(base);
  KvCache cache(ctx(), s, o);
  const KvCacheSizing& z = cache.sizing();
  EXPECT_EQ(z.fraction_of, device.memory_budget ? MemorySource::memory_budget : MemorySource::heap_size);
  EXPECT_EQ(cache.num_blocks(), KvCache::blocks_for_budget(s, uint64_t(o.budget_fraction * double(z.fraction_of_bytes))));
  if (!device.memory_budget) {
    EXPECT_EQ(z.fraction_of_bytes, device.device_local_bytes);
    EXPECT_LE(z.total_bytes, 16 * kMiB);
    EXPECT_GT(z.total_bytes, 16 * kMiB - KvCache::bytes_per_block(s));
  }
}

TEST_F(KvCacheTest, RefusalsOnTheDeviceAllocateNothing) {
  const DeviceInfo& device = ctx().device_info();
  const auto s = shape_of(1, 8, 128, 16, DType::f16);
  KvCacheOptions o;
  o.budget_bytes = device.device_local_bytes + 1;
  expect_refused([&] { KvCache c(ctx(), s, o); }, ErrorCode::out_of_memory, {"larger than", "device-local"});
  // Host pools: each within the range, together far beyond any host-visible heap.
  const auto deep = shape_of(4096, 8, 128, 16, DType::f16);
  o = {};
  o.num_blocks = 1;
  // One pool is one allocation: the smaller of the range and maxMemoryAllocationSize bounds it.
  const uint64_t range = device.max_storage_buffer_range, allocation = device.max_memory_allocation_size;
  const bool range_binds = allocation == 0 || range < allocation;
  o.num_host_blocks = KvCache::max_blocks_per_pool(deep, range_binds ? range : allocation);
  expect_refused([&] { KvCache c(ctx(), deep, o); }, ErrorCode::out_of_memory, {"host blocks", "host-visible heap"});

  // Pools past maxStorageBufferRange need buffer device addresses: an adopted device that did
  // not enable them is refused, naming the argument and the limit.
  Context adopted(shared_device_without_addresses());
  const uint32_t past = KvCache::max_blocks_per_pool(s, range) + 1;
  o = {};
  o.num_blocks = past;
  if (!range_binds) {
    // Where one allocation is promised less than the range (NVIDIA: 2 MiB less), a pool past the
    // range is past one allocation first, and refused as that on every context.
    expect_refused([&] { KvCache c(adopted, s, o); }, ErrorCode::out_of_memory,
                   {"num_blocks " + std::to_string(past), "maxMemoryAllocationSize", std::to_string(allocation)});
    o.num_blocks = 1;
    o.num_host_blocks = past;
    expect_refused([&] { KvCache c(ctx(), s, o); }, ErrorCode::out_of_memory,
                   {"num_host_blocks " + std::to_string(past), "host key or value pool", "maxMemoryAllocationSize"});
    return;
  }
  expect_refused([&] { KvCache c(adopted, s, o); }, ErrorCode::unsupported,
                 {"num_blocks " + std::to_string(past), "maxStorageBufferRange", std::to_string(range),
                  "buffer device addresses"});
  o.num_blocks = 1;
  o.num_host_blocks = past;
  expect_refused([&] { KvCache c(adopted, s, o); }, ErrorCode::unsupported,
                 {"num_host_blocks " + std::to_string(past), "host key or value pool", "maxStorageBufferRange"});
  // The same sizes are planned on this context, which reaches such pools by address.
  if (device.buffer_device_address) {
    o.num_blocks = past;
    o.num_host_blocks = 0;
    EXPECT_EQ(KvCache::plan(device, s, o).num_blocks, past);
  }
}

TEST_F(KvCacheTest, CopyBlocksOverEveryLayerIsBitExact) {
  for (DType dtype : {DType::f16, DType::fp8_e5m2, DType::f32}) {
    SCOPED_TRACE(std::string(dtype_name(dtype)));
    const auto s = shape_of(3, 2, 64, 8, dtype);
    KvCacheOptions o;
    o.num_blocks = 12;
    KvCache cache(ctx(), s, o);
    fill_device(cache, 100);
    Pools want = fetch_device(cache);
    const std::vector<BlockCopy> pairs = {{0, 5}, {2, 6}, {11, 1}, {3, 3}};
    for (uint32_t l = 0; l < 3; ++l) reference::copy_blocks(want.key[l], want.value[l], pairs);
    ctx().run_and_wait([&](VkCommandBuffer cmd) { cache.record_copy_blocks(cmd, pairs); });
    const Pools got = fetch_device(cache);
    for (uint32_t l = 0; l < 3; ++l) {
      EXPECT_EQ(std::memcmp(got.key[l].data(), want.key[l].data(), want.key[l].bytes()), 0) << "layer " << l;
      EXPECT_EQ(std::memcmp(got.value[l].data(), want.value[l].data(), want.value[l].bytes()), 0) << "layer " << l;
    }
    // Refused pairs change nothing.
    const std::vector<BlockCopy> bad = {{0, 12}};
    expect_refused([&] { ctx().run_and_wait([&](VkCommandBuffer cmd) { cache.record_copy_blocks(cmd, bad); }); },
                   ErrorCode::invalid_argument, {"pairs[0].dst", "12"});
  }
}

TEST_F(KvCacheTest, SwapOutOverwriteSwapInIsBitExact) {
  for (DType dtype : {DType::f16, DType::bf16, DType::fp8_e4m3, DType::f32}) {
    SCOPED_TRACE(std::string(dtype_name(dtype)));
    const auto s = shape_of(3, 2, 64, 16, dtype);
    KvCacheOptions o;
    o.num_blocks = 16;
    o.num_host_blocks = 6;
    KvCache cache(ctx(), s, o);
    const uint64_t bb = cache.sizing().block_bytes;
    fill_device(cache, 7);
    const Pools before = fetch_device(cache);

    const std::vector<BlockCopy> out = {{1, 0}, {4, 3}, {15, 5}, {9, 1}};  // (device, host)
    ctx().run_and_wait([&](VkCommandBuffer cmd) { cache.record_swap_out(cmd, out); });
    const Pools host = fetch_host(cache);
    for (uint32_t l = 0; l < 3; ++l)
      for (const BlockCopy& p : out) {
        EXPECT_TRUE(same_block(host.key[l], p.dst, before.key[l], p.src, bb)) << "layer " << l << " block " << p.src;
        EXPECT_TRUE(same_block(host.value[l], p.dst, before.value[l], p.src, bb))
            << "layer " << l << " block " << p.src;
      }

    // The device blocks are reused by others: overwrite every pool, then bring the blocks back,
    // two of them to other device blocks than they left.
    fill_device(cache, 9000);
    const Pools overwritten = fetch_device(cache);
    ASSERT_FALSE(same_block(overwritten.key[0], 1, before.key[0], 1, bb));
    const std::vector<BlockCopy> in = {{0, 1}, {3, 4}, {5, 12}, {1, 2}};  // (host, device)
    ctx().run_and_wait([&](VkCommandBuffer cmd) { cache.record_swap_in(cmd, in); });
    const Pools after = fetch_device(cache);
    for (uint32_t l = 0; l < 3; ++l) {
      for (int32_t b = 0; b < 16; ++b) {
        int32_t original = -1;  // the device block whose pre-swap bytes b must hold now
        for (size_t i = 0; i < in.size(); ++i)
          if (in[i].dst == b) original = out[i].src;
        const HostTensor& k = original >= 0 ? before.key[l] : overwritten.key[l];
        const HostTensor& v = original >= 0 ? before.value[l] : overwritten.value[l];
        const int32_t from = original >= 0 ? original : b;
        EXPECT_TRUE(same_block(after.key[l], b, k, from, bb)) << "layer " << l << " block " << b;
        EXPECT_TRUE(same_block(after.value[l], b, v, from, bb)) << "layer " << l << " block " << b;
      }
    }
  }
}

// A cache whose pools pass maxStorageBufferRange, used end to end through its views: new
// tokens written into blocks past the range, decoded (the decode reads them by address),
// copied into other blocks and gathered from both, swapped out, overwritten and swapped back.
// Only the blocks used travel to the host: the references run on them as a small pool.
TEST_F(KvCacheTest, PoolsPastTheStorageBufferRangeEndToEnd) {
  const DeviceInfo& device = ctx().device_info();
  const uint64_t range = device.max_storage_buffer_range;
  if (const std::string why = past_range_skip_reason(device); !why.empty()) GTEST_SKIP() << why;
  const auto s = shape_of(1, 2, 64, 16, DType::f16);  // 4 KiB per pool block
  KvCacheOptions o;
  o.num_blocks = KvCache::max_blocks_per_pool(s, range) + 32;
  o.num_host_blocks = 4;
  KvCache cache(ctx(), s, o);
  ASSERT_GT(cache.sizing().pool_bytes, range);
  const int32_t N = int32_t(cache.num_blocks());
  const PoolWindow w{N, 2, 32};  // blocks 0, 1 and the last 32, which start at the range's end
  ASSERT_GE(uint64_t(N - 32) * cache.sizing().block_bytes, range);
  const TensorView key_pool = cache.key_cache(0), value_pool = cache.value_cache(0);
  std::mt19937 rng(17);

  // Two sequences of 40 and 21 tokens in blocks past the range.
  const int64_t B = 16, M = 3, H = 4;
  const std::vector<std::vector<int32_t>> blocks = {{N - 1, N - 3, N - 5}, {N - 2, N - 4}};
  const std::vector<int32_t> lens = {40, 21};
  std::vector<int64_t> slot_list;
  for (size_t q = 0; q < blocks.size(); ++q)
    for (int32_t t = 0; t < lens[q]; ++t) slot_list.push_back(int64_t(blocks[q][size_t(t / B)]) * B + t % B);
  const int64_t T = int64_t(slot_list.size());
  HostTensor slots(DType::i64, Shape{T}), window_slots(DType::i64, Shape{T});
  for (int64_t t = 0; t < T; ++t) {
    slots.as<int64_t>()[t] = slot_list[size_t(t)];
    window_slots.as<int64_t>()[t] = int64_t(w.window_block(int32_t(slot_list[size_t(t)] / B))) * B + slot_list[size_t(t)] % B;
  }
  HostTensor key(DType::f16, Shape{T, 2, 64}), value(DType::f16, Shape{T, 2, 64});
  std::uniform_real_distribution<float> u(-1.0f, 1.0f);
  for (int64_t i = 0; i < key.numel(); ++i) {
    key.set(size_t(i), u(rng));
    value.set(size_t(i), u(rng));
  }
  HostTensor key_window = download_window(ctx(), key_pool, w), value_window = download_window(ctx(), value_pool, w);
  DeviceBuffer staging = ctx().create_buffer(key.bytes() * 2 + slots.bytes());
  ReshapeAndCacheViews rv;
  rv.key = staging.tensor(DType::f16, key.shape());
  rv.value = staging.tensor(DType::f16, value.shape(), key.bytes());
  rv.slot_mapping = staging.tensor(DType::i64, slots.shape(), 2 * key.bytes());
  ctx().upload(rv.key.memory, key.data(), key.bytes());
  ctx().upload(rv.value.memory, value.data(), value.bytes());
  ctx().upload(rv.slot_mapping.memory, slots.data(), slots.bytes());
  rv.key_cache = key_pool;
  rv.value_cache = value_pool;
  ctx().run_and_wait([&](VkCommandBuffer cmd) { record_reshape_and_cache(ctx(), cmd, rv); });
  reference::reshape_and_cache(key, value, window_slots, key_window, value_window);
  ASSERT_EQ(std::memcmp(download_window(ctx(), key_pool, w).data(), key_window.data(), key_window.bytes()), 0);
  ASSERT_EQ(std::memcmp(download_window(ctx(), value_pool, w).data(), value_window.data(), value_window.bytes()), 0);

  // Decode over the cache's views: the plan reads the pools by address.
  DecodeShape shape;
  shape.num_seqs = 2;
  shape.num_heads = uint32_t(H);
  shape.num_kv_heads = 2;
  shape.head_size = 64;
  shape.block_size = 16;
  shape.num_blocks = uint32_t(N);
  shape.max_blocks_per_seq = uint32_t(M);
  shape.query_dtype = shape.cache_dtype = DType::f16;
  const DecodePlan plan = DecodePlan::create(ctx(), shape);
  EXPECT_NE(plan.describe().find("device address"), std::string::npos) << plan.describe();
  DecodeInputs in;
  in.query = HostTensor(DType::f16, Shape{2, H, 64});
  for (int64_t i = 0; i < in.query.numel(); ++i) in.query.set(size_t(i), u(rng));
  in.block_tables = HostTensor(DType::i32, Shape{2, M});
  HostTensor tables(DType::i32, Shape{2, M});
  in.context_lens = HostTensor(DType::i32, Shape{2});
  for (size_t q = 0; q < 2; ++q) {
    in.context_lens.as<int32_t>()[q] = lens[q];
    for (size_t j = 0; j < size_t(M); ++j) {
      const int32_t b = j < blocks[q].size() ? blocks[q][j] : N - 1;
      tables.as<int32_t>()[q * M + j] = b;
      in.block_tables.as<int32_t>()[q * M + j] = w.window_block(b);
    }
  }
  in.key_cache = key_window;
  in.value_cache = value_window;
  DeviceBuffer arrays = ctx().create_buffer(4096);
  DecodeViews dv;
  dv.query = arrays.tensor(DType::f16, in.query.shape());
  dv.block_tables = arrays.tensor(DType::i32, tables.shape(), 1024);
  dv.context_lens = arrays.tensor(DType::i32, in.context_lens.shape(), 1536);
  dv.output = arrays.tensor(DType::f16, in.query.shape(), 2048);
  ctx().upload(dv.query.memory, in.query.data(), in.query.bytes());
  ctx().upload(dv.block_tables.memory, tables.data(), tables.bytes());
  ctx().upload(dv.context_lens.memory, in.context_lens.data(), in.context_lens.bytes());
  dv.key_cache = key_pool;
  dv.value_cache = value_pool;
  DeviceBuffer scratch = ctx().create_buffer(std::max<size_t>(plan.scratch_bytes(), 16));
  if (plan.scratch_bytes() > 0) dv.scratch = scratch.view(0, plan.scratch_bytes());
  ctx().run_and_wait([&](VkCommandBuffer cmd) { record_decode(ctx(), cmd, plan, dv); });
  HostTensor output(DType::f16, in.query.shape());
  ctx().download(dv.output.memory, output.data(), output.bytes());
  EXPECT_LE(max_abs_diff(output, reference::decode_attention(in).output), tolerance(DType::f16, DType::f16));

  // copy_blocks of the first sequence to other blocks (one below the range), then gather it
  // through both tables: the same rows, equal to the reference's.
  const std::vector<BlockCopy> copies = {{N - 1, N - 7}, {N - 3, 1}, {N - 5, N - 9}};
  ctx().run_and_wait([&](VkCommandBuffer cmd) { cache.record_copy_blocks(cmd, copies); });
  HostTensor gather_tables(DType::i32, Shape{2, M}), starts(DType::i32, Shape{3});
  for (int64_t j = 0; j < M; ++j) {
    gather_tables.as<int32_t>()[j] = blocks[0][size_t(j)];
    gather_tables.as<int32_t>()[M + j] = copies[size_t(j)].dst;
  }
  starts.as<int32_t>()[1] = lens[0];
  starts.as<int32_t>()[2] = 2 * lens[0];
  DeviceBuffer gather_buffers = ctx().create_buffer(256 + 2 * size_t(2 * lens[0]) * 128 * 4);
  GatherViews gv;
  gv.key_cache = key_pool;
  gv.value_cache = value_pool;
  gv.block_tables = gather_buffers.tensor(DType::i32, gather_tables.shape());
  gv.seq_starts = gather_buffers.tensor(DType::i32, starts.shape(), 128);
  const Shape rows{2 * lens[0], 2, 64};
  gv.key_out = gather_buffers.tensor(DType::f32, rows, 256);
  gv.value_out = gather_buffers.tensor(DType::f32, rows, 256 + size_t(rows.numel()) * 4);
  ctx().upload(gv.block_tables.memory, gather_tables.data(), gather_tables.bytes());
  ctx().upload(gv.seq_starts.memory, starts.data(), starts.bytes());
  ctx().run_and_wait([&](VkCommandBuffer cmd) { record_gather(ctx(), cmd, gv); });
  HostTensor got_keys(DType::f32, rows), got_values(DType::f32, rows);
  ctx().download(gv.key_out.memory, got_keys.data(), got_keys.bytes());
  ctx().download(gv.value_out.memory, got_values.data(), got_values.bytes());
  HostTensor one_table(DType::i32, Shape{1, M}), one_start(DType::i32, Shape{2});
  for (int64_t j = 0; j < M; ++j) one_table.as<int32_t>()[j] = w.window_block(blocks[0][size_t(j)]);
  one_start.as<int32_t>()[1] = lens[0];
  const auto want = reference::gather(key_window, value_window, one_table, one_start, DType::f32);
  const size_t half = got_keys.bytes() / 2;
  for (size_t copy = 0; copy < 2; ++copy) {
    EXPECT_EQ(std::memcmp(static_cast<const std::byte*>(got_keys.data()) + copy * half, want.key.data(), half), 0)
        << (copy ? "the copied blocks" : "the original blocks");
    EXPECT_EQ(std::memcmp(static_cast<const std::byte*>(got_values.data()) + copy * half, want.value.data(), half), 0)
        << (copy ? "the copied blocks" : "the original blocks");
  }

  // Swap the second sequence's blocks out, overwrite them on the device, swap them back in.
  const HostTensor keys_before = download_window(ctx(), key_pool, w);
  const HostTensor values_before = download_window(ctx(), value_pool, w);
  const std::vector<BlockCopy> out = {{N - 2, 0}, {N - 4, 1}}, in_pairs = {{0, N - 2}, {1, N - 4}};
  ctx().run_and_wait([&](VkCommandBuffer cmd) { cache.record_swap_out(cmd, out); });
  const std::vector<uint8_t> garbage(cache.sizing().block_bytes, 0x5a);
  for (const BlockCopy& p : out)
    for (const TensorView* pool : {&key_pool, &value_pool})
      ctx().upload({pool->memory.buffer, pool->memory.offset + uint64_t(p.src) * garbage.size(), garbage.size()},
                   garbage.data(), garbage.size());
  ASSERT_NE(std::memcmp(download_window(ctx(), key_pool, w).data(), keys_before.data(), keys_before.bytes()), 0);
  ctx().run_and_wait([&](VkCommandBuffer cmd) { cache.record_swap_in(cmd, in_pairs); });
  EXPECT_EQ(std::memcmp(download_window(ctx(), key_pool, w).data(), keys_before.data(), keys_before.bytes()), 0);
  EXPECT_EQ(std::memcmp(download_window(ctx(), value_pool, w).data(), values_before.data(), values_before.bytes()), 0);
}

}  // namespace
}  // namespace vkpaged::test
