// SPDX-License-Identifier: Apache-2.0
// Cache operations on pools larger than maxStorageBufferRange (128 MiB on lavapipe), whose
// blocks past the range cannot be one descriptor: reshape_and_cache (and its rotary form) and
// gather reach them by device address, copy_blocks and swap_blocks copy with no range limit,
// in every layout. Each pool is just over
// the range; the tests touch its first blocks and its last ones (past the range) and compare
// those, bit for bit, with the CPU references run on the same blocks as a small pool. Without
// buffer device addresses (an adopted device that did not enable them) the indexed operations
// are refused, naming the view and the limit.
#include <algorithm>
#include <numeric>
#include <vector>

#include "ops/cache_test_helpers.hpp"
#include "support/engine_buffer.hpp"
#include "support/pool_window.hpp"
#include "vk/context_impl.hpp"
#include "vkpaged/rotary.hpp"

namespace vkpaged::test {
namespace {

using namespace cache_helpers;

// A key and a value pool of N blocks, N chosen so that the last kPastBlocks start past the range.
struct LargePools {
  int64_t kv_heads, head_size, block_size;
  DType dtype;
  KvLayout layout;
  DeviceBuffer key_buffer, value_buffer;
  TensorView key, value;
  PoolWindow window;

  uint64_t block_bytes() const { return uint64_t(kv_heads * head_size * block_size) * dtype_size(dtype); }
  LayerCacheViews layer() const { return {key, value, layout}; }
};

LargePools make_pools(Context& ctx, DType dtype, int64_t kv_heads, int64_t head_size, int64_t block_size,
                      KvLayout layout = KvLayout::vllm) {
  LargePools p{kv_heads, head_size, block_size, dtype, layout, {}, {}, {}, {}, {}};
  const uint64_t range = ctx.device_info().max_storage_buffer_range;
  const int64_t n = int64_t(range / p.block_bytes()) + kPastBlocks;
  p.key_buffer = ctx.create_buffer(size_t(n) * p.block_bytes());
  p.value_buffer = ctx.create_buffer(size_t(n) * p.block_bytes());
  p.key = p.key_buffer.tensor(dtype, key_cache_shape(layout, dtype, n, kv_heads, head_size, block_size));
  p.value = p.value_buffer.tensor(dtype, value_cache_shape(layout, n, kv_heads, head_size, block_size));
  p.window = PoolWindow{n, kLowBlocks, kHighBlocks};
  return p;
}

class CachePastRangeTest : public GpuTest {
 protected:
  void SetUp() override {
    GpuTest::SetUp();
    if (const std::string why = past_range_skip_reason(ctx().device_info()); !why.empty()) GTEST_SKIP() << why;
  }
  // Random window contents on the device; returns them.
  std::pair<HostTensor, HostTensor> randomize(const LargePools& p, uint32_t seed) {
    HostTensor k = random_tensor(p.dtype, p.window.shape_of(p.key), seed);
    HostTensor v = random_tensor(p.dtype, p.window.shape_of(p.value), seed + 1);
    upload_window(ctx(), p.key, p.window, k);
    upload_window(ctx(), p.value, p.window, v);
    return {std::move(k), std::move(v)};
  }
};

struct PastRangeCase {
  DType input, cache;
  int64_t kv_heads, head_size, block_size;
  CacheScales scales{};
  KvLayout layout = KvLayout::vllm;
};

TEST_F(CachePastRangeTest, ReshapeThenGatherMatchTheReferenceBitExactly) {
  for (const PastRangeCase c : {PastRangeCase{DType::f32, DType::f16, 2, 64, 16},
                                PastRangeCase{DType::f16, DType::fp8_e4m3, 2, 128, 16, {0.5f, 2.0f}},
                                PastRangeCase{DType::bf16, DType::f32, 1, 64, 8},
                                PastRangeCase{DType::f16, DType::bf16, 2, 64, 16, {}, KvLayout::nhd},
                                PastRangeCase{DType::f32, DType::fp8_e5m2, 2, 64, 8, {0.25f, 3.0f}, KvLayout::hnd}}) {
    SCOPED_TRACE(std::string(dtype_name(c.input)) + " -> " + std::string(dtype_name(c.cache)) + ", " +
                 std::string(kv_layout_name(c.layout)));
    const LargePools p = make_pools(ctx(), c.cache, c.kv_heads, c.head_size, c.block_size, c.layout);
    const PoolWindow& w = p.window;
    const uint64_t range = ctx().device_info().max_storage_buffer_range;
    ASSERT_GT(p.key.memory.size, range);
    ASSERT_GE(uint64_t(w.num_blocks - kPastBlocks) * p.block_bytes(), range);
    auto [key_window, value_window] = randomize(p, 7);
    std::mt19937 rng(uint32_t(c.head_size + int64_t(c.cache)));

    // Tokens into shuffled slots of the window (low blocks and blocks past the range), some padding.
    const int64_t B = c.block_size, T = 90;
    std::vector<int64_t> window_slots(size_t(w.size()) * size_t(B));
    std::iota(window_slots.begin(), window_slots.end(), 0);
    std::shuffle(window_slots.begin(), window_slots.end(), rng);
    HostTensor slots(DType::i64, Shape{T}), reference_slots(DType::i64, Shape{T});
    int64_t past = 0;
    for (int64_t t = 0; t < T; ++t) {
      const int64_t s = window_slots[size_t(t)];
      const bool padding = t % 9 == 4;
      const int64_t block = w.pool_block(int32_t(s / B));
      past += !padding && block >= w.num_blocks - kPastBlocks;
      slots.as<int64_t>()[t] = padding ? -1 : block * B + s % B;
      reference_slots.as<int64_t>()[t] = padding ? -1 : s;
    }
    ASSERT_GT(past, 10) << "too few tokens land past the range";
    const Shape tokens{T, c.kv_heads, c.head_size};
    const HostTensor key = random_tensor(c.input, tokens, rng()), value = random_tensor(c.input, tokens, rng());
    auto d_key = upload(ctx(), key), d_value = upload(ctx(), value), d_slots = upload(ctx(), slots);
    DeviceBuffer status = ctx().create_buffer(16);
    const uint32_t zero = 0;
    ctx().upload(status.view(0, 4), &zero, 4);
    const ReshapeAndCacheViews rv{d_key.view, d_value.view, d_slots.view, p.key, p.value, status.view(0, 4), c.layout};
    ctx().run_and_wait([&](VkCommandBuffer cmd) { record_reshape_and_cache(ctx(), cmd, rv, c.scales); });
    reference::reshape_and_cache(key, value, reference_slots, key_window, value_window, c.scales, c.layout);
    EXPECT_TRUE(bytes_equal(download_window(ctx(), p.key, w), key_window)) << "key blocks";
    EXPECT_TRUE(bytes_equal(download_window(ctx(), p.value, w), value_window)) << "value blocks";
    EXPECT_EQ(read_status(ctx(), status), 0u);

    // Three sequences over shuffled window blocks (past the range and not), gathered.
    const std::vector<int64_t> lengths = {5 * B + 3, 2 * B, 9};
    const int64_t S = int64_t(lengths.size()), M = 7;
    std::vector<int32_t> order(size_t(w.size()));
    std::iota(order.begin(), order.end(), 0);
    std::shuffle(order.begin(), order.end(), rng);
    HostTensor tables(DType::i32, Shape{S, M}), reference_tables(DType::i32, Shape{S, M});
    HostTensor starts(DType::i32, Shape{S + 1});
    int32_t rows = 0;
    size_t next = 0;
    for (int64_t s = 0; s < S; ++s) {
      starts.as<int32_t>()[s] = rows;
      rows += int32_t(lengths[size_t(s)]);
      for (int64_t j = 0; j < M; ++j) {
        const int32_t wb = order[next++ % order.size()];
        reference_tables.as<int32_t>()[s * M + j] = wb;
        tables.as<int32_t>()[s * M + j] = w.pool_block(wb);
      }
    }
    starts.as<int32_t>()[S] = rows;
    const DType out = DType::f32;
    auto d_tables = upload(ctx(), tables), d_starts = upload(ctx(), starts);
    auto key_out = upload(ctx(), HostTensor(out, Shape{rows, c.kv_heads, c.head_size}));
    auto value_out = upload(ctx(), HostTensor(out, Shape{rows, c.kv_heads, c.head_size}));
    const GatherViews gv{p.key,          p.value,           d_tables.view, d_starts.view,
                         key_out.view,   value_out.view,    status.view(0, 4), c.layout};
    ctx().run_and_wait([&](VkCommandBuffer cmd) { record_gather(ctx(), cmd, gv, c.scales); });
    const auto want = reference::gather(key_window, value_window, reference_tables, starts, out, c.scales, c.layout);
    EXPECT_TRUE(bytes_equal(download(ctx(), key_out), want.key)) << "gathered keys";
    EXPECT_TRUE(bytes_equal(download(ctx(), value_out), want.value)) << "gathered values";
    EXPECT_EQ(read_status(ctx(), status), 0u);
  }
}

// The fused rotary write reaches pools past the range by address too: its cache bytes are
// what reshape_and_cache (reference) stores from the keys the GPU rotated.
TEST_F(CachePastRangeTest, RotaryWriteMatchesTheReferenceBitExactly) {
  for (const KvLayout layout : {KvLayout::vllm, KvLayout::nhd}) {
    SCOPED_TRACE(kv_layout_name(layout));
    const int64_t Hkv = 2, D = 64, B = 16, T = 40, H = 4;
    const LargePools p = make_pools(ctx(), DType::fp8_e4m3, Hkv, D, B, layout);
    const PoolWindow& w = p.window;
    auto [key_window, value_window] = randomize(p, 17);
    std::mt19937 rng(uint32_t(layout) + 40);
    std::vector<int64_t> window_slots(size_t(w.size()) * size_t(B));
    std::iota(window_slots.begin(), window_slots.end(), 0);
    std::shuffle(window_slots.begin(), window_slots.end(), rng);
    HostTensor slots(DType::i64, Shape{T}), reference_slots(DType::i64, Shape{T}), positions(DType::i64, Shape{T});
    int64_t past = 0;
    for (int64_t t = 0; t < T; ++t) {
      const int64_t s = window_slots[size_t(t)], block = w.pool_block(int32_t(s / B));
      past += block >= w.num_blocks - kPastBlocks;
      slots.as<int64_t>()[t] = block * B + s % B;
      reference_slots.as<int64_t>()[t] = s;
      positions.as<int64_t>()[t] = int64_t(rng() % 50);
    }
    ASSERT_GT(past, 5) << "too few tokens land past the range";
    const HostTensor query = random_tensor(DType::f16, Shape{T, H, D}, rng());
    const HostTensor key = random_tensor(DType::f16, Shape{T, Hkv, D}, rng());
    const HostTensor value = random_tensor(DType::f16, Shape{T, Hkv, D}, rng());
    const HostTensor cos_sin = rotary_cos_sin_cache(50, 64);
    auto d_query = upload(ctx(), query), d_key = upload(ctx(), key), d_value = upload(ctx(), value);
    auto d_slots = upload(ctx(), slots), d_positions = upload(ctx(), positions), d_cos_sin = upload(ctx(), cos_sin);
    const CacheScales scales{0.01f, 0.02f};
    const ReshapeAndCacheViews rv{d_key.view, d_value.view, d_slots.view, p.key, p.value, {}, layout};
    ctx().run_and_wait([&](VkCommandBuffer cmd) {
      record_reshape_and_cache_rotary(ctx(), cmd, rv, {d_query.view, d_positions.view, d_cos_sin.view}, scales);
    });
    const HostTensor rotated_key = download(ctx(), d_key);
    reference::reshape_and_cache(rotated_key, value, reference_slots, key_window, value_window, scales, layout);
    EXPECT_TRUE(bytes_equal(download_window(ctx(), p.key, w), key_window)) << "key blocks";
    EXPECT_TRUE(bytes_equal(download_window(ctx(), p.value, w), value_window)) << "value blocks";
    HostTensor want_q = query, want_k = key;
    reference::rotary_embedding(want_q, want_k, positions, cos_sin, RotaryStyle::neox);
    EXPECT_TRUE(values_close(rotated_key, want_k, DType::f16));
    EXPECT_TRUE(values_close(download(ctx(), d_query), want_q, DType::f16));
  }
}

TEST_F(CachePastRangeTest, CopyAndSwapAcrossTheBoundary) {
  const LargePools p = make_pools(ctx(), DType::f16, 2, 64, 16);
  const PoolWindow& w = p.window;
  auto [key_window, value_window] = randomize(p, 21);
  const int32_t last = int32_t(w.num_blocks - 1);
  const int32_t below = int32_t(w.num_blocks - kHighBlocks);  // a high block still within the range

  // Low -> past, past -> low, within -> past, past -> past.
  const std::vector<BlockCopy> pool_pairs = {{0, last}, {last - 1, 1}, {below, last - 2}, {last - 3, last - 4}};
  std::vector<BlockCopy> window_pairs;
  for (const BlockCopy& q : pool_pairs) window_pairs.push_back({w.window_block(q.src), w.window_block(q.dst)});
  const LayerCacheViews layer = p.layer();
  ctx().run_and_wait([&](VkCommandBuffer cmd) { record_copy_blocks(ctx(), cmd, std::span(&layer, 1), pool_pairs); });
  reference::copy_blocks(key_window, value_window, window_pairs);
  EXPECT_TRUE(bytes_equal(download_window(ctx(), p.key, w), key_window)) << "copy_blocks, keys";
  EXPECT_TRUE(bytes_equal(download_window(ctx(), p.value, w), value_window)) << "copy_blocks, values";

  // Swap blocks past the range out to a host-visible pool, change them, swap them back elsewhere.
  const int64_t host_blocks = 6;
  DeviceBuffer host_key = ctx().create_buffer(size_t(host_blocks) * p.block_bytes(), MemoryKind::host_visible);
  DeviceBuffer host_value = ctx().create_buffer(size_t(host_blocks) * p.block_bytes(), MemoryKind::host_visible);
  const LayerCacheViews host{host_key.tensor(p.dtype, key_cache_shape(p.dtype, host_blocks, 2, 64, 16)),
                             host_value.tensor(p.dtype, value_cache_shape(host_blocks, 2, 64, 16))};
  HostTensor host_key_want(p.dtype, host.key_cache.shape), host_value_want(p.dtype, host.value_cache.shape);
  const std::vector<BlockCopy> out = {{last, 0}, {last - 5, 3}, {below + 1, 5}};  // (device, host)
  std::vector<BlockCopy> window_out;
  for (const BlockCopy& q : out) window_out.push_back({w.window_block(q.src), q.dst});
  ctx().run_and_wait([&](VkCommandBuffer cmd) {
    record_swap_blocks(ctx(), cmd, std::span(&layer, 1), std::span(&host, 1), out);
  });
  reference::swap_blocks(key_window, value_window, host_key_want, host_value_want, window_out);
  const HostTensor host_key_got = download(ctx(), host.key_cache), host_value_got = download(ctx(), host.value_cache);
  for (const BlockCopy& q : out) {
    const size_t bb = p.block_bytes(), at = size_t(q.dst) * bb;
    EXPECT_EQ(std::memcmp(static_cast<const std::byte*>(host_key_got.data()) + at,
                          static_cast<const std::byte*>(host_key_want.data()) + at, bb), 0) << "swap out, block " << q.src;
    EXPECT_EQ(std::memcmp(static_cast<const std::byte*>(host_value_got.data()) + at,
                          static_cast<const std::byte*>(host_value_want.data()) + at, bb), 0) << "swap out, block " << q.src;
  }
  std::tie(key_window, value_window) = randomize(p, 99);  // the device blocks were reused
  const std::vector<BlockCopy> in = {{0, last - 6}, {3, 2}, {5, last}};  // (host, device)
  std::vector<BlockCopy> window_in;
  for (const BlockCopy& q : in) window_in.push_back({q.src, w.window_block(q.dst)});
  ctx().run_and_wait([&](VkCommandBuffer cmd) {
    record_swap_blocks(ctx(), cmd, std::span(&host, 1), std::span(&layer, 1), in);
  });
  reference::swap_blocks(host_key_got, host_value_got, key_window, value_window, window_in);
  EXPECT_TRUE(bytes_equal(download_window(ctx(), p.key, w), key_window)) << "swap in, keys";
  EXPECT_TRUE(bytes_equal(download_window(ctx(), p.value, w), value_window)) << "swap in, values";
}

// An adopted device that did not enable buffer device addresses cannot index such pools:
// reshape_and_cache and gather are refused before recording; copies still work.
TEST_F(CachePastRangeTest, WithoutDeviceAddressesIndexedOperationsAreRefused) {
  const LargePools p = make_pools(ctx(), DType::f16, 2, 64, 16);
  Context adopted(shared_device_without_addresses());

  const HostTensor key = random_tensor(DType::f16, Shape{1, 2, 64}, 3);
  HostTensor slots(DType::i64, Shape{1});
  slots.as<int64_t>()[0] = (p.window.num_blocks - 1) * 16;
  auto d_key = upload(adopted, key), d_slots = upload(adopted, slots);
  const std::string limit = std::to_string(ctx().device_info().max_storage_buffer_range);
  const ReshapeAndCacheViews rv{d_key.view, d_key.view, d_slots.view, p.key, p.value, {}};
  adopted.run_and_wait([&](VkCommandBuffer cmd) {
    expect_refused([&] { record_reshape_and_cache(adopted, cmd, rv); }, "key_cache: a view of", ErrorCode::unsupported);
    expect_refused([&] { record_reshape_and_cache(adopted, cmd, rv); }, limit, ErrorCode::unsupported);
  });
  HostTensor tables(DType::i32, Shape{1, 1}), starts(DType::i32, Shape{2});
  starts.as<int32_t>()[1] = 1;
  auto d_tables = upload(adopted, tables), d_starts = upload(adopted, starts), d_out = upload(adopted, key);
  const GatherViews gv{p.key, p.value, d_tables.view, d_starts.view, d_out.view, d_out.view, {}};
  adopted.run_and_wait([&](VkCommandBuffer cmd) {
    expect_refused([&] { record_gather(adopted, cmd, gv); }, "maxStorageBufferRange", ErrorCode::unsupported);
  });

  auto [key_window, value_window] = randomize(p, 5);
  const std::vector<BlockCopy> pairs = {{0, int32_t(p.window.num_blocks - 1)}};
  const LayerCacheViews layer = p.layer();
  adopted.run_and_wait([&](VkCommandBuffer cmd) { record_copy_blocks(adopted, cmd, std::span(&layer, 1), pairs); });
  reference::copy_blocks(key_window, value_window, std::vector<BlockCopy>{{0, p.window.size() - 1}});
  EXPECT_TRUE(bytes_equal(download_window(ctx(), p.key, p.window), key_window));
  EXPECT_TRUE(bytes_equal(download_window(ctx(), p.value, p.window), value_window));
}

// Pools past 4 GiB keep 32-bit slots and block ids in the shaders: more slots (reshape_and_cache)
// or blocks (gather) than that are refused, naming them, before anything is recorded. (The
// views claim sizes no buffer here has; the refusal comes before any use of them.)
TEST_F(CachePastRangeTest, SlotsAndBlocksPast32BitsAreRefused) {
  // Views that claim pools of 2^32 slots or blocks over a small engine buffer (never recorded).
  const EngineBuffer engine(ctx(), 4096);
  const VkBuffer raw = engine.get();
  const int64_t n_slots = (int64_t(1) << 28) + 1;  // blocks of 16 slots: N * B > 2^32 - 1
  auto claim = [&](DType t, int64_t n, int64_t b) {
    const TensorView key{{raw, 0, uint64_t(n * 16 * b)}, t, key_cache_shape(t, n, 1, 16, b)};
    const TensorView value{{raw, 0, uint64_t(n * 16 * b)}, t, value_cache_shape(n, 1, 16, b)};
    return std::pair{key, value};
  };
  const auto [key_cache, value_cache] = claim(DType::fp8_e4m3, n_slots, 16);
  const HostTensor key(DType::f16, Shape{1, 1, 16});
  HostTensor slots(DType::i64, Shape{1});
  auto d_key = upload(ctx(), key), d_slots = upload(ctx(), slots);
  const ReshapeAndCacheViews rv{d_key.view, d_key.view, d_slots.view, key_cache, value_cache, {}};
  ctx().run_and_wait([&](VkCommandBuffer cmd) {
    expect_refused([&] { record_reshape_and_cache(ctx(), cmd, rv); }, "N * B = " + std::to_string(n_slots * 16),
                   ErrorCode::unsupported);
  });
  const int64_t n_blocks = (int64_t(1) << 32) + 1;
  const auto [key_cache1, value_cache1] = claim(DType::fp8_e4m3, n_blocks, 1);
  HostTensor tables(DType::i32, Shape{1, 1}), starts(DType::i32, Shape{2});
  auto d_tables = upload(ctx(), tables), d_starts = upload(ctx(), starts), d_key_out = upload(ctx(), key),
       d_value_out = upload(ctx(), key);  // both written: two buffers
  const GatherViews gv{key_cache1, value_cache1, d_tables.view, d_starts.view, d_key_out.view, d_value_out.view, {}};
  ctx().run_and_wait([&](VkCommandBuffer cmd) {
    expect_refused([&] { record_gather(ctx(), cmd, gv); }, "N = " + std::to_string(n_blocks) + " blocks",
                   ErrorCode::unsupported);
  });
}

}  // namespace
}  // namespace vkpaged::test
