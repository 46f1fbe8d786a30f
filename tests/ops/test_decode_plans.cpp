// SPDX-License-Identifier: Apache-2.0
// DecodePlan::create on this device: the attention problem's plan of its batch (the one-token
// AttentionPlan's choice), the automatic choices that hold on any device, the matrix
// kernel's where it runs, what is refused and why, the per-call params checked when recording,
// and VKPAGED_DECODE_TUNE read per context. The planner's every choice on fabricated devices is
// tested without a GPU in test_decode_planner.cpp.
#include <gtest/gtest.h>

#include <tuple>
#include <utility>
#include <vector>

#include "ops/attention_plan.hpp"
#include "vk/matrix_features.hpp"
#include "support/decode_case.hpp"
#include "support/decode_check.hpp"
#include "support/expect_error.hpp"
#include "support/scoped_env.hpp"
#include "support/test_context.hpp"
#include "vkpaged/error.hpp"
#include "vkpaged/reference.hpp"

namespace vkpaged::test {
namespace {

DecodeShape shape_of(const DecodeCase& c) {
  std::mt19937 rng(1);
  return decode_shape_of(make_decode_inputs(c, rng));
}

const detail::DecodeChoice& choice(const DecodePlan& plan) { return plan.data().choice(); }

class DecodePlanTest : public GpuTest {};

TEST_F(DecodePlanTest, PlanChoosesSplitForFewLongSequences) {
  const DecodeShape s = plan_shape(1, 4, 1, 128, 32768);
  const auto plan = DecodePlan::create(ctx(), s);
  // One workgroup for one 32K sequence leaves every other compute unit idle.
  EXPECT_TRUE(plan.split()) << plan.describe();
  EXPECT_EQ(plan.partition_tokens() % 256, 0u);
  EXPECT_GE(uint64_t(plan.num_partitions()) * plan.partition_tokens(), 32768u);
  DecodeOptions forced;
  forced.split = SplitMode::single_pass;
  EXPECT_FALSE(DecodePlan::create(ctx(), s, forced).split());
  forced.split = SplitMode::split;
  forced.partition_tokens = 1024;
  const auto split = DecodePlan::create(ctx(), s, forced);
  EXPECT_TRUE(split.split());
  EXPECT_EQ(split.num_partitions(), 32u);
  EXPECT_EQ(split.scratch_bytes(), 4u * 4 * 32 * (128 + 2));
}

// A DecodePlan is the attention problem's plan of its batch: the AttentionPlan of the same batch
// (one token per request) runs on the decode family with the very same choice, scratch and
// description, and the DecodePlan gives back the shape and options it was made with.
TEST_F(DecodePlanTest, DecodePlanIsTheOneTokenAttentionPlan) {
  std::vector<std::pair<DecodeShape, DecodeOptions>> cases;
  cases.push_back({plan_shape(64, 32, 8, 128, 2048), {}});
  cases.push_back({plan_shape(1, 4, 1, 128, 32768), {}});
  DecodeShape features = plan_shape(16, 16, 2, 128, 1024);
  features.kv_layout = KvLayout::hnd;
  features.alibi = features.sinks = features.lse = features.softcap = true;
  DecodeOptions window;
  window.sliding_window = 100;
  cases.push_back({features, window});
  DecodeShape csr = plan_shape(8, 8, 8, 64, 4096);
  csr.csr_page_table = true;
  DecodeOptions split;
  split.split = SplitMode::split;
  split.partition_tokens = 512;
  cases.push_back({csr, split});
  for (const auto& [shape, options] : cases) {
    const DecodePlan decode = DecodePlan::create(ctx(), shape, options);
    SCOPED_TRACE(decode.describe());
    const detail::AttentionPlanData& inner = decode.data().plan;
    EXPECT_EQ(inner.choice.kernel, AttentionKernel::decode);
    EXPECT_EQ(decode.shape().num_seqs, shape.num_seqs);
    EXPECT_EQ(decode.shape().kv_layout, shape.kv_layout);
    EXPECT_EQ(decode.shape().csr_page_table, shape.csr_page_table);
    EXPECT_EQ(decode.options().sliding_window, options.sliding_window);
    EXPECT_EQ(decode.options().split, options.split);
    EXPECT_EQ(decode.options().partition_tokens, options.partition_tokens);

    AttentionOptions attention_options;
    attention_options.split = options.split;
    attention_options.partition_tokens = options.partition_tokens;
    std::vector<int32_t> starts(shape.num_seqs + 1);
    for (uint32_t i = 0; i <= shape.num_seqs; ++i) starts[i] = int32_t(i);
    const AttentionPlan attention = AttentionPlan::create(
        ctx(), detail::decode_problem(shape, options.sliding_window), starts, attention_options);
    ASSERT_EQ(attention.kernel(), AttentionKernel::decode);
    ASSERT_TRUE(attention.data().decode.has_value());
    EXPECT_EQ(attention.data().decode->choice, choice(decode));
    EXPECT_EQ(attention.describe(), "decode kernels: " + decode.describe());
    EXPECT_EQ(attention.scratch_bytes(), decode.scratch_bytes());
    EXPECT_EQ(attention.split(), decode.split());
    EXPECT_EQ(attention.num_partitions(), decode.num_partitions());
    EXPECT_EQ(attention.data().decode->decode, decode.data().family().decode);  // the context's one pipeline
  }
}

TEST_F(DecodePlanTest, PlanSplitsLongContextsOfAFullBatchOnTheScalarKernel) {
  // 64 sequences of MHA (the scalar kernel): 2048 workgroups in one pass, a full batch on any device.
  DecodeShape s = plan_shape(64, 32, 32, 128, 65536);
  s.max_context_len = 4096;
  EXPECT_FALSE(DecodePlan::create(ctx(), s).split()) << DecodePlan::create(ctx(), s).describe();
  // Past 4K tokens a workgroup walking the longest sequence alone would outlast the others
  // when lengths vary: 1024-token partitions, at most 8 of them.
  s.max_context_len = 4097;
  const auto just_past = DecodePlan::create(ctx(), s);
  EXPECT_TRUE(just_past.split()) << just_past.describe();
  EXPECT_EQ(just_past.partition_tokens(), 1024u);
  EXPECT_EQ(just_past.num_partitions(), 5u);
  s.max_context_len = 8192;
  const auto mid = DecodePlan::create(ctx(), s);
  EXPECT_TRUE(mid.split()) << mid.describe();
  EXPECT_EQ(mid.partition_tokens(), 1024u);
  EXPECT_EQ(mid.num_partitions(), 8u);
  s.max_context_len = 65536 - 100;
  const auto longer = DecodePlan::create(ctx(), s);
  EXPECT_TRUE(longer.split()) << longer.describe();
  EXPECT_EQ(longer.partition_tokens(), 8192u);
  EXPECT_EQ(longer.num_partitions(), 8u);
  DecodeOptions one_pass;
  one_pass.split = SplitMode::single_pass;
  EXPECT_FALSE(DecodePlan::create(ctx(), s, one_pass).split());

  // The automatic plan over lengths spread from 1 to past 8K agrees with the reference.
  DecodeCase c;
  c.heads = 4;
  c.kv_heads = 4;
  c.head_size = 64;
  c.lens = {8193, 1, 4111, 0, 9000, 1024};
  c.sinks = true;
  std::mt19937 rng(5);
  const DecodeInputs in = make_decode_inputs(c, rng);
  expect_decode_near(decode_attention(ctx(), in, {}, {}, true), reference::decode_attention(in, {}, {}, true),
                     tolerance(c.query_dtype, c.cache_dtype), true, c.str());
}

// ---- the kernel's choice, on every device ----

// The matrix kernel is refused, with the reason, where it cannot run.
TEST_F(DecodePlanTest, MatrixKernelRefusedWhereItCannotRun) {
  DecodeCase c;
  c.query_dtype = c.cache_dtype = DType::f32;
  DecodeOptions o;
  o.kernel = DecodeKernel::matrix;
  expect_refused([&] { DecodePlan::create(ctx(), shape_of(c), o); }, "kernel: matrix", ErrorCode::unsupported);
  c.query_dtype = c.cache_dtype = DType::f16;
  c.head_size = 72;
  expect_refused([&] { DecodePlan::create(ctx(), shape_of(c), o); }, "kernel: matrix", ErrorCode::unsupported);
  // Asking for the scalar kernel is always possible and automatic never refuses for this.
  o.kernel = DecodeKernel::scalar;
  EXPECT_EQ(choice(DecodePlan::create(ctx(), shape_of(c), o)).kernel, DecodeKernel::scalar);
  EXPECT_EQ(choice(DecodePlan::create(ctx(), shape_of(c))).kernel, DecodeKernel::scalar);
}

// DecodeKernel::matrix_khr: where the Context has no VK_KHR_cooperative_matrix (lavapipe, or a
// validation layer older than the extension) it is refused with the Context's reason; where the
// plan is made, it is the matrix kernel through KHR.
TEST_F(DecodePlanTest, MatrixKhrRefusedWhereTheContextHasNoKhr) {
  DecodeOptions o;
  o.kernel = DecodeKernel::matrix_khr;
  const std::string missing = detail::missing_khr_matrix_features(ctx().impl());
  if (!ctx().device_info().cooperative_matrix_khr) {
    ASSERT_NE(missing, "");
    expect_refused([&] { DecodePlan::create(ctx(), shape_of(DecodeCase{}), o); }, ErrorCode::unsupported,
                   {"kernel: matrix_khr: ", missing});
    return;
  }
  try {
    const DecodePlan plan = DecodePlan::create(ctx(), shape_of(DecodeCase{}), o);
    EXPECT_EQ(choice(plan).kernel, DecodeKernel::matrix);
    EXPECT_TRUE(choice(plan).khr);
    EXPECT_NE(plan.describe().find("matrix units (KHR)"), std::string::npos) << plan.describe();
  } catch (const Error& e) {
    EXPECT_EQ(e.code(), ErrorCode::unsupported);
    EXPECT_EQ(std::string(e.what()).rfind("kernel: matrix_khr: device ", 0), 0u) << e.what();
    // NVIDIA's KHR B fragment is not in the NV kernel's order (measured on the H200): there the
    // refusal must name it, and nothing else.
    if (ctx().device_info().vendor_id == 0x10de)
      EXPECT_NE(std::string(e.what()).find("fragments: fragment B [16 x 8]"), std::string::npos) << e.what();
  }
}

// The timeline (DecodeOptions::timeline) is the matrix kernel's alone: refused elsewhere.
TEST_F(DecodePlanTest, TimelineRefusedOffTheMatrixKernel) {
  DecodeCase c;
  DecodeOptions o;
  o.timeline = true;
  o.kernel = DecodeKernel::scalar;
  expect_refused([&] { DecodePlan::create(ctx(), shape_of(c), o); }, "timeline", ErrorCode::unsupported);
  c.kv_heads = c.heads;  // MHA: automatic takes the scalar kernel
  o.kernel = DecodeKernel::automatic;
  expect_refused([&] { DecodePlan::create(ctx(), shape_of(c), o); }, "timeline", ErrorCode::unsupported);
  // A plan without the option has no timeline.
  EXPECT_EQ(DecodePlan::create(ctx(), shape_of(c)).timeline_bytes(), 0u);
}

// ---- the matrix kernel's automatic choices, where it runs ----

class DecodeMatrixPlanTest : public GpuTest {
 protected:
  void SetUp() override {
    GpuTest::SetUp();
    if (!ctx().device_info().cooperative_matrix)
      GTEST_SKIP() << ctx().device_info().name << " has no matrix units for the decode";
    DecodeOptions o;
    o.kernel = DecodeKernel::matrix;
    std::string refusal;
    try {
      DecodePlan::create(ctx(), shape_of(DecodeCase{}), o);
    } catch (const Error& e) {
      refusal = e.what();
    }
    // NVIDIA's fragments have the layout the kernel writes (fragment_layout.cpp); elsewhere a
    // different layout is a reason to fall back, not a failure.
    if (ctx().device_info().vendor_id == 0x10de) ASSERT_EQ(refusal, "");
    if (!refusal.empty()) GTEST_SKIP() << refusal;
  }
};

// A plan on a token-major layout (nhd, hnd) takes views of that layout's shapes and refuses
// the vllm ones, naming the view.
TEST_F(DecodeMatrixPlanTest, TokenMajorPlansTakeTheirLayoutsViews) {
  std::mt19937 rng(4);
  const DecodeInputs in = make_decode_inputs(DecodeCase{}, rng);
  DeviceBuffer big = ctx().create_buffer(1 << 20);
  const std::vector<uint8_t> zeros(big.size(), 0);  // lengths of 0: the decodes read nothing
  ctx().upload(big.view(), zeros.data(), zeros.size());
  for (const KvLayout layout : {KvLayout::nhd, KvLayout::hnd}) {
    DecodeShape s = decode_shape_of(in);
    s.kv_layout = layout;
    const DecodePlan plan = DecodePlan::create(ctx(), s);
    EXPECT_EQ(choice(plan).kernel, DecodeKernel::matrix) << plan.describe();
    const int64_t N = s.num_blocks, B = s.block_size, Hkv = s.num_kv_heads, D = s.head_size;
    const Shape token_major = layout == KvLayout::nhd ? Shape{N, B, Hkv, D} : Shape{N, Hkv, B, D};
    DecodeViews v;
    v.query = big.tensor(DType::f16, in.query.shape());
    v.key_cache = big.tensor(DType::f16, in.key_cache.shape());  // vllm's [N, Hkv, D/x, B, x]
    v.value_cache = big.tensor(DType::f16, token_major);
    v.block_tables = big.tensor(DType::i32, in.block_tables.shape());
    v.context_lens = big.tensor(DType::i32, in.context_lens.shape());
    v.output = big.tensor(DType::f16, in.query.shape());
    auto record = [&] { ctx().run_and_wait([&](VkCommandBuffer cmd) { record_decode(ctx(), cmd, plan, v); }); };
    expect_refused(record, "key_cache");
    v.key_cache = big.tensor(DType::f16, token_major);
    EXPECT_NO_THROW(record());
  }
}

// Automatic takes the matrix kernel for GQA groups with 16-bit queries and caches (where it
// measured faster) and the scalar kernel for MHA and for f32.
TEST_F(DecodeMatrixPlanTest, AutomaticPicksTheMatrixKernelForGroupsOf16BitDtypes) {
  DecodeCase c;
  c.heads = 8;
  c.kv_heads = 2;
  EXPECT_EQ(choice(DecodePlan::create(ctx(), shape_of(c))).kernel, DecodeKernel::matrix);
  c.cache_dtype = DType::bf16;
  c.query_dtype = DType::bf16;
  EXPECT_EQ(choice(DecodePlan::create(ctx(), shape_of(c))).kernel, DecodeKernel::matrix);
  c.kv_heads = 8;
  EXPECT_EQ(choice(DecodePlan::create(ctx(), shape_of(c))).kernel, DecodeKernel::scalar);
  c.kv_heads = 2;
  c.cache_dtype = DType::f32;
  EXPECT_EQ(choice(DecodePlan::create(ctx(), shape_of(c))).kernel, DecodeKernel::scalar);
  c.cache_dtype = DType::f16;
  c.query_dtype = DType::f32;
  EXPECT_EQ(choice(DecodePlan::create(ctx(), shape_of(c))).kernel, DecodeKernel::scalar);
}

// Small batches split into partitions of 1024 to 8192 tokens: never shorter (a partition costs
// more to start than to stream), longer as the context grows past what the compute units need.
TEST_F(DecodeMatrixPlanTest, AutomaticSplitKeepsPartitionsBetween1024And8192Tokens) {
  DecodeShape s = plan_shape(1, 32, 8, 128, 262144);
  uint32_t previous = 0;
  for (const uint32_t len : {8192u, 32768u, 131072u, 262144u}) {
    s.max_context_len = len;
    const auto plan = DecodePlan::create(ctx(), s);
    SCOPED_TRACE(plan.describe());
    ASSERT_TRUE(plan.split());
    EXPECT_GE(plan.partition_tokens(), 1024u);
    EXPECT_LE(plan.partition_tokens(), 8192u);
    EXPECT_EQ(plan.partition_tokens() % 256, 0u);
    EXPECT_GE(plan.partition_tokens(), previous);
    previous = plan.partition_tokens();
  }
  // One sequence of 8 kv heads reaches the 4 workgroups per compute unit the plan wants with
  // 256K / (compute units / 2) tokens per partition: 2048 or more up to 256 compute units.
  if (ctx().device_info().compute_units <= 256) EXPECT_GE(previous, 2048u);
}

// A small batch runs in one pass on 4 or 8 subgroups per workgroup when that gives at least 7
// subgroups per compute unit and 256 tokens or more to each; shorter sequences still split.
TEST_F(DecodeMatrixPlanTest, AutomaticRunsSmallBatchesInOnePassOnMoreSubgroups) {
  const uint32_t units = ctx().device_info().compute_units;
  if (units < 32) GTEST_SKIP() << "the batches below are sized for 32 compute units or more";
  // 8 kv heads: about one workgroup per compute unit, then about 1.75.
  DecodeShape s = plan_shape((units + 7) / 8, 32, 8, 128, 16384);
  auto plan = DecodePlan::create(ctx(), s);
  EXPECT_FALSE(plan.split()) << plan.describe();
  EXPECT_EQ(choice(plan).subgroups, 8u) << plan.describe();
  s.max_context_len = 2000;  // under 256 tokens for each of 8 subgroups: split
  plan = DecodePlan::create(ctx(), s);
  EXPECT_TRUE(plan.split()) << plan.describe();
  s.max_context_len = 2048;
  plan = DecodePlan::create(ctx(), s);
  EXPECT_FALSE(plan.split()) << plan.describe();
  EXPECT_EQ(choice(plan).subgroups, 8u) << plan.describe();
  s = plan_shape((7 * units + 31) / 32, 32, 8, 128, 8192);
  plan = DecodePlan::create(ctx(), s);
  EXPECT_FALSE(plan.split()) << plan.describe();
  EXPECT_EQ(choice(plan).subgroups, 4u) << plan.describe();
}

// bf16 and fp8 caches issue a unit's value loads with its key loads, and fp8 caches the next
// unit's loads before this unit's products (measured faster there); f16 caches load the values
// after the scores, one unit at a time.
TEST_F(DecodeMatrixPlanTest, AutomaticLoadsValuesWithKeysForConvertedCaches) {
  DecodeShape s = plan_shape(64, 32, 8, 128, 4096);
  for (DType cache : {DType::f16, DType::bf16, DType::fp8_e4m3, DType::fp8_e5m2}) {
    s.cache_dtype = cache;
    const auto plan = DecodePlan::create(ctx(), s);
    SCOPED_TRACE(plan.describe());
    ASSERT_EQ(choice(plan).kernel, DecodeKernel::matrix);
    EXPECT_EQ(choice(plan).early_values, cache != DType::f16) << dtype_name(cache);
    EXPECT_EQ(choice(plan).pipeline, is_fp8_dtype(cache)) << dtype_name(cache);
  }
}

// Longest first (lengths that vary), a full batch past 2048 tokens runs in one pass on 4
// subgroups per workgroup so that its longest sequences, started first, end sooner (measured on
// an H200, bench/experiments/longest-first.md); in grid order, and longest first with shorter
// contexts, on 2.
TEST_F(DecodeMatrixPlanTest, LongestFirstTakesFourSubgroupsForLongFullBatches) {
  const DecodeShape long_batch = plan_shape(64, 32, 8, 128, 4096);
  const DecodeShape short_batch = plan_shape(256, 32, 8, 128, 1024);
  DecodeOptions grid;
  DecodeOptions longest;
  longest.order = DecodeOrder::longest_first;
  for (const auto& [shape, options, subgroups] : {std::tuple{long_batch, grid, 2u}, std::tuple{long_batch, longest, 4u},
                                                  std::tuple{short_batch, longest, 2u}}) {
    const DecodePlan plan = DecodePlan::create(ctx(), shape, options);
    EXPECT_FALSE(plan.split()) << plan.describe();
    EXPECT_EQ(choice(plan).subgroups, subgroups) << plan.describe();
    EXPECT_EQ(plan.longest_first(), options.order == DecodeOrder::longest_first) << plan.describe();
  }
}

// ---- refusals: every message names the argument and the value ----

class DecodeRefusalTest : public GpuTest {};

TEST_F(DecodeRefusalTest, RefusesBadShapes) {
  std::mt19937 rng(3);
  DecodeCase c;
  DecodeInputs good = make_decode_inputs(c, rng);

  DecodeCase odd = c;
  odd.heads = 3;  // not a multiple of 2 kv heads
  DecodeInputs in = make_decode_inputs(odd, rng);
  expect_refused([&] { decode_attention(ctx(), in); }, "num_heads: 3 is not a multiple of num_kv_heads 2");

  DecodeCase fp8 = c;
  fp8.head_size = 72;  // not a multiple of x = 16
  fp8.cache_dtype = DType::fp8_e4m3;
  expect_refused([&] { decode_attention(ctx(), make_decode_inputs(fp8, rng)); },
                 "D = 72 is not a multiple of x = 16");

  in = good;
  in.block_tables.as<int32_t>()[0] = 1000;
  expect_refused([&] { decode_attention(ctx(), in); }, "block id 1000");
  in = good;
  in.context_lens.as<int32_t>()[1] = 100000;
  expect_refused([&] { decode_attention(ctx(), in); }, "context_lens[1]: 100000");
  in = good;
  in.context_lens.as<int32_t>()[0] = -1;
  expect_refused([&] { decode_attention(ctx(), in); }, "context_lens[0]: -1");
  in = good;
  in.query = HostTensor(DType::f16, Shape{2, 4, 32});
  expect_refused([&] { decode_attention(ctx(), in); }, "does not match the query's head size D = 32");
  in = good;
  in.value_cache = HostTensor(DType::f16, Shape{1, 2, 64, 16});
  expect_refused([&] { decode_attention(ctx(), in); }, "value_cache: shape [1, 2, 64, 16]");
  in = good;
  in.key_cache = HostTensor(DType::f32, in.key_cache.shape());
  expect_refused([&] { decode_attention(ctx(), in); }, "key_cache: dtype f32");
  in = good;
  in.sinks = HostTensor(DType::f32, Shape{3});
  expect_refused([&] { decode_attention(ctx(), in); }, "sinks: shape [3]");

  DecodeShape s = decode_shape_of(good);
  s.head_size = 60;
  expect_refused([&] { DecodePlan::create(ctx(), s); }, "head_size: 60 is not supported");
  s = decode_shape_of(good);
  s.block_size = 24;
  expect_refused([&] { DecodePlan::create(ctx(), s); }, "block_size: 24");
  s = decode_shape_of(good);
  DecodeOptions o;
  o.partition_tokens = 100;
  expect_refused([&] { DecodePlan::create(ctx(), s, o); }, "partition_tokens: 100");
  // A bad per-call value is refused by the convenience path too, before anything runs.
  DecodeParams p;
  p.softcap = -1.0f;
  expect_refused([&] { decode_attention(ctx(), good, {}, p); }, "softcap: -1");
}

// The views of one call (a fresh device view for each) and its per-call values, against the
// plan: refused before anything is recorded, naming the field and the value.
class DecodeRecordRefusalTest : public GpuTest {
 protected:
  void SetUp() override {
    GpuTest::SetUp();
    std::mt19937 rng(4);
    in_ = make_decode_inputs(DecodeCase{}, rng);
    small_ = ctx().create_buffer(64);
    big_ = ctx().create_buffer(1 << 20);
    v_.query = big_.tensor(DType::f16, in_.query.shape());
    v_.key_cache = big_.tensor(DType::f16, in_.key_cache.shape());
    v_.value_cache = big_.tensor(DType::f16, in_.value_cache.shape());
    v_.block_tables = big_.tensor(DType::i32, in_.block_tables.shape());
    v_.context_lens = big_.tensor(DType::i32, in_.context_lens.shape());
    v_.output = big_.tensor(DType::f16, in_.query.shape());
    // Zeros: lengths of 0, so that the decodes these tests record read nothing.
    const std::vector<uint8_t> zeros(big_.size(), 0);
    ctx().upload(big_.view(), zeros.data(), zeros.size());
  }
  void record(const DecodePlan& plan, const DecodeViews& v, const DecodeParams& p = {}) {
    ctx().run_and_wait([&](VkCommandBuffer cmd) { record_decode(ctx(), cmd, plan, v, p); });
  }

  DecodeInputs in_;
  DeviceBuffer small_, big_;
  DecodeViews v_;
};

TEST_F(DecodeRecordRefusalTest, RefusesViewsThatDoNotFit) {
  const auto plan = DecodePlan::create(ctx(), decode_shape_of(in_));
  DecodeViews v = v_;
  v.output = big_.tensor(DType::f16, in_.query.shape());
  v.output.memory = small_.view(0, 64);
  expect_refused([&] { record(plan, v); }, "output: buffer view of 64 bytes is too small");
  v.output = big_.tensor(DType::f16, in_.query.shape());
  v.key_cache.memory.offset = 8;
  expect_refused([&] { record(plan, v); }, "key_cache: offset 8 is not a multiple of 16");
  v.key_cache = big_.tensor(DType::f32, in_.key_cache.shape());
  expect_refused([&] { record(plan, v); }, "key_cache: dtype f32 is not f16");
}

// Scale, soft-cap value and fp8 scales are the call's (DecodeParams); whether a cap applies is
// the plan's (DecodeShape::softcap): a value that contradicts it is refused naming both.
TEST_F(DecodeRecordRefusalTest, RefusesParamsOutOfRangeOrAgainstThePlan) {
  DecodeShape shape = decode_shape_of(in_);
  const auto plain = DecodePlan::create(ctx(), shape);
  shape.softcap = true;
  const auto capped = DecodePlan::create(ctx(), shape);
  EXPECT_NE(plain.data().choice().features, capped.data().choice().features);
  DecodeParams p;
  p.softcap = 30.0f;
  expect_refused([&] { record(plain, v_, p); }, "softcap: 30, but the plan's shape.softcap is false");
  expect_refused([&] { record(capped, v_); }, "softcap: 0 (off), but the plan's shape.softcap is true");
  p.softcap = -1.0f;
  expect_refused([&] { record(capped, v_, p); }, "softcap: -1 must be finite and >= 0");
  p.softcap = std::numeric_limits<float>::infinity();
  expect_refused([&] { record(capped, v_, p); }, "softcap: inf");
  p = {};
  p.scale = std::numeric_limits<float>::quiet_NaN();
  expect_refused([&] { record(plain, v_, p); }, "scale: nan is not a finite scale > 0");
  p = {};
  p.k_scale = 0.0f;
  expect_refused([&] { record(plain, v_, p); }, "k_scale: 0 is not a finite scale > 0");
  p = {};
  p.v_scale = -std::numeric_limits<float>::infinity();
  expect_refused([&] { record(plain, v_, p); }, "v_scale: -inf");
  // The same plans take the values that fit them, call after call.
  p = {};
  record(plain, v_, p);
  p.scale = 0.5f;
  record(plain, v_, p);
  p.softcap = 20.0f;
  record(capped, v_, p);
  p.softcap = 5.0f;
  record(capped, v_, p);
}

// One plan, called with other per-call values, computes what those values ask for.
TEST_F(DecodeRecordRefusalTest, PerCallValuesChangeBetweenCallsOfOnePlan) {
  DecodeCase c;
  c.heads = 8;
  c.cache_dtype = DType::fp8_e5m2;
  c.head_size = 128;
  c.lens = {3, 70, 300};
  std::mt19937 rng(6);
  const DecodeInputs in = make_decode_inputs(c, rng);
  DecodeShape shape = decode_shape_of(in);
  shape.softcap = true;
  const DecodePlan plan = DecodePlan::create(ctx(), shape);
  auto upload = [&](const HostTensor& t, DType dtype) {
    auto b = ctx().create_buffer(t.bytes());
    ctx().upload(b.view(), t.data(), t.bytes());
    return std::pair{std::move(b), dtype};
  };
  auto [q, qd] = upload(in.query, DType::f16);
  auto [k, kd] = upload(in.key_cache, DType::u8);
  auto [vc, vd] = upload(in.value_cache, DType::u8);
  auto [bt, btd] = upload(in.block_tables, DType::i32);
  auto [cl, cld] = upload(in.context_lens, DType::i32);
  auto out = ctx().create_buffer(in.query.bytes());
  auto scratch = ctx().create_buffer(std::max<size_t>(plan.scratch_bytes(), 16));
  DecodeViews v;
  v.query = q.tensor(qd, in.query.shape());
  v.key_cache = k.tensor(kd, in.key_cache.shape());
  v.value_cache = vc.tensor(vd, in.value_cache.shape());
  v.block_tables = bt.tensor(btd, in.block_tables.shape());
  v.context_lens = cl.tensor(cld, in.context_lens.shape());
  v.output = out.tensor(DType::f16, in.query.shape());
  if (plan.scratch_bytes()) v.scratch = scratch.view(0, plan.scratch_bytes());
  for (const DecodeParams p : {DecodeParams{std::nullopt, 2.0f, c.fp8_scale, c.fp8_scale},
                               DecodeParams{0.3f, 50.0f, 2 * c.fp8_scale, c.fp8_scale / 2}}) {
    ctx().run_and_wait([&](VkCommandBuffer cmd) { record_decode(ctx(), cmd, plan, v, p); });
    HostTensor got(DType::f16, in.query.shape());
    ctx().download(out.view(), got.data(), got.bytes());
    EXPECT_LE(max_abs_diff(got, reference::decode_attention(in, {}, p).output), tolerance(DType::f16, c.cache_dtype))
        << "softcap " << p.softcap;
  }
}

// ---- VKPAGED_DECODE_TUNE: read at a context's first plan, strictly ----

class DecodeTuningTest : public GpuTest {
 protected:
  static Context fresh_context() { return Context(test_context_options()); }
};

TEST_F(DecodeTuningTest, ReadOncePerContextAndRefusedWhenBad) {
  const DecodeShape gqa = plan_shape(2, 8, 1, 64, 100);  // a group of 8 heads on one kv head
  DecodeOptions scalar;
  scalar.kernel = DecodeKernel::scalar;
  {
    ScopedEnv env("VKPAGED_DECODE_TUNE", "heads=2,lanes=5");
    Context context = fresh_context();
    expect_refused([&] { DecodePlan::create(context, gqa, scalar); },
                   "VKPAGED_DECODE_TUNE: key \"lanes\": value \"5\" is out of range");
    // Not kept: a context whose first plan met a bad value refuses each plan while it stays.
    expect_refused([&] { DecodePlan::create(context, gqa, scalar); }, "VKPAGED_DECODE_TUNE");
  }
  Context context = fresh_context();
  {
    ScopedEnv env("VKPAGED_DECODE_TUNE", "heads=2");
    EXPECT_EQ(DecodePlan::create(context, gqa, scalar).data().choice().heads_per_workgroup, 2u);
  }
  // Read once: the context keeps its tuning after the variable goes; a new context reads anew.
  EXPECT_EQ(DecodePlan::create(context, gqa, scalar).data().choice().heads_per_workgroup, 2u);
  {
    ScopedEnv env("VKPAGED_DECODE_TUNE", "");
    Context other = fresh_context();
    EXPECT_EQ(DecodePlan::create(other, gqa, scalar).data().choice().heads_per_workgroup, 4u);
    EXPECT_EQ(other.validation_message_count(), 0u);
  }
  EXPECT_EQ(context.validation_message_count(), 0u);
}

}  // namespace
}  // namespace vkpaged::test
