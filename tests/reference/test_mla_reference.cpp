// SPDX-License-Identifier: Apache-2.0
// The MLA attention reference (reference::mla_attention) against other ways to the same
// numbers: the multi-query reference over the same rows with the rotary entries zeroed in the
// values, the two cache forms against each other, R = 0 against attention with one kv head,
// and a case computed by hand; then mla_shape_of's refusals. No GPU.
#include <gtest/gtest.h>

#include <cmath>
#include <cstring>
#include <random>

#include "support/csr_tables.hpp"
#include "support/decode_case.hpp"
#include "support/expect_error.hpp"
#include "support/mla_case.hpp"
#include "vkpaged/reference.hpp"

namespace vkpaged::test {
namespace {

constexpr DType kCacheDtypes[] = {DType::f32, DType::f16, DType::bf16, DType::fp8_e4m3, DType::fp8_e5m2};

// Every request form, option and cache dtype: the outputs are the multi-query reference's first
// Dv dims, in both cache forms, the CSR page tables too.
TEST(MlaReference, IsAttentionWithTheLatentAsValue) {
  for (DType cache : kCacheDtypes) {
    for (uint32_t mask = 0; mask < 32; ++mask) {
      MlaCase c;
      c.attention.heads = 5;
      c.attention.lens = {1, 23, 40, 9};
      c.attention.new_tokens = {1, 23, 6, 4};
      c.attention.cache_dtype = cache;
      c.attention.query_dtype = mask & 16 ? DType::bf16 : DType::f32;
      c.attention.alibi = mask & 1;
      c.attention.sinks = mask & 2;
      c.attention.sliding_window = mask & 4 ? 7 : 0;
      c.attention.tree_mask = mask & 8 ? TreeMask::random : TreeMask::none;
      std::mt19937 rng(mask * 7 + uint32_t(cache));
      const MlaDraw draw = make_mla_inputs(c, rng);
      AttentionParams p = default_params(c.attention);
      p.scale = 0.3f;
      p.softcap = mask & 4 ? 3.0f : 0.0f;
      const std::string label = c.attention.str() + " mask " + std::to_string(mask);
      AttentionResult want = reference::batch_attention(draw.attention, p, true);
      want.output = leading_dims(want.output, c.value_head_size);
      const AttentionResult one = reference::mla_attention(draw.mla, p, true);
      expect_attention_near(one, want, 0.0, true, label + " one pool");
      const MlaInputs two = with_cache_form(draw.mla, MlaCacheForm::two_pools);
      expect_attention_near(reference::mla_attention(two, p, true), want, 0.0, true, label + " two pools");
      if (mask % 8 == 0) {
        MlaInputs csr = draw.mla;
        const AttentionInputs csr_attention = with_csr(draw.attention, c.attention.block_size);
        csr.block_tables = HostTensor();
        csr.context_lens = HostTensor();
        csr.kv_indptr = csr_attention.kv_indptr;
        csr.kv_indices = csr_attention.kv_indices;
        csr.kv_last_page_len = csr_attention.kv_last_page_len;
        csr.max_blocks_per_seq = csr_attention.max_blocks_per_seq;
        expect_attention_near(reference::mla_attention(csr, p, true), want, 0.0, true, label + " CSR");
      }
    }
  }
}

// The one-pool and two-pool forms hold the same rows: the same bits out, every cache dtype,
// ragged lengths around the block size (1, B - 1, B, B + 1, 2B + 3) over shuffled tables.
TEST(MlaReference, OnePoolAndTwoPoolsAgreeOnRaggedLengths) {
  for (DType cache : kCacheDtypes) {
    for (uint32_t B : {1u, 8u, 16u}) {
      MlaCase c;
      c.value_head_size = 64;
      c.rope_head_size = 16;
      c.attention.heads = 16;
      c.attention.block_size = B;
      c.attention.lens = {1, B > 1 ? B - 1 : 1, B, B + 1, 2 * B + 3};
      c.attention.new_tokens = {1, 1, B, 1, 3};
      c.attention.cache_dtype = cache;
      c.form = MlaCacheForm::two_pools;
      std::mt19937 rng(B + 100 * uint32_t(cache));
      const MlaDraw draw = make_mla_inputs(c, rng);
      const AttentionParams p = default_params(c.attention);
      const AttentionResult two = reference::mla_attention(draw.mla, p, true);
      const AttentionResult one = reference::mla_attention(with_cache_form(draw.mla, MlaCacheForm::one_pool), p, true);
      const std::string label = c.attention.str();
      ASSERT_EQ(two.output.shape(), (Shape{int64_t(B) + 6, 16, 64})) << label;
      EXPECT_EQ(std::memcmp(one.output.data(), two.output.data(), one.output.bytes()), 0) << label;
      EXPECT_EQ(std::memcmp(one.lse.data(), two.lse.data(), one.lse.bytes()), 0) << label;
      AttentionResult want = reference::batch_attention(draw.attention, p, true);
      want.output = leading_dims(want.output, c.value_head_size);
      expect_attention_near(two, want, 0.0, true, label);
    }
  }
}

// R = 0: the key is the value, and MLA is multi-query attention with one kv head whose key and
// value caches hold the same rows.
TEST(MlaReference, RopeWidthZeroIsAttentionWithOneKvHead) {
  for (DType cache : kCacheDtypes) {
    MlaCase c;
    c.value_head_size = 64;
    c.rope_head_size = 0;
    c.attention.heads = 3;
    c.attention.lens = {17, 33};
    c.attention.new_tokens = {17, 2};
    c.attention.cache_dtype = cache;
    c.attention.sinks = true;
    std::mt19937 rng{uint32_t(cache)};
    MlaDraw draw = make_mla_inputs(c, rng);
    draw.attention.value_cache = draw.attention.key_cache;  // nothing zeroed: Dv = Dk
    const AttentionParams p = default_params(c.attention);
    const AttentionResult want = reference::batch_attention(draw.attention, p, true);
    expect_attention_near(reference::mla_attention(draw.mla, p, true), want, 0.0, true, c.attention.str());
  }
}

// One head, Dv = 1, R = 1, B = 2, f32 cache: query (1, 2) at position 1 over rows
// (1, 0.5) and (3, 1.5) with scale 1: logits 2 and 6, output (e^2 * 1 + e^6 * 3) / (e^2 + e^6).
TEST(MlaReference, HandComputedTinyCase) {
  MlaInputs in;
  in.query = HostTensor(DType::f32, Shape{1, 1, 2});
  in.query.set(0, 1.0);
  in.query.set(1, 2.0);
  in.mla_cache = HostTensor(DType::f32, Shape{2, 2, 2});  // block 1 holds the rows, block 0 garbage
  for (size_t i = 0; i < 4; ++i) in.mla_cache.set(i, std::nan(""));
  in.mla_cache.set(4, 1.0);
  in.mla_cache.set(5, 0.5);
  in.mla_cache.set(6, 3.0);
  in.mla_cache.set(7, 1.5);
  in.value_head_size = 1;
  in.cache_dtype = DType::f32;
  in.block_tables = HostTensor(DType::i32, Shape{1, 1});
  in.block_tables.as<int32_t>()[0] = 1;
  in.context_lens = HostTensor(DType::i32, Shape{1});
  in.context_lens.as<int32_t>()[0] = 2;
  in.query_starts = HostTensor(DType::i32, Shape{2});
  in.query_starts.as<int32_t>()[1] = 1;
  AttentionParams p;
  p.scale = 1.0f;
  const double e2 = std::exp(2.0), e6 = std::exp(6.0);
  for (MlaCacheForm form : {MlaCacheForm::one_pool, MlaCacheForm::two_pools}) {
    const AttentionResult r = reference::mla_attention(with_cache_form(in, form), p, true);
    ASSERT_EQ(r.output.shape(), (Shape{1, 1, 1}));
    EXPECT_NEAR(r.output.get(0), (e2 * 1.0 + e6 * 3.0) / (e2 + e6), 1e-6);
    EXPECT_NEAR(r.lse.get(0), std::log(e2 + e6), 1e-5);
  }
  // The default scale is 1 / sqrt(Dk): logits 2 / sqrt(2) and 6 / sqrt(2).
  const double a = std::exp(2.0 / std::sqrt(2.0)), b = std::exp(6.0 / std::sqrt(2.0));
  EXPECT_NEAR(reference::mla_attention(in).output.get(0), (a + 3.0 * b) / (a + b), 1e-6);
  // A NaN in the rotary part of an attended row poisons the logits: the output is NaN.
  in.mla_cache.set(7, std::nan(""));
  EXPECT_TRUE(std::isnan(reference::mla_attention(in, p).output.get(0)));
}

MlaInputs small_inputs() {
  MlaCase c;
  c.attention.lens = {5, 9};
  c.attention.new_tokens = {2, 1};
  std::mt19937 rng(3);
  return make_mla_inputs(c, rng).mla;
}

TEST(MlaReference, Refusals) {
  const MlaInputs good = small_inputs();  // Dv 48, R 16, f16
  auto refused = [](MlaInputs in, const std::string& needle) {
    expect_refused([&] { reference::mla_attention(in); }, needle);
  };
  MlaInputs in = good;
  in.query = HostTensor(DType::f16, Shape{3, 4, 48});
  refused(in, "query: shape [3, 4, 48] is not [T, H, Dk] with the cache's Dk = Dv + R = 48 + 16");
  in = good;
  in.value_head_size = 0;
  refused(in, "value_head_size: Dv = 0 is outside [1, Dk = 64]");
  in.value_head_size = 65;
  refused(in, "value_head_size: Dv = 65 is outside [1, Dk = 64]");
  in = with_cache_form(good, MlaCacheForm::two_pools);
  in.mla_cache = good.mla_cache;
  refused(in, "mla_cache: given together with ckv_cache or kpe_cache");
  in = with_cache_form(good, MlaCacheForm::two_pools);
  in.kpe_cache = HostTensor();
  refused(in, "kpe_cache: the two-pool form needs both");
  in = with_cache_form(good, MlaCacheForm::two_pools);
  in.kpe_cache = HostTensor(DType::f16, Shape{in.ckv_cache.shape()[0], 8, 16});
  refused(in, "kpe_cache: shape");
  in = with_cache_form(good, MlaCacheForm::two_pools);
  in.value_head_size = 32;
  refused(in, "value_head_size: 32 is not ckv_cache's width Dv = 48");
  in = good;
  in.mla_cache = HostTensor(DType::bf16, good.mla_cache.shape());
  refused(in, "mla_cache: dtype bf16 does not hold a f16 cache");
  in = good;
  in.mla_cache = HostTensor(DType::f16, Shape{4, 16, 1, 64});
  refused(in, "mla_cache: shape [4, 16, 1, 64] is not [N, B, width]");
  in = good;
  in.context_lens.as<int32_t>()[1] = 0;
  refused(in, "context_lens[1]: 0 is less than the request's q_s = 1");
  in = good;
  in.block_tables.as<int32_t>()[0] = 1000;
  refused(in, "block_tables[0][0]: block id 1000 is outside");
  in = good;
  in.sinks = HostTensor(DType::f32, Shape{3});
  refused(in, "sinks: shape [3] is not [H] = [4]");
  AttentionParams p;
  p.k_scale = -1.0f;
  expect_refused([&] { reference::mla_attention(good, p); }, "k_scale: -1 is not a finite scale > 0");
}

}  // namespace
}  // namespace vkpaged::test
