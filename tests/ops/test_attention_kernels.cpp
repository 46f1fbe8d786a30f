// SPDX-License-Identifier: Apache-2.0
// Multi-query attention cases cut across what the kernels' work is made of (the matrix
// kernel's key tiles of 16 to 64 positions and row blocks of 16 rows; the scalar kernel's tiles
// of 128 positions): prompts and chunks longer than several tiles in every layout, with every
// feature on; bf16 far outside f16's range, which the matrix kernel's f16 products must keep.
// On every kernel (support/attention_kernels.hpp), against the CPU reference.
#include <gtest/gtest.h>

#include <cmath>
#include <random>

#include "support/attention_case.hpp"
#include "support/attention_kernels.hpp"
#include "support/decode_case.hpp"
#include "vkpaged/reference.hpp"

namespace vkpaged::test {
namespace {

using AttentionKernelsTest = AttentionKernelTest;

TEST_P(AttentionKernelsTest, PromptsAcrossManyTilesAndRowBlocks) {
  // A whole prompt, a chunk after a cached prefix that starts mid-block and a decode request,
  // in each layout; then D 128 and 256 over a bf16 cache.
  uint32_t seed = 1;
  for (KvLayout layout : {KvLayout::vllm, KvLayout::nhd, KvLayout::hnd}) {
    AttentionCase c;
    c.heads = 8;
    c.kv_heads = 2;
    c.head_size = 64;
    c.layout = layout;
    c.lens = {100, 61 + 50, 37};
    c.new_tokens = {100, 50, 1};
    check(c, default_params(c), options(), seed++);
  }
  for (uint32_t D : {128u, 256u}) {
    AttentionCase c;
    c.heads = 4;
    c.kv_heads = 1;
    c.head_size = D;
    c.query_dtype = c.cache_dtype = DType::bf16;
    c.lens = {70, 101};
    c.new_tokens = {70, 30};
    check(c, default_params(c), options(), seed++);
  }
}

TEST_P(AttentionKernelsTest, LongRowsWithEveryFeature) {
  // Windows, ALiBi, soft cap, sinks and tree masks over chunks that span several tiles, one
  // pass and split into partitions of 256.
  AttentionCase c;
  c.heads = 8;
  c.kv_heads = 2;
  c.head_size = 96;
  c.cache_dtype = DType::fp8_e4m3;
  c.fp8_scale = 0.02f;
  c.lens = {600, 40, 300};
  c.new_tokens = {60, 40, 7};
  c.alibi = c.sinks = true;
  c.sliding_window = 200;
  c.tree_mask = TreeMask::tree;
  AttentionParams p = default_params(c);
  p.softcap = 4.0f;
  check(c, p, options(SplitMode::single_pass), 5);
  check(c, p, options(SplitMode::split, 256), 5);
}

// Request s's queries, keys and values times powers of two: some past f16's largest value
// (65504), some below its smallest normal (2^-14), within one call.
TEST_P(AttentionKernelsTest, Bf16FarOutsideTheF16RangeIsKept) {
  AttentionCase c;
  c.heads = 4;
  c.kv_heads = 2;
  c.head_size = 64;
  c.query_dtype = c.cache_dtype = DType::bf16;
  c.lens = {40, 70, 20};
  c.new_tokens = {8, 30, 20};
  struct Factors {
    double query, key, value;
  };
  const Factors factors[] = {{std::ldexp(1.0, 40), std::ldexp(1.0, -40), std::ldexp(1.0, 30)},
                             {std::ldexp(1.0, -35), std::ldexp(1.0, 33), std::ldexp(1.0, -40)},
                             {1.0, std::ldexp(1.0, 8), std::ldexp(1.0, 20)}};
  std::mt19937 rng(21);
  AttentionInputs in = make_attention_inputs(c, rng);
  const int64_t H = c.heads, D = c.head_size;
  int64_t token = 0;
  for (size_t s = 0; s < c.lens.size(); ++s) {
    const Factors f = factors[s];
    for (int64_t j = 0; j < c.new_tokens[s]; ++j, ++token)
      for (int64_t i = 0; i < H * D; ++i) in.query.set(size_t(token * H * D + i), in.query.get(size_t(token * H * D + i)) * f.query);
    for (int64_t t = 0; t < c.lens[s]; ++t)
      for (int64_t g = 0; g < c.kv_heads; ++g)
        for (int64_t d = 0; d < D; ++d) {
          const int64_t block = block_of(c, in, int64_t(s), t), o = t % c.block_size;
          const size_t k = size_t(key_index(c, block, g, d, o)), v = size_t(value_index(c, block, g, d, o));
          in.key_cache.set(k, in.key_cache.get(k) * f.key);
          in.value_cache.set(v, in.value_cache.get(v) * f.value);
        }
  }
  const AttentionParams p = default_params(c);
  if (!plan_or_refused(attention_shape_of(in, p), std::vector<int32_t>{0, 8, 38, 58}, options())) return;
  const AttentionResult want = reference::batch_attention(in, p);
  const AttentionResult got = batch_attention(ctx(), in, p, options());
  token = 0;
  for (size_t s = 0; s < c.lens.size(); ++s) {
    double worst = 0.0;  // relative to the request's value scale
    for (int64_t j = 0; j < c.new_tokens[s]; ++j, ++token)
      for (int64_t i = 0; i < H * D; ++i) {
        const size_t e = size_t(token * H * D + i);
        const double diff = std::fabs(got.output.get(e) - want.output.get(e)) / factors[s].value;
        worst = std::isnan(diff) ? INFINITY : std::max(worst, diff);
      }
    EXPECT_LE(worst, tolerance(DType::bf16, DType::bf16)) << "request " << s << " on " << kernel_name();
  }
}

// bf16 queries and keys whose largest elements are 2^84 times the rest, in different dims (so
// every logit is about 2^84 times the scale, finite): the matrix kernel's powers of two for the
// query's and the key tile's ranges, about 2^-70 each, must not meet as one f32 factor (2^-140
// underflows, its inverse overflows). Contract: finite inputs with finite logits give finite
// outputs, each a weighted mean of the attended values (here within [-1, 1]). How close they come
// to the reference is not asserted: elements 2^29 below their tile's largest leave the f16 range
// (the kernel's header says so).
TEST_P(AttentionKernelsTest, Bf16RangesFarApartGiveFiniteOutputs) {
  AttentionCase c;
  c.heads = 2;
  c.kv_heads = 1;
  c.head_size = 32;
  c.query_dtype = c.cache_dtype = DType::bf16;
  c.lens = {20};
  c.new_tokens = {4};
  std::mt19937 rng(3);
  AttentionInputs in = make_attention_inputs(c, rng);
  const int64_t H = c.heads, D = c.head_size;
  const double big = std::ldexp(1.0, 84);
  for (int64_t j = 0; j < 4; ++j)
    for (int64_t h = 0; h < H; ++h) {
      const size_t e = size_t((j * H + h) * D);  // dim 0
      in.query.set(e, in.query.get(e) * big);
    }
  for (int64_t t = 0; t < 20; ++t) {
    const size_t k = size_t(key_index(c, block_of(c, in, 0, t), 0, 1, t % c.block_size));  // dim 1
    in.key_cache.set(k, in.key_cache.get(k) * big);
  }
  const AttentionParams p = default_params(c);
  if (!plan_or_refused(attention_shape_of(in, p), std::vector<int32_t>{0, 4}, options())) return;
  const AttentionResult want = reference::batch_attention(in, p);
  const AttentionResult got = batch_attention(ctx(), in, p, options());
  for (int64_t i = 0; i < 4 * H * D; ++i) {
    ASSERT_TRUE(std::isfinite(want.output.get(size_t(i)))) << "the reference, element " << i;
    const double g = got.output.get(size_t(i));
    EXPECT_TRUE(std::isfinite(g) && std::fabs(g) <= 1.0 + tolerance(DType::bf16, DType::bf16))
        << "element " << i << " is " << g << " on " << kernel_name();
  }
}

INSTANTIATE_TEST_SUITE_P(Kernels, AttentionKernelsTest, ::testing::ValuesIn(kAttentionKernels),
                         attention_kernel_param_name);

}  // namespace
}  // namespace vkpaged::test
