// SPDX-License-Identifier: Apache-2.0
// MLA attention at DeepSeek's widths (Dk 576 = 512 latent + 64 rope, Dv 512) on each kernel,
// against the CPU reference: the head counts the tensor-core kernel tiles into blocks of its
// product's M rows (16, 32, 64, 128, and 20, which fills no block evenly) with f16, bf16 and fp8
// E4M3 caches; every request form with ragged cached prefixes (0, 1, B - 1, B, B + 1) over
// shuffled block tables, split and one pass, LSE. Contexts stay short: lavapipe runs the shaders on the CPU.
#include <gtest/gtest.h>

#include "support/decode_case.hpp"
#include "support/mla_kernels.hpp"

namespace vkpaged::test {
namespace {

class MlaAttentionHeadsTest : public MlaKernelTest {};

MlaCase deepseek_case(uint32_t heads, DType query, DType cache, MlaCacheForm form) {
  MlaCase c;
  c.value_head_size = 512;
  c.rope_head_size = 64;
  c.form = form;
  c.attention.heads = heads;
  c.attention.block_size = 16;
  c.attention.query_dtype = query;
  c.attention.cache_dtype = cache;
  return c;
}

struct DtypePair {
  DType query, cache;
};
constexpr DtypePair kDtypes[] = {{DType::f16, DType::f16}, {DType::bf16, DType::bf16}, {DType::bf16, DType::fp8_e4m3}};

// Decode of lengths 1, B - 1, B and B + 1, every head count with every cache dtype, the cache
// forms alternating.
TEST_P(MlaAttentionHeadsTest, DecodeEveryHeadCountAndDtype) {
  uint32_t seed = 100;
  for (uint32_t heads : {16u, 20u, 32u, 64u, 128u}) {
    for (const DtypePair& d : kDtypes) {
      MlaCase c = deepseek_case(heads, d.query, d.cache, seed % 2 ? MlaCacheForm::two_pools : MlaCacheForm::one_pool);
      c.attention.lens = {1, 15, 16, 17};
      c.attention.new_tokens = {1, 1, 1, 1};
      check(c, default_params(c.attention), options(), seed++);
    }
  }
}

// Chunks after cached prefixes of 0, 1, B - 1, B and B + 1 positions, and a decode past one
// 256-position partition: split and one pass. (A request of no new tokens is a bucket plan's
// padding; a step's plan refuses it.)
TEST_P(MlaAttentionHeadsTest, ChunksAfterRaggedPrefixesSplitAndOnePass) {
  uint32_t seed = 200;
  for (const DtypePair& d : kDtypes) {
    MlaCase c = deepseek_case(16, d.query, d.cache, seed % 2 ? MlaCacheForm::two_pools : MlaCacheForm::one_pool);
    c.attention.new_tokens = {2, 3, 1, 4, 2, 1};
    c.attention.lens = {0 + 2, 1 + 3, 15 + 1, 16 + 4, 17 + 2, 300};
    check(c, default_params(c.attention), split_by(256), seed++);
    check(c, default_params(c.attention), single_pass(), seed++);
  }
}

// Speculative tokens with draft-tree masks and a window, 32 heads (tokens x heads fill several
// row blocks), with soft cap, sinks and ALiBi.
TEST_P(MlaAttentionHeadsTest, SpeculativeTokensWithTreeMasks) {
  MlaCase c = deepseek_case(32, DType::bf16, DType::fp8_e4m3, MlaCacheForm::two_pools);
  c.attention.new_tokens = {4, 3};
  c.attention.lens = {17, 40};
  c.attention.tree_mask = TreeMask::tree;
  c.attention.sliding_window = 20;
  c.attention.alibi = true;
  c.attention.sinks = true;
  AttentionParams p = default_params(c.attention);
  p.softcap = 30.0f;
  check(c, p, single_pass(), 300);
  check(c, p, split_by(256), 301);
}

INSTANTIATE_TEST_SUITE_P(Kernels, MlaAttentionHeadsTest, ::testing::ValuesIn(kMlaKernels), attention_kernel_param_name);

}  // namespace
}  // namespace vkpaged::test
