// SPDX-License-Identifier: Apache-2.0
// The replay contract (docs/integration.md, "Replaying a recorded step"): a plan made for a
// bucket serves every step inside it, recorded once into a command buffer that is submitted
// again and again while the host rewrites only the device arrays (query, block tables, context
// lengths, query starts, tree masks) between submissions. Each replay's output is checked
// against the CPU reference of the step's own requests: steps of fewer requests and tokens than
// the bucket (padding requests of no new tokens and length 0 fill the rest), lengths up to the
// bucket's longest, block tables drawn afresh. Decode steps and mixed steps, on every kernel the
// device runs (the matrix kernels skip, saying why, where it has no cooperative matrices); with
// contiguous queries and outputs, and with strided ones (the query a slice of a fused projection
// the host rewrites row by row, the output in part of each row of a larger buffer): a recording
// holds the views' strides as it holds their offsets, and each replay reads and writes the rows
// where they are.
#include <gtest/gtest.h>

#include <algorithm>
#include <cstring>
#include <functional>
#include <optional>
#include <random>
#include <string>
#include <tuple>
#include <vector>

#include "support/bucket_step.hpp"
#include "support/decode_case.hpp"
#include "support/replayer.hpp"
#include "support/test_context.hpp"
#include "vkpaged/attention.hpp"
#include "vkpaged/decode.hpp"
#include "vkpaged/dtype.hpp"
#include "vkpaged/error.hpp"
#include "vkpaged/reference.hpp"

namespace vkpaged::test {
namespace {

// The bucket every test replays: GQA groups of 4 (the matrix decode kernel takes them), contexts
// of up to 300 positions in blocks of 16, a cache of 48 blocks.
constexpr uint32_t kHeads = 8, kKvHeads = 2, kHeadSize = 64, kBlockSize = 16, kBlocks = 48;
constexpr uint32_t kMaxBlocksPerSeq = 20, kMaxContext = 300;

constexpr BucketLimits kLimits{kBlockSize, kBlocks, kMaxBlocksPerSeq, kMaxContext};
using Step = BucketStep;

// A step of the bucket (random_bucket_step: the ragged lengths among them).
Step random_step(std::mt19937& rng, uint32_t requests, uint32_t tokens, uint32_t max_query, bool tree_mask) {
  return random_bucket_step(rng, kLimits, requests, tokens, max_query, tree_mask);
}

HostTensor random_cache(Shape shape, std::mt19937& rng) {
  HostTensor t(DType::f16, shape);
  std::uniform_real_distribution<float> u(-1.0f, 1.0f);
  for (size_t i = 0; i < size_t(t.numel()); ++i) t.set(i, u(rng));
  return t;
}

// Where a bucket's queries and outputs lie: contiguous [T, H, D], or the query q of a fused
// projection [T, (H + 2 Hkv) D] and the output in part of each row of a [T, (H + 2) D] buffer,
// one head's width in (strides in elements, offsets in bytes).
struct RowPlacement {
  int64_t token_stride = kHeads * kHeadSize, head_stride = kHeadSize;
  size_t offset = 0;
  size_t at(int64_t t, int64_t h) const { return offset + size_t(t * token_stride + h * head_stride) * 2; }
};
constexpr RowPlacement kContiguous{};
constexpr RowPlacement kFusedQuery{(kHeads + 2 * kKvHeads) * kHeadSize, kHeadSize, 0};
constexpr RowPlacement kOutputSlice{(kHeads + 2) * kHeadSize, kHeadSize, kHeadSize * 2};

// The device arrays of a bucket, host-visible: the host rewrites them before each replay.
struct BucketBuffers {
  DeviceBuffer query, output, key_cache, value_cache, scratch, order;
  BucketPageTables pages;
  HostTensor key_host, value_host;
  uint32_t T = 0;
  RowPlacement query_rows = kContiguous, output_rows = kContiguous;

  BucketBuffers(Context& ctx, uint32_t requests, uint32_t tokens, size_t tree_mask_bytes, size_t scratch_bytes,
                size_t order_bytes, std::mt19937& rng, bool strided = false)
      : pages(ctx, requests, kLimits, tree_mask_bytes), T(tokens) {
    auto host = [&](size_t bytes) { return ctx.create_buffer(bytes, MemoryKind::host_visible); };
    if (strided) {
      query_rows = kFusedQuery;
      output_rows = kOutputSlice;
    }
    // The rows' extents and then some; 0xff (NaN) between them, which no replay may read.
    query = host(query_rows.at(T, 0));
    std::memset(query.mapped(), 0xff, query.size());
    output = host(output_rows.at(T, 0));
    key_host = random_cache(Shape{kBlocks, kKvHeads, kHeadSize / 8, kBlockSize, 8}, rng);
    value_host = random_cache(Shape{kBlocks, kKvHeads, kHeadSize, kBlockSize}, rng);
    key_cache = ctx.create_buffer(key_host.bytes());
    value_cache = ctx.create_buffer(value_host.bytes());
    ctx.upload(key_cache.view(), key_host.data(), key_host.bytes());
    ctx.upload(value_cache.view(), value_host.data(), value_host.bytes());
    if (scratch_bytes > 0) scratch = ctx.create_buffer(scratch_bytes);
    if (order_bytes > 0) order = ctx.create_buffer(order_bytes);
  }

  // The views of the bucket's [T, H, D] query and output.
  TensorView query_view() const { return rows_view(query, query_rows); }
  TensorView output_view() const { return rows_view(output, output_rows); }
  TensorView rows_view(const DeviceBuffer& buffer, const RowPlacement& p) const {
    return buffer.strided_tensor(DType::f16, Shape{T, kHeads, kHeadSize}, {p.token_stride, p.head_stride}, p.offset);
  }

  // The step and its padding: requests of no new tokens and length 0 after its own, query rows
  // past its tokens random (they are no request's).
  HostTensor write(const Step& step, std::mt19937& rng) {
    HostTensor all(DType::f16, Shape{T, kHeads, kHeadSize});
    for (size_t i = 0; i < size_t(all.numel()); ++i)
      all.as<uint16_t>()[i] = f32_to_f16(std::uniform_real_distribution<float>(-1.0f, 1.0f)(rng));
    for (int64_t t = 0; t < T; ++t)
      for (int64_t h = 0; h < kHeads; ++h)
        std::memcpy(static_cast<uint8_t*>(query.mapped()) + query_rows.at(t, h),
                    all.as<uint16_t>() + (t * kHeads + h) * kHeadSize, kHeadSize * 2);
    pages.write(step);
    HostTensor rows(DType::f16, Shape{step.tokens(), kHeads, kHeadSize});
    std::memcpy(rows.data(), all.data(), rows.bytes());
    return rows;
  }

  // The reference of the step's own requests, against this replay's output rows.
  void check(const Step& step, const HostTensor& query_rows, const std::string& label) const {
    const int64_t t = step.tokens();
    AttentionInputs in;
    in.query = query_rows;
    in.key_cache = key_host;
    in.value_cache = value_host;
    set_reference_page_tables(in, step, kLimits);
    const AttentionResult want = reference::batch_attention(in);
    HostTensor got(DType::f16, Shape{t, kHeads, kHeadSize});
    for (int64_t r = 0; r < t; ++r)
      for (int64_t h = 0; h < kHeads; ++h)
        std::memcpy(got.as<uint16_t>() + (r * kHeads + h) * kHeadSize,
                    static_cast<const uint8_t*>(output.mapped()) + output_rows.at(r, h), kHeadSize * 2);
    EXPECT_LE(max_abs_diff(got, want.output), tolerance(DType::f16, DType::f16)) << label;
    EXPECT_EQ(pages.status_flags(), 0u) << label << ": padding requests and lengths within the bucket flag nothing";
  }
};

AttentionShape bucket_shape(uint32_t requests, uint32_t tokens, bool tree_mask) {
  AttentionShape s;
  s.num_requests = requests;
  s.num_query_tokens = tokens;
  s.num_heads = kHeads;
  s.num_kv_heads = kKvHeads;
  s.head_size = kHeadSize;
  s.block_size = kBlockSize;
  s.num_blocks = kBlocks;
  s.max_blocks_per_seq = kMaxBlocksPerSeq;
  s.max_context_len = kMaxContext;
  s.tree_mask = tree_mask;
  return s;
}

// A plan, or nullopt where the device cannot run the kernel asked for (the test skips then).
std::optional<AttentionPlan> bucket_plan_or_skip(Context& ctx, const AttentionShape& s, uint32_t max_query,
                                                 const AttentionOptions& o, std::string& why) {
  try {
    return AttentionPlan::create_bucket(ctx, s, max_query, o);
  } catch (const Error& e) {
    if (e.code() != ErrorCode::unsupported) throw;
    why = e.what();
    return std::nullopt;
  }
}

struct AttentionReplayCase {
  std::string name;
  AttentionKernel kernel;
  SplitMode split;
  uint32_t requests, tokens, max_query;  // the bucket
  bool tree_mask = false;
  bool strided = false;  // the query a slice of a fused projection, the output a slice of larger rows
};

class AttentionReplayTest : public GpuTest, public ::testing::WithParamInterface<AttentionReplayCase> {};

// Six steps of one recorded command buffer: the bucket's full step first, then fewer requests
// and tokens, other lengths and tables, each checked against the reference.
TEST_P(AttentionReplayTest, OneRecordingServesEveryStepOfTheBucket) {
  const AttentionReplayCase& c = GetParam();
  const AttentionShape shape = bucket_shape(c.requests, c.tokens, c.tree_mask);
  AttentionOptions options;
  options.kernel = c.kernel;
  options.split = c.split;
  if (c.split == SplitMode::split) options.partition_tokens = 256;
  std::string why;
  const auto plan = bucket_plan_or_skip(ctx(), shape, c.max_query, options, why);
  if (!plan) GTEST_SKIP() << why;
  EXPECT_TRUE(plan->bucket());
  EXPECT_EQ(plan->split(), c.split == SplitMode::split) << plan->describe();
  // The shape query answers the plan's scratch before any plan exists.
  EXPECT_EQ(AttentionPlan::max_scratch_bytes(ctx(), shape, c.max_query, options), plan->scratch_bytes());

  std::mt19937 rng(7);
  BucketBuffers buf(ctx(), c.requests, c.tokens, plan->tree_mask_bytes(), plan->scratch_bytes(), 0, rng, c.strided);
  AttentionViews v;
  v.query = buf.query_view();
  v.key_cache = buf.key_cache.tensor(DType::f16, Shape{kBlocks, kKvHeads, kHeadSize / 8, kBlockSize, 8});
  v.value_cache = buf.value_cache.tensor(DType::f16, Shape{kBlocks, kKvHeads, kHeadSize, kBlockSize});
  v.block_tables = buf.pages.block_tables();
  v.context_lens = buf.pages.context_lens();
  v.query_starts = buf.pages.query_starts();
  v.output = buf.output_view();
  if (c.tree_mask) v.tree_mask = buf.pages.tree_mask();
  if (plan->scratch_bytes() > 0) v.scratch = buf.scratch.view();
  v.status = buf.pages.status();
  Replayer replayer(ctx());
  replayer.record([&](VkCommandBuffer cmd) { record_attention(ctx(), cmd, *plan, v); });

  const std::vector<std::pair<uint32_t, uint32_t>> steps{  // (requests, tokens)
      {c.requests, c.tokens}, {1, std::min(c.tokens, c.max_query)}, {c.requests, c.requests},
      {std::max(1u, c.requests / 2), c.tokens - 1}, {c.requests - 1, c.tokens / 2}, {c.requests, c.tokens}};
  for (size_t k = 0; k < steps.size(); ++k) {
    const auto [requests, tokens] = steps[k];
    const Step step = random_step(rng, requests, std::max(tokens, requests), c.max_query, c.tree_mask);
    const HostTensor rows = buf.write(step, rng);
    replayer.replay();
    buf.check(step, rows, c.name + " step " + std::to_string(k));
  }
}

INSTANTIATE_TEST_SUITE_P(
    Buckets, AttentionReplayTest,
    ::testing::Values(
        // Decode steps: every request one token row (T = S), on the decode kernels.
        AttentionReplayCase{"decode", AttentionKernel::automatic, SplitMode::single_pass, 6, 6, 1},
        AttentionReplayCase{"decode_split", AttentionKernel::automatic, SplitMode::split, 6, 6, 1},
        // Mixed steps: prompt chunks and decode requests, on the attention kernels.
        AttentionReplayCase{"scalar", AttentionKernel::scalar, SplitMode::single_pass, 5, 40, 16},
        AttentionReplayCase{"scalar_split", AttentionKernel::scalar, SplitMode::split, 5, 40, 16},
        AttentionReplayCase{"scalar_tree_mask", AttentionKernel::scalar, SplitMode::single_pass, 4, 24, 8, true},
        AttentionReplayCase{"matrix", AttentionKernel::matrix, SplitMode::single_pass, 5, 40, 16},
        AttentionReplayCase{"matrix_split", AttentionKernel::matrix, SplitMode::split, 5, 40, 16},
        // Strided queries and outputs, recorded once like the rest.
        AttentionReplayCase{"decode_strided", AttentionKernel::automatic, SplitMode::split, 6, 6, 1, false, true},
        AttentionReplayCase{"scalar_strided", AttentionKernel::scalar, SplitMode::single_pass, 5, 40, 16, false, true},
        AttentionReplayCase{"scalar_split_strided", AttentionKernel::scalar, SplitMode::split, 5, 40, 16, true, true},
        AttentionReplayCase{"matrix_split_strided", AttentionKernel::matrix, SplitMode::split, 5, 40, 16, false, true}),
    [](const auto& info) { return info.param.name; });

// DecodePlan directly (a DecodeShape is a bucket: S and the longest context), longest first so
// that the order list is made on the device from each replay's lengths, on each kernel, with
// contiguous and with strided queries and outputs.
struct DecodeReplayCase {
  DecodeKernel kernel;
  bool strided;
  std::string name() const {
    return std::string(kernel == DecodeKernel::scalar ? "scalar" : "matrix") + (strided ? "_strided" : "");
  }
};
class DecodeReplayTest : public GpuTest, public ::testing::WithParamInterface<DecodeReplayCase> {};

TEST_P(DecodeReplayTest, OneRecordingServesEveryStepOfTheBucket) {
  constexpr uint32_t S = 6;
  DecodeShape shape;
  shape.num_seqs = S;
  shape.num_heads = kHeads;
  shape.num_kv_heads = kKvHeads;
  shape.head_size = kHeadSize;
  shape.block_size = kBlockSize;
  shape.num_blocks = kBlocks;
  shape.max_blocks_per_seq = kMaxBlocksPerSeq;
  shape.max_context_len = kMaxContext;
  DecodeOptions options;
  options.kernel = GetParam().kernel;
  options.order = DecodeOrder::longest_first;
  options.split = SplitMode::split;
  options.partition_tokens = 256;
  std::optional<DecodePlan> plan;
  try {
    plan = DecodePlan::create(ctx(), shape, options);
  } catch (const Error& e) {
    if (e.code() != ErrorCode::unsupported) throw;
    GTEST_SKIP() << e.what();
  }
  std::mt19937 rng(11);
  BucketBuffers buf(ctx(), S, S, 0, plan->scratch_bytes(), plan->order_bytes(), rng, GetParam().strided);
  DecodeViews v;
  v.query = buf.query_view();
  v.key_cache = buf.key_cache.tensor(DType::f16, Shape{kBlocks, kKvHeads, kHeadSize / 8, kBlockSize, 8});
  v.value_cache = buf.value_cache.tensor(DType::f16, Shape{kBlocks, kKvHeads, kHeadSize, kBlockSize});
  v.block_tables = buf.pages.block_tables();
  v.context_lens = buf.pages.context_lens();
  v.output = buf.output_view();
  v.scratch = buf.scratch.view();
  v.order = buf.order.view();
  v.status = buf.pages.status();
  Replayer replayer(ctx());
  replayer.record([&](VkCommandBuffer cmd) {
    record_decode_order(ctx(), cmd, *plan, v.context_lens, v.order);
    const VkMemoryBarrier b{VK_STRUCTURE_TYPE_MEMORY_BARRIER, nullptr, VK_ACCESS_SHADER_WRITE_BIT,
                            VK_ACCESS_SHADER_READ_BIT};
    vkCmdPipelineBarrier(cmd, VK_PIPELINE_STAGE_COMPUTE_SHADER_BIT, VK_PIPELINE_STAGE_COMPUTE_SHADER_BIT, 0, 1, &b, 0,
                         nullptr, 0, nullptr);
    record_decode(ctx(), cmd, *plan, v);
  });
  for (const uint32_t requests : {S, 2u, 5u, 1u, S}) {
    const Step step = random_step(rng, requests, requests, 1, false);
    const HostTensor rows = buf.write(step, rng);
    replayer.replay();
    buf.check(step, rows, GetParam().name() + ", " + std::to_string(requests) + " requests");
  }
}

INSTANTIATE_TEST_SUITE_P(Kernels, DecodeReplayTest,
                         ::testing::Values(DecodeReplayCase{DecodeKernel::scalar, false},
                                           DecodeReplayCase{DecodeKernel::matrix, false},
                                           DecodeReplayCase{DecodeKernel::scalar, true},
                                           DecodeReplayCase{DecodeKernel::matrix, true}),
                         [](const auto& info) { return info.param.name(); });

class AttentionBucketTest : public GpuTest {};

// What a bucket refuses, naming the argument.
TEST_F(AttentionBucketTest, RefusesWhatNoStepOfItCouldHold) {
  auto message = [&](const AttentionShape& s, uint32_t max_query, AttentionOptions o = {}) -> std::string {
    try {
      AttentionPlan::create_bucket(ctx(), s, max_query, o);
    } catch (const Error& e) {
      EXPECT_EQ(e.code(), ErrorCode::invalid_argument) << e.what();
      return e.what();
    }
    return "";
  };
  EXPECT_EQ(message(bucket_shape(4, 8, false), 9), "max_query_tokens: 9 exceeds T = num_query_tokens = 8");
  AttentionShape short_context = bucket_shape(4, 40, false);
  short_context.max_context_len = 16;
  EXPECT_EQ(message(short_context, 20), "max_query_tokens: 20 new tokens exceed the 16 positions a context may hold "
                                        "(max_context_len)");
  EXPECT_EQ(message(bucket_shape(0, 0, false), 1), "num_requests: a bucket holds at least one request, got 0");
  AttentionOptions decode;
  decode.kernel = AttentionKernel::decode;
  EXPECT_NE(message(bucket_shape(4, 8, false), 1, decode).find("kernel: decode takes a bucket whose steps give every "
                                                                 "request one token row"),
            std::string::npos);
}

// A bucket's tree masks are sized for its worst step: as many whole requests of max_query_tokens
// as the tokens and requests allow, then one of the rest.
TEST_F(AttentionBucketTest, SizesTreeMasksForItsWorstStep) {
  const AttentionPlan a = AttentionPlan::create_bucket(ctx(), bucket_shape(4, 24, true), 8);
  EXPECT_EQ(a.tree_mask_bytes(), 3u * 64u);  // three requests of 8
  const AttentionPlan b = AttentionPlan::create_bucket(ctx(), bucket_shape(2, 24, true), 8);
  EXPECT_EQ(b.tree_mask_bytes(), 2u * 64u);  // two requests hold at most 16 of the 24 tokens
  const AttentionPlan c = AttentionPlan::create_bucket(ctx(), bucket_shape(4, 20, true), 8);
  EXPECT_EQ(c.tree_mask_bytes(), 2u * 64u + 16u);  // 8 + 8 + 4
  EXPECT_EQ(c.max_query_tokens(), 8u);
}

// A bucket that takes CSR page tables: the scratch sized before the plan holds the expansion
// too, where the plan places it (after a split's part), on the decode and the attention kernels.
TEST_F(AttentionBucketTest, ScratchBeforeThePlanHoldsTheCsrExpansion) {
  for (const auto& [requests, tokens, max_query] : {std::tuple{6u, 6u, 1u}, std::tuple{5u, 40u, 16u}})
    for (SplitMode split : {SplitMode::single_pass, SplitMode::split}) {
      AttentionShape shape = bucket_shape(requests, tokens, false);
      shape.csr_page_table = true;
      AttentionOptions options;
      options.split = split;
      const AttentionPlan plan = AttentionPlan::create_bucket(ctx(), shape, max_query, options);
      EXPECT_EQ(AttentionPlan::max_scratch_bytes(ctx(), shape, max_query, options), plan.scratch_bytes())
          << plan.describe();
      shape.csr_page_table = false;
      EXPECT_GT(plan.scratch_bytes(), AttentionPlan::max_scratch_bytes(ctx(), shape, max_query, options));
    }
}

}  // namespace
}  // namespace vkpaged::test
