// SPDX-License-Identifier: Apache-2.0
// reshape_and_cache on the GPU against the CPU reference, bit for bit: every cache dtype and
// layout (vllm, nhd, hnd), block sizes 1 to 32, head sizes 64, 80 and 128, shuffled and
// padding slots, rounding ties, saturation, signed zeros and NaN; device-side bad slots;
// host-side refusals.
#include <fmt/format.h>

#include <algorithm>
#include <cmath>
#include <limits>
#include <numeric>
#include <tuple>

#include "ops/cache_test_helpers.hpp"
#include "ops/linear_grid.hpp"

namespace vkpaged::test {
namespace {

using namespace cache_helpers;

struct ReshapeCase {
  DType input;
  DType cache;
  int64_t block_size, head_size, kv_heads, blocks, tokens;
  DType slot_dtype = DType::i64;
  CacheScales scales{};
  KvLayout layout = KvLayout::vllm;
};

void PrintTo(const ReshapeCase& c, std::ostream* os) {
  *os << dtype_name(c.input) << " -> " << dtype_name(c.cache) << ", B " << c.block_size << ", D " << c.head_size
      << ", Hkv " << c.kv_heads << ", N " << c.blocks << ", T " << c.tokens << ", scales " << c.scales.k_scale << "/"
      << c.scales.v_scale << ", " << kv_layout_name(c.layout);
}

std::string case_name(const ::testing::TestParamInfo<ReshapeCase>& info) {
  const auto& c = info.param;
  const std::string layout = c.layout == KvLayout::vllm ? "" : std::string(kv_layout_name(c.layout)) + "_";
  return fmt::format("{}{}_to_{}_B{}_D{}_H{}_{}", layout,
                     dtype_name(c.input), dtype_name(c.cache), c.block_size, c.head_size, c.kv_heads,
                     dtype_name(c.slot_dtype));
}

// Values on and around the rounding decisions of every cache dtype (in units of the stored
// value: fp8 inputs are multiplied by the scale first), plus overflow, signed zeros and NaN.
std::vector<float> special_values(const ReshapeCase& c) {
  const float inf = std::numeric_limits<float>::infinity();
  std::vector<float> v = {0.0f, -0.0f, -1e-30f, 1e-40f, -1e-40f, inf, -inf, std::numeric_limits<float>::quiet_NaN()};
  switch (c.cache) {
    case DType::fp8_e4m3:
      v.insert(v.end(),
               {448.0f, 464.0f, 465.0f, -480.0f, 1e6f, 0x1p-10f, -0x1p-10f, 0x3p-10f, 1.0625f, 1.1875f, -0x1.1p-7f});
      break;
    case DType::fp8_e5m2:
      v.insert(v.end(), {57344.0f, 61440.0f, 61439.0f, -1e9f, 0x1p-17f, 0x3p-17f, 1.125f, 1.375f, -0x1.8p-15f});
      break;
    case DType::f16:
      v.insert(v.end(), {65504.0f, 65519.0f, 65520.0f, -1e5f, 0x1p-25f, 0x3p-25f, 1.0f + 0x1p-11f, 1.0f + 0x3p-11f});
      break;
    default:
      v.insert(v.end(), {1.0f + 0x1p-8f, 1.0f + 0x3p-8f, 3.4e38f, -3.39e38f, 0x1.0081p-127f});
      break;
  }
  if (is_fp8_dtype(c.cache))
    for (float& x : v) x *= c.scales.k_scale;
  return v;
}

// T distinct slots in shuffled order, about one in six replaced by padding.
HostTensor shuffled_slots(const ReshapeCase& c, std::mt19937& rng) {
  std::vector<int64_t> all(size_t(c.blocks * c.block_size));
  std::iota(all.begin(), all.end(), 0);
  std::shuffle(all.begin(), all.end(), rng);
  HostTensor slots(c.slot_dtype, Shape{c.tokens});
  const int64_t paddings[] = {-1, -7,
                              c.slot_dtype == DType::i64 ? std::numeric_limits<int64_t>::min() : -2147483647 - 1};
  for (int64_t t = 0; t < c.tokens; ++t)
    slots.set(size_t(t), rng() % 6 == 0 ? double(paddings[rng() % 3]) : double(all[size_t(t)]));
  return slots;
}

class ReshapeAndCacheTest : public GpuTest, public ::testing::WithParamInterface<ReshapeCase> {};

TEST_P(ReshapeAndCacheTest, MatchesReferenceBitExactly) {
  const ReshapeCase c = GetParam();
  std::mt19937 rng(uint32_t(c.block_size * 131 + c.head_size * 7 + uint32_t(c.cache)));
  const Shape token_shape{c.tokens, c.kv_heads, c.head_size};
  HostTensor key = random_tensor(c.input, token_shape, rng());
  HostTensor value = random_tensor(c.input, token_shape, rng());
  const auto specials = special_values(c);
  for (size_t i = 0, j = 0; i < size_t(key.numel()); i += 5, ++j) {
    key.set(i, specials[j % specials.size()]);
    value.set(size_t(key.numel()) - 1 - i, specials[(j + 3) % specials.size()] * c.scales.v_scale / c.scales.k_scale);
  }
  const HostTensor slots = shuffled_slots(c, rng);
  HostTensor key_cache =
      random_tensor(c.cache, key_cache_shape(c.layout, c.cache, c.blocks, c.kv_heads, c.head_size, c.block_size),
                    rng());
  HostTensor value_cache =
      random_tensor(c.cache, value_cache_shape(c.layout, c.blocks, c.kv_heads, c.head_size, c.block_size), rng());

  auto d_key = upload(ctx(), key), d_value = upload(ctx(), value), d_slots = upload(ctx(), slots);
  auto d_key_cache = upload(ctx(), key_cache), d_value_cache = upload(ctx(), value_cache);
  auto status = ctx().create_buffer(16);
  const uint32_t zero = 0;
  ctx().upload(status.view(0, 4), &zero, 4);
  ReshapeAndCacheViews v{d_key.view,         d_value.view,      d_slots.view, d_key_cache.view,
                         d_value_cache.view, status.view(0, 4), c.layout};
  ctx().run_and_wait([&](VkCommandBuffer cmd) { record_reshape_and_cache(ctx(), cmd, v, c.scales); });

  reference::reshape_and_cache(key, value, slots, key_cache, value_cache, c.scales, c.layout);
  EXPECT_TRUE(bytes_equal(download(ctx(), d_key_cache), key_cache)) << "key cache";
  EXPECT_TRUE(bytes_equal(download(ctx(), d_value_cache), value_cache)) << "value cache";
  EXPECT_EQ(read_status(ctx(), status), 0u);
}

const ReshapeCase kCases[] = {
    {DType::f32, DType::f32, 16, 64, 2, 6, 40},
    {DType::f16, DType::f16, 8, 128, 2, 5, 30, DType::i32},
    {DType::bf16, DType::bf16, 32, 80, 1, 3, 70},
    {DType::f16, DType::f16, 1, 80, 3, 24, 20},
    {DType::f32, DType::f16, 16, 64, 1, 4, 50},
    {DType::f32, DType::bf16, 8, 80, 2, 6, 40, DType::i32},
    {DType::f16, DType::fp8_e4m3, 16, 128, 2, 4, 50, DType::i64, {0.5f, 2.0f}},
    {DType::f32, DType::fp8_e4m3, 32, 80, 1, 3, 80, DType::i64, {0.37f, 1.9f}},
    {DType::bf16, DType::fp8_e4m3, 1, 64, 2, 30, 25, DType::i32, {1.0f, 1.0f}},
    {DType::f32, DType::fp8_e5m2, 8, 64, 4, 5, 35, DType::i64, {0.013f, 3.0f}},
    {DType::f16, DType::fp8_e5m2, 16, 80, 1, 4, 60, DType::i32, {1.0f, 0.25f}},
};
INSTANTIATE_TEST_SUITE_P(Shapes, ReshapeAndCacheTest, ::testing::ValuesIn(kCases), case_name);

// Every case again in the nhd and hnd layouts.
std::vector<ReshapeCase> layout_cases() {
  std::vector<ReshapeCase> cases;
  for (KvLayout layout : {KvLayout::nhd, KvLayout::hnd})
    for (ReshapeCase c : kCases) {
      c.layout = layout;
      cases.push_back(c);
    }
  return cases;
}
INSTANTIATE_TEST_SUITE_P(Layouts, ReshapeAndCacheTest, ::testing::ValuesIn(layout_cases()), case_name);

// A fixture-only suite for the single tests below.
class ReshapeAndCacheDeviceTest : public GpuTest {
 protected:
  struct Setup {
    HostTensor key, value, key_cache, value_cache;
    DeviceTensor d_key, d_value, d_key_cache, d_value_cache;
    KvLayout layout = KvLayout::vllm;
  };
  // fp8 e4m3, B = 16, N = 4: in the vllm layout four tokens' bytes share every value word.
  Setup make(int64_t tokens, uint32_t seed, int64_t kv_heads = 2, int64_t head_size = 64,
             KvLayout layout = KvLayout::vllm) {
    Setup s;
    s.layout = layout;
    s.key = random_tensor(DType::f16, Shape{tokens, kv_heads, head_size}, seed);
    s.value = random_tensor(DType::f16, Shape{tokens, kv_heads, head_size}, seed + 1);
    s.key_cache =
        random_tensor(DType::fp8_e4m3, key_cache_shape(layout, DType::fp8_e4m3, 4, kv_heads, head_size, 16), seed + 2);
    s.value_cache = random_tensor(DType::fp8_e4m3, value_cache_shape(layout, 4, kv_heads, head_size, 16), seed + 3);
    s.d_key = upload(ctx(), s.key);
    s.d_value = upload(ctx(), s.value);
    s.d_key_cache = upload(ctx(), s.key_cache);
    s.d_value_cache = upload(ctx(), s.value_cache);
    return s;
  }
  ReshapeAndCacheViews views(const Setup& s, const DeviceTensor& slots, const BufferView& status = {}) {
    return {s.d_key.view, s.d_value.view, slots.view, s.d_key_cache.view, s.d_value_cache.view, status, s.layout};
  }
};

TEST_F(ReshapeAndCacheDeviceTest, FillsEveryWordSharedByManyTokens) {
  // All 64 slots, every value word written by four tokens at once. With D = 16 a token is one
  // invocation, so in slot order the four writers of a word run side by side in one subgroup.
  for (bool shuffled : {false, true}) {
    Setup s = make(64, 11, 1, 16);
    HostTensor slots(DType::i64, Shape{64});
    std::vector<int64_t> order(64);
    std::iota(order.begin(), order.end(), 0);
    if (shuffled) std::shuffle(order.begin(), order.end(), std::mt19937(5));
    std::copy(order.begin(), order.end(), slots.as<int64_t>());
    auto d_slots = upload(ctx(), slots);
    ctx().run_and_wait([&](VkCommandBuffer cmd) { record_reshape_and_cache(ctx(), cmd, views(s, d_slots)); });
    reference::reshape_and_cache(s.key, s.value, slots, s.key_cache, s.value_cache);
    EXPECT_TRUE(bytes_equal(download(ctx(), s.d_key_cache), s.key_cache)) << "shuffled " << shuffled;
    EXPECT_TRUE(bytes_equal(download(ctx(), s.d_value_cache), s.value_cache)) << "shuffled " << shuffled;
  }
}

TEST_F(ReshapeAndCacheDeviceTest, ViewsAtOffsetsInsideOneBuffer) {
  // Every view inside one buffer at offsets that are not multiples of the descriptor
  // alignment: the shader must add each view's word offset (and chunk offset, nhd and hnd).
  for (KvLayout layout : kAllLayouts) {
    SCOPED_TRACE(kv_layout_name(layout));
    const HostTensor key = random_tensor(DType::bf16, Shape{5, 1, 80}, 61),
                     value = random_tensor(DType::bf16, Shape{5, 1, 80}, 62);
    HostTensor slots(DType::i64, Shape{5});
    const int64_t slot_values[] = {9, -1, 0, 31, 17};
    std::copy(std::begin(slot_values), std::end(slot_values), slots.as<int64_t>());
    HostTensor key_cache = random_tensor(DType::fp8_e5m2, key_cache_shape(layout, DType::fp8_e5m2, 4, 1, 80, 8), 63);
    HostTensor value_cache = random_tensor(DType::fp8_e5m2, value_cache_shape(layout, 4, 1, 80, 8), 64);
    auto buffer = ctx().create_buffer(16384);
    ReshapeAndCacheViews v;
    v.key = upload_at(ctx(), buffer, 4, key);
    v.value = upload_at(ctx(), buffer, 1000, value);
    v.slot_mapping = upload_at(ctx(), buffer, 2020, slots);
    v.key_cache = upload_at(ctx(), buffer, 4096 + 48, key_cache);
    v.value_cache = upload_at(ctx(), buffer, 8192 + 80, value_cache);
    v.layout = layout;
    const uint32_t zero = 0;
    v.status = {buffer.handle(), 12300, 4};
    ctx().upload(v.status, &zero, 4);
    ctx().run_and_wait([&](VkCommandBuffer cmd) { record_reshape_and_cache(ctx(), cmd, v, {0.3f, 0.7f}); });
    reference::reshape_and_cache(key, value, slots, key_cache, value_cache, {0.3f, 0.7f}, layout);
    EXPECT_TRUE(bytes_equal(download(ctx(), v.key_cache), key_cache));
    EXPECT_TRUE(bytes_equal(download(ctx(), v.value_cache), value_cache));
    uint32_t status = 1;
    ctx().download(v.status, &status, 4);
    EXPECT_EQ(status, 0u);
  }
}

TEST_F(ReshapeAndCacheDeviceTest, AllPaddingWritesNothing) {
  Setup s = make(8, 21);
  HostTensor slots(DType::i32, Shape{8});
  for (size_t i = 0; i < 8; ++i) slots.as<int32_t>()[i] = -1 - int32_t(i);
  auto d_slots = upload(ctx(), slots);
  ctx().run_and_wait([&](VkCommandBuffer cmd) { record_reshape_and_cache(ctx(), cmd, views(s, d_slots)); });
  EXPECT_TRUE(bytes_equal(download(ctx(), s.d_key_cache), s.key_cache));
  EXPECT_TRUE(bytes_equal(download(ctx(), s.d_value_cache), s.value_cache));
}

TEST_F(ReshapeAndCacheDeviceTest, DuplicateSlotsLeaveOneValueAndSpareNeighbours) {
  for (KvLayout layout : kAllLayouts) {
    SCOPED_TRACE(kv_layout_name(layout));
    // Tokens 0 and 1 both go to slot 17; tokens 2..9 to its neighbours 16, 18, 19, ...
    Setup s = make(10, 31, 2, 64, layout);
    HostTensor slots(DType::i64, Shape{10});
    const int64_t wanted[] = {17, 17, 16, 18, 19, 20, 21, 22, 23, 33};
    std::copy(std::begin(wanted), std::end(wanted), slots.as<int64_t>());
    auto d_slots = upload(ctx(), slots);
    ctx().run_and_wait([&](VkCommandBuffer cmd) { record_reshape_and_cache(ctx(), cmd, views(s, d_slots)); });

    // Either token may win slot 17, element by element; everything else is as if token 1 were padding.
    HostTensor first_k = s.key_cache, first_v = s.value_cache, second_k = s.key_cache, second_v = s.value_cache;
    HostTensor only_first = slots, only_second = slots;
    only_first.as<int64_t>()[1] = -1;
    only_second.as<int64_t>()[0] = -1;
    reference::reshape_and_cache(s.key, s.value, only_first, first_k, first_v, {}, layout);
    reference::reshape_and_cache(s.key, s.value, only_second, second_k, second_v, {}, layout);
    const HostTensor got_k = download(ctx(), s.d_key_cache), got_v = download(ctx(), s.d_value_cache);
    for (auto [got, a, b] : {std::tuple{&got_k, &first_k, &second_k}, std::tuple{&got_v, &first_v, &second_v}}) {
      const auto* g = got->as<uint8_t>();
      size_t bad = 0;
      for (size_t i = 0; i < got->bytes(); ++i)
        if (g[i] != a->as<uint8_t>()[i] && g[i] != b->as<uint8_t>()[i]) ++bad;
      EXPECT_EQ(bad, 0u) << "bytes that match neither token's write";
    }
  }
}

TEST_F(ReshapeAndCacheDeviceTest, BadSlotOnDeviceIsSkippedAndFlagged) {
  for (KvLayout layout : kAllLayouts) {
    SCOPED_TRACE(kv_layout_name(layout));
    // Slots N * B = 64 and 2^40 pass no host check (they live in device memory): the shader
    // skips them, writes the other tokens and sets STATUS_BAD_SLOT.
    Setup s = make(6, 41, 2, 64, layout);
    HostTensor slots(DType::i64, Shape{6});
    const int64_t device_slots[] = {3, 64, 40, int64_t(1) << 40, -1, 63};
    std::copy(std::begin(device_slots), std::end(device_slots), slots.as<int64_t>());
    auto d_slots = upload(ctx(), slots);
    auto status = ctx().create_buffer(16);
    const uint32_t zero = 0;
    ctx().upload(status.view(0, 4), &zero, 4);
    ctx().run_and_wait(
        [&](VkCommandBuffer cmd) { record_reshape_and_cache(ctx(), cmd, views(s, d_slots, status.view(0, 4))); });
    EXPECT_EQ(read_status(ctx(), status), kStatusBadSlot);

    HostTensor good = slots;
    good.as<int64_t>()[1] = good.as<int64_t>()[3] = -1;
    reference::reshape_and_cache(s.key, s.value, good, s.key_cache, s.value_cache, {}, layout);
    EXPECT_TRUE(bytes_equal(download(ctx(), s.d_key_cache), s.key_cache));
    EXPECT_TRUE(bytes_equal(download(ctx(), s.d_value_cache), s.value_cache));

    // Without a status buffer the bad slots are still skipped.
    ctx().run_and_wait([&](VkCommandBuffer cmd) { record_reshape_and_cache(ctx(), cmd, views(s, d_slots)); });
    EXPECT_TRUE(bytes_equal(download(ctx(), s.d_value_cache), s.value_cache));
  }
}

TEST_F(ReshapeAndCacheDeviceTest, RefusesBadArgumentsBeforeRecording) {
  Setup s = make(4, 51);
  HostTensor slots(DType::i64, Shape{4});
  auto d_slots = upload(ctx(), slots);
  auto refused = [&](const std::function<void(ReshapeAndCacheViews&, CacheScales&)>& spoil, const std::string& name) {
    ReshapeAndCacheViews v = views(s, d_slots);
    CacheScales scales;
    spoil(v, scales);
    expect_refused_recording(
        ctx(), [&](VkCommandBuffer cmd) { record_reshape_and_cache(ctx(), cmd, v, scales); }, name);
  };
  refused([](auto& v, auto&) { v.key.shape = Shape{4, 3, 64}; }, "key");
  refused([](auto& v, auto&) { v.value.shape = Shape{5, 2, 64}; }, "value");
  refused([](auto& v, auto&) { v.value.dtype = DType::f32; }, "value: dtype f32");
  refused([](auto& v, auto&) { v.key.dtype = DType::fp8_e4m3; }, "key: dtype fp8_e4m3");
  refused([](auto& v, auto&) { v.slot_mapping.dtype = DType::f32; }, "slot_mapping: dtype f32");
  refused([](auto& v, auto&) { v.slot_mapping.shape = Shape{3}; }, "slot_mapping");
  refused([](auto& v, auto&) { v.key_cache.shape = Shape{4, 2, 4, 8, 16}; }, "key_cache");
  refused([](auto& v, auto&) { v.value_cache.dtype = DType::fp8_e5m2; }, "value_cache: dtype fp8_e5m2");
  refused([](auto& v, auto&) { v.key_cache.dtype = v.value_cache.dtype = DType::u8; }, "key_cache: dtype u8");
  refused([](auto& v, auto&) { v.key_cache.memory.size -= 16; }, "key_cache");
  refused([](auto& v, auto&) { v.value_cache.memory.offset += 4; }, "value_cache: offset 4");
  refused([](auto& v, auto&) { v.key.memory = {}; }, "key: no buffer");
  refused([](auto&, auto& scales) { scales.k_scale = 0.0f; }, "k_scale");
  refused([](auto&, auto& scales) { scales.v_scale = std::numeric_limits<float>::infinity(); }, "v_scale");
  // D = 72 is a multiple of x = 8 (f16) but not of x = 16 (fp8): the message names both.
  refused(
      [](auto& v, auto&) {
        v.value_cache.shape = Shape{4, 2, 72, 16};
      },
      "D = 72 is not a positive multiple of x = 16");
  // Views of one layout named as another, or as none.
  refused([](auto& v, auto&) { v.layout = KvLayout::nhd; }, "the nhd layout");
  refused([](auto& v, auto&) { v.layout = KvLayout(5); }, "layout: 5 is not a cache layout");
  refused(
      [](auto& v, auto&) {
        v.layout = KvLayout::hnd;
        v.key_cache.shape = v.value_cache.shape = Shape{4, 2, 16, 64};
        v.key_cache.shape = Shape{4, 16, 2, 64};  // nhd keys beside hnd values
      },
      "key_cache: shape [4, 16, 2, 64] does not match [N, Hkv, B, D] of the value cache (the hnd layout) = "
      "[4, 2, 16, 64]");
  EXPECT_TRUE(bytes_equal(download(ctx(), s.d_key_cache), s.key_cache)) << "a refused call wrote the cache";
  EXPECT_TRUE(bytes_equal(download(ctx(), s.d_value_cache), s.value_cache)) << "a refused call wrote the cache";
}

TEST(ReshapeAndCacheReferenceTest, RefusesHostKnownSlotPastTheCache) {
  HostTensor key(DType::f32, Shape{3, 1, 64}), value(DType::f32, Shape{3, 1, 64});
  HostTensor key_cache(DType::f32, key_cache_shape(DType::f32, 2, 1, 64, 8));
  HostTensor value_cache(DType::f32, value_cache_shape(2, 1, 64, 8));
  HostTensor slots(DType::i64, Shape{3});
  slots.as<int64_t>()[0] = 1;
  slots.as<int64_t>()[2] = 16;  // N * B = 16
  key.set(0, 1.0);
  expect_refused([&] { reference::reshape_and_cache(key, value, slots, key_cache, value_cache); },
                 "slot_mapping[2]: slot 16");
  EXPECT_EQ(key_cache.get(4), 0.0) << "token 0 (slot 1) was written before the refusal";
}

TEST(LinearGridTest, SplitsLaunchesPast65535Workgroups) {
  EXPECT_EQ(detail::linear_grid(64, 64).x, 1u);
  EXPECT_EQ(detail::linear_grid(65, 64).x, 2u);
  const auto big = detail::linear_grid(uint64_t(65535) * 64 * 3 + 1, 64);
  EXPECT_EQ(big.x, 65535u);
  EXPECT_EQ(big.y, 4u);
  EXPECT_EQ(detail::linear_grid(0, 64).y, 0u);
}

}  // namespace
}  // namespace vkpaged::test
