// SPDX-License-Identifier: Apache-2.0
// Host-side checks of the cache layouts and the rotary embedding, without a device: the CPU
// references put each element where the contract's tables say (written out here, not taken
// from kv_layout.hpp), rotate by hand-computed examples, and refuse bad input naming the
// argument and the value without writing anything. These run in vkpaged_host_tests too, under
// ASan and UBSan (scripts/sanitize.sh); the GPU paths are checked against these references in
// tests/ops/.
#include <gtest/gtest.h>

#include <cmath>
#include <cstring>
#include <numeric>
#include <random>
#include <vector>

#include "support/expect_error.hpp"
#include "vkpaged/reference.hpp"
#include "vkpaged/rotary.hpp"

namespace vkpaged::test {
namespace {

bool same_bytes(const HostTensor& a, const HostTensor& b) {
  return a.bytes() == b.bytes() && std::memcmp(a.data(), b.data(), a.bytes()) == 0;
}

HostTensor counting(DType t, Shape shape, double start = 1.0) {
  HostTensor h(t, shape);
  for (int64_t i = 0; i < h.numel(); ++i) h.set(size_t(i), start + double(i));
  return h;
}

HostTensor index_tensor(DType t, std::vector<int64_t> values) {
  HostTensor h(t, Shape{int64_t(values.size())});
  for (size_t i = 0; i < values.size(); ++i) h.set(i, double(values[i]));
  return h;
}

// ---- layouts ----

struct LayoutCase {
  KvLayout layout;
  DType dtype;
};

// Shapes of docs/contract.md's layout table.
std::pair<Shape, Shape> cache_shapes(KvLayout layout, DType t, int64_t n, int64_t hkv, int64_t d, int64_t b) {
  const int64_t x = cache_pack_factor(t);
  switch (layout) {
    case KvLayout::nhd: return {Shape{n, b, hkv, d}, Shape{n, b, hkv, d}};
    case KvLayout::hnd: return {Shape{n, hkv, b, d}, Shape{n, hkv, b, d}};
    case KvLayout::vllm: break;
  }
  return {Shape{n, hkv, d / x, b, x}, Shape{n, hkv, d, b}};
}

// Element (block, g, d, o) by the contract's index formulas.
size_t key_at(KvLayout layout, int64_t x, int64_t hkv, int64_t dd, int64_t bb, int64_t b, int64_t g, int64_t d,
              int64_t o) {
  switch (layout) {
    case KvLayout::nhd: return size_t(((b * bb + o) * hkv + g) * dd + d);
    case KvLayout::hnd: return size_t(((b * hkv + g) * bb + o) * dd + d);
    case KvLayout::vllm: break;
  }
  return size_t(((((b * hkv + g) * (dd / x)) + d / x) * bb + o) * x + d % x);
}
size_t value_at(KvLayout layout, int64_t x, int64_t hkv, int64_t dd, int64_t bb, int64_t b, int64_t g, int64_t d,
                int64_t o) {
  if (layout == KvLayout::vllm) return size_t(((b * hkv + g) * dd + d) * bb + o);
  return key_at(layout, x, hkv, dd, bb, b, g, d, o);
}

class LayoutReference : public ::testing::TestWithParam<LayoutCase> {};

TEST_P(LayoutReference, ReshapeAndGatherPlaceEachElementWhereTheContractSays) {
  const auto [layout, t] = GetParam();
  const int64_t N = 3, Hkv = 2, D = 32, B = 4, T = 7, x = cache_pack_factor(t);
  const auto [key_shape, value_shape] = cache_shapes(layout, t, N, Hkv, D, B);
  HostTensor key_cache(t, key_shape), value_cache(t, value_shape);
  // Small integers: exact in every dtype (fp8 e4m3 up to 16 with scale 1).
  HostTensor key(DType::f32, Shape{T, Hkv, D}), value(DType::f32, Shape{T, Hkv, D});
  for (int64_t i = 0; i < key.numel(); ++i) {
    key.set(size_t(i), double(i % 13) - 6.0);
    value.set(size_t(i), double(i % 11) - 5.0);
  }
  if (t != DType::f32) {  // the cache's input dtype: f32 except for 16-bit caches, which take their own
    HostTensor k(is_fp8_dtype(t) ? DType::f32 : t, key.shape()), v(k.dtype(), value.shape());
    for (int64_t i = 0; i < key.numel(); ++i) {
      k.set(size_t(i), key.get(size_t(i)));
      v.set(size_t(i), value.get(size_t(i)));
    }
    key = k;
    value = v;
  }
  const std::vector<int64_t> slot_values = {5, -1, 11, 0, 3, 8, 6};  // shuffled, a padding, the last slot
  const HostTensor slots = index_tensor(DType::i64, slot_values);
  reference::reshape_and_cache(key, value, slots, key_cache, value_cache, {}, layout);
  for (int64_t tok = 0; tok < T; ++tok) {
    const int64_t s = slot_values[size_t(tok)];
    if (s < 0) continue;
    for (int64_t g = 0; g < Hkv; ++g)
      for (int64_t d = 0; d < D; ++d) {
        const size_t in = size_t((tok * Hkv + g) * D + d);
        ASSERT_EQ(key_cache.get(key_at(layout, x, Hkv, D, B, s / B, g, d, s % B)), key.get(in))
            << tok << " " << g << " " << d;
        ASSERT_EQ(value_cache.get(value_at(layout, x, Hkv, D, B, s / B, g, d, s % B)), value.get(in));
      }
  }
  // Gather the slots back: one sequence over blocks 1, 2, 0 holds slots 4..11 then 0..3.
  HostTensor tables(DType::i32, Shape{1, 3}), starts(DType::i32, Shape{2});
  const int32_t order[] = {1, 2, 0};
  std::memcpy(tables.data(), order, sizeof order);
  starts.as<int32_t>()[1] = 12;
  const auto got = reference::gather(key_cache, value_cache, tables, starts, DType::f32, {}, layout);
  for (int64_t tok = 0; tok < T; ++tok) {
    const int64_t s = slot_values[size_t(tok)];
    if (s < 0) continue;
    const int64_t row = s >= 4 ? s - 4 : s + 8;
    for (int64_t i = 0; i < Hkv * D; ++i) {
      ASSERT_EQ(got.key.get(size_t(row * Hkv * D + i)), key.get(size_t(tok * Hkv * D + i)));
      ASSERT_EQ(got.value.get(size_t(row * Hkv * D + i)), value.get(size_t(tok * Hkv * D + i)));
    }
  }
}

TEST_P(LayoutReference, CopyAndSwapMoveWholeBlocks) {
  const auto [layout, t] = GetParam();
  const auto [key_shape, value_shape] = cache_shapes(layout, t, 4, 2, 32, 4);
  HostTensor key_cache = counting(DType::u8, Shape{key_shape.numel() * int64_t(dtype_size(t))});
  HostTensor value_cache = counting(DType::u8, Shape{value_shape.numel() * int64_t(dtype_size(t))}, 7.0);
  // Reinterpret the counting bytes as the cache dtype.
  HostTensor k(t, key_shape), v(t, value_shape);
  std::memcpy(k.data(), key_cache.data(), k.bytes());
  std::memcpy(v.data(), value_cache.data(), v.bytes());
  const HostTensor k0 = k, v0 = v;
  const size_t block = k.bytes() / 4;
  const std::vector<BlockCopy> pairs = {{0, 3}, {2, 1}};
  reference::copy_blocks(k, v, pairs, layout);
  for (const BlockCopy& p : pairs) {
    EXPECT_EQ(std::memcmp(static_cast<const uint8_t*>(k.data()) + size_t(p.dst) * block,
                          static_cast<const uint8_t*>(k0.data()) + size_t(p.src) * block, block),
              0);
    EXPECT_EQ(std::memcmp(static_cast<const uint8_t*>(v.data()) + size_t(p.dst) * block,
                          static_cast<const uint8_t*>(v0.data()) + size_t(p.src) * block, block),
              0);
  }
  EXPECT_EQ(std::memcmp(k.data(), k0.data(), block), 0) << "block 0 is no destination";
  const auto [host_key_shape, host_value_shape] = cache_shapes(layout, t, 2, 2, 32, 4);
  HostTensor hk(t, host_key_shape), hv(t, host_value_shape);
  reference::swap_blocks(k, v, hk, hv, std::vector<BlockCopy>{{3, 1}}, layout);
  EXPECT_EQ(std::memcmp(static_cast<const uint8_t*>(hk.data()) + block, static_cast<const uint8_t*>(k0.data()), block),
            0);
  EXPECT_EQ(std::memcmp(static_cast<const uint8_t*>(hv.data()) + block, static_cast<const uint8_t*>(v0.data()), block),
            0);
}

TEST_P(LayoutReference, RefusesShapesOfAnotherLayoutNamingIt) {
  const auto [layout, t] = GetParam();
  const KvLayout other = layout == KvLayout::nhd ? KvLayout::hnd : KvLayout::nhd;
  // Hkv != B so that nhd and hnd shapes differ.
  const auto [key_shape, value_shape] = cache_shapes(other, t, 3, 2, 32, 4);
  HostTensor key_cache(t, key_shape), value_cache(t, value_shape);
  const HostTensor before_k = key_cache, before_v = value_cache;
  HostTensor key(DType::f32, Shape{1, 2, 32}), value(DType::f32, Shape{1, 2, 32});
  if (!is_fp8_dtype(t)) key = value = HostTensor(t, Shape{1, 2, 32});
  const HostTensor slots = index_tensor(DType::i64, {1});
  expect_refused([&] { reference::reshape_and_cache(key, value, slots, key_cache, value_cache, {}, layout); },
                 std::string(kv_layout_name(layout)) + " layout");
  EXPECT_TRUE(same_bytes(key_cache, before_k) && same_bytes(value_cache, before_v));
}

std::string layout_case_name(const ::testing::TestParamInfo<LayoutCase>& info) {
  return std::string(kv_layout_name(info.param.layout)) + "_" + std::string(dtype_name(info.param.dtype));
}

INSTANTIATE_TEST_SUITE_P(Layouts, LayoutReference,
                         ::testing::Values(LayoutCase{KvLayout::vllm, DType::f16},
                                           LayoutCase{KvLayout::nhd, DType::f16}, LayoutCase{KvLayout::hnd, DType::f16},
                                           LayoutCase{KvLayout::nhd, DType::fp8_e4m3},
                                           LayoutCase{KvLayout::hnd, DType::f32},
                                           LayoutCase{KvLayout::vllm, DType::fp8_e5m2}),
                         layout_case_name);

TEST(LayoutRefusals, UnknownLayoutAndMismatchedSwapAreNamed) {
  HostTensor key_cache(DType::f16, Shape{2, 4, 2, 32}), value_cache(DType::f16, Shape{2, 4, 2, 32});
  expect_refused([&] { reference::copy_blocks(key_cache, value_cache, {}, KvLayout(7)); },
                 "layout: 7 is not a cache layout");
  // The value shape read in another layout than the key's: the key shape check names it.
  HostTensor vllm_key(DType::f16, Shape{2, 4, 4, 2, 8});
  expect_refused([&] { reference::copy_blocks(vllm_key, value_cache, {}, KvLayout::nhd); },
                 "key_cache: shape [2, 4, 4, 2, 8] does not match [N, B, Hkv, D] of the value cache (the nhd layout)");
}

// ---- rotary embedding ----

TEST(RotaryReference, RotatesHandComputedPairsInBothStyles) {
  // D = 6, rotary_dim = 4: at position 1, pair 0 turns by 90 degrees (c 0, s 1), pair 1 by 0.
  HostTensor cos_sin(DType::f32, Shape{2, 4});
  const float rows[2][4] = {{1, 1, 0, 0}, {0, 1, 1, 0}};
  std::memcpy(cos_sin.data(), rows, sizeof rows);
  const HostTensor positions = index_tensor(DType::i64, {1, 0});
  HostTensor none;
  for (RotaryStyle style : {RotaryStyle::neox, RotaryStyle::gptj}) {
    HostTensor q = counting(DType::f32, Shape{2, 1, 6});
    reference::rotary_embedding(q, none, positions, cos_sin, style);
    // NeoX pairs (0, 2), (1, 3): (1, 3) -> (1*0 - 3*1, 3*0 + 1*1) = (-3, 1). GPT-J pairs
    // (0, 1), (2, 3): (1, 2) -> (-2, 1). Elements 4, 5 and token 1 (position 0) stay.
    const std::vector<double> want =
        style == RotaryStyle::neox ? std::vector<double>{-3, 2, 1, 4, 5, 6} : std::vector<double>{-2, 1, 3, 4, 5, 6};
    for (size_t i = 0; i < 6; ++i) EXPECT_EQ(q.get(i), want[i]) << rotary_style_name(style) << " " << i;
    for (size_t i = 6; i < 12; ++i) EXPECT_EQ(q.get(i), double(i + 1)) << "position 0 is the identity";
  }
}

TEST(RotaryReference, RotatesKeysLikeQueriesAndKeepsPairNorms) {
  std::mt19937 rng(3);
  std::uniform_real_distribution<float> u(-1, 1);
  const HostTensor cos_sin = rotary_cos_sin_cache(64, 32);
  HostTensor q(DType::f32, Shape{5, 4, 48}), k(DType::f32, Shape{5, 2, 48});
  for (int64_t i = 0; i < q.numel(); ++i) q.set(size_t(i), u(rng));
  for (int64_t t = 0; t < 5; ++t)  // the keys are the queries' first two heads
    for (int64_t i = 0; i < 2 * 48; ++i) k.set(size_t(t * 96 + i), q.get(size_t(t * 192 + i)));
  const HostTensor q0 = q;
  const HostTensor positions = index_tensor(DType::i32, {0, 63, 7, 7, 30});
  reference::rotary_embedding(q, k, positions, cos_sin, RotaryStyle::neox);
  for (int64_t t = 0; t < 5; ++t)
    for (int64_t h = 0; h < 4; ++h) {
      const size_t row = size_t((t * 4 + h) * 48);
      for (size_t i = 0; i < 16; ++i) {
        const double before = std::hypot(q0.get(row + i), q0.get(row + i + 16));
        EXPECT_NEAR(std::hypot(q.get(row + i), q.get(row + i + 16)), before, 1e-6);
      }
      for (size_t d = 32; d < 48; ++d) EXPECT_EQ(q.get(row + d), q0.get(row + d)) << "past rotary_dim";
    }
  for (int64_t t = 0; t < 5; ++t)
    for (size_t i = 0; i < 48; ++i) EXPECT_EQ(k.get(size_t(t * 96) + i), q.get(size_t(t * 192) + i)) << "key row 0";
}

TEST(RotaryReference, CosSinCacheIsVllms) {
  const HostTensor c = rotary_cos_sin_cache(100, 2, 10000.0);  // one pair: frequency 1
  for (size_t p : {0u, 1u, 57u, 99u}) {
    EXPECT_FLOAT_EQ(float(c.get(2 * p)), float(std::cos(double(p))));
    EXPECT_FLOAT_EQ(float(c.get(2 * p + 1)), float(std::sin(double(p))));
  }
  const HostTensor h = rotary_cos_sin_cache(10, 8, 500.0, DType::bf16);
  EXPECT_EQ(h.dtype(), DType::bf16);
  EXPECT_EQ(h.shape(), (Shape{10, 8}));
  HostTensor rounded(DType::bf16, Shape{2});  // row 3, pair 1: cos and sin of 3 * 500^(-2/8), rounded to bf16
  rounded.set(0, std::cos(3.0 * std::pow(500.0, -2.0 / 8.0)));
  rounded.set(1, std::sin(3.0 * std::pow(500.0, -2.0 / 8.0)));
  EXPECT_EQ(h.get(8 * 3 + 1), rounded.get(0));
  EXPECT_EQ(h.get(8 * 3 + 4 + 1), rounded.get(1));
  expect_refused([] { rotary_cos_sin_cache(10, 7); }, "rotary_dim: 7");
  expect_refused([] { rotary_cos_sin_cache(0, 8); }, "max_position: 0");
  expect_refused([] { rotary_cos_sin_cache(10, 8, -1.0); }, "base: -1");
}

TEST(RotaryReference, RefusesBadInputNamingItAndWritesNothing) {
  const HostTensor cos_sin = rotary_cos_sin_cache(16, 8);
  HostTensor q = counting(DType::f16, Shape{3, 2, 8}), k = counting(DType::f16, Shape{3, 1, 8});
  const HostTensor q0 = q, k0 = k;
  const HostTensor good_positions = index_tensor(DType::i64, {0, 1, 2});
  auto refused = [&](const HostTensor& positions, const HostTensor& cs, HostTensor& query, HostTensor& key,
                     const std::string& needle, RotaryStyle style = RotaryStyle::neox) {
    expect_refused([&] { reference::rotary_embedding(query, key, positions, cs, style); }, needle);
  };
  refused(index_tensor(DType::i64, {0, 16, 2}), cos_sin, q, k, "positions[1]: 16 is outside [0, max_position = 16)");
  refused(index_tensor(DType::i32, {0, 1, -3}), cos_sin, q, k, "positions[2]: -3");
  refused(index_tensor(DType::i64, {0, 1}), cos_sin, q, k, "positions: shape [2] is not [T] = [3]");
  refused(index_tensor(DType::u32, {0, 1, 2}), cos_sin, q, k, "positions: dtype u32");
  refused(good_positions, rotary_cos_sin_cache(16, 8, 10000.0, DType::bf16), q, k,
          "cos_sin_cache: dtype bf16 is neither f32 nor query's f16");
  refused(good_positions, rotary_cos_sin_cache(16, 10), q, k, "rotary_dim = 10 is more than the head size D = 8");
  refused(good_positions, HostTensor(DType::f32, Shape{16, 3}), q, k, "rotary_dim = 3 is not an even number");
  refused(good_positions, HostTensor(DType::f32, Shape{0, 8}), q, k, "max_position (dimension 0) is 0");
  refused(good_positions, cos_sin, q, k, "style: 9", RotaryStyle(9));
  HostTensor none, k32 = counting(DType::f32, Shape{3, 1, 8}), odd = counting(DType::f16, Shape{3, 1, 7});
  HostTensor k_tokens = counting(DType::f16, Shape{2, 1, 8});
  refused(good_positions, cos_sin, none, none, "neither is given");
  refused(good_positions, cos_sin, q, k32, "key: dtype f32 differs from query's f16");
  refused(good_positions, cos_sin, q, k_tokens, "key: shape [2, 1, 8] does not match");
  refused(good_positions, cos_sin, none, odd, "key: head size D = 7 is not a positive even number");
  EXPECT_TRUE(same_bytes(q, q0) && same_bytes(k, k0)) << "a refused call wrote";
  // f16 cos/sin with an f16 query is fine; an empty batch is too.
  EXPECT_NO_THROW(reference::rotary_embedding(q, k, good_positions, rotary_cos_sin_cache(16, 8, 1e4, DType::f16)));
  HostTensor q_empty(DType::f16, Shape{0, 2, 8});
  EXPECT_NO_THROW(reference::rotary_embedding(q_empty, none, HostTensor(DType::i64, Shape{0}), cos_sin));
}

TEST(RotaryReference, FusedWriteRefusesBeforeRotatingAnything) {
  const HostTensor cos_sin = rotary_cos_sin_cache(16, 8);
  HostTensor q = counting(DType::f16, Shape{2, 2, 8}), k = counting(DType::f16, Shape{2, 1, 8});
  const HostTensor v = counting(DType::f16, Shape{2, 1, 8});
  HostTensor key_cache(DType::f16, Shape{2, 4, 1, 8}), value_cache(DType::f16, Shape{2, 4, 1, 8});
  const HostTensor q0 = q, k0 = k;
  expect_refused(
      [&] {
        reference::reshape_and_cache_rotary(q, k, v, index_tensor(DType::i64, {1, 8}), index_tensor(DType::i64, {0, 1}),
                                            cos_sin, RotaryStyle::neox, key_cache, value_cache, {}, KvLayout::nhd);
      },
      "slot_mapping[1]: slot 8 is not below N * B = 8");
  expect_refused(
      [&] {
        reference::reshape_and_cache_rotary(q, k, v, index_tensor(DType::i64, {1, 2}),
                                            index_tensor(DType::i64, {0, 99}), cos_sin, RotaryStyle::neox, key_cache,
                                            value_cache, {}, KvLayout::nhd);
      },
      "positions[1]: 99");
  EXPECT_TRUE(same_bytes(q, q0) && same_bytes(k, k0)) << "a refused call rotated";
  EXPECT_TRUE(same_bytes(key_cache, HostTensor(DType::f16, Shape{2, 4, 1, 8})));
  // Accepted: the cache holds the rotated key, and the key buffer is rotated too.
  reference::reshape_and_cache_rotary(q, k, v, index_tensor(DType::i64, {1, -1}), index_tensor(DType::i64, {3, 5}),
                                      cos_sin, RotaryStyle::gptj, key_cache, value_cache, {}, KvLayout::nhd);
  HostTensor q1 = q0, k1 = k0;
  reference::rotary_embedding(q1, k1, index_tensor(DType::i64, {3, 5}), cos_sin, RotaryStyle::gptj);
  EXPECT_TRUE(same_bytes(q, q1) && same_bytes(k, k1));
  for (size_t d = 0; d < 8; ++d) EXPECT_EQ(key_cache.get(8 + d), k1.get(d)) << "slot 1 of block 0 (nhd)";
}

}  // namespace
}  // namespace vkpaged::test
