// SPDX-License-Identifier: Apache-2.0
// reshape_and_cache for MLA on pools larger than maxStorageBufferRange (128 MiB on lavapipe),
// whose blocks past the range cannot be one descriptor: record_mla_reshape_and_cache, plain and
// with RoPE, reaches them by device address, in both cache forms (one pool; ckv and kpe, either
// of which may be the one past the range). Each case's largest pool is just over the range; the
// tokens land in its first blocks and its last ones (past the range), compared bit for bit with
// the CPU reference run on those blocks as a small pool (PoolWindow). KvCache makes and writes
// such pools on a context with buffer device addresses. Without them (an adopted device that did
// not enable them) the write is refused naming the view and the limit, and KvCache refuses the
// pools naming the size. Pools past 4 GiB keep 32-bit slots and in-block offsets: more slots, or
// larger blocks, are refused naming the pool.
#include <algorithm>
#include <functional>
#include <numeric>
#include <string>
#include <vector>

#include "ops/cache_test_helpers.hpp"
#include "support/engine_buffer.hpp"
#include "support/pool_window.hpp"
#include "vkpaged/kv_cache.hpp"
#include "vkpaged/mla_cache_ops.hpp"
#include "vkpaged/rotary.hpp"

namespace vkpaged::test {
namespace {

using namespace cache_helpers;

constexpr uint32_t kMaxPosition = 300;

struct MlaPastRangeCase {
  DType input, cache;
  MlaCacheForm form;
  int64_t block_size, latent, rope;
  float scale = 1.0f;
  DType slot_dtype = DType::i64;
  RotaryStyle style = RotaryStyle::neox;  // the rope variant's
};

std::string case_name(const MlaPastRangeCase& c) {
  return std::string(dtype_name(c.input)) + " -> " + std::string(dtype_name(c.cache)) +
         (c.form == MlaCacheForm::one_pool ? ", one pool" : ", two pools") + ", B " + std::to_string(c.block_size) +
         ", Dv " + std::to_string(c.latent) + ", R " + std::to_string(c.rope);
}

// A layer's MLA pools of N blocks, N chosen so that the last kPastBlocks blocks of the largest
// pool start past the range (its blocks need not divide the range: one more block straddles it).
struct LargeMlaPools {
  std::vector<DeviceBuffer> buffers;
  MlaCacheViews views;
  TensorView largest;
  PoolWindow window;
};

LargeMlaPools make_pools(Context& ctx, const MlaPastRangeCase& c) {
  const uint64_t element = dtype_size(c.cache), B = uint64_t(c.block_size);
  const bool one = c.form == MlaCacheForm::one_pool;
  const int64_t widest = one ? c.latent + c.rope : std::max(c.latent, c.rope);
  const int64_t n =
      int64_t(ctx.device_info().max_storage_buffer_range / (B * uint64_t(widest) * element)) + 1 + kPastBlocks;
  LargeMlaPools p;
  p.buffers.reserve(2);
  auto pool = [&](int64_t width) {
    p.buffers.push_back(ctx.create_buffer(size_t(uint64_t(n) * B * uint64_t(width) * element)));
    return p.buffers.back().tensor(c.cache, Shape{n, c.block_size, width});
  };
  if (one) {
    p.views.mla_cache = pool(c.latent + c.rope);
    p.largest = p.views.mla_cache;
  } else {
    p.views.ckv_cache = pool(c.latent);
    p.views.kpe_cache = pool(c.rope);
    p.largest = c.latent >= c.rope ? p.views.ckv_cache : p.views.kpe_cache;
  }
  p.window = PoolWindow{n, kLowBlocks, kHighBlocks};
  return p;
}

// The window's blocks of each pool given, as the reference's small pools.
reference::MlaHostCache download_windows(Context& ctx, const MlaCacheViews& v, const PoolWindow& w) {
  reference::MlaHostCache h;
  if (!v.mla_cache.memory.empty()) h.mla_cache = download_window(ctx, v.mla_cache, w);
  if (!v.ckv_cache.memory.empty()) h.ckv_cache = download_window(ctx, v.ckv_cache, w);
  if (!v.kpe_cache.memory.empty()) h.kpe_cache = download_window(ctx, v.kpe_cache, w);
  return h;
}

// Random window contents on the device; returns them.
reference::MlaHostCache randomize(Context& ctx, const MlaCacheViews& v, const PoolWindow& w, uint32_t seed) {
  reference::MlaHostCache h;
  auto fill = [&](const TensorView& pool, HostTensor& host) {
    if (pool.memory.empty()) return;
    host = random_tensor(pool.dtype, w.shape_of(pool), seed++);
    upload_window(ctx, pool, w, host);
  };
  fill(v.mla_cache, h.mla_cache);
  fill(v.ckv_cache, h.ckv_cache);
  fill(v.kpe_cache, h.kpe_cache);
  return h;
}

void expect_windows_equal(const reference::MlaHostCache& got, const reference::MlaHostCache& want) {
  if (!want.mla_cache.empty()) EXPECT_TRUE(bytes_equal(got.mla_cache, want.mla_cache)) << "mla_cache blocks";
  if (!want.ckv_cache.empty()) EXPECT_TRUE(bytes_equal(got.ckv_cache, want.ckv_cache)) << "ckv_cache blocks";
  if (!want.kpe_cache.empty()) EXPECT_TRUE(bytes_equal(got.kpe_cache, want.kpe_cache)) << "kpe_cache blocks";
}

using Record = std::function<void(VkCommandBuffer, const MlaReshapeAndCacheViews&, const MlaRopeViews*)>;

// T tokens into shuffled slots of the window (its low blocks and the blocks past the range),
// one in nine padding, written by `record` (plain, or with RoPE) and compared bit for bit with
// the reference on the window: with RoPE, what rotary_embedding on the GPU then the write stores.
void write_and_compare(Context& ctx, const MlaPastRangeCase& c, const MlaCacheViews& pools, const PoolWindow& w,
                       bool with_rope, uint32_t seed, const Record& record) {
  SCOPED_TRACE(with_rope ? "rope" : "plain");
  reference::MlaHostCache want = randomize(ctx, pools, w, seed);
  std::mt19937 rng(seed);
  const int64_t B = c.block_size, T = 90;
  std::vector<int64_t> window_slots(size_t(w.size()) * size_t(B));
  std::iota(window_slots.begin(), window_slots.end(), 0);
  std::shuffle(window_slots.begin(), window_slots.end(), rng);
  HostTensor slots(c.slot_dtype, Shape{T}), reference_slots(DType::i64, Shape{T});
  int64_t low = 0, past = 0;
  for (int64_t t = 0; t < T; ++t) {
    const int64_t s = window_slots[size_t(t)];
    const bool padding = t % 9 == 4;
    const int64_t block = w.pool_block(int32_t(s / B));
    low += !padding && block < w.low;
    past += !padding && block >= w.num_blocks - kPastBlocks;
    slots.set(size_t(t), padding ? -1.0 : double(block * B + s % B));
    reference_slots.set(size_t(t), padding ? -1.0 : double(s));
  }
  ASSERT_GT(past, 10) << "too few tokens land past the range";
  ASSERT_GT(low, 2) << "too few tokens land in the first blocks";
  // Inputs within the fp8 range once divided by the scale.
  HostTensor kv_c = random_tensor(c.input, Shape{T, c.latent}, rng());
  HostTensor k_pe = random_tensor(c.input, Shape{T, c.rope}, rng());
  for (HostTensor* h : {&kv_c, &k_pe})
    for (int64_t i = 0; i < h->numel(); ++i) h->set(size_t(i), h->get(size_t(i)) * 4.0 * c.scale);
  auto d_kv_c = upload(ctx, kv_c), d_k_pe = upload(ctx, k_pe), d_slots = upload(ctx, slots);
  DeviceBuffer status = ctx.create_buffer(16);
  const uint32_t zero = 0;
  ctx.upload(status.view(0, 4), &zero, 4);
  const MlaReshapeAndCacheViews v{d_kv_c.view, d_k_pe.view, d_slots.view, pools, status.view(0, 4)};

  if (!with_rope) {
    ctx.run_and_wait([&](VkCommandBuffer cmd) { record(cmd, v, nullptr); });
    reference::mla_reshape_and_cache(kv_c, k_pe, reference_slots, want, c.scale);
  } else {
    HostTensor positions(DType::i64, Shape{T});
    for (int64_t t = 0; t < T; ++t) positions.set(size_t(t), double(rng() % kMaxPosition));
    const HostTensor cos_sin = rotary_cos_sin_cache(kMaxPosition, uint32_t(c.rope), 10000.0, c.input);
    auto d_positions = upload(ctx, positions), d_cos_sin = upload(ctx, cos_sin);
    const MlaRopeViews rope{d_positions.view, d_cos_sin.view, c.style};
    ctx.run_and_wait([&](VkCommandBuffer cmd) { record(cmd, v, &rope); });
    EXPECT_TRUE(bytes_equal(download(ctx, d_k_pe.view), k_pe)) << "k_pe is read, not written";
    HostTensor rotated(k_pe.dtype(), Shape{T, 1, c.rope}), no_query;
    std::memcpy(rotated.data(), k_pe.data(), k_pe.bytes());
    rotary_embedding(ctx, no_query, rotated, positions, cos_sin, c.style);
    HostTensor rotated_rows(k_pe.dtype(), k_pe.shape());
    std::memcpy(rotated_rows.data(), rotated.data(), rotated.bytes());
    reference::mla_reshape_and_cache(kv_c, rotated_rows, reference_slots, want, c.scale);
  }
  expect_windows_equal(download_windows(ctx, pools, w), want);
  EXPECT_EQ(read_status(ctx, status), 0u);
}

class MlaCachePastRangeTest : public GpuTest {
 protected:
  void SetUp() override {
    GpuTest::SetUp();
    if (const std::string why = past_range_skip_reason(ctx().device_info()); !why.empty()) GTEST_SKIP() << why;
  }
};

TEST_F(MlaCachePastRangeTest, WriteMatchesTheReferenceBitExactly) {
  using F = MlaCacheForm;
  for (const MlaPastRangeCase c : {
           MlaPastRangeCase{DType::f16, DType::bf16, F::one_pool, 64, 512, 64},
           MlaPastRangeCase{DType::bf16, DType::fp8_e4m3, F::one_pool, 16, 512, 64, 0.05f, DType::i32,
                            RotaryStyle::gptj},
           MlaPastRangeCase{DType::bf16, DType::bf16, F::two_pools, 32, 512, 64},  // ckv past the range
           // kpe past the range (ckv within it): the second pool's address.
           MlaPastRangeCase{DType::f16, DType::fp8_e4m3, F::two_pools, 16, 32, 256, 0.5f, DType::i32},
       }) {
    SCOPED_TRACE(case_name(c));
    const LargeMlaPools p = make_pools(ctx(), c);
    const uint64_t range = ctx().device_info().max_storage_buffer_range;
    ASSERT_GT(p.largest.memory.size, range);
    ASSERT_GE(uint64_t(p.window.num_blocks - kPastBlocks) * (p.largest.memory.size / uint64_t(p.window.num_blocks)),
              range);
    for (const bool with_rope : {false, true})
      write_and_compare(ctx(), c, p.views, p.window, with_rope, with_rope ? 11u : 7u,
                        [&](VkCommandBuffer cmd, const MlaReshapeAndCacheViews& v, const MlaRopeViews* rope) {
                          record_mla_reshape_and_cache(ctx(), cmd, v, c.scale, rope);
                        });
  }
}

// KvCache plans MLA pools past the range on a context with buffer device addresses, and its
// write reaches their last blocks.
TEST_F(MlaCachePastRangeTest, KvCacheMakesAndWritesPoolsPastTheRange) {
  const MlaPastRangeCase c{DType::bf16, DType::bf16, MlaCacheForm::two_pools, 16, 512, 64};
  KvCacheShape s;
  s.num_layers = 1;
  s.num_kv_heads = 1;
  s.head_size = uint32_t(c.latent);
  s.block_size = uint32_t(c.block_size);
  s.dtype = c.cache;
  s.layout = KvLayout::nhd;
  s.kind = KvCacheKind::mla_two_pools;
  s.rope_head_size = uint32_t(c.rope);
  const DeviceInfo& device = ctx().device_info();
  KvCacheOptions o;
  o.num_blocks = KvCache::max_blocks_per_pool(s, device.max_storage_buffer_range) + 1 + kPastBlocks;
  const KvCacheSizing z = KvCache::sizing(s, o.num_blocks);
  if (device.max_memory_allocation_size != 0 && z.pool_bytes > device.max_memory_allocation_size)
    GTEST_SKIP() << "one allocation is promised less than a pool past the range here";
  KvCache cache(ctx(), s, o);
  const PoolWindow w{int64_t(cache.num_blocks()), kLowBlocks, kHighBlocks};
  ASSERT_GE(uint64_t(w.num_blocks - kPastBlocks) * cache.sizing().block_bytes, device.max_storage_buffer_range);
  for (const bool with_rope : {false, true})
    write_and_compare(ctx(), c, cache.mla_cache(0), w, with_rope, with_rope ? 23u : 19u,
                      [&](VkCommandBuffer cmd, const MlaReshapeAndCacheViews& v, const MlaRopeViews* rope) {
                        cache.record_mla_reshape_and_cache(cmd, 0, {v.kv_c, v.k_pe, v.slot_mapping, v.status}, c.scale,
                                                           rope);
                      });

  // An adopted device that did not enable buffer device addresses: the same pools are refused.
  Context adopted(shared_device_without_addresses());
  expect_refused([&] { KvCache refused(adopted, s, o); }, ErrorCode::unsupported,
                 {"num_blocks " + std::to_string(o.num_blocks), "largest MLA pool", "maxStorageBufferRange",
                  "buffer device addresses"});
}

// Without buffer device addresses a pool view past the range is refused before recording,
// naming the view, its size and the limit: the one pool, ckv or kpe, plain or with RoPE.
TEST_F(MlaCachePastRangeTest, WithoutDeviceAddressesTheWriteIsRefused) {
  Context adopted(shared_device_without_addresses());
  const std::string limit = std::to_string(ctx().device_info().max_storage_buffer_range);
  using F = MlaCacheForm;
  for (const MlaPastRangeCase c : {MlaPastRangeCase{DType::f16, DType::f16, F::one_pool, 16, 512, 64},
                                   MlaPastRangeCase{DType::f16, DType::f16, F::two_pools, 16, 512, 64},
                                   MlaPastRangeCase{DType::f16, DType::f16, F::two_pools, 16, 16, 512}}) {
    SCOPED_TRACE(case_name(c));
    const LargeMlaPools p = make_pools(ctx(), c);
    const char* name = c.form == F::one_pool ? "mla_cache" : c.latent > c.rope ? "ckv_cache" : "kpe_cache";
    const HostTensor kv_c = random_tensor(DType::f16, Shape{1, c.latent}, 3);
    const HostTensor k_pe = random_tensor(DType::f16, Shape{1, c.rope}, 4);
    HostTensor slots(DType::i64, Shape{1}), positions(DType::i64, Shape{1});
    slots.set(0, double((p.window.num_blocks - 1) * c.block_size));
    auto d_kv_c = upload(adopted, kv_c), d_k_pe = upload(adopted, k_pe), d_slots = upload(adopted, slots);
    auto d_positions = upload(adopted, positions);
    auto d_cos_sin = upload(adopted, rotary_cos_sin_cache(8, uint32_t(c.rope)));
    const MlaReshapeAndCacheViews v{d_kv_c.view, d_k_pe.view, d_slots.view, p.views, {}};
    const MlaRopeViews rope{d_positions.view, d_cos_sin.view, RotaryStyle::neox};
    const std::string view_size = std::string(name) + ": a view of " + std::to_string(p.largest.memory.size) + " bytes";
    for (const MlaRopeViews* r : {static_cast<const MlaRopeViews*>(nullptr), &rope}) {
      SCOPED_TRACE(r ? "rope" : "plain");
      adopted.run_and_wait([&](VkCommandBuffer cmd) {
        expect_refused([&] { record_mla_reshape_and_cache(adopted, cmd, v, 1.0f, r); }, ErrorCode::unsupported,
                       {view_size, "maxStorageBufferRange of " + limit, "buffer device addresses"});
      });
    }
  }
}

// The shaders keep slots and offsets inside a block in 32 bits: N * B past 2^32 - 1 slots
// (invalid_argument, the shape's check) or a block of 4 GiB or more (unsupported, the address
// variant's) is refused before recording, naming the pool. (The views claim pools no buffer here
// has, over an engine's small buffer; the refusals come before any use of them.)
TEST_F(MlaCachePastRangeTest, SlotsAndBlocksPast32BitsAreRefused) {
  const EngineBuffer engine(ctx(), 4096);
  // fp8 rows of Dv 16 + R 16: 32 bytes a row.
  auto claim = [&](int64_t n, int64_t b, int64_t width) {
    return TensorView{{engine.get(), 0, uint64_t(n * b * width)}, DType::fp8_e4m3, Shape{n, b, width}};
  };
  const HostTensor kv_c = random_tensor(DType::f16, Shape{1, 16}, 1);
  HostTensor slots(DType::i64, Shape{1});
  auto d_kv_c = upload(ctx(), kv_c), d_slots = upload(ctx(), slots);
  auto d_k_pe16 = upload(ctx(), random_tensor(DType::f16, Shape{1, 16}, 2));
  auto d_k_pe32 = upload(ctx(), random_tensor(DType::f16, Shape{1, 32}, 3));
  auto refused = [&](const MlaCacheViews& pools, int64_t rope, ErrorCode code, const std::string& needle) {
    const MlaReshapeAndCacheViews v{d_kv_c.view, rope == 16 ? d_k_pe16.view : d_k_pe32.view, d_slots.view, pools, {}};
    ctx().run_and_wait([&](VkCommandBuffer cmd) {
      expect_refused([&] { record_mla_reshape_and_cache(ctx(), cmd, v, 1.0f); }, code, {needle});
    });
  };
  const int64_t n = (int64_t(1) << 28) + 1;  // blocks of 16 slots: N * B > 2^32 - 1
  const std::string slots_past = " N * B = " + std::to_string(n * 16) + " slots is more than";
  refused({claim(n, 16, 32), {}, {}}, 16, ErrorCode::invalid_argument, "mla_cache:" + slots_past);
  refused({{}, claim(n, 16, 16), claim(n, 16, 16)}, 16, ErrorCode::invalid_argument, "ckv_cache:" + slots_past);
  // One block of 2^27 rows of 32 bytes: 2^32 bytes, one more than a block's 32-bit offsets reach.
  const int64_t b = int64_t(1) << 27;
  const std::string too_large = "blocks of " + std::to_string(b * 32) + " bytes are too large to address";
  refused({claim(1, b, 32), {}, {}}, 16, ErrorCode::unsupported, "mla_cache: " + too_large);
  // ckv's blocks (2 GiB) pass; kpe's are named.
  refused({{}, claim(1, b, 16), claim(1, b, 32)}, 32, ErrorCode::unsupported, "kpe_cache: " + too_large);
}

}  // namespace
}  // namespace vkpaged::test
