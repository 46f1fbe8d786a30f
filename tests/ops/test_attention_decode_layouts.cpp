// A batch of single tokens on the nhd and hnd layouts runs on the decode kernels (the scalar
// decode kernel reads every layout): the multi-query operator's plan says so, and its result is
// the decode operator's on that layout, bit for bit, and the reference's within the contract.
#include <gtest/gtest.h>

#include <cstring>
#include <random>

#include "support/decode_case.hpp"
#include "support/decode_check.hpp"
#include "support/test_context.hpp"
#include "vkpaged/attention.hpp"
#include "vkpaged/reference.hpp"

namespace vkpaged::test {
namespace {

class AttentionDecodeLayoutTest : public GpuTest, public ::testing::WithParamInterface<KvLayout> {};

TEST_P(AttentionDecodeLayoutTest, SingleTokenBatchesRunOnTheDecodeKernels) {
  DecodeCase dc;
  dc.heads = 8;
  dc.kv_heads = 2;
  dc.head_size = 64;
  dc.lens = {1, 17, 300, 64};
  dc.alibi = dc.sinks = true;
  std::mt19937 rng(12);
  const DecodeInputs vllm = make_decode_inputs(dc, rng);
  const DecodeInputs d = with_layout(vllm, GetParam());
  DecodeOptions dopt;
  dopt.sliding_window = 50;
  DecodeParams dparams = default_params(dc);
  dparams.softcap = 4.0f;
  dparams.scale = 0.2f;
  const DecodeResult want = decode_attention(ctx(), d, dopt, dparams, true);
  expect_decode_near(want, reference::decode_attention(vllm, dopt, dparams, true), tolerance(dc.query_dtype, dc.cache_dtype),
                     true, "decode on " + std::string(kv_layout_name(GetParam())));

  AttentionInputs a;
  a.query = d.query;
  a.key_cache = d.key_cache;
  a.value_cache = d.value_cache;
  a.block_tables = d.block_tables;
  a.context_lens = d.context_lens;
  a.alibi_slopes = d.alibi_slopes;
  a.sinks = d.sinks;
  a.cache_dtype = d.cache_dtype;
  a.kv_layout = d.kv_layout;
  a.sliding_window = dopt.sliding_window;
  a.query_starts = HostTensor(DType::i32, Shape{5});
  for (int i = 0; i < 5; ++i) a.query_starts.as<int32_t>()[i] = i;
  const AttentionShape shape = attention_shape_of(a, dparams, true);
  const AttentionPlan plan = AttentionPlan::create(ctx(), shape, std::vector<int32_t>{0, 1, 2, 3, 4});
  EXPECT_EQ(plan.kernel(), AttentionKernel::decode) << plan.describe();
  const AttentionResult same = batch_attention(ctx(), a, dparams, {}, true);
  ASSERT_EQ(same.output.bytes(), want.output.bytes());
  EXPECT_EQ(std::memcmp(same.output.data(), want.output.data(), want.output.bytes()), 0);
  EXPECT_EQ(std::memcmp(same.lse.data(), want.lse.data(), want.lse.bytes()), 0);
}

INSTANTIATE_TEST_SUITE_P(Layouts, AttentionDecodeLayoutTest, ::testing::Values(KvLayout::nhd, KvLayout::hnd),
                         [](const ::testing::TestParamInfo<KvLayout>& info) { return std::string(kv_layout_name(info.param)); });

}  // namespace
}  // namespace vkpaged::test
