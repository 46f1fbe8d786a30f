// SPDX-License-Identifier: Apache-2.0
// The multi-query attention reference against other ways to the same numbers: the three cache
// layouts, a causal tree mask against none, a window over a causal mask; and the refusals of
// attention_shape_of and the params. No GPU. (The reference's independent check is the NumPy
// implementation of docs/contract.md in tests/tools/contract_check*.py, run by ContractCheck*.)
#include <gtest/gtest.h>

#include <cmath>
#include <random>

#include "support/attention_case.hpp"
#include "support/decode_case.hpp"  // max_abs_diff
#include "support/expect_error.hpp"
#include "vkpaged/reference.hpp"

namespace vkpaged::test {
namespace {

TEST(AttentionReference, LayoutsHoldTheSameCache) {
  AttentionCase c;
  c.lens = {30, 7};
  c.new_tokens = {5, 7};
  c.tree_mask = TreeMask::tree;
  std::mt19937 rng(2);
  const AttentionInputs vllm = make_attention_inputs(c, rng);
  const auto want = reference::batch_attention(vllm, default_params(c), true);
  for (KvLayout layout : {KvLayout::nhd, KvLayout::hnd}) {
    AttentionCase other = c;
    other.layout = layout;
    std::mt19937 unused(2);
    AttentionInputs in = make_attention_inputs(other, unused);
    // The same elements, moved to the other layout's places.
    const int64_t N = vllm.key_cache.shape()[0];
    for (int64_t b = 0; b < N; ++b)
      for (int64_t g = 0; g < c.kv_heads; ++g)
        for (int64_t d = 0; d < c.head_size; ++d)
          for (int64_t o = 0; o < c.block_size; ++o) {
            in.key_cache.set(size_t(key_index(other, b, g, d, o)), vllm.key_cache.get(size_t(key_index(c, b, g, d, o))));
            in.value_cache.set(size_t(value_index(other, b, g, d, o)), vllm.value_cache.get(size_t(value_index(c, b, g, d, o))));
          }
    in.query = vllm.query;
    in.block_tables = vllm.block_tables;
    in.tree_mask = vllm.tree_mask;
    const auto got = reference::batch_attention(in, default_params(c), true);
    EXPECT_EQ(max_abs_diff(got.output, want.output), 0.0) << kv_layout_name(layout);
    EXPECT_EQ(max_abs_diff(got.lse, want.lse), 0.0) << kv_layout_name(layout);
  }
}

TEST(AttentionReference, ACausalTreeMaskIsNoMask) {
  AttentionCase c;
  c.lens = {30, 20};
  c.new_tokens = {20, 20};  // more than 16 new tokens: the case maker's tree is a chain
  c.tree_mask = TreeMask::tree;
  std::mt19937 rng(4);
  AttentionInputs in = make_attention_inputs(c, rng);
  const auto masked = reference::batch_attention(in, default_params(c), true);
  in.tree_mask = HostTensor();
  const auto plain = reference::batch_attention(in, default_params(c), true);
  EXPECT_EQ(max_abs_diff(masked.output, plain.output), 0.0);
}

// docs/contract.md: the sliding window applies to every key by position, the new tokens
// included, so a causal mask under a window shorter than the new tokens is that window alone.
TEST(AttentionReference, ACausalTreeMaskUnderAShortWindowIsTheWindowAlone) {
  AttentionCase c;
  c.lens = {30, 20, 9};
  c.new_tokens = {20, 20, 9};  // chains (more than 16 new tokens) and a 9-token draft tree
  c.tree_mask = TreeMask::tree;
  c.sliding_window = 5;
  std::mt19937 rng(6);
  AttentionInputs in = make_attention_inputs(c, rng);
  // The third request's tree made causal: every new token sees itself and all before it.
  const size_t third = 2 * 20 * 20;
  for (size_t j = 0; j < 9; ++j)
    for (size_t i = 0; i < 9; ++i) in.tree_mask.as<uint8_t>()[third + j * 9 + i] = i <= j ? 1 : 0;
  const auto masked = reference::batch_attention(in, default_params(c), true);
  AttentionInputs causal = in;
  causal.tree_mask = HostTensor();
  const auto plain = reference::batch_attention(causal, default_params(c), true);
  EXPECT_EQ(max_abs_diff(masked.output, plain.output), 0.0);
  EXPECT_EQ(max_abs_diff(masked.lse, plain.lse), 0.0);
  // The window does hide new tokens the mask shows: without it the masked rows change.
  in.sliding_window = 0;
  const auto unwindowed = reference::batch_attention(in, default_params(c), true);
  EXPECT_GT(max_abs_diff(masked.lse, unwindowed.lse), 1e-3);
}

TEST(AttentionReference, RefusesWhatTheContractRefuses) {
  AttentionCase c;
  c.tree_mask = TreeMask::random;
  std::mt19937 rng(1);
  const AttentionInputs good = make_attention_inputs(c, rng);
  const AttentionParams p = default_params(c);
  auto refused = [&](auto edit, const std::string& needle) {
    AttentionInputs in = good;
    AttentionParams params = p;
    edit(in, params);
    expect_refused([&] { reference::batch_attention(in, params); }, needle);
  };
  refused([](AttentionInputs& in, AttentionParams&) { in.context_lens.as<int32_t>()[1] = 2; },
          "context_lens[1]: 2 is less than the request's q_s = 3");
  refused([](AttentionInputs& in, AttentionParams&) { in.tree_mask.as<uint8_t>()[3] = 2; }, "tree_mask[3]: 2 is not 0 or 1");
  refused([](AttentionInputs& in, AttentionParams&) { in.tree_mask = HostTensor(DType::u8, Shape{5}); },
          "tree_mask: shape [5] is not [sum of q_s^2] = [34]");
  refused([](AttentionInputs& in, AttentionParams&) { in.query_starts.as<int32_t>()[2] = 9; },
          "query_starts[2]: 9 is not T = num_query_tokens = 8");
  refused([](AttentionInputs& in, AttentionParams&) { in.query_starts = HostTensor(DType::i32, Shape{2}); },
          "query_starts: 2 entries, expected S + 1 = 3");
  refused([](AttentionInputs& in, AttentionParams&) { in.block_tables.as<int32_t>()[0] = 1000; },
          "block_tables[0][0]: block id 1000");
  refused([](AttentionInputs& in, AttentionParams&) { in.kv_layout = KvLayout::nhd; }, "key_cache: shape [");
  refused([](AttentionInputs&, AttentionParams& params) { params.scale = 0.0f; }, "scale: 0 is not a finite scale > 0");
  refused([](AttentionInputs&, AttentionParams& params) { params.softcap = -1.0f; }, "softcap: -1");
  AttentionCase fp8 = c;
  fp8.cache_dtype = DType::fp8_e4m3;
  std::mt19937 rng8(1);
  AttentionInputs in8 = make_attention_inputs(fp8, rng8);
  AttentionParams big = default_params(fp8);
  big.k_scale = 1e36f;  // 448 * 1e36 is past f32's largest
  expect_refused([&] { reference::batch_attention(in8, big); }, "k_scale: 1e+36 is too large for an fp8_e4m3 cache");
}

}  // namespace
}  // namespace vkpaged::test
