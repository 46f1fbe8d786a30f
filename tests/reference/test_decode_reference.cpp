// SPDX-License-Identifier: Apache-2.0
// The decode reference and decode_shape_of on the cache layouts (KvLayout): the same cache in
// the nhd and hnd layouts gives the vllm layout's results exactly, and shapes that do not fit
// the layout named are refused naming it. No GPU.
#include <gtest/gtest.h>

#include <cstring>
#include <random>

#include "support/attention_case.hpp"
#include "support/decode_case.hpp"
#include "support/expect_error.hpp"
#include "vkpaged/reference.hpp"

namespace vkpaged::test {
namespace {

TEST(DecodeReference, LayoutsHoldTheSameCache) {
  for (const FeatureMix& m : feature_mixes()) {
    std::mt19937 rng(m.seed);
    const DecodeInputs vllm = make_decode_inputs(m.c, rng);
    const DecodeResult want = reference::decode_attention(vllm, m.options, m.params, true);
    for (const KvLayout layout : {KvLayout::nhd, KvLayout::hnd}) {
      SCOPED_TRACE(std::string(kv_layout_name(layout)) + " " + m.c.str());
      const DecodeInputs in = with_layout(vllm, layout);
      const DecodeShape s = decode_shape_of(in, true);
      EXPECT_EQ(s.kv_layout, layout);
      EXPECT_EQ(s.num_kv_heads, m.c.kv_heads);
      EXPECT_EQ(s.block_size, m.c.block_size);
      EXPECT_EQ(s.num_blocks, uint32_t(vllm.key_cache.shape()[0]));
      const DecodeResult got = reference::decode_attention(in, m.options, m.params, true);
      ASSERT_EQ(got.output.bytes(), want.output.bytes());
      // Bit for bit: the same elements in the same order of arithmetic (NaN outputs compare as bits).
      EXPECT_EQ(std::memcmp(got.output.data(), want.output.data(), want.output.bytes()), 0);
      EXPECT_EQ(std::memcmp(got.lse.data(), want.lse.data(), want.lse.bytes()), 0);
    }
  }
}

TEST(DecodeReference, Fp8CachesInEveryLayout) {
  DecodeCase c;
  c.head_size = 128;
  c.lens = {0, 1, 40, 77};
  for (const DType cache : {DType::fp8_e4m3, DType::fp8_e5m2}) {
    c.cache_dtype = cache;
    std::mt19937 rng(3);
    const DecodeInputs vllm = make_decode_inputs(c, rng);
    const DecodeResult want = reference::decode_attention(vllm, {}, default_params(c));
    for (const KvLayout layout : {KvLayout::nhd, KvLayout::hnd}) {
      const DecodeResult got = reference::decode_attention(with_layout(vllm, layout), {}, default_params(c));
      EXPECT_EQ(std::memcmp(got.output.data(), want.output.data(), want.output.bytes()), 0) << kv_layout_name(layout);
    }
  }
}

// Caches whose shapes belong to another layout than the one named are refused, naming the
// cache and the layout's shape.
TEST(DecodeReference, ShapesOfAnotherLayoutAreRefused) {
  DecodeCase c;  // H 4, Hkv 2, D 64, B 16, f16: x = 8
  std::mt19937 rng(5);
  const DecodeInputs vllm = make_decode_inputs(c, rng);
  DecodeInputs wrong = vllm;
  wrong.kv_layout = KvLayout::nhd;  // vllm's 5-dimensional key cache
  expect_refused([&] { decode_shape_of(wrong); }, "key_cache: shape [");
  expect_refused([&] { decode_shape_of(wrong); }, "[N, B, Hkv, D] (kv_layout nhd)");
  expect_refused([&] { reference::decode_attention(wrong); }, "kv_layout nhd");

  const DecodeInputs nhd = with_layout(vllm, KvLayout::nhd);  // [N, 16, 2, 64]
  DecodeInputs as_hnd = nhd;
  as_hnd.kv_layout = KvLayout::hnd;  // read as [N, Hkv = 16, B = 2, D]: 16 kv heads do not divide 4 heads
  expect_refused([&] { decode_shape_of(as_hnd); }, "num_heads: 4 is not a multiple of num_kv_heads 16");

  DecodeInputs short_values = nhd;
  short_values.value_cache = HostTensor(DType::f16, Shape{nhd.value_cache.shape()[0], 16, 2, 32});
  expect_refused([&] { decode_shape_of(short_values); }, "value_cache: shape");

  DecodeInputs wide_keys = nhd;
  wide_keys.key_cache = HostTensor(DType::f16, Shape{nhd.key_cache.shape()[0], 16, 2, 128});
  expect_refused([&] { decode_shape_of(wide_keys); }, "key_cache: D = 128");

  DecodeInputs no_layout = vllm;
  no_layout.kv_layout = KvLayout(9);
  expect_refused([&] { decode_shape_of(no_layout); }, "kv_layout: 9 is not a cache layout");
}

// Decode is the one-token case of multi-query attention: each sequence's row is the batch
// reference's row of a request of one new token at its last position, ALiBi, sinks, the soft cap
// and the window included; a sequence of length 0 attends nothing (outputs 0, LSE the sink's
// logit).
TEST(DecodeReference, IsTheOneTokenCaseOfAttention) {
  DecodeCase c;
  c.heads = 8;
  c.kv_heads = 2;
  c.head_size = 64;
  c.lens = {0, 1, 17, 300, 0, 64};
  c.alibi = c.sinks = true;
  std::mt19937 rng(11);
  const DecodeInputs in = make_decode_inputs(c, rng);
  DecodeOptions o;
  o.sliding_window = 50;
  DecodeParams p = default_params(c);
  p.softcap = 4.0f;
  const DecodeResult got = reference::decode_attention(in, o, p, true);
  // The non-empty sequences as their own one-token batch.
  const std::vector<int64_t> rows{1, 2, 3, 5};
  DecodeInputs sub = in;
  const int64_t H = c.heads, D = c.head_size, M = in.block_tables.shape()[1];
  sub.query = HostTensor(in.query.dtype(), Shape{4, H, D});
  sub.block_tables = HostTensor(DType::i32, Shape{4, M});
  sub.context_lens = HostTensor(DType::i32, Shape{4});
  for (int64_t t = 0; t < 4; ++t) {
    for (int64_t i = 0; i < H * D; ++i) sub.query.set(size_t(t * H * D + i), in.query.get(size_t(rows[t] * H * D + i)));
    for (int64_t j = 0; j < M; ++j) sub.block_tables.as<int32_t>()[t * M + j] = in.block_tables.as<int32_t>()[rows[t] * M + j];
    sub.context_lens.as<int32_t>()[t] = in.context_lens.as<int32_t>()[rows[t]];
  }
  const AttentionResult want = reference::batch_attention(single_token_batch(sub, o.sliding_window), p, true);
  for (int64_t t = 0; t < 4; ++t)
    for (int64_t i = 0; i < H * D; ++i)
      EXPECT_EQ(got.output.get(size_t(rows[t] * H * D + i)), want.output.get(size_t(t * H * D + i))) << t << " " << i;
  for (int64_t t = 0; t < 4; ++t)
    for (int64_t h = 0; h < H; ++h) EXPECT_EQ(got.lse.get(size_t(rows[t] * H + h)), want.lse.get(size_t(t * H + h)));
  for (int64_t seq : {0, 4}) {
    for (int64_t i = 0; i < H * D; ++i) EXPECT_EQ(got.output.get(size_t(seq * H * D + i)), 0.0);
    for (int64_t h = 0; h < H; ++h) EXPECT_EQ(got.lse.get(size_t(seq * H + h)), in.sinks.get(size_t(h)));
  }
}

}  // namespace
}  // namespace vkpaged::test
