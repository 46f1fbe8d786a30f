// The matrix-unit decode kernel (shaders/common/decode_coopmat_kernel.glsl) against the CPU reference, and
// the choice between it and the scalar kernel. The kernel runs only where the context has
// VK_NV_cooperative_matrix (an NVIDIA GPU); elsewhere these tests check that it is refused
// and skip the rest.
#include <gtest/gtest.h>

#include <cmath>
#include <tuple>

#include "support/decode_bad_indices.hpp"
#include "support/decode_bf16_range.hpp"
#include "support/decode_case.hpp"
#include "support/expect_error.hpp"
#include "support/test_context.hpp"
#include "vkpaged/error.hpp"
#include "vkpaged/reference.hpp"

namespace vkpaged::test {
namespace {

DecodeShape shape_of(const DecodeCase& c) {
  std::mt19937 rng(1);
  return decode_shape_of(make_decode_inputs(c, rng));
}

// A split into 256-token partitions on the matrix kernel, merged in the decode dispatch.
DecodeOptions merged_in_dispatch(const DecodeCase& c) {
  DecodeOptions o = default_options(c);
  o.kernel = DecodeKernel::matrix;
  o.split = SplitMode::split;
  o.partition_tokens = 256;
  o.merge = DecodeMerge::in_dispatch;
  return o;
}

class DecodeMatrixTest : public GpuTest {
 protected:
  void SetUp() override {
    GpuTest::SetUp();
    if (!ctx().device_info().cooperative_matrix)
      GTEST_SKIP() << ctx().device_info().name << " has no matrix units for the decode";
    const std::string refusal = matrix_kernel_refusal();
    // NVIDIA's fragments have the layout the kernel writes (fragment_layout.cpp); elsewhere a
    // different layout is a reason to fall back, not a failure.
    if (ctx().device_info().vendor_id == 0x10de) ASSERT_EQ(refusal, "");
    if (!refusal.empty()) GTEST_SKIP() << refusal;
  }

  std::string matrix_kernel_refusal() {
    DecodeOptions o;
    o.kernel = DecodeKernel::matrix;
    try {
      DecodePlan::create(ctx(), shape_of(DecodeCase{}), o);
      return "";
    } catch (const Error& e) {
      return e.what();
    }
  }

  // Runs the case with the matrix kernel and checks it against the reference.
  void check(const DecodeCase& c, DecodeOptions options, uint32_t seed = 1, bool lse = false) {
    options.kernel = DecodeKernel::matrix;
    std::mt19937 rng(seed);
    const DecodeInputs in = make_decode_inputs(c, rng);
    ASSERT_NE(DecodePlan::create(ctx(), decode_shape_of(in, lse), options).describe().find("matrix units"),
              std::string::npos);
    const DecodeResult want = reference::decode_attention(in, options, lse);
    const DecodeResult got = decode_attention(ctx(), in, options, lse);
    const double tol = tolerance(c.query_dtype, c.cache_dtype);
    EXPECT_LE(max_abs_diff(got.output, want.output), tol) << c.str();
    if (lse)
      for (int64_t i = 0; i < want.lse.numel(); ++i) {
        const double w = want.lse.get(size_t(i)), g = got.lse.get(size_t(i));
        if (std::isinf(w)) EXPECT_TRUE(std::isinf(g) && g < 0) << c.str() << " lse " << i;
        else EXPECT_NEAR(g, w, 1e-3 + tol) << c.str() << " lse " << i;
      }
  }

  // A query/cache dtype pair over head sizes 64/128/256 and block sizes 8/16/32, with the
  // lengths around every edge, a soft cap, a window and a forced split on some of them.
  void check_across_shapes(DType query, DType cache) {
    for (uint32_t D : {64u, 128u, 256u}) {
      for (uint32_t B : {8u, 16u, 32u}) {
        DecodeCase c;
        c.query_dtype = query;
        c.cache_dtype = cache;
        c.head_size = D;
        c.block_size = B;
        c.heads = D == 128 ? 16 : 6;
        c.kv_heads = 2;
        c.lens = {0, 1, B - 1, B, B + 1, 31, 32, 33, 301};
        DecodeOptions o = default_options(c);
        o.softcap = D == 64 ? 4.0f : 0.0f;
        o.sliding_window = B == 32 ? 45 : 0;
        o.split = B == 8 ? SplitMode::split : SplitMode::automatic;
        SCOPED_TRACE(c.str());
        check(c, o, D + B, /*lse=*/true);
      }
    }
  }
};

// On every device: the matrix kernel is refused, with the reason, where it cannot run.
class DecodeKernelChoiceTest : public GpuTest {};

TEST_F(DecodeKernelChoiceTest, MatrixKernelRefusedWhereItCannotRun) {
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
  EXPECT_EQ(DecodePlan::create(ctx(), shape_of(c), o).describe().find("matrix units"), std::string::npos);
}

// The timeline (DecodeOptions::timeline) is the matrix kernel's alone: refused elsewhere.
TEST_F(DecodeKernelChoiceTest, TimelineRefusedOffTheMatrixKernel) {
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

// Automatic takes the matrix kernel for GQA groups with 16-bit queries and caches (where it
// measured faster) and the scalar kernel for MHA and for f32.
TEST_F(DecodeMatrixTest, AutomaticPicksTheMatrixKernelForGroupsOf16BitDtypes) {
  DecodeCase c;
  c.heads = 8;
  c.kv_heads = 2;
  EXPECT_NE(DecodePlan::create(ctx(), shape_of(c)).describe().find("matrix units"), std::string::npos);
  c.cache_dtype = DType::bf16;
  c.query_dtype = DType::bf16;
  EXPECT_NE(DecodePlan::create(ctx(), shape_of(c)).describe().find("matrix units"), std::string::npos);
  c.kv_heads = 8;
  EXPECT_EQ(DecodePlan::create(ctx(), shape_of(c)).describe().find("matrix units"), std::string::npos);
  c.kv_heads = 2;
  c.cache_dtype = DType::f32;
  EXPECT_EQ(DecodePlan::create(ctx(), shape_of(c)).describe().find("matrix units"), std::string::npos);
  c.cache_dtype = DType::f16;
  c.query_dtype = DType::f32;
  EXPECT_EQ(DecodePlan::create(ctx(), shape_of(c)).describe().find("matrix units"), std::string::npos);
}

// Small batches split into partitions of 1024 to 8192 tokens: never shorter (a partition costs
// more to start than to stream), longer as the context grows past what the compute units need.
TEST_F(DecodeMatrixTest, AutomaticSplitKeepsPartitionsBetween1024And8192Tokens) {
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
TEST_F(DecodeMatrixTest, AutomaticRunsSmallBatchesInOnePassOnMoreSubgroups) {
  const uint32_t units = ctx().device_info().compute_units;
  if (units < 32) GTEST_SKIP() << "the batches below are sized for 32 compute units or more";
  // 8 kv heads: about one workgroup per compute unit, then about 1.75.
  DecodeShape s = plan_shape((units + 7) / 8, 32, 8, 128, 16384);
  auto plan = DecodePlan::create(ctx(), s);
  EXPECT_FALSE(plan.split()) << plan.describe();
  EXPECT_NE(plan.describe().find("8 subgroups/wg"), std::string::npos) << plan.describe();
  s.max_context_len = 2000;  // under 256 tokens for each of 8 subgroups: split
  plan = DecodePlan::create(ctx(), s);
  EXPECT_TRUE(plan.split()) << plan.describe();
  s.max_context_len = 2048;
  plan = DecodePlan::create(ctx(), s);
  EXPECT_FALSE(plan.split()) << plan.describe();
  EXPECT_NE(plan.describe().find("8 subgroups/wg"), std::string::npos) << plan.describe();
  s = plan_shape((7 * units + 31) / 32, 32, 8, 128, 8192);
  plan = DecodePlan::create(ctx(), s);
  EXPECT_FALSE(plan.split()) << plan.describe();
  EXPECT_NE(plan.describe().find("4 subgroups/wg"), std::string::npos) << plan.describe();
}

// bf16 and fp8 caches issue a unit's value loads with its key loads, and fp8 caches the next
// unit's loads before this unit's products (measured faster there); f16 caches load the values
// after the scores, one unit at a time.
TEST_F(DecodeMatrixTest, AutomaticLoadsValuesWithKeysForConvertedCaches) {
  DecodeShape s = plan_shape(64, 32, 8, 128, 4096);
  for (DType cache : {DType::f16, DType::bf16, DType::fp8_e4m3, DType::fp8_e5m2}) {
    s.cache_dtype = cache;
    const auto plan = DecodePlan::create(ctx(), s);
    SCOPED_TRACE(plan.describe());
    ASSERT_NE(plan.describe().find("matrix units"), std::string::npos);
    EXPECT_EQ(plan.describe().find("values with keys") != std::string::npos, cache != DType::f16) << dtype_name(cache);
    EXPECT_EQ(plan.describe().find("next unit ahead") != std::string::npos, is_fp8_dtype(cache)) << dtype_name(cache);
  }
}

TEST_F(DecodeMatrixTest, RaggedLengthsAroundUnitAndBlockEdges) {
  for (uint32_t B : {8u, 16u, 32u, 64u}) {
    DecodeCase c;
    c.block_size = B;
    c.lens = {0, 1, 15, 16, 17, B - 1, B, B + 1, 2 * B + 3, 301};
    check(c, default_options(c), B);
  }
}

TEST_F(DecodeMatrixTest, HeadSizesAndGroups) {
  for (uint32_t D : {32u, 64u, 96u, 128u, 256u}) {
    for (uint32_t group : {1u, 2u, 3u, 4u, 8u}) {
      DecodeCase c;
      c.head_size = D;
      c.kv_heads = 2;
      c.heads = 2 * group;
      c.lens = {5, 40, 129, 700};
      check(c, default_options(c), D + group);
    }
  }
  DecodeCase wide;  // groups past 8 are sliced over workgroups
  wide.heads = 12;
  wide.kv_heads = 1;
  wide.lens = {33, 200};
  check(wide, default_options(wide));
  wide.heads = 16;
  check(wide, default_options(wide));
}

TEST_F(DecodeMatrixTest, Fp8CachesAcrossShapes) {
  for (DType cache : {DType::fp8_e4m3, DType::fp8_e5m2}) check_across_shapes(DType::f16, cache);
}

// bf16 elements become f16 in registers: every pairing of a bf16 query or cache with the
// other 16-bit dtypes, across head and block sizes, one pass and split, with features.
TEST_F(DecodeMatrixTest, Bf16QueriesAndCachesAcrossShapes) {
  const std::pair<DType, DType> pairs[] = {{DType::bf16, DType::bf16},
                                           {DType::f16, DType::bf16},
                                           {DType::bf16, DType::f16},
                                           {DType::bf16, DType::fp8_e4m3}};
  for (const auto& [query, cache] : pairs) check_across_shapes(query, cache);
}

// bf16 keys, values and queries from 2^-40 to 2^40, one pass and split into partitions.
TEST_F(DecodeMatrixTest, Bf16FarOutsideTheF16RangeIsRescaled) {
  DecodeOptions o;
  o.kernel = DecodeKernel::matrix;
  o.split = SplitMode::single_pass;
  expect_bf16_far_outside_f16_range_kept(ctx(), o);
  o.split = SplitMode::split;
  o.partition_tokens = 256;
  expect_bf16_far_outside_f16_range_kept(ctx(), o);
}

// An E4M3 NaN byte (S.1111.111, either sign) is NaN on the matrix kernel as on the scalar kernel
// (the contract leaves NaN inputs open; both kernels let them through). The matrix kernel
// probes the raw bytes and finds where a NaN is after its loop (decode_coopmat_kernel.glsl,
// "fp8 NaN"): a NaN key makes its heads' outputs NaN, a NaN value the outputs of its dim, in a
// full unit, in a unit with masked tokens and in a later unit of another subgroup, one pass
// and split; NaN bytes in the masked slots past a length change nothing, and every other output
// matches the reference.
TEST_F(DecodeMatrixTest, Fp8E4m3NanIsNanAsOnTheScalarKernel) {
  DecodeCase c;
  c.cache_dtype = DType::fp8_e4m3;
  c.head_size = 64;
  c.heads = 4;
  c.kv_heads = 2;
  c.lens = {40, 300};
  std::mt19937 rng(11);
  DecodeInputs in = make_decode_inputs(c, rng);
  auto nan_key = [&](int64_t seq, int64_t token, int64_t kv_head, int64_t dim, uint8_t nan) {
    in.key_cache.as<uint8_t>()[key_cache_index(c, block_of_token(c, in, seq, token), kv_head, dim, token % c.block_size)] = nan;
  };
  auto nan_value = [&](int64_t seq, int64_t token, int64_t kv_head, int64_t dim, uint8_t nan) {
    in.value_cache.as<uint8_t>()[value_cache_index(c, block_of_token(c, in, seq, token), kv_head, dim, token % c.block_size)] = nan;
  };
  nan_key(0, 3, 0, 5, 0x7f);       // full unit: heads 0 and 1 of sequence 0
  nan_value(0, 7, 1, 9, 0xff);     // full unit: dim 9 of heads 2 and 3
  nan_key(1, 100, 0, 62, 0xff);    // unit 3 of 32 tokens (not the first subgroup's): heads 0 and 1
  nan_value(1, 290, 1, 20, 0x7f);  // the last unit (masked tokens past 300): dim 20 of heads 2 and 3
  nan_key(1, 302, 1, 1, 0x7f);     // past the length: nothing
  nan_value(1, 301, 0, 3, 0xff);   // past the length: nothing
  auto nan_expected = [&](int64_t seq, int64_t head, int64_t dim) {
    return seq == 0 ? head < 2 || dim == 9 : head < 2 || dim == 20;
  };
  DecodeOptions o = default_options(c);
  const auto want = reference::decode_attention(in, o);
  struct Run {
    const char* name;
    DecodeKernel kernel;
    SplitMode split;
  };
  for (const Run& run : {Run{"scalar", DecodeKernel::scalar, SplitMode::single_pass},
                         Run{"matrix one pass", DecodeKernel::matrix, SplitMode::single_pass},
                         Run{"matrix split", DecodeKernel::matrix, SplitMode::split}}) {
    o.kernel = run.kernel;
    o.split = run.split;
    o.partition_tokens = run.split == SplitMode::split ? 256 : 0;
    const auto got = decode_attention(ctx(), in, o);
    for (int64_t i = 0; i < got.output.numel(); ++i) {
      const int64_t seq = i / (c.heads * c.head_size), head = (i / c.head_size) % c.heads, dim = i % c.head_size;
      const double g = got.output.get(size_t(i));
      const bool nan_here = nan_expected(seq, head, dim);
      EXPECT_EQ(std::isnan(g), nan_here) << run.name << ", element " << i;
      if (!nan_here) EXPECT_NEAR(g, want.output.get(size_t(i)), tolerance(c.query_dtype, c.cache_dtype)) << run.name << ", element " << i;
    }
  }
}

TEST_F(DecodeMatrixTest, FeaturesAloneAndCombined) {
  for (const FeatureMix& m : feature_mixes()) check(m.c, m.options, m.seed, /*lse=*/true);
}

// Logits that climb along the context (a steep ALiBi slope) make the lazy running max move on
// most units, so the accumulators take the rescale path many times.
TEST_F(DecodeMatrixTest, ClimbingLogitsRescaleOften) {
  DecodeCase c;
  c.alibi = true;
  c.lens = {50, 400};
  std::mt19937 rng(3);
  DecodeInputs in = make_decode_inputs(c, rng);
  for (int64_t h = 0; h < in.alibi_slopes.numel(); ++h) in.alibi_slopes.as<float>()[h] = 0.9f + 0.1f * float(h);
  DecodeOptions o = default_options(c);
  o.kernel = DecodeKernel::matrix;
  const auto want = reference::decode_attention(in, o, true);
  const auto got = decode_attention(ctx(), in, o, true);
  EXPECT_LE(max_abs_diff(got.output, want.output), tolerance(DType::f16, DType::f16));
  EXPECT_LE(max_abs_diff(got.lse, want.lse), 1e-3);
}

TEST_F(DecodeMatrixTest, SlidingWindowEdges) {
  DecodeCase c;
  c.lens = {0, 1, 31, 32, 33, 64, 65, 600};
  for (uint32_t w : {1u, 15u, 16u, 17u, 33u, 1000u}) {
    DecodeOptions o = default_options(c);
    o.sliding_window = w;
    check(c, o, w);
  }
}

TEST_F(DecodeMatrixTest, SplitMatchesSinglePassAndScalar) {
  DecodeCase c;
  c.heads = 8;
  c.kv_heads = 2;
  c.lens = {0, 1, 255, 256, 257, 1500, 3000};
  c.sinks = true;
  c.alibi = true;
  for (uint32_t window : {0u, 700u}) {
    DecodeOptions single = default_options(c);
    single.sliding_window = window;
    single.split = SplitMode::single_pass;
    single.kernel = DecodeKernel::matrix;
    DecodeOptions split = single;
    split.split = SplitMode::split;
    split.partition_tokens = 256;
    DecodeOptions scalar = split;
    scalar.kernel = DecodeKernel::scalar;
    std::mt19937 rng(7);
    const DecodeInputs in = make_decode_inputs(c, rng);
    const auto a = decode_attention(ctx(), in, single, true);
    const auto b = decode_attention(ctx(), in, split, true);
    const auto s = decode_attention(ctx(), in, scalar, true);
    const auto ref = reference::decode_attention(in, single, true);
    const double tol = tolerance(c.query_dtype, c.cache_dtype);
    EXPECT_LE(max_abs_diff(a.output, ref.output), tol);
    EXPECT_LE(max_abs_diff(b.output, ref.output), tol);
    EXPECT_LE(max_abs_diff(b.output, s.output), tol);
    EXPECT_LE(max_abs_diff(a.lse, ref.lse), 1e-3);
    EXPECT_LE(max_abs_diff(b.lse, ref.lse), 1e-3);
  }
}

// DecodeMerge::in_dispatch: the split's partitions merged by the last workgroup of each head
// group inside the decode dispatch, against the reference: lengths around the partitions' edges
// (empty, one token, a partition and one more), windows that start partitions in, sinks, ALiBi,
// LSE, bf16 queries, fp8 caches, longest first, two head groups per kv head (16 heads on one).
// decode_attention zeroes the counters first and fails unless the decode leaves them zero.
TEST_F(DecodeMatrixTest, MergeInDispatchMatchesTheReference) {
  struct Run {
    DType query, cache;
    uint32_t heads, kv_heads, head_size, window, longest;  // longest: the last sequence's length
    bool sinks, alibi, longest_first;
  };
  // 256-token partitions: at most 8 (2048 tokens) x 4 heads x 128 dims, or 8 x 8 x 64, or
  // 4 x 4 x 256: the 4096 floats a plan merges in the dispatch at most.
  const Run runs[] = {
      {DType::f16, DType::f16, 8, 2, 128, 0, 2048, false, false, false},
      {DType::f16, DType::f16, 8, 2, 128, 700, 2000, true, true, false},
      {DType::bf16, DType::bf16, 16, 1, 64, 0, 1999, true, false, true},
      {DType::f16, DType::fp8_e4m3, 4, 1, 128, 300, 2048, false, true, false},
      {DType::f16, DType::fp8_e5m2, 4, 1, 256, 0, 1024, false, false, true},
  };
  uint32_t seed = 20;
  for (const Run& r : runs) {
    DecodeCase c;
    c.query_dtype = r.query;
    c.cache_dtype = r.cache;
    c.heads = r.heads;
    c.kv_heads = r.kv_heads;
    c.head_size = r.head_size;
    c.sinks = r.sinks;
    c.alibi = r.alibi;
    c.lens = {0, 1, 255, 256, 257, 700, r.longest};
    DecodeOptions o = merged_in_dispatch(c);
    o.sliding_window = r.window;
    o.order = r.longest_first ? DecodeOrder::longest_first : DecodeOrder::grid;
    SCOPED_TRACE(c.str());
    const DecodePlan plan = DecodePlan::create(ctx(), shape_of(c), o);
    EXPECT_EQ(plan.merge_counter_bytes(), size_t(4) * c.lens.size() * c.heads);
    EXPECT_NE(plan.describe().find("merged in the dispatch"), std::string::npos) << plan.describe();
    check(c, o, ++seed, /*lse=*/true);
  }
  // Past 4096 floats (36 partitions x 128 dims, whatever the heads per workgroup) the plan keeps
  // the reduce pass.
  DecodeCase c;
  c.heads = 8;
  c.kv_heads = 2;
  c.lens = {9000};
  const DecodeOptions o = merged_in_dispatch(c);
  const DecodePlan plan = DecodePlan::create(ctx(), shape_of(c), o);
  EXPECT_EQ(plan.num_partitions(), 36u);
  EXPECT_EQ(plan.merge_counter_bytes(), 0u);
  EXPECT_EQ(plan.describe().find("merged in the dispatch"), std::string::npos) << plan.describe();
  check(c, o, 30, /*lse=*/true);
}

// Merge counters that are not zero when a decode starts: one at or past its partition count is
// flagged in the status word. A missing counters view is refused before anything is recorded.
TEST_F(DecodeMatrixTest, MergeCountersPastTheirCountAreFlagged) {
  DecodeCase c;
  c.heads = 8;
  c.kv_heads = 2;
  c.lens = {700, 1500};
  std::mt19937 rng(9);
  const DecodeInputs in = make_decode_inputs(c, rng);
  const DecodeOptions o = merged_in_dispatch(c);
  const auto plan = DecodePlan::create(ctx(), decode_shape_of(in), o);
  ASSERT_GT(plan.merge_counter_bytes(), 0u);
  auto upload = [&](const HostTensor& t) {
    auto b = ctx().create_buffer(t.bytes());
    ctx().upload(b.view(), t.data(), t.bytes());
    return b;
  };
  auto q = upload(in.query), k = upload(in.key_cache), vc = upload(in.value_cache), bt = upload(in.block_tables),
       cl = upload(in.context_lens);
  auto out = ctx().create_buffer(in.query.bytes());
  auto scratch = ctx().create_buffer(plan.scratch_bytes());
  auto counters = ctx().create_buffer(plan.merge_counter_bytes());
  auto status = ctx().create_buffer(16);
  DecodeViews v;
  v.query = q.tensor(DType::f16, in.query.shape());
  v.key_cache = k.tensor(DType::f16, in.key_cache.shape());
  v.value_cache = vc.tensor(DType::f16, in.value_cache.shape());
  v.block_tables = bt.tensor(DType::i32, in.block_tables.shape());
  v.context_lens = cl.tensor(DType::i32, in.context_lens.shape());
  v.output = out.tensor(DType::f16, in.query.shape());
  v.scratch = scratch.view();
  v.status = status.view(0, 4);
  expect_refused([&] { ctx().run_and_wait([&](VkCommandBuffer cmd) { record_decode(ctx(), cmd, plan, v); }); },
                 "merge_counters");
  v.merge_counters = counters.view();

  // Zeroed counters: no flag, the reference's outputs, and the counters zero again.
  const std::vector<uint32_t> zeros(plan.merge_counter_bytes() / 4, 0u);
  const uint32_t zero = 0;
  ctx().upload(counters.view(), zeros.data(), plan.merge_counter_bytes());
  ctx().upload(status.view(0, 4), &zero, 4);
  ctx().run_and_wait([&](VkCommandBuffer cmd) { record_decode(ctx(), cmd, plan, v); });
  uint32_t flags = 1;
  ctx().download(status.view(0, 4), &flags, 4);
  EXPECT_EQ(flags, 0u);
  std::vector<uint32_t> after(zeros.size(), 1u);
  ctx().download(counters.view(), after.data(), plan.merge_counter_bytes());
  EXPECT_EQ(after, zeros);
  HostTensor got(DType::f16, in.query.shape());
  ctx().download(out.view(), got.data(), got.bytes());
  EXPECT_LE(max_abs_diff(got, reference::decode_attention(in, o).output), tolerance(DType::f16, DType::f16));

  // Counters far past every count: every head group's arrivals are flagged.
  const std::vector<uint32_t> stale(zeros.size(), 1000u);
  ctx().upload(counters.view(), stale.data(), plan.merge_counter_bytes());
  ctx().run_and_wait([&](VkCommandBuffer cmd) { record_decode(ctx(), cmd, plan, v); });
  ctx().download(status.view(0, 4), &flags, 4);
  EXPECT_EQ(flags, kStatusBadMergeCounters);
  EXPECT_EQ(ctx().validation_message_count(), 0u);
}

// With DecodeOptions::timeline the kernel computes the same outputs and writes one record per
// subgroup (decode_timeline in decode.hpp): stamps in order, and the units of 32 tokens
// its subgroups walked adding up to each sequence's, in one pass and split.
TEST_F(DecodeMatrixTest, TimelineRecordsEverySubgroupsUnits) {
  if (!ctx().device_info().decode_timeline) GTEST_SKIP() << ctx().device_info().name << " cannot record a timeline";
  DecodeCase c;
  c.heads = 8;
  c.kv_heads = 2;  // one workgroup per kv head: grid x = kv heads
  c.head_size = 128;
  c.lens = {0, 1, 31, 32, 33, 301, 1000};
  std::mt19937 rng(3);
  const DecodeInputs in = make_decode_inputs(c, rng);
  for (const SplitMode split : {SplitMode::single_pass, SplitMode::split}) {
    DecodeOptions o = default_options(c);
    o.kernel = DecodeKernel::matrix;
    o.split = split;
    o.partition_tokens = split == SplitMode::split ? 256 : 0;
    o.timeline = true;
    SCOPED_TRACE(split == SplitMode::split ? "split" : "one pass");
    const DecodePlan plan = DecodePlan::create(ctx(), decode_shape_of(in), o);
    const DecodeResult got = decode_attention(ctx(), in, o);
    EXPECT_LE(max_abs_diff(got.output, reference::decode_attention(in, o).output), tolerance(c.query_dtype, c.cache_dtype));
    const auto& t = got.timeline;
    ASSERT_EQ(size_t(t.numel()) * 4, plan.timeline_bytes());
    const int64_t records = t.shape()[0];
    std::vector<uint64_t> units(c.lens.size() * c.kv_heads, 0);
    auto stamp = [&](int64_t r, int i) {
      return uint64_t(t.as<uint32_t>()[r * decode_timeline::words + decode_timeline::stamps + 2 * i]) |
             uint64_t(t.as<uint32_t>()[r * decode_timeline::words + decode_timeline::stamps + 2 * i + 1]) << 32;
    };
    for (int64_t r = 0; r < records; ++r) {
      const uint32_t* w = t.as<uint32_t>() + r * decode_timeline::words;
      ASSERT_NE(stamp(r, 4), 0u) << "record " << r << " was not written";
      for (int i = 1; i < 5; ++i) EXPECT_LE(stamp(r, i - 1), stamp(r, i)) << "record " << r << " stamp " << i;
      const uint32_t wg = w[decode_timeline::workgroup];
      EXPECT_EQ(wg, uint32_t(r) / (records / (int64_t(c.lens.size()) * c.kv_heads * plan.num_partitions())));
      const uint32_t kv_head = wg % c.kv_heads, seq = (wg / c.kv_heads) % uint32_t(c.lens.size());
      units[seq * c.kv_heads + kv_head] += w[decode_timeline::units];
    }
    for (size_t s = 0; s < c.lens.size(); ++s)
      for (uint32_t h = 0; h < c.kv_heads; ++h) EXPECT_EQ(units[s * c.kv_heads + h], (c.lens[s] + 31) / 32) << "sequence " << s;
  }
}

TEST_F(DecodeMatrixTest, DeviceSideBadBlockIdsAreFlaggedNotFollowed) {
  DecodeOptions o;
  o.kernel = DecodeKernel::matrix;
  expect_bad_indices_flagged_not_followed(ctx(), o);
}

// Longest first (lengths that vary), a full batch past 2048 tokens runs in one pass on 4
// subgroups per workgroup so that its longest sequences, started first, end sooner (measured on
// an H200, bench/RESULTS.md); in grid order, and longest first with shorter contexts, on 2.
TEST_F(DecodeMatrixTest, LongestFirstTakesFourSubgroupsForLongFullBatches) {
  const DecodeShape long_batch = plan_shape(64, 32, 8, 128, 4096);
  const DecodeShape short_batch = plan_shape(256, 32, 8, 128, 1024);
  DecodeOptions grid;
  DecodeOptions longest;
  longest.order = DecodeOrder::longest_first;
  for (const auto& [shape, options, subgroups] : {std::tuple{long_batch, grid, "2 subgroups/wg"},
                                                  std::tuple{long_batch, longest, "4 subgroups/wg"},
                                                  std::tuple{short_batch, longest, "2 subgroups/wg"}}) {
    const std::string path = DecodePlan::create(ctx(), shape, options).describe();
    EXPECT_NE(path.find("one pass"), std::string::npos) << path;
    EXPECT_NE(path.find(subgroups), std::string::npos) << path;
    EXPECT_EQ(path.find("longest first") != std::string::npos, options.order == DecodeOrder::longest_first) << path;
  }
}

}  // namespace
}  // namespace vkpaged::test
