// SPDX-License-Identifier: Apache-2.0
#include "support/decode_bad_indices.hpp"

#include <gtest/gtest.h>

#include <random>

#include "support/decode_case.hpp"
#include "vkpaged/reference.hpp"

namespace vkpaged::test {

void expect_bad_indices_flagged_not_followed(Context& ctx, const DecodeOptions& options, const DecodeParams& params,
                                             KvLayout layout) {
  DecodeCase c;
  c.lens = {20, 40, 33};  // sequence 2 stays intact and must come out right
  std::mt19937 rng(5);
  const DecodeInputs vllm = make_decode_inputs(c, rng);
  const DecodeInputs in = with_layout(vllm, layout);
  const auto plan = DecodePlan::create(ctx, decode_shape_of(in), options);

  auto upload = [&](const HostTensor& t) {
    auto b = ctx.create_buffer(t.bytes());
    ctx.upload(b.view(), t.data(), t.bytes());
    return b;
  };
  HostTensor tables = in.block_tables;
  tables.as<int32_t>()[0] = 0x7fffffff;  // block id far past N
  HostTensor lens = in.context_lens;
  lens.as<int32_t>()[1] = 1 << 30;  // length far past M * B
  auto q = upload(in.query), k = upload(in.key_cache), vc = upload(in.value_cache), bt = upload(tables),
       cl = upload(lens);
  auto out = ctx.create_buffer(in.query.bytes());
  auto status = ctx.create_buffer(16);
  const uint32_t zero = 0;
  ctx.upload(status.view(0, 4), &zero, 4);
  DecodeViews v;
  v.query = q.tensor(DType::f16, in.query.shape());
  v.key_cache = k.tensor(DType::f16, in.key_cache.shape());
  v.value_cache = vc.tensor(DType::f16, in.value_cache.shape());
  v.block_tables = bt.tensor(DType::i32, tables.shape());
  v.context_lens = cl.tensor(DType::i32, lens.shape());
  v.output = out.tensor(DType::f16, in.query.shape());
  v.status = status.view(0, 4);
  ctx.run_and_wait([&](VkCommandBuffer cmd) { record_decode(ctx, cmd, plan, v, params); });
  uint32_t flags = 0;
  ctx.download(status.view(0, 4), &flags, 4);
  EXPECT_EQ(flags, kStatusBadBlockId | kStatusBadContextLen);
  HostTensor got(DType::f16, in.query.shape());
  ctx.download(out.view(), got.data(), got.bytes());
  const auto want = reference::decode_attention(vllm, options, params);
  const int64_t row = int64_t(c.heads) * c.head_size;
  for (int64_t i = 2 * row; i < 3 * row; ++i)
    ASSERT_NEAR(got.get(size_t(i)), want.output.get(size_t(i)), tolerance(DType::f16, DType::f16)) << i;
}

}  // namespace vkpaged::test
