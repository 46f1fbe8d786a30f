// SPDX-License-Identifier: Apache-2.0
// Rotary embedding on the GPU against the CPU reference (double precision): NeoX and GPT-J
// styles, full and partial rotary dims, f32/f16/bf16 rows with f32 or same-dtype cos/sin,
// i64 and i32 positions, odd T and T = 0, queries or keys alone; the fused reshape_and_cache
// in every cache dtype and layout, whose cache bytes must be exactly what reshape_and_cache
// stores from the keys the GPU rotated, and whose every output must equal the two-kernel path
// (rotary_embedding then reshape_and_cache) bit for bit; positions out of range flagged and
// their tokens left alone; refusals before anything is recorded.
#include <fmt/format.h>

#include <algorithm>
#include <cmath>
#include <numeric>
#include <vector>

#include "ops/cache_test_helpers.hpp"
#include "vkpaged/rotary.hpp"

namespace vkpaged::test {
namespace {

using namespace cache_helpers;

// Elements [from, D) of every row of [T, heads, D] tensors are the same bits.
::testing::AssertionResult tails_equal(const HostTensor& a, const HostTensor& b, int64_t from) {
  const int64_t d = a.shape()[2], rows = a.numel() / std::max<int64_t>(d, 1), bytes = int64_t(dtype_size(a.dtype()));
  for (int64_t r = 0; r < rows; ++r)
    if (std::memcmp(a.as<uint8_t>() + (r * d + from) * bytes, b.as<uint8_t>() + (r * d + from) * bytes,
                    size_t((d - from) * bytes)) != 0)
      return ::testing::AssertionFailure() << "row " << r << " changed past rotary_dim";
  return ::testing::AssertionSuccess();
}

HostTensor random_positions(DType t, int64_t tokens, int64_t max_position, std::mt19937& rng) {
  HostTensor p(t, Shape{tokens});
  for (int64_t i = 0; i < tokens; ++i)
    p.set(size_t(i), double(i == 0 ? max_position - 1 : int64_t(rng() % uint64_t(max_position))));
  return p;
}

DeviceBuffer zeroed_status(Context& ctx) {
  DeviceBuffer status = ctx.create_buffer(16);
  const uint32_t zero = 0;
  ctx.upload(status.view(0, 4), &zero, 4);
  return status;
}

// ---- rotary_embedding ----

struct RotaryCase {
  DType dtype;
  DType cos_sin;
  RotaryStyle style;
  int64_t tokens, heads, kv_heads, head_size, rotary_dim;
  DType positions = DType::i64;
  bool query = true, key = true;
};

void PrintTo(const RotaryCase& c, std::ostream* os) {
  *os << dtype_name(c.dtype) << " (cos/sin " << dtype_name(c.cos_sin) << "), " << rotary_style_name(c.style) << ", T "
      << c.tokens << ", H " << c.heads << "/" << c.kv_heads << ", D " << c.head_size << ", rotary " << c.rotary_dim;
}

std::string rotary_name(const ::testing::TestParamInfo<RotaryCase>& info) {
  const auto& c = info.param;
  return fmt::format("{}_{}_cs{}_T{}_H{}x{}_D{}_R{}_{}{}{}", rotary_style_name(c.style), dtype_name(c.dtype),
                     dtype_name(c.cos_sin), c.tokens, c.heads, c.kv_heads, c.head_size, c.rotary_dim,
                     dtype_name(c.positions), c.query ? "" : "_keys_only", c.key ? "" : "_queries_only");
}

class RotaryEmbeddingTest : public GpuTest, public ::testing::WithParamInterface<RotaryCase> {};

TEST_P(RotaryEmbeddingTest, MatchesReference) {
  const RotaryCase c = GetParam();
  std::mt19937 rng(uint32_t(c.tokens * 31 + c.head_size * 7 + c.rotary_dim + int(c.style)));
  const int64_t max_position = 97;
  HostTensor query = c.query ? random_tensor(c.dtype, Shape{c.tokens, c.heads, c.head_size}, rng()) : HostTensor{};
  HostTensor key = c.key ? random_tensor(c.dtype, Shape{c.tokens, c.kv_heads, c.head_size}, rng()) : HostTensor{};
  const HostTensor positions = random_positions(c.positions, c.tokens, max_position, rng);
  const HostTensor cos_sin = rotary_cos_sin_cache(uint32_t(max_position), uint32_t(c.rotary_dim), 10000.0, c.cos_sin);

  DeviceTensor d_query, d_key;
  RotaryViews v;
  if (c.query) v.query = (d_query = upload(ctx(), query)).view;
  if (c.key) v.key = (d_key = upload(ctx(), key)).view;
  auto d_positions = upload(ctx(), positions), d_cos_sin = upload(ctx(), cos_sin);
  DeviceBuffer status = zeroed_status(ctx());
  v.positions = d_positions.view;
  v.cos_sin_cache = d_cos_sin.view;
  v.status = status.view(0, 4);
  v.style = c.style;
  ctx().run_and_wait([&](VkCommandBuffer cmd) { record_rotary_embedding(ctx(), cmd, v); });

  const HostTensor query_before = query, key_before = key;
  reference::rotary_embedding(query, key, positions, cos_sin, c.style);
  if (c.query) {
    const HostTensor got = download(ctx(), d_query);
    EXPECT_TRUE(values_close(got, query, c.dtype)) << "queries";
    EXPECT_TRUE(tails_equal(got, query_before, c.rotary_dim)) << "queries";
  }
  if (c.key) {
    const HostTensor got = download(ctx(), d_key);
    EXPECT_TRUE(values_close(got, key, c.dtype)) << "keys";
    EXPECT_TRUE(tails_equal(got, key_before, c.rotary_dim)) << "keys";
  }
  EXPECT_EQ(read_status(ctx(), status), 0u);
}

const RotaryCase kRotaryCases[] = {
    {DType::f32, DType::f32, RotaryStyle::neox, 9, 4, 2, 64, 64},
    {DType::f16, DType::f32, RotaryStyle::neox, 13, 8, 2, 128, 128},
    {DType::bf16, DType::bf16, RotaryStyle::neox, 5, 4, 4, 80, 80, DType::i32},
    {DType::f16, DType::f16, RotaryStyle::gptj, 7, 6, 3, 64, 64},
    {DType::f32, DType::f32, RotaryStyle::gptj, 11, 2, 1, 128, 32, DType::i32},
    // Partial rotary: GPT-NeoX-20B's 24 of 96 (a half of 12 elements: NeoX pairs straddle the
    // 16-bit words), GPT-J's 64 of 256, Phi-2's 32 of 80.
    {DType::f16, DType::f32, RotaryStyle::neox, 7, 4, 4, 96, 24},
    {DType::bf16, DType::f32, RotaryStyle::gptj, 3, 2, 2, 256, 64},
    {DType::f32, DType::f32, RotaryStyle::neox, 15, 3, 3, 80, 32},
    {DType::f16, DType::f16, RotaryStyle::neox, 9, 2, 2, 64, 2},  // one pair
    {DType::f16, DType::f32, RotaryStyle::neox, 1, 32, 8, 128, 128},
    {DType::f16, DType::f32, RotaryStyle::neox, 6, 4, 2, 64, 64, DType::i64, false, true},
    {DType::bf16, DType::f32, RotaryStyle::gptj, 6, 4, 2, 64, 48, DType::i64, true, false},
    {DType::f32, DType::f32, RotaryStyle::neox, 0, 4, 2, 64, 64},  // T = 0: nothing recorded
};
INSTANTIATE_TEST_SUITE_P(Shapes, RotaryEmbeddingTest, ::testing::ValuesIn(kRotaryCases), rotary_name);

class RotaryDeviceTest : public GpuTest {};

TEST_F(RotaryDeviceTest, BadPositionsAreFlaggedAndTheirTokensLeftAlone) {
  std::mt19937 rng(5);
  const int64_t T = 6, H = 4, Hkv = 2, D = 64, max_position = 32;
  HostTensor query = random_tensor(DType::f16, Shape{T, H, D}, 1), key = random_tensor(DType::f16, Shape{T, Hkv, D}, 2);
  HostTensor positions(DType::i64, Shape{T});
  const int64_t values[] = {3, 32, 0, -1, int64_t(1) << 33, 31};  // tokens 1, 3 and 4 are out of range
  std::copy(std::begin(values), std::end(values), positions.as<int64_t>());
  const HostTensor cos_sin = rotary_cos_sin_cache(uint32_t(max_position), 64);
  auto d_query = upload(ctx(), query), d_key = upload(ctx(), key);
  auto d_positions = upload(ctx(), positions), d_cos_sin = upload(ctx(), cos_sin);
  DeviceBuffer status = zeroed_status(ctx());
  const RotaryViews v{d_query.view, d_key.view, d_positions.view, d_cos_sin.view, status.view(0, 4)};
  ctx().run_and_wait([&](VkCommandBuffer cmd) { record_rotary_embedding(ctx(), cmd, v); });
  EXPECT_EQ(read_status(ctx(), status), kStatusBadPosition);

  // The reference with the bad tokens at position 0, then their rows put back.
  HostTensor want_q = query, want_k = key, good = positions;
  for (int64_t t : {1, 3, 4}) good.as<int64_t>()[t] = 0;
  reference::rotary_embedding(want_q, want_k, good, cos_sin, RotaryStyle::neox);
  for (int64_t t : {1, 3, 4}) {
    std::memcpy(want_q.as<uint16_t>() + t * H * D, query.as<uint16_t>() + t * H * D, size_t(H * D) * 2);
    std::memcpy(want_k.as<uint16_t>() + t * Hkv * D, key.as<uint16_t>() + t * Hkv * D, size_t(Hkv * D) * 2);
  }
  const HostTensor got_q = download(ctx(), d_query), got_k = download(ctx(), d_key);
  EXPECT_TRUE(values_close(got_q, want_q, DType::f16));
  EXPECT_TRUE(values_close(got_k, want_k, DType::f16));
  for (int64_t t : {1, 3, 4}) {
    EXPECT_EQ(std::memcmp(got_q.as<uint16_t>() + t * H * D, query.as<uint16_t>() + t * H * D, size_t(H * D) * 2), 0)
        << "token " << t;
    EXPECT_EQ(std::memcmp(got_k.as<uint16_t>() + t * Hkv * D, key.as<uint16_t>() + t * Hkv * D, size_t(Hkv * D) * 2), 0)
        << "token " << t;
  }
}

TEST_F(RotaryDeviceTest, ViewsAtOffsetsInsideOneBuffer) {
  const HostTensor query = random_tensor(DType::bf16, Shape{5, 3, 64}, 11),
                   key = random_tensor(DType::bf16, Shape{5, 1, 64}, 12);
  HostTensor positions(DType::i32, Shape{5});
  const int32_t values[] = {4, 0, 9, 9, 2};
  std::copy(std::begin(values), std::end(values), positions.as<int32_t>());
  const HostTensor cos_sin = rotary_cos_sin_cache(10, 40, 500.0, DType::bf16);
  auto buffer = ctx().create_buffer(8192);
  RotaryViews v;
  v.query = upload_at(ctx(), buffer, 4, query);
  v.key = upload_at(ctx(), buffer, 2048 + 12, key);
  v.positions = upload_at(ctx(), buffer, 3000, positions);
  v.cos_sin_cache = upload_at(ctx(), buffer, 4096 + 8, cos_sin);
  v.style = RotaryStyle::gptj;
  ctx().run_and_wait([&](VkCommandBuffer cmd) { record_rotary_embedding(ctx(), cmd, v); });
  HostTensor want_q = query, want_k = key;
  reference::rotary_embedding(want_q, want_k, positions, cos_sin, RotaryStyle::gptj);
  EXPECT_TRUE(values_close(download(ctx(), v.query), want_q, DType::bf16));
  EXPECT_TRUE(values_close(download(ctx(), v.key), want_k, DType::bf16));
  EXPECT_TRUE(bytes_equal(download(ctx(), v.positions), positions)) << "a neighbour was written";
}

TEST_F(RotaryDeviceTest, HostConvenienceMatchesTheReferenceAndRefusesBadPositions) {
  HostTensor query = random_tensor(DType::f32, Shape{4, 2, 32}, 21),
             key = random_tensor(DType::f32, Shape{4, 1, 32}, 22);
  const HostTensor cos_sin = rotary_cos_sin_cache(8, 32);
  HostTensor positions(DType::i64, Shape{4});
  const int64_t values[] = {1, 7, 0, 3};
  std::copy(std::begin(values), std::end(values), positions.as<int64_t>());
  HostTensor want_q = query, want_k = key;
  reference::rotary_embedding(want_q, want_k, positions, cos_sin, RotaryStyle::neox);
  rotary_embedding(ctx(), query, key, positions, cos_sin);
  EXPECT_TRUE(values_close(query, want_q, DType::f32));
  EXPECT_TRUE(values_close(key, want_k, DType::f32));

  positions.as<int64_t>()[2] = 8;
  const HostTensor q_before = query;
  expect_refused([&] { rotary_embedding(ctx(), query, key, positions, cos_sin); },
                 "positions[2]: 8 is outside [0, max_position = 8)");
  EXPECT_TRUE(bytes_equal(query, q_before));
}

TEST_F(RotaryDeviceTest, RefusesBadArgumentsBeforeRecording) {
  const HostTensor query = random_tensor(DType::f16, Shape{4, 4, 64}, 31),
                   key = random_tensor(DType::f16, Shape{4, 2, 64}, 32);
  auto d_query = upload(ctx(), query), d_key = upload(ctx(), key);
  auto d_positions = upload(ctx(), HostTensor(DType::i64, Shape{4}));
  auto d_cos_sin = upload(ctx(), rotary_cos_sin_cache(16, 64));
  auto d_cos_sin_f16 = upload(ctx(), rotary_cos_sin_cache(16, 64, 1e4, DType::f16));
  auto refused = [&](const std::string& name, auto spoil) {
    RotaryViews v{d_query.view, d_key.view, d_positions.view, d_cos_sin.view, {}};
    spoil(v);
    expect_refused_recording(
        ctx(), [&](VkCommandBuffer cmd) { record_rotary_embedding(ctx(), cmd, v); }, name);
  };
  refused("key: dtype bf16 differs from query's f16", [](auto& v) { v.key.dtype = DType::bf16; });
  refused("query: dtype i32", [](auto& v) { v.query.dtype = DType::i32; });
  refused("key: shape [4, 2, 32] does not match", [](auto& v) { v.key.shape = Shape{4, 2, 32}; });
  refused("query: head size D = 63", [](auto& v) { v.query.shape = v.key.shape = Shape{4, 1, 63}; });
  refused("positions: shape [3] is not [T] = [4]", [](auto& v) { v.positions.shape = Shape{3}; });
  refused("positions: dtype f32", [](auto& v) { v.positions.dtype = DType::f32; });
  refused("cos_sin_cache: rotary_dim = 128 is more than the head size D = 64", [](auto& v) {
    v.cos_sin_cache.shape = Shape{8, 128};
  });
  refused("cos_sin_cache: rotary_dim = 5", [](auto& v) { v.cos_sin_cache.shape = Shape{16, 5}; });
  refused("cos_sin_cache: dtype bf16 is neither f32 nor query's f16", [&](auto& v) {
    v.cos_sin_cache = d_cos_sin_f16.view;
    v.cos_sin_cache.dtype = DType::bf16;
  });
  refused("cos_sin_cache: buffer view of", [](auto& v) { v.cos_sin_cache.memory.size = 64; });
  refused("query, key: neither is given", [](auto& v) { v.query = v.key = {}; });
  refused("key: row (token 0, head 0) overlaps query's row (token 0, head 0) in one buffer (both are rotated in place)",
          [](auto& v) { v.key.memory = v.query.memory; });
  refused("style: 2 is not a rotary style", [](auto& v) { v.style = RotaryStyle(2); });
  refused("status: offset 2", [](auto& v) { v.status = {v.key.memory.buffer, 2, 4}; });
  EXPECT_TRUE(bytes_equal(download(ctx(), d_query), query)) << "a refused call wrote the queries";
  EXPECT_TRUE(bytes_equal(download(ctx(), d_key), key)) << "a refused call wrote the keys";
}

// ---- reshape_and_cache_rotary ----

struct FusedCase {
  DType input, cache;
  KvLayout layout;
  RotaryStyle style;
  int64_t tokens, heads, kv_heads, head_size, rotary_dim, block_size, blocks;
  CacheScales scales{};
  DType cos_sin = DType::f32;
  bool query = true;
};

void PrintTo(const FusedCase& c, std::ostream* os) {
  *os << dtype_name(c.input) << " -> " << dtype_name(c.cache) << " " << kv_layout_name(c.layout) << ", "
      << rotary_style_name(c.style) << ", T " << c.tokens << ", H " << c.heads << "/" << c.kv_heads << ", D "
      << c.head_size << ", rotary " << c.rotary_dim << ", B " << c.block_size;
}

std::string fused_name(const ::testing::TestParamInfo<FusedCase>& info) {
  const auto& c = info.param;
  return fmt::format("{}_{}_to_{}_{}_T{}_D{}_R{}_B{}{}", kv_layout_name(c.layout), dtype_name(c.input),
                     dtype_name(c.cache), rotary_style_name(c.style), c.tokens, c.head_size, c.rotary_dim, c.block_size,
                     c.query ? "" : "_keys_only");
}

// T slots over the whole pool, shuffled (the last block's last slot among them), about one
// in five padding.
HostTensor fused_slots(const FusedCase& c, std::mt19937& rng) {
  std::vector<int64_t> all(size_t(c.blocks * c.block_size));
  std::iota(all.begin(), all.end(), 0);
  std::shuffle(all.begin(), all.end(), rng);
  std::iter_swap(all.begin() + 1, std::find(all.begin(), all.end(), int64_t(all.size()) - 1));
  HostTensor slots(DType::i64, Shape{c.tokens});
  for (int64_t t = 0; t < c.tokens; ++t) slots.as<int64_t>()[t] = t != 1 && rng() % 5 == 0 ? -1 : all[size_t(t)];
  return slots;
}

class ReshapeAndCacheRotaryTest : public GpuTest, public ::testing::WithParamInterface<FusedCase> {};

TEST_P(ReshapeAndCacheRotaryTest, MatchesReferenceAndTheTwoKernelPath) {
  const FusedCase c = GetParam();
  std::mt19937 rng(uint32_t(c.tokens * 13 + c.head_size + int(c.layout) * 101 + int(c.cache) * 7));
  const int64_t max_position = 64;
  const Shape q_shape{c.tokens, c.heads, c.head_size}, kv_shape{c.tokens, c.kv_heads, c.head_size};
  const HostTensor query = random_tensor(c.input, q_shape, rng()), key = random_tensor(c.input, kv_shape, rng());
  const HostTensor value = random_tensor(c.input, kv_shape, rng());
  const HostTensor slots = fused_slots(c, rng);
  const HostTensor positions = random_positions(DType::i64, c.tokens, max_position, rng);
  const HostTensor cos_sin = rotary_cos_sin_cache(uint32_t(max_position), uint32_t(c.rotary_dim), 10000.0, c.cos_sin);
  const HostTensor key_cache = random_tensor(
      c.cache, key_cache_shape(c.layout, c.cache, c.blocks, c.kv_heads, c.head_size, c.block_size), rng());
  const HostTensor value_cache =
      random_tensor(c.cache, value_cache_shape(c.layout, c.blocks, c.kv_heads, c.head_size, c.block_size), rng());

  // Both paths on their own copies of everything that is written.
  struct Run {
    DeviceTensor query, key, key_cache, value_cache;
    DeviceBuffer status;
  };
  auto d_value = upload(ctx(), value), d_slots = upload(ctx(), slots);
  auto d_positions = upload(ctx(), positions), d_cos_sin = upload(ctx(), cos_sin);
  auto start = [&] {
    return Run{upload(ctx(), query), upload(ctx(), key), upload(ctx(), key_cache), upload(ctx(), value_cache),
               zeroed_status(ctx())};
  };
  auto cache_views = [&](const Run& r) {
    return ReshapeAndCacheViews{r.key.view,         d_value.view,        d_slots.view, r.key_cache.view,
                                r.value_cache.view, r.status.view(0, 4), c.layout};
  };
  Run fused = start(), pair = start();
  const RotaryInputs rotary{c.query ? fused.query.view : TensorView{}, d_positions.view, d_cos_sin.view, c.style};
  ctx().run_and_wait(
      [&](VkCommandBuffer cmd) { record_reshape_and_cache_rotary(ctx(), cmd, cache_views(fused), rotary, c.scales); });
  const RotaryViews pair_rotary{c.query ? pair.query.view : TensorView{},
                                pair.key.view,
                                d_positions.view,
                                d_cos_sin.view,
                                pair.status.view(0, 4),
                                c.style};
  ctx().run_and_wait([&](VkCommandBuffer cmd) {
    record_rotary_embedding(ctx(), cmd, pair_rotary);
    record_compute_barrier(ctx(), cmd);
    record_reshape_and_cache(ctx(), cmd, cache_views(pair), c.scales);
  });

  const HostTensor got_q = download(ctx(), fused.query), got_k = download(ctx(), fused.key);
  const HostTensor got_kc = download(ctx(), fused.key_cache), got_vc = download(ctx(), fused.value_cache);
  EXPECT_EQ(read_status(ctx(), fused.status), 0u);
  // 1. The same bits as the two-kernel path, everywhere.
  EXPECT_TRUE(bytes_equal(got_q, download(ctx(), pair.query))) << "queries, fused vs two kernels";
  EXPECT_TRUE(bytes_equal(got_k, download(ctx(), pair.key))) << "keys, fused vs two kernels";
  EXPECT_TRUE(bytes_equal(got_kc, download(ctx(), pair.key_cache))) << "key cache, fused vs two kernels";
  EXPECT_TRUE(bytes_equal(got_vc, download(ctx(), pair.value_cache))) << "value cache, fused vs two kernels";
  // 2. The cache bytes are what reshape_and_cache (reference) stores from the keys the GPU rotated.
  HostTensor want_kc = key_cache, want_vc = value_cache;
  reference::reshape_and_cache(got_k, value, slots, want_kc, want_vc, c.scales, c.layout);
  EXPECT_TRUE(bytes_equal(got_kc, want_kc)) << "key cache";
  EXPECT_TRUE(bytes_equal(got_vc, want_vc)) << "value cache";
  // 3. The rotation against the double-precision reference, the fused cache write included.
  HostTensor ref_q = query, ref_k = key, ref_kc = key_cache, ref_vc = value_cache, none;
  reference::reshape_and_cache_rotary(c.query ? ref_q : none, ref_k, value, slots, positions, cos_sin, c.style, ref_kc,
                                      ref_vc, c.scales, c.layout);
  if (c.query)
    EXPECT_TRUE(values_close(got_q, ref_q, c.input)) << "queries";
  else
    EXPECT_TRUE(bytes_equal(got_q, query)) << "no query given: left alone";
  EXPECT_TRUE(values_close(got_k, ref_k, c.input)) << "keys";
  EXPECT_TRUE(tails_equal(got_k, key, c.rotary_dim)) << "keys";
  // An element rounds once to the input dtype and once to the cache's: one step of the coarser.
  const DType coarser = mantissa_bits(c.cache) < mantissa_bits(c.input) ? c.cache : c.input;
  const double fp8_floor = c.cache == DType::fp8_e4m3 ? 0x1p-9 : 0x1p-16;  // subnormal spacing
  const double floor = is_fp8_dtype(c.cache) ? fp8_floor : 1e-6;           // (fp8 elements read unscaled)
  EXPECT_TRUE(values_close(got_kc, ref_kc, coarser, floor)) << "key cache against the double reference";
  EXPECT_TRUE(bytes_equal(got_vc, ref_vc)) << "value cache (nothing rotated)";
}

std::vector<FusedCase> fused_cases() {
  std::vector<FusedCase> cases;
  for (KvLayout layout : kAllLayouts) {
    cases.push_back({DType::f16, DType::f16, layout, RotaryStyle::neox, 37, 8, 2, 128, 128, 16, 4});
    cases.push_back({DType::f16, DType::fp8_e4m3, layout, RotaryStyle::neox, 21, 4, 2, 64, 64, 8, 5, {0.05f, 0.02f}});
    cases.push_back({DType::bf16, DType::fp8_e5m2, layout, RotaryStyle::gptj, 9, 2, 1, 64, 32, 4, 6, {0.5f, 3.0f}});
    cases.push_back({DType::f32, DType::f32, layout, RotaryStyle::gptj, 15, 6, 3, 64, 64, 1, 20});
    cases.push_back({DType::f16, DType::f32, layout, RotaryStyle::neox, 11, 4, 4, 96, 24, 8, 3, {}, DType::f16});
    cases.push_back(
        {DType::bf16, DType::bf16, layout, RotaryStyle::neox, 7, 2, 2, 80, 32, 32, 1, {}, DType::f32, false});
  }
  return cases;
}
INSTANTIATE_TEST_SUITE_P(Shapes, ReshapeAndCacheRotaryTest, ::testing::ValuesIn(fused_cases()), fused_name);

class ReshapeAndCacheRotaryDeviceTest : public GpuTest {};

TEST_F(ReshapeAndCacheRotaryDeviceTest, BadPositionsLeaveTheirTokensAndSlotsAlone) {
  for (KvLayout layout : kAllLayouts) {
    SCOPED_TRACE(kv_layout_name(layout));
    const int64_t T = 5, H = 2, Hkv = 2, D = 64, B = 8, N = 2;
    const HostTensor query = random_tensor(DType::f16, Shape{T, H, D}, 41),
                     key = random_tensor(DType::f16, Shape{T, Hkv, D}, 42);
    const HostTensor value = random_tensor(DType::f16, Shape{T, Hkv, D}, 43);
    HostTensor slots(DType::i32, Shape{T}), positions(DType::i32, Shape{T});
    const int32_t slot_values[] = {3, 9, 15, 0, 7}, position_values[] = {2, -5, 1, 40, 0};  // tokens 1 and 3 bad
    std::copy(std::begin(slot_values), std::end(slot_values), slots.as<int32_t>());
    std::copy(std::begin(position_values), std::end(position_values), positions.as<int32_t>());
    const HostTensor cos_sin = rotary_cos_sin_cache(40, 64);
    const HostTensor key_cache =
        random_tensor(DType::fp8_e4m3, key_cache_shape(layout, DType::fp8_e4m3, N, Hkv, D, B), 44);
    const HostTensor value_cache = random_tensor(DType::fp8_e4m3, value_cache_shape(layout, N, Hkv, D, B), 45);
    auto d_query = upload(ctx(), query), d_key = upload(ctx(), key), d_value = upload(ctx(), value);
    auto d_slots = upload(ctx(), slots), d_positions = upload(ctx(), positions), d_cos_sin = upload(ctx(), cos_sin);
    auto d_key_cache = upload(ctx(), key_cache), d_value_cache = upload(ctx(), value_cache);
    DeviceBuffer status = zeroed_status(ctx());
    const ReshapeAndCacheViews v{d_key.view,         d_value.view,      d_slots.view, d_key_cache.view,
                                 d_value_cache.view, status.view(0, 4), layout};
    ctx().run_and_wait([&](VkCommandBuffer cmd) {
      record_reshape_and_cache_rotary(ctx(), cmd, v, {d_query.view, d_positions.view, d_cos_sin.view});
    });
    EXPECT_EQ(read_status(ctx(), status), kStatusBadPosition);

    // The reference with the bad tokens as padding (position 0), their rows put back.
    HostTensor want_q = query, want_k = key, want_kc = key_cache, want_vc = value_cache;
    HostTensor good_slots = slots, good_positions = positions;
    for (int t : {1, 3}) good_slots.as<int32_t>()[t] = -1, good_positions.as<int32_t>()[t] = 0;
    reference::reshape_and_cache_rotary(want_q, want_k, value, good_slots, good_positions, cos_sin, RotaryStyle::neox,
                                        want_kc, want_vc, {}, layout);
    for (int t : {1, 3}) {
      std::memcpy(want_q.as<uint16_t>() + t * H * D, query.as<uint16_t>() + t * H * D, size_t(H * D) * 2);
      std::memcpy(want_k.as<uint16_t>() + t * Hkv * D, key.as<uint16_t>() + t * Hkv * D, size_t(Hkv * D) * 2);
    }
    const HostTensor got_k = download(ctx(), d_key);
    EXPECT_TRUE(values_close(download(ctx(), d_query), want_q, DType::f16));
    EXPECT_TRUE(values_close(got_k, want_k, DType::f16));
    // The cache: bit for bit what reshape_and_cache stores from the GPU's keys, bad tokens as padding.
    HostTensor exact_kc = key_cache, exact_vc = value_cache;
    reference::reshape_and_cache(got_k, value, good_slots, exact_kc, exact_vc, {}, layout);
    EXPECT_TRUE(bytes_equal(download(ctx(), d_key_cache), exact_kc));
    EXPECT_TRUE(bytes_equal(download(ctx(), d_value_cache), exact_vc));
  }
}

TEST_F(ReshapeAndCacheRotaryDeviceTest, EmptyBatchRecordsNothing) {
  const HostTensor empty(DType::f16, Shape{0, 2, 64});
  auto d_key = upload(ctx(), empty), d_value = upload(ctx(), empty), d_query = upload(ctx(), empty);
  auto d_slots = upload(ctx(), HostTensor(DType::i64, Shape{0})),
       d_positions = upload(ctx(), HostTensor(DType::i64, Shape{0}));
  auto d_cos_sin = upload(ctx(), rotary_cos_sin_cache(4, 64));
  const HostTensor key_cache = random_tensor(DType::f16, key_cache_shape(KvLayout::hnd, DType::f16, 2, 2, 64, 4), 51);
  auto d_key_cache = upload(ctx(), key_cache), d_value_cache = upload(ctx(), key_cache);
  const ReshapeAndCacheViews v{d_key.view,         d_value.view, d_slots.view, d_key_cache.view,
                               d_value_cache.view, {},           KvLayout::hnd};
  ctx().run_and_wait([&](VkCommandBuffer cmd) {
    record_reshape_and_cache_rotary(ctx(), cmd, v, {d_query.view, d_positions.view, d_cos_sin.view});
  });
  EXPECT_TRUE(bytes_equal(download(ctx(), d_key_cache), key_cache));
}

TEST_F(ReshapeAndCacheRotaryDeviceTest, RefusesBadArgumentsBeforeRecording) {
  const int64_t T = 4;
  const HostTensor query = random_tensor(DType::f16, Shape{T, 4, 64}, 61),
                   key = random_tensor(DType::f16, Shape{T, 2, 64}, 62);
  auto d_query = upload(ctx(), query), d_key = upload(ctx(), key), d_value = upload(ctx(), key);
  auto d_slots = upload(ctx(), HostTensor(DType::i64, Shape{T})),
       d_positions = upload(ctx(), HostTensor(DType::i64, Shape{T}));
  auto d_cos_sin = upload(ctx(), rotary_cos_sin_cache(16, 64));
  const HostTensor key_cache =
      random_tensor(DType::fp8_e4m3, key_cache_shape(KvLayout::nhd, DType::fp8_e4m3, 2, 2, 64, 16), 63);
  auto d_key_cache = upload(ctx(), key_cache), d_value_cache = upload(ctx(), key_cache);
  auto refused = [&](const std::string& name, auto spoil) {
    ReshapeAndCacheViews v{d_key.view,         d_value.view, d_slots.view, d_key_cache.view,
                           d_value_cache.view, {},           KvLayout::nhd};
    RotaryInputs r{d_query.view, d_positions.view, d_cos_sin.view};
    CacheScales scales;
    spoil(v, r, scales);
    expect_refused_recording(
        ctx(), [&](VkCommandBuffer cmd) { record_reshape_and_cache_rotary(ctx(), cmd, v, r, scales); }, name);
  };
  refused("key: shape [4, 2, 64] does not match [T, Hkv, D] of query's [4, 4, 32]", [](auto&, auto& r, auto&) {
    r.query.shape = Shape{4, 4, 32};
  });
  refused("key: dtype f16 differs from query's bf16", [](auto&, auto& r, auto&) { r.query.dtype = DType::bf16; });
  refused("positions: shape [3]", [](auto&, auto& r, auto&) { r.positions.shape = Shape{3}; });
  refused("cos_sin_cache: rotary_dim = 66", [](auto&, auto& r, auto&) { r.cos_sin_cache.shape = Shape{4, 66}; });
  // Token 2's queries start 1024 bytes in, where the keys do.
  refused("query: row (token 2, head 0) overlaps key's row (token 0, head 0) in one buffer (both are rotated in place)",
          [](auto& v, auto& r, auto&) {
    v.key.memory = {r.query.memory.buffer, r.query.memory.offset + 1024, 1024};  // the keys inside the queries
  });
  refused("value: row (token 0, head 0) overlaps key's row (token 0, head 0) in one buffer (the keys are rotated in place)",
          [](auto& v, auto&, auto&) { v.value = v.key; });
  refused("the nhd layout", [](auto& v, auto&, auto&) { v.key_cache.shape = Shape{2, 2, 16, 64}; });
  refused("k_scale", [](auto&, auto&, auto& s) { s.k_scale = 0.0f; });
  refused("style: 7", [](auto&, auto& r, auto&) { r.style = RotaryStyle(7); });
  EXPECT_TRUE(bytes_equal(download(ctx(), d_query), query)) << "a refused call rotated the queries";
  EXPECT_TRUE(bytes_equal(download(ctx(), d_key), key)) << "a refused call rotated the keys";
  EXPECT_TRUE(bytes_equal(download(ctx(), d_key_cache), key_cache)) << "a refused call wrote the cache";
}

}  // namespace
}  // namespace vkpaged::test
