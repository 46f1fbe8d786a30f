// SPDX-License-Identifier: Apache-2.0
// gather on the GPU against the CPU reference, bit for bit: every cache dtype and layout
// (vllm, nhd, hnd) with f32, f16 and bf16 outputs, block sizes 1 to 32, head sizes 64, 80 and
// 128, shuffled block tables, empty and partial sequences; a reshape -> gather round trip;
// device-side bad block ids and lengths; host-side refusals.
#include <fmt/format.h>

#include <algorithm>
#include <numeric>
#include <vector>

#include "ops/cache_test_helpers.hpp"

namespace vkpaged::test {
namespace {

using namespace cache_helpers;

struct GatherCase {
  DType cache;
  DType output;
  int64_t block_size, head_size, kv_heads, blocks;
  std::vector<int64_t> lengths;
  CacheScales scales{};
  KvLayout layout = KvLayout::vllm;
};

void PrintTo(const GatherCase& c, std::ostream* os) {
  *os << dtype_name(c.cache) << " -> " << dtype_name(c.output) << ", B " << c.block_size << ", D " << c.head_size
      << ", Hkv " << c.kv_heads << ", N " << c.blocks << ", " << c.lengths.size() << " sequences, "
      << kv_layout_name(c.layout);
}

std::string case_name(const ::testing::TestParamInfo<GatherCase>& info) {
  const auto& c = info.param;
  const std::string layout = c.layout == KvLayout::vllm ? "" : std::string(kv_layout_name(c.layout)) + "_";
  return fmt::format("{}{}_to_{}_B{}_D{}_H{}", layout,
                     dtype_name(c.cache), dtype_name(c.output), c.block_size, c.head_size, c.kv_heads);
}

// Block tables over a shuffled set of blocks; unused entries hold an id past N, which gather
// must never read.
struct Tables {
  HostTensor block_tables, seq_starts;
  int64_t rows = 0;
};
Tables make_tables(const std::vector<int64_t>& lengths, int64_t block_size, int64_t blocks, std::mt19937& rng) {
  int64_t max_blocks = 1;
  for (int64_t len : lengths) max_blocks = std::max(max_blocks, (len + block_size - 1) / block_size + 1);
  const int64_t S = int64_t(lengths.size());
  Tables t{HostTensor(DType::i32, Shape{S, max_blocks}), HostTensor(DType::i32, Shape{S + 1})};
  std::vector<int32_t> ids(static_cast<size_t>(blocks));
  std::iota(ids.begin(), ids.end(), 0);
  std::shuffle(ids.begin(), ids.end(), rng);
  size_t next = 0;
  for (int64_t s = 0; s < S; ++s) {
    t.seq_starts.as<int32_t>()[s] = int32_t(t.rows);
    const int64_t used = (lengths[size_t(s)] + block_size - 1) / block_size;
    for (int64_t j = 0; j < max_blocks; ++j)
      t.block_tables.as<int32_t>()[s * max_blocks + j] = j < used ? ids[next++ % ids.size()] : int32_t(blocks + 5);
    t.rows += lengths[size_t(s)];
  }
  t.seq_starts.as<int32_t>()[S] = int32_t(t.rows);
  return t;
}

struct GatherRun {
  DeviceTensor key_out, value_out;
  DeviceBuffer status;
};
GatherRun run_gather(Context& ctx, const DeviceTensor& key_cache, const DeviceTensor& value_cache, const Tables& t,
                     DType output, int64_t kv_heads, int64_t head_size, const CacheScales& scales, uint32_t seed,
                     KvLayout layout = KvLayout::vllm) {
  GatherRun r;
  const Shape out_shape{t.rows, kv_heads, head_size};
  r.key_out = upload(ctx, random_tensor(output, out_shape, seed));  // every row must be overwritten
  r.value_out = upload(ctx, random_tensor(output, out_shape, seed + 1));
  r.status = ctx.create_buffer(16);
  const uint32_t zero = 0;
  ctx.upload(r.status.view(0, 4), &zero, 4);
  auto tables = upload(ctx, t.block_tables), starts = upload(ctx, t.seq_starts);
  GatherViews v{key_cache.view,   value_cache.view,   tables.view, starts.view, r.key_out.view,
                r.value_out.view, r.status.view(0, 4), layout};
  ctx.run_and_wait([&](VkCommandBuffer cmd) { record_gather(ctx, cmd, v, scales); });
  return r;
}

class GatherTest : public GpuTest, public ::testing::WithParamInterface<GatherCase> {};

TEST_P(GatherTest, MatchesReferenceBitExactly) {
  const GatherCase c = GetParam();
  std::mt19937 rng(uint32_t(c.block_size * 17 + c.head_size + uint32_t(c.cache) * 1000));
  const HostTensor key_cache = random_tensor(
      c.cache, key_cache_shape(c.layout, c.cache, c.blocks, c.kv_heads, c.head_size, c.block_size), rng());
  const HostTensor value_cache =
      random_tensor(c.cache, value_cache_shape(c.layout, c.blocks, c.kv_heads, c.head_size, c.block_size), rng());
  const Tables t = make_tables(c.lengths, c.block_size, c.blocks, rng);
  auto d_key_cache = upload(ctx(), key_cache), d_value_cache = upload(ctx(), value_cache);
  const GatherRun r =
      run_gather(ctx(), d_key_cache, d_value_cache, t, c.output, c.kv_heads, c.head_size, c.scales, rng(), c.layout);

  const auto want =
      reference::gather(key_cache, value_cache, t.block_tables, t.seq_starts, c.output, c.scales, c.layout);
  EXPECT_TRUE(bytes_equal(download(ctx(), r.key_out), want.key)) << "keys";
  EXPECT_TRUE(bytes_equal(download(ctx(), r.value_out), want.value)) << "values";
  EXPECT_EQ(read_status(ctx(), r.status), 0u);
}

const GatherCase kCases[] = {
    {DType::f32, DType::f32, 16, 64, 2, 12, {37, 0, 16, 5}},
    {DType::f16, DType::f16, 8, 128, 2, 10, {20, 9, 1}},
    {DType::bf16, DType::f32, 32, 80, 1, 6, {70, 33}},
    {DType::f16, DType::bf16, 16, 80, 1, 8, {30, 31}},
    {DType::f32, DType::f16, 1, 128, 1, 20, {7, 6}},
    {DType::fp8_e4m3, DType::f16, 16, 128, 2, 8, {40, 17}, {0.37f, 1.9f}},
    {DType::fp8_e4m3, DType::f32, 8, 80, 1, 10, {25, 30}, {0.013f, 3.0f}},
    {DType::fp8_e5m2, DType::bf16, 1, 64, 2, 40, {13, 0, 9}, {2.0f, 0.5f}},
    {DType::fp8_e5m2, DType::f32, 32, 64, 1, 4, {64, 50}, {1.0f, 1.0f}},
};
INSTANTIATE_TEST_SUITE_P(Shapes, GatherTest, ::testing::ValuesIn(kCases), case_name);

// Every case again in the nhd and hnd layouts.
std::vector<GatherCase> layout_cases() {
  std::vector<GatherCase> cases;
  for (KvLayout layout : {KvLayout::nhd, KvLayout::hnd})
    for (GatherCase c : kCases) {
      c.layout = layout;
      cases.push_back(c);
    }
  return cases;
}
INSTANTIATE_TEST_SUITE_P(Layouts, GatherTest, ::testing::ValuesIn(layout_cases()), case_name);

class GatherDeviceTest : public GpuTest {};

TEST_F(GatherDeviceTest, ReturnsWhatReshapeAndCacheStored) {
  for (KvLayout layout : kAllLayouts) {
    SCOPED_TRACE(kv_layout_name(layout));
    // T tokens stored at shuffled slots of an f16 cache come back unchanged when gathered in
    // slot order through a block table listing blocks 0..N-1.
    const int64_t N = 6, B = 8, Hkv = 2, D = 80, T = N * B;
    const HostTensor key = random_tensor(DType::f16, Shape{T, Hkv, D}, 61),
                     value = random_tensor(DType::f16, Shape{T, Hkv, D}, 62);
    HostTensor slots(DType::i64, Shape{T});
    std::vector<int64_t> order(static_cast<size_t>(T));
    std::iota(order.begin(), order.end(), 0);
    std::shuffle(order.begin(), order.end(), std::mt19937(63));
    std::copy(order.begin(), order.end(), slots.as<int64_t>());
    HostTensor key_cache(DType::f16, key_cache_shape(layout, DType::f16, N, Hkv, D, B)),
        value_cache(DType::f16, value_cache_shape(layout, N, Hkv, D, B));
    auto d_key = upload(ctx(), key), d_value = upload(ctx(), value), d_slots = upload(ctx(), slots);
    auto d_key_cache = upload(ctx(), key_cache), d_value_cache = upload(ctx(), value_cache);
    ReshapeAndCacheViews rv{d_key.view, d_value.view, d_slots.view, d_key_cache.view, d_value_cache.view, {}, layout};
    ctx().run_and_wait([&](VkCommandBuffer cmd) {
      record_reshape_and_cache(ctx(), cmd, rv);
      record_compute_barrier(ctx(), cmd);
    });

    Tables t{HostTensor(DType::i32, Shape{1, N}), HostTensor(DType::i32, Shape{2}), T};
    for (int32_t j = 0; j < N; ++j) t.block_tables.as<int32_t>()[j] = j;
    t.seq_starts.as<int32_t>()[1] = int32_t(T);
    const GatherRun r = run_gather(ctx(), d_key_cache, d_value_cache, t, DType::f16, Hkv, D, {}, 64, layout);
    // Row p of the gather is slot p, which holds token order^-1(p).
    HostTensor want_key(DType::f16, Shape{T, Hkv, D}), want_value(DType::f16, Shape{T, Hkv, D});
    const size_t row_bytes = size_t(Hkv * D) * 2;
    for (int64_t token = 0; token < T; ++token) {
      const size_t slot = size_t(order[size_t(token)]);
      std::memcpy(want_key.as<uint8_t>() + slot * row_bytes, key.as<uint8_t>() + token * row_bytes, row_bytes);
      std::memcpy(want_value.as<uint8_t>() + slot * row_bytes, value.as<uint8_t>() + token * row_bytes, row_bytes);
    }
    EXPECT_TRUE(bytes_equal(download(ctx(), r.key_out), want_key));
    EXPECT_TRUE(bytes_equal(download(ctx(), r.value_out), want_value));
  }
}

TEST_F(GatherDeviceTest, ViewsAtOffsetsInsideOneBuffer) {
  for (KvLayout layout : kAllLayouts) {
    SCOPED_TRACE(kv_layout_name(layout));
    const int64_t N = 5, B = 16, Hkv = 2, D = 64;
    std::mt19937 rng(91);
    const HostTensor key_cache =
        random_tensor(DType::fp8_e4m3, key_cache_shape(layout, DType::fp8_e4m3, N, Hkv, D, B), 92);
    const HostTensor value_cache = random_tensor(DType::fp8_e4m3, value_cache_shape(layout, N, Hkv, D, B), 93);
    const Tables t = make_tables({20, 3, 33}, B, N, rng);
    auto buffer = ctx().create_buffer(131072);
    GatherViews v;
    v.key_cache = upload_at(ctx(), buffer, 48, key_cache);
    v.value_cache = upload_at(ctx(), buffer, 16384 + 80, value_cache);
    v.block_tables = upload_at(ctx(), buffer, 32768 + 4, t.block_tables);
    v.seq_starts = upload_at(ctx(), buffer, 32768 + 1028, t.seq_starts);
    v.key_out = upload_at(ctx(), buffer, 65536 + 8, HostTensor(DType::bf16, Shape{t.rows, Hkv, D}));
    v.value_out = upload_at(ctx(), buffer, 98304 + 12, HostTensor(DType::bf16, Shape{t.rows, Hkv, D}));
    v.layout = layout;
    ctx().run_and_wait([&](VkCommandBuffer cmd) { record_gather(ctx(), cmd, v, {0.2f, 5.0f}); });
    const auto want =
        reference::gather(key_cache, value_cache, t.block_tables, t.seq_starts, DType::bf16, {0.2f, 5.0f}, layout);
    EXPECT_TRUE(bytes_equal(download(ctx(), v.key_out), want.key));
    EXPECT_TRUE(bytes_equal(download(ctx(), v.value_out), want.value));
  }
}

TEST_F(GatherDeviceTest, BadBlockIdsAndLengthsOnDeviceAreFlaggedAndSkipped) {
  for (KvLayout layout : kAllLayouts) {
    SCOPED_TRACE(kv_layout_name(layout));
    // Sequence 0's third block id is N (bad); sequence 1 is longer than M * B = 24.
    const int64_t N = 6, B = 8, Hkv = 1, D = 64;
    const HostTensor key_cache = random_tensor(DType::f32, key_cache_shape(layout, DType::f32, N, Hkv, D, B), 71);
    const HostTensor value_cache = random_tensor(DType::f32, value_cache_shape(layout, N, Hkv, D, B), 72);
    Tables t{HostTensor(DType::i32, Shape{2, 3}), HostTensor(DType::i32, Shape{3}), 20 + 30};
    const int32_t tables[] = {4, 1, int32_t(N), 0, 5, 2};
    std::copy(std::begin(tables), std::end(tables), t.block_tables.as<int32_t>());
    const int32_t starts[] = {0, 20, 50};
    std::copy(std::begin(starts), std::end(starts), t.seq_starts.as<int32_t>());
    auto d_key_cache = upload(ctx(), key_cache), d_value_cache = upload(ctx(), value_cache);
    const GatherRun r = run_gather(ctx(), d_key_cache, d_value_cache, t, DType::f32, Hkv, D, {}, 73, layout);
    EXPECT_EQ(read_status(ctx(), r.status), kStatusBadBlockId | kStatusBadContextLen);

    // The reference on the valid part: sequence 0's first 16 positions, sequence 1's first 24.
    Tables valid = t;
    const int32_t valid_starts[] = {0, 16, 40};
    std::copy(std::begin(valid_starts), std::end(valid_starts), valid.seq_starts.as<int32_t>());
    const auto want =
        reference::gather(key_cache, value_cache, valid.block_tables, valid.seq_starts, DType::f32, {}, layout);
    const HostTensor before = random_tensor(DType::f32, Shape{50, Hkv, D}, 73);  // what run_gather uploaded
    const HostTensor got = download(ctx(), r.key_out);
    const size_t row = size_t(Hkv * D) * 4;
    auto rows_equal = [&](const HostTensor& a, int64_t a_row, const HostTensor& b, int64_t b_row, int64_t n) {
      return std::memcmp(a.as<uint8_t>() + a_row * row, b.as<uint8_t>() + b_row * row, size_t(n) * row) == 0;
    };
    EXPECT_TRUE(rows_equal(got, 0, want.key, 0, 16)) << "sequence 0, good blocks";
    EXPECT_TRUE(rows_equal(got, 16, before, 16, 4)) << "sequence 0, bad block: left as it was";
    EXPECT_TRUE(rows_equal(got, 20, want.key, 16, 24)) << "sequence 1, within M * B";
    EXPECT_TRUE(rows_equal(got, 44, before, 44, 6)) << "sequence 1, past M * B: left as it was";
  }
}

TEST_F(GatherDeviceTest, RefusesBadArgumentsBeforeRecording) {
  const int64_t N = 4, B = 16, Hkv = 2, D = 64;
  auto key_cache = upload(ctx(), random_tensor(DType::fp8_e4m3, key_cache_shape(DType::fp8_e4m3, N, Hkv, D, B), 81));
  auto value_cache = upload(ctx(), random_tensor(DType::fp8_e4m3, value_cache_shape(N, Hkv, D, B), 82));
  auto tables = upload(ctx(), HostTensor(DType::i32, Shape{2, 3}));
  auto starts = upload(ctx(), HostTensor(DType::i32, Shape{3}));
  const HostTensor out_before = random_tensor(DType::f16, Shape{10, Hkv, D}, 83);
  auto key_out = upload(ctx(), out_before), value_out = upload(ctx(), out_before);
  auto refused = [&](const std::string& name, auto spoil) {
    GatherViews v{key_cache.view, value_cache.view, tables.view, starts.view, key_out.view, value_out.view, {}};
    CacheScales scales;
    spoil(v, scales);
    expect_refused_recording(
        ctx(), [&](VkCommandBuffer cmd) { record_gather(ctx(), cmd, v, scales); }, name);
  };
  refused("key_out: dtype fp8_e4m3", [](auto& v, auto&) { v.key_out.dtype = v.value_out.dtype = DType::fp8_e4m3; });
  refused("value_out: dtype f32", [](auto& v, auto&) { v.value_out.dtype = DType::f32; });
  refused("key_out: shape [10, 3, 64]", [](auto& v, auto&) { v.key_out.shape = Shape{10, 3, 64}; });
  refused("value_out", [](auto& v, auto&) { v.value_out.shape = Shape{9, 2, 64}; });
  refused("seq_starts: shape [2]", [](auto& v, auto&) { v.seq_starts.shape = Shape{2}; });
  refused("seq_starts: dtype f32", [](auto& v, auto&) { v.seq_starts.dtype = DType::f32; });
  refused("block_tables: dtype i64", [](auto& v, auto&) { v.block_tables.dtype = DType::i64; });
  refused("block_tables: shape", [](auto& v, auto&) { v.block_tables.shape = Shape{6}; });
  refused("value_cache: shape", [](auto& v, auto&) { v.value_cache.shape = Shape{4, 2, 64}; });
  refused("key_out: buffer view", [](auto& v, auto&) { v.key_out.memory.size = 8; });
  refused("k_scale", [](auto&, auto& s) { s.k_scale = -1.0f; });
  refused("the hnd layout", [](auto& v, auto&) { v.layout = KvLayout::hnd; });
  refused("layout: 3 is not a cache layout", [](auto& v, auto&) { v.layout = KvLayout(3); });
  EXPECT_TRUE(bytes_equal(download(ctx(), key_out), out_before)) << "a refused call wrote key_out";
}

TEST(GatherReferenceTest, RefusesHostKnownBadIndices) {
  HostTensor key_cache(DType::f16, key_cache_shape(DType::f16, 3, 1, 64, 4)),
      value_cache(DType::f16, value_cache_shape(3, 1, 64, 4));
  HostTensor tables(DType::i32, Shape{1, 3}), starts(DType::i32, Shape{2});
  starts.as<int32_t>()[1] = 10;
  tables.as<int32_t>()[2] = 3;  // N = 3
  expect_refused([&] { reference::gather(key_cache, value_cache, tables, starts, DType::f16); },
                 "block_tables[0][2]: block id 3");
  starts.as<int32_t>()[1] = 13;  // M * B = 12
  expect_refused([&] { reference::gather(key_cache, value_cache, tables, starts, DType::f16); }, "seq_starts[1]");
  HostTensor two(DType::i32, Shape{2, 3}), decreasing(DType::i32, Shape{3});
  decreasing.as<int32_t>()[0] = 4;
  decreasing.as<int32_t>()[1] = 2;
  decreasing.as<int32_t>()[2] = 5;
  expect_refused([&] { reference::gather(key_cache, value_cache, two, decreasing, DType::f16); }, "seq_starts[0]: 4");
}

}  // namespace
}  // namespace vkpaged::test
