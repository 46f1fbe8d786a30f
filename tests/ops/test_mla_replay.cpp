// SPDX-License-Identifier: Apache-2.0
// The replay contract for MLA (MlaPlan::create_bucket; docs/integration.md, "Replaying a recorded
// step"): a plan made for a bucket serves every step inside it, recorded once and submitted again
// while the host rewrites only the device arrays (query, block tables, context lengths, query
// starts, tree masks). Each replay's output is checked against the CPU reference
// (reference::mla_attention) of the step's own requests: fewer requests and tokens than the
// bucket (padding requests of no new tokens and length 0 fill the rest), lengths up to the
// bucket's longest among them 1, B - 1, B and B + 1 (and the padding's 0), block tables drawn afresh over the whole
// cache. Decode buckets and mixed ones (prompt chunks beside decode requests), with tree masks,
// split and in one pass, in both cache forms, on the portable kernel and on the tensor-core one
// (which skips, saying why, where the device has no cooperative matrices).
#include <gtest/gtest.h>

#include <algorithm>
#include <cstring>
#include <optional>
#include <random>
#include <string>
#include <vector>

#include "support/bucket_step.hpp"
#include "support/decode_case.hpp"
#include "support/replayer.hpp"
#include "support/test_context.hpp"
#include "vkpaged/dtype.hpp"
#include "vkpaged/error.hpp"
#include "vkpaged/mla_attention.hpp"
#include "vkpaged/reference.hpp"

namespace vkpaged::test {
namespace {

// The bucket every test replays: 8 heads over a latent of 64 and a rotary part of 16, contexts of
// up to 200 positions in blocks of 16, a cache of 40 blocks.
constexpr uint32_t kHeads = 8, kDv = 64, kRope = 16, kDk = kDv + kRope, kBlockSize = 16, kBlocks = 40;
constexpr uint32_t kMaxBlocksPerSeq = 13, kMaxContext = 200;

constexpr BucketLimits kLimits{kBlockSize, kBlocks, kMaxBlocksPerSeq, kMaxContext};

HostTensor random_f16(Shape shape, std::mt19937& rng) {
  HostTensor t(DType::f16, shape);
  std::uniform_real_distribution<float> u(-1.0f, 1.0f);
  for (size_t i = 0; i < size_t(t.numel()); ++i) t.set(i, u(rng));
  return t;
}

struct MlaReplayCase {
  std::string name;
  AttentionKernel kernel;
  SplitMode split;
  uint32_t requests, tokens, max_query;  // the bucket
  bool tree_mask = false;
  MlaCacheForm form = MlaCacheForm::one_pool;
};

MlaShape bucket_shape(const MlaReplayCase& c) {
  MlaShape m;
  AttentionShape& s = m.attention;
  s.num_requests = c.requests;
  s.num_query_tokens = c.tokens;
  s.num_heads = kHeads;
  s.num_kv_heads = 1;
  s.head_size = kDk;
  s.block_size = kBlockSize;
  s.num_blocks = kBlocks;
  s.max_blocks_per_seq = kMaxBlocksPerSeq;
  s.max_context_len = kMaxContext;
  s.kv_layout = KvLayout::nhd;
  s.tree_mask = c.tree_mask;
  m.value_head_size = kDv;
  m.cache_form = c.form;
  return m;
}

// The device arrays of a bucket, host-visible: the host rewrites them before each replay.
struct MlaBucketBuffers {
  DeviceBuffer query, output, rows, ckv, kpe, scratch;
  BucketPageTables pages;
  HostTensor rows_host;  // [N, B, Dk]: the one pool, or ckv and kpe side by side
  uint32_t T = 0;

  MlaBucketBuffers(Context& ctx, const MlaReplayCase& c, size_t tree_mask_bytes, size_t scratch_bytes,
                   std::mt19937& rng)
      : pages(ctx, c.requests, kLimits, tree_mask_bytes), T(c.tokens) {
    auto host = [&](size_t bytes) { return ctx.create_buffer(bytes, MemoryKind::host_visible); };
    query = host(size_t(T) * kHeads * kDk * 2);
    output = host(size_t(T) * kHeads * kDv * 2);
    rows_host = random_f16(Shape{kBlocks, kBlockSize, kDk}, rng);
    if (c.form == MlaCacheForm::one_pool) {
      rows = ctx.create_buffer(rows_host.bytes());
      ctx.upload(rows.view(), rows_host.data(), rows_host.bytes());
    } else {
      HostTensor ckv_host(DType::f16, Shape{kBlocks, kBlockSize, kDv}), kpe_host(DType::f16, Shape{kBlocks, kBlockSize, kRope});
      for (int64_t r = 0; r < int64_t(kBlocks) * kBlockSize; ++r) {
        std::memcpy(ckv_host.as<uint16_t>() + r * kDv, rows_host.as<uint16_t>() + r * kDk, kDv * 2);
        std::memcpy(kpe_host.as<uint16_t>() + r * kRope, rows_host.as<uint16_t>() + r * kDk + kDv, kRope * 2);
      }
      ckv = ctx.create_buffer(ckv_host.bytes());
      kpe = ctx.create_buffer(kpe_host.bytes());
      ctx.upload(ckv.view(), ckv_host.data(), ckv_host.bytes());
      ctx.upload(kpe.view(), kpe_host.data(), kpe_host.bytes());
    }
    if (scratch_bytes > 0) scratch = ctx.create_buffer(scratch_bytes);
  }

  MlaViews views(const MlaReplayCase& c, size_t scratch_bytes) const {
    MlaViews v;
    v.query = query.tensor(DType::f16, Shape{T, kHeads, kDk});
    if (c.form == MlaCacheForm::one_pool) {
      v.mla_cache = rows.tensor(DType::f16, Shape{kBlocks, kBlockSize, kDk});
    } else {
      v.ckv_cache = ckv.tensor(DType::f16, Shape{kBlocks, kBlockSize, kDv});
      v.kpe_cache = kpe.tensor(DType::f16, Shape{kBlocks, kBlockSize, kRope});
    }
    v.block_tables = pages.block_tables();
    v.context_lens = pages.context_lens();
    v.query_starts = pages.query_starts();
    v.output = output.tensor(DType::f16, Shape{T, kHeads, kDv});
    if (c.tree_mask) v.tree_mask = pages.tree_mask();
    if (scratch_bytes > 0) v.scratch = scratch.view();
    v.status = pages.status();
    return v;
  }

  // The step and its padding: requests of no new tokens and length 0 after its own, query rows
  // past its tokens random (they are no request's). Returns the step's own query rows.
  HostTensor write(const BucketStep& step, std::mt19937& rng) {
    const HostTensor all = random_f16(Shape{T, kHeads, kDk}, rng);
    std::memcpy(query.mapped(), all.data(), all.bytes());
    pages.write(step);
    HostTensor own(DType::f16, Shape{step.tokens(), kHeads, kDk});
    std::memcpy(own.data(), all.data(), own.bytes());
    return own;
  }

  // The reference of the step's own requests against this replay's output rows.
  void check(const BucketStep& step, const HostTensor& query_rows, const std::string& label) const {
    const int64_t t = step.tokens();
    MlaInputs in;
    in.query = query_rows;
    in.mla_cache = rows_host;
    in.value_head_size = kDv;
    set_reference_page_tables(in, step, kLimits);
    const AttentionResult want = reference::mla_attention(in);
    HostTensor got(DType::f16, Shape{t, kHeads, kDv});
    std::memcpy(got.data(), output.mapped(), got.bytes());
    EXPECT_LE(max_abs_diff(got, want.output), tolerance(DType::f16, DType::f16)) << label;
    EXPECT_EQ(pages.status_flags(), 0u) << label << ": padding requests and lengths within the bucket flag nothing";
  }
};

class MlaReplayTest : public GpuTest, public ::testing::WithParamInterface<MlaReplayCase> {};

// Six steps of one recorded command buffer: the bucket's full step first, then fewer requests
// and tokens, other lengths and tables, each checked against the reference.
TEST_P(MlaReplayTest, OneRecordingServesEveryStepOfTheBucket) {
  const MlaReplayCase& c = GetParam();
  const MlaShape shape = bucket_shape(c);
  MlaOptions options;
  options.kernel = c.kernel;
  options.split = c.split;
  if (c.split == SplitMode::split) options.partition_tokens = 64;
  std::optional<MlaPlan> plan;
  try {
    plan = MlaPlan::create_bucket(ctx(), shape, c.max_query, options);
  } catch (const Error& e) {
    if (e.code() != ErrorCode::unsupported) throw;
    GTEST_SKIP() << e.what();
  }
  EXPECT_TRUE(plan->bucket());
  EXPECT_EQ(plan->max_query_tokens(), c.max_query);
  EXPECT_EQ(plan->kernel(), c.kernel) << plan->describe();
  EXPECT_EQ(plan->split(), c.split == SplitMode::split) << plan->describe();
  // The shape query answers the plan's scratch before any plan exists.
  EXPECT_EQ(MlaPlan::max_scratch_bytes(ctx(), shape, c.max_query, options), plan->scratch_bytes());

  std::mt19937 rng(11);
  MlaBucketBuffers buf(ctx(), c, plan->tree_mask_bytes(), plan->scratch_bytes(), rng);
  const MlaViews v = buf.views(c, plan->scratch_bytes());
  Replayer replayer(ctx());
  replayer.record([&](VkCommandBuffer cmd) { record_mla_attention(ctx(), cmd, *plan, v); });

  const std::vector<std::pair<uint32_t, uint32_t>> steps{  // (requests, tokens)
      {c.requests, c.tokens}, {1, std::min(c.tokens, c.max_query)}, {c.requests, c.requests},
      {std::max(1u, c.requests / 2), c.tokens - 1}, {c.requests - 1, c.tokens / 2}, {c.requests, c.tokens}};
  for (size_t k = 0; k < steps.size(); ++k) {
    const auto [requests, tokens] = steps[k];
    const BucketStep step = random_bucket_step(
        rng, kLimits, requests, std::min(std::max(tokens, requests), requests * c.max_query), c.max_query, c.tree_mask);
    const HostTensor rows = buf.write(step, rng);
    replayer.replay();
    buf.check(step, rows, c.name + " step " + std::to_string(k));
  }
  EXPECT_EQ(ctx().validation_message_count(), 0u);
}

INSTANTIATE_TEST_SUITE_P(
    Buckets, MlaReplayTest,
    ::testing::Values(
        // Decode steps: every request one new token (T = S).
        MlaReplayCase{"decode", AttentionKernel::scalar, SplitMode::single_pass, 6, 6, 1},
        MlaReplayCase{"decode_split", AttentionKernel::scalar, SplitMode::split, 6, 6, 1},
        MlaReplayCase{"decode_two_pools", AttentionKernel::scalar, SplitMode::split, 6, 6, 1, false,
                      MlaCacheForm::two_pools},
        // Mixed steps: prompt chunks and decode requests; speculative tokens with tree masks.
        MlaReplayCase{"mixed", AttentionKernel::scalar, SplitMode::single_pass, 5, 40, 16},
        MlaReplayCase{"mixed_split", AttentionKernel::scalar, SplitMode::split, 5, 40, 16},
        MlaReplayCase{"tree_mask", AttentionKernel::scalar, SplitMode::single_pass, 4, 24, 8, true},
        // The tensor-core kernel.
        MlaReplayCase{"matrix_decode_split", AttentionKernel::matrix, SplitMode::split, 6, 6, 1},
        MlaReplayCase{"matrix_mixed", AttentionKernel::matrix, SplitMode::single_pass, 5, 40, 16},
        MlaReplayCase{"matrix_tree_mask_two_pools", AttentionKernel::matrix, SplitMode::split, 4, 24, 8, true,
                      MlaCacheForm::two_pools}),
    [](const auto& info) { return info.param.name; });

class MlaBucketTest : public GpuTest {};

// A bucket's refusals name the argument: a longest request past T or past the longest context.
TEST_F(MlaBucketTest, RefusesWhatNoStepOfItCouldHold) {
  MlaReplayCase c{"", AttentionKernel::automatic, SplitMode::automatic, 4, 8, 0};
  MlaShape shape = bucket_shape(c);
  auto message = [&](uint32_t max_query) {
    try {
      MlaPlan::create_bucket(ctx(), shape, max_query);
    } catch (const Error& e) {
      EXPECT_EQ(e.code(), ErrorCode::invalid_argument);
      return std::string(e.what());
    }
    return std::string("(not refused)");
  };
  EXPECT_EQ(message(9), "max_query_tokens: 9 exceeds T = num_query_tokens = 8");
  shape.attention.max_context_len = 6;
  EXPECT_EQ(message(7), "max_query_tokens: 7 new tokens exceed the 6 positions a context may hold (max_context_len)");
  // 0: the bucket's T, which a context of 8 positions holds.
  shape.attention.max_context_len = 8;
  EXPECT_EQ(MlaPlan::create_bucket(ctx(), shape, 0).max_query_tokens(), 8u);
}

}  // namespace
}  // namespace vkpaged::test
