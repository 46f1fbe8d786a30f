// SPDX-License-Identifier: Apache-2.0
// Decode attention on the device against the CPU reference, on every kernel and cache layout
// (support/decode_kernels.hpp): shapes, ragged lengths, dtypes, features, one pass and split,
// the in-dispatch merge, the timeline, device-side bad indices. Cases a kernel cannot run are
// skipped with the reason. The plans' choices are tested in test_decode_plans.cpp (on this
// device) and test_decode_planner.cpp (on fabricated ones, without a GPU).
#include <gtest/gtest.h>

#include <cmath>
#include <cstring>
#include <functional>

#include "ops/attention_plan.hpp"
#include "support/decode_bad_indices.hpp"
#include "support/decode_bf16_range.hpp"
#include "support/decode_case.hpp"
#include "support/decode_check.hpp"
#include "support/decode_kernels.hpp"
#include "support/expect_error.hpp"
#include "vkpaged/error.hpp"
#include "vkpaged/reference.hpp"

namespace vkpaged::test {
namespace {

// A split into 256-token partitions merged in the decode dispatch where the kernel takes that.
DecodeOptions merged_in_dispatch() {
  DecodeOptions o;
  o.split = SplitMode::split;
  o.partition_tokens = 256;
  o.merge = DecodeMerge::in_dispatch;
  return o;
}

// A case of the matrix kernel's module tests: dtypes, head size, block size and heads.
struct MatrixRun {
  DType query, cache;
  uint32_t head_size, block_size, heads, kv_heads;
};

DecodeCase case_of(const MatrixRun& r, std::vector<uint32_t> lens) {
  DecodeCase c;
  c.query_dtype = r.query;
  c.cache_dtype = r.cache;
  c.head_size = r.head_size;
  c.block_size = r.block_size;
  c.heads = r.heads;
  c.kv_heads = r.kv_heads;
  c.lens = std::move(lens);
  return c;
}

// The five option sets those tests run each case on: one pass, a window with a soft cap, splits
// merged by the reduce pass and in the dispatch (with a 700-token sequence added where
// `add_long`), and longest first with ALiBi, sinks and LSE.
struct OptionSet {
  const char* name;
  DecodeCase c;
  DecodeOptions o;
  DecodeParams p;
  bool lse = false;
};
std::vector<OptionSet> option_sets(const DecodeCase& c, const DecodeOptions& base, bool add_long) {
  static constexpr const char* kNames[] = {"one pass", "window and soft cap", "split, reduce pass",
                                           "split, merged in the dispatch", "longest first, ALiBi and sinks"};
  std::vector<OptionSet> sets;
  for (int variant = 0; variant < 5; ++variant) {
    OptionSet s{kNames[variant], c, base, default_params(c)};
    if (variant == 1) {
      s.o.sliding_window = 45;
      s.p.softcap = 4.0f;
    } else if (variant == 2 || variant == 3) {
      s.o.split = SplitMode::split;
      s.o.partition_tokens = 256;
      s.o.merge = variant == 3 ? DecodeMerge::in_dispatch : DecodeMerge::reduce_pass;
      if (add_long) s.c.lens.push_back(700);
      s.lse = true;
    } else if (variant == 4) {
      s.o.order = DecodeOrder::longest_first;
      s.c.alibi = s.c.sinks = true;
      s.lse = true;
    }
    sets.push_back(s);
  }
  return sets;
}

// `got` is NaN exactly where nan_expected(seq, head, dim) says, and within the case's tolerance
// of `want` (the reference) everywhere else.
void expect_nan_where(const DecodeCase& c, const DecodeResult& got, const DecodeResult& want,
                      const std::function<bool(int64_t, int64_t, int64_t)>& nan_expected, const std::string& label) {
  for (int64_t i = 0; i < got.output.numel(); ++i) {
    const int64_t seq = i / (c.heads * c.head_size), head = (i / c.head_size) % c.heads, dim = i % c.head_size;
    const double g = got.output.get(size_t(i));
    const bool nan_here = nan_expected(seq, head, dim);
    EXPECT_EQ(std::isnan(g), nan_here) << label << ", element " << i;
    if (!nan_here) EXPECT_NEAR(g, want.output.get(size_t(i)), tolerance(c.query_dtype, c.cache_dtype)) << label << ", element " << i;
  }
}

using DecodeTest = DecodeKernelTest;

TEST_P(DecodeTest, RaggedLengthsAroundUnitAndBlockEdges) {
  for (uint32_t B : {8u, 16u, 32u, 64u}) {
    DecodeCase c;
    c.block_size = B;
    c.lens = {0, 1, 15, 16, 17, B - 1, B, B + 1, 2 * B + 3, 301};
    for (DType t : {DType::f32, DType::f16}) {
      c.query_dtype = c.cache_dtype = t;
      check(c, {}, default_params(c), B);
    }
  }
}

TEST_P(DecodeTest, HeadSizesAndGroups) {
  for (uint32_t D : {32u, 64u, 80u, 96u, 112u, 128u, 256u}) {
    for (uint32_t group : {1u, 2u, 3u, 4u, 8u}) {
      DecodeCase c;
      c.head_size = D;
      c.kv_heads = 2;
      c.heads = 2 * group;
      c.lens = {5, 40, 129, 700};
      check(c, {}, default_params(c), D + group);
    }
  }
}

TEST_P(DecodeTest, OddHeadSizesAndLargeGroups) {
  for (uint32_t D : {32u, 40u, 72u, 168u, 512u}) {
    DecodeCase c;
    c.head_size = D;
    c.lens = {3, 70};
    check(c, {}, default_params(c), D);
  }
  DecodeCase wide;  // groups past what one workgroup takes are sliced over workgroups
  wide.kv_heads = 1;
  wide.lens = {33, 200};
  for (uint32_t heads : {12u, 16u}) {
    wide.heads = heads;
    check(wide, {}, default_params(wide));
  }
}

TEST_P(DecodeTest, EveryBlockSize) {
  for (uint32_t B : {1u, 2u, 4u, 8u, 16u, 32u, 64u, 128u}) {
    DecodeCase c;
    c.block_size = B;
    c.lens = {1, B + 1, 3 * B + 2};
    for (DType t : {DType::f32, DType::f16}) {
      c.query_dtype = c.cache_dtype = t;
      check(c, {}, default_params(c), B);
    }
  }
}

TEST_P(DecodeTest, Bf16AndFp8Caches) {
  DecodeCase c;
  c.lens = {0, 1, 15, 16, 17, 250};
  c.query_dtype = c.cache_dtype = DType::bf16;
  check(c, {}, default_params(c));
  for (DType fp8 : {DType::fp8_e4m3, DType::fp8_e5m2}) {
    c.query_dtype = DType::f16;
    c.cache_dtype = fp8;
    c.head_size = 128;  // a multiple of x = 16
    check(c, {}, default_params(c));
    c.query_dtype = DType::f32;
    check(c, {}, default_params(c));
  }
}

// A query/cache dtype pair over head sizes 64/128/256 and block sizes 8/16/32, with the
// lengths around every edge, a soft cap, a window and a forced split on some of them.
using CheckCase = std::function<void(const DecodeCase&, const DecodeOptions&, const DecodeParams&, uint32_t seed)>;
void check_across_shapes(DType query, DType cache, const CheckCase& check) {
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
      DecodeOptions o;
      o.sliding_window = B == 32 ? 45 : 0;
      o.split = B == 8 ? SplitMode::split : SplitMode::automatic;
      DecodeParams p = default_params(c);
      p.softcap = D == 64 ? 4.0f : 0.0f;
      SCOPED_TRACE(c.str());
      check(c, o, p, D + B);
    }
  }
}

TEST_P(DecodeTest, Fp8CachesAcrossShapes) {
  const CheckCase with_lse = [&](const DecodeCase& c, const DecodeOptions& o, const DecodeParams& p, uint32_t seed) {
    check(c, o, p, seed, /*lse=*/true);
  };
  for (DType cache : {DType::fp8_e4m3, DType::fp8_e5m2}) check_across_shapes(DType::f16, cache, with_lse);
}

// Every pairing of a bf16 query or cache with the other 16-bit dtypes (the matrix kernel makes
// bf16 elements f16 in registers), across head and block sizes, one pass and split, with features.
TEST_P(DecodeTest, Bf16QueriesAndCachesAcrossShapes) {
  const std::pair<DType, DType> pairs[] = {{DType::bf16, DType::bf16},
                                           {DType::f16, DType::bf16},
                                           {DType::bf16, DType::f16},
                                           {DType::bf16, DType::fp8_e4m3}};
  const CheckCase with_lse = [&](const DecodeCase& c, const DecodeOptions& o, const DecodeParams& p, uint32_t seed) {
    check(c, o, p, seed, /*lse=*/true);
  };
  for (const auto& [query, cache] : pairs) check_across_shapes(query, cache, with_lse);
}

// bf16 keys, values and queries from 2^-40 to 2^40, in one pass and split into partitions: the
// scalar kernel computes bf16 in f32, the matrix kernel converts it to f16 in registers and
// must rescale what does not fit.
TEST_P(DecodeTest, Bf16FarOutsideTheF16RangeIsKept) {
  DecodeShape helper = plan_shape(6, 8, 2, 64, 600);  // the helper's shape: 8 heads on 2, D = 64, bf16
  helper.query_dtype = helper.cache_dtype = DType::bf16;
  if (!plan_or_refused(helper, {})) return;
  for (const SplitMode split : {SplitMode::automatic, SplitMode::single_pass, SplitMode::split}) {
    SCOPED_TRACE(int(split));
    DecodeOptions o = with_kernel({});
    o.split = split;
    o.partition_tokens = split == SplitMode::split ? 256 : 0;
    expect_bf16_far_outside_f16_range_kept(ctx(), o, {}, layout());
  }
}

TEST_P(DecodeTest, FeaturesAloneAndCombined) {
  for (const FeatureMix& m : feature_mixes()) check(m.c, m.options, m.params, m.seed, /*lse=*/true);
}

// Logits that climb along the context (a steep ALiBi slope) move the running max on most
// steps, so the accumulators take the rescale path many times.
TEST_P(DecodeTest, ClimbingLogitsRescaleOften) {
  DecodeCase c;
  c.alibi = true;
  c.lens = {50, 400};
  std::mt19937 rng(3);
  DecodeInputs in = make_decode_inputs(c, rng);
  for (int64_t h = 0; h < in.alibi_slopes.numel(); ++h) in.alibi_slopes.as<float>()[h] = 0.9f + 0.1f * float(h);
  const DecodeOptions o = with_kernel({});
  ASSERT_TRUE(plan_or_refused(decode_shape_of(in, true), o));
  const auto want = reference::decode_attention(in, o, {}, true);
  const auto got = run(in, o, {}, true);
  EXPECT_LE(max_abs_diff(got.output, want.output), tolerance(DType::f16, DType::f16));
  EXPECT_LE(max_abs_diff(got.lse, want.lse), 1e-3);
}

TEST_P(DecodeTest, SlidingWindowEdges) {
  DecodeCase c;
  c.lens = {0, 1, 31, 32, 33, 64, 65, 600};
  for (uint32_t w : {1u, 15u, 16u, 17u, 32u, 33u, 1000u}) {
    DecodeOptions o;
    o.sliding_window = w;
    check(c, o, default_params(c), w);
  }
}

// One pass and split agree with each other and with the reference; on a kernel other than the
// scalar one, the split also agrees with the scalar kernel's.
TEST_P(DecodeTest, SplitMatchesSinglePass) {
  DecodeCase c;
  c.heads = 8;
  c.kv_heads = 2;
  c.lens = {0, 1, 255, 256, 257, 1500, 3000};
  c.sinks = true;
  c.alibi = true;
  for (uint32_t window : {0u, 700u}) {
    DecodeOptions single = with_kernel({});
    single.sliding_window = window;
    single.split = SplitMode::single_pass;
    DecodeOptions split = single;
    split.split = SplitMode::split;
    split.partition_tokens = 256;  // up to 12 partitions
    std::mt19937 rng(7);
    const DecodeInputs in = make_decode_inputs(c, rng);
    ASSERT_TRUE(plan_or_refused(decode_shape_of(in, true), split));
    const auto a = run(in, single, {}, true);
    const auto b = run(in, split, {}, true);
    const auto ref = reference::decode_attention(in, single, {}, true);
    const double tol = tolerance(c.query_dtype, c.cache_dtype);
    EXPECT_LE(max_abs_diff(a.output, b.output), tol);
    EXPECT_LE(max_abs_diff(a.output, ref.output), tol);
    EXPECT_LE(max_abs_diff(b.output, ref.output), tol);
    EXPECT_LE(max_abs_diff(a.lse, ref.lse), 1e-3);
    EXPECT_LE(max_abs_diff(b.lse, ref.lse), 1e-3);
    if (kernel() != DecodeKernel::scalar) {
      DecodeOptions scalar = split;
      scalar.kernel = DecodeKernel::scalar;
      EXPECT_LE(max_abs_diff(b.output, run(in, scalar, {}, true).output), tol);
    }
  }
}

// The reduce pass gives each invocation a slice of the partitions and merges them 8 at a time
// (partition_merge.comp): enough partitions for several rounds per slice, counts that are not a
// multiple of the slices, and a window that starts the range part-way in.
TEST_P(DecodeTest, SplitIntoManyPartitionsMatchesTheReference) {
  struct Variant {
    uint32_t head_size;
    DType dtype;
  };
  for (const Variant v : {Variant{128, DType::f16}, Variant{64, DType::f32}, Variant{256, DType::bf16}}) {
    DecodeCase c;
    c.heads = 2;
    c.kv_heads = 1;
    c.head_size = v.head_size;
    c.query_dtype = c.cache_dtype = v.dtype;
    c.lens = {12000, 256 * 37 + 5, 3};
    c.sinks = true;
    for (uint32_t window : {0u, 7000u}) {
      SCOPED_TRACE(c.str() + " window " + std::to_string(window));
      DecodeOptions split;
      split.sliding_window = window;
      split.split = SplitMode::split;
      split.partition_tokens = 256;  // 47 partitions for the longest sequence
      check(c, split, default_params(c), 11, true);
    }
  }
}

// DecodeMerge::in_dispatch, where the kernel takes it: the split's partitions merged by the last
// workgroup of each head group inside the decode dispatch, against the reference: lengths around
// the partitions' edges (empty, one token, a partition and one more), windows that start
// partitions in, sinks, ALiBi, LSE, bf16 queries, fp8 caches, longest first, two head groups per
// kv head (16 heads on one). decode_attention zeroes the counters first and fails unless the
// decode leaves them zero.
TEST_P(DecodeTest, MergeInDispatchMatchesTheReference) {
  if (!merges_in_dispatch(kernel()))
    GTEST_SKIP() << "the " << kernel_name() << " kernel merges every split in a reduce pass "
                 << "(MergeInDispatchKeepsTheReducePassWhereNotTaken)";
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
    DecodeOptions o = merged_in_dispatch();
    o.sliding_window = r.window;
    o.order = r.longest_first ? DecodeOrder::longest_first : DecodeOrder::grid;
    SCOPED_TRACE(c.str());
    std::mt19937 rng(1);
    const auto plan = plan_or_refused(decode_shape_of(make_decode_inputs(c, rng)), o);
    ASSERT_TRUE(plan);
    EXPECT_EQ(plan->merge_counter_bytes(), size_t(4) * c.lens.size() * c.heads);
    EXPECT_TRUE(plan->data().choice().merge_in_dispatch) << plan->describe();
    check(c, o, default_params(c), ++seed, /*lse=*/true);
  }
  // Past 4096 floats (36 partitions x 128 dims, whatever the heads per workgroup) the plan keeps
  // the reduce pass.
  DecodeCase c;
  c.heads = 8;
  c.kv_heads = 2;
  c.lens = {9000};
  const DecodeOptions o = merged_in_dispatch();
  std::mt19937 rng(1);
  const auto plan = plan_or_refused(decode_shape_of(make_decode_inputs(c, rng)), o);
  ASSERT_TRUE(plan);
  EXPECT_EQ(plan->num_partitions(), 36u);
  EXPECT_EQ(plan->merge_counter_bytes(), 0u);
  EXPECT_FALSE(plan->data().choice().merge_in_dispatch) << plan->describe();
  check(c, o, {}, 30, /*lse=*/true);
}

// Where the kernel does not take DecodeMerge::in_dispatch (the scalar kernel's every split, and
// merges past 4096 floats on the kernels that take it), the split keeps its reduce pass, needs
// no counters and gives the same outputs as DecodeMerge::reduce_pass, bit for bit.
TEST_P(DecodeTest, MergeInDispatchKeepsTheReducePassWhereNotTaken) {
  DecodeCase c;
  c.heads = 8;
  c.kv_heads = 2;
  c.lens = {0, 1, 255, 256, 257, 1500};
  c.sinks = true;
  if (merges_in_dispatch(kernel())) c.lens = {9000, 3, 300};  // 36 partitions x 4 heads x 64 dims: past 4096 floats
  DecodeOptions reduce_pass = with_kernel({});
  reduce_pass.split = SplitMode::split;
  reduce_pass.partition_tokens = 256;
  DecodeOptions in_dispatch = reduce_pass;
  in_dispatch.merge = DecodeMerge::in_dispatch;
  std::mt19937 rng(8);
  const DecodeInputs in = make_decode_inputs(c, rng);
  const auto plan = plan_or_refused(decode_shape_of(in, true), in_dispatch);
  ASSERT_TRUE(plan);
  EXPECT_TRUE(plan->split());
  EXPECT_EQ(plan->merge_counter_bytes(), 0u);
  EXPECT_FALSE(plan->data().choice().merge_in_dispatch) << plan->describe();
  const auto a = run(in, reduce_pass, {}, true);
  const auto b = run(in, in_dispatch, {}, true);
  ASSERT_EQ(a.output.bytes(), b.output.bytes());
  EXPECT_EQ(std::memcmp(a.output.data(), b.output.data(), a.output.bytes()), 0);
  EXPECT_LE(max_abs_diff(b.output, reference::decode_attention(in, in_dispatch, {}, true).output),
            tolerance(c.query_dtype, c.cache_dtype));
}

// Merge counters that are not zero when a decode starts: one at or past its partition count is
// flagged in the status word. A missing counters view is refused before anything is recorded.
TEST_P(DecodeTest, MergeCountersPastTheirCountAreFlagged) {
  if (!merges_in_dispatch(kernel()))
    GTEST_SKIP() << "the " << kernel_name() << " kernel uses no merge counters";
  DecodeCase c;
  c.heads = 8;
  c.kv_heads = 2;
  c.lens = {700, 1500};
  std::mt19937 rng(9);
  // In this variant's layout: the views below are handed to record_decode as they are.
  const DecodeInputs in = with_layout(make_decode_inputs(c, rng), layout());
  const DecodeOptions o = with_kernel(merged_in_dispatch());
  const auto plan_or = plan_or_refused(decode_shape_of(in), o);
  ASSERT_TRUE(plan_or);
  const DecodePlan& plan = *plan_or;
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
}

// With DecodeOptions::timeline the kernel computes the same outputs and writes one record per
// subgroup (decode_timeline in decode.hpp): stamps in order, and the units of 32 tokens its
// subgroups walked adding up to each sequence's, in one pass and split.
TEST_P(DecodeTest, TimelineRecordsEverySubgroupsUnits) {
  if (!records_timeline(GetParam()))
    GTEST_SKIP() << decode_variant_name(GetParam()) << " records no timeline (TimelineRefusedOffTheMatrixKernel)";
  if (!ctx().device_info().decode_timeline) GTEST_SKIP() << ctx().device_info().name << " cannot record a timeline";
  DecodeCase c;
  c.heads = 8;
  c.kv_heads = 2;  // one workgroup per kv head: grid x = kv heads
  c.head_size = 128;
  c.lens = {0, 1, 31, 32, 33, 301, 1000};
  std::mt19937 rng(3);
  const DecodeInputs in = make_decode_inputs(c, rng);
  for (const SplitMode split : {SplitMode::single_pass, SplitMode::split}) {
    DecodeOptions o = with_kernel({});
    o.split = split;
    o.partition_tokens = split == SplitMode::split ? 256 : 0;
    o.timeline = true;
    SCOPED_TRACE(split == SplitMode::split ? "split" : "one pass");
    const auto plan_or = plan_or_refused(decode_shape_of(in), o);
    ASSERT_TRUE(plan_or);
    const DecodePlan& plan = *plan_or;
    const DecodeResult got = run(in, o);
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

// An E4M3 NaN byte (S.1111.111, either sign) is NaN on every kernel (the contract leaves NaN
// inputs open; the kernels let them through). The matrix kernel probes the raw bytes and finds
// where a NaN is after its loop (decode_coopmat_kernel.glsl, "fp8 NaN"): a NaN key makes its
// heads' outputs NaN, a NaN value the outputs of its dim, in a full unit, in a unit with masked
// tokens and in a later unit of another subgroup, one pass and split (the scalar kernel's split
// is not held to this); NaN bytes in the masked slots past a length change nothing, and every
// other output matches the reference.
TEST_P(DecodeTest, Fp8E4m3NanIsNan) {
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
  nan_value(0, 7, 1, 9, 0xff);     // full unit: dim 9 of heads 2 and 3...
  nan_value(0, 7, 1, 10, 0x7e);    // ...and not dim 10 (a finite byte above the NaN, which a
                                   // probe's carry may flip where a word holds 4 dims: nhd, hnd)
  nan_key(1, 100, 0, 62, 0xff);    // unit 3 of 32 tokens (not the first subgroup's): heads 0 and 1
  nan_value(1, 290, 1, 20, 0x7f);  // the last unit (masked tokens past 300): dim 20 of heads 2 and 3
  nan_value(1, 290, 1, 21, 0xfe);  // not dim 21
  nan_key(1, 302, 1, 1, 0x7f);     // past the length: nothing
  nan_value(1, 301, 0, 3, 0xff);   // past the length: nothing
  auto nan_expected = [&](int64_t seq, int64_t head, int64_t dim) {
    return seq == 0 ? head < 2 || dim == 9 : head < 2 || dim == 20;
  };
  const DecodeParams params = default_params(c);
  const auto want = reference::decode_attention(in, {}, params);
  std::vector<SplitMode> splits{SplitMode::single_pass};
  if (kernel() != DecodeKernel::scalar) splits.push_back(SplitMode::split);
  for (const SplitMode split : splits) {
    DecodeOptions o = with_kernel({});
    o.split = split;
    o.partition_tokens = split == SplitMode::split ? 256 : 0;
    const char* name = split == SplitMode::split ? "split" : "one pass";
    ASSERT_TRUE(plan_or_refused(decode_shape_of(in), o));
    expect_nan_where(c, run(in, o, params), want, nan_expected, name);
  }
}

// Head size 512: NaN bytes of values in the upper dims (the matrix kernel's NaN rows past its
// first 32-bit word) make exactly their dims NaN, and a NaN key its heads, on every layout.
TEST_P(DecodeTest, Fp8E4m3NanIsNanAtHeadSize512) {
  DecodeCase c;
  c.cache_dtype = DType::fp8_e4m3;
  c.head_size = 512;
  c.heads = 4;
  c.kv_heads = 2;
  c.lens = {40, 70};
  std::mt19937 rng(13);
  DecodeInputs in = make_decode_inputs(c, rng);
  auto at = [&](int64_t seq, int64_t token) { return block_of_token(c, in, seq, token); };
  in.value_cache.as<uint8_t>()[value_cache_index(c, at(0, 7), 1, 300, 7 % c.block_size)] = 0xff;    // seq 0: dim 300 of heads 2, 3
  in.value_cache.as<uint8_t>()[value_cache_index(c, at(1, 60), 0, 511, 60 % c.block_size)] = 0x7f;  // seq 1: dim 511 of heads 0, 1
  in.key_cache.as<uint8_t>()[key_cache_index(c, at(1, 3), 1, 400, 3 % c.block_size)] = 0xff;       // seq 1: heads 2, 3
  auto nan_expected = [&](int64_t seq, int64_t head, int64_t dim) {
    return seq == 0 ? head >= 2 && dim == 300 : head >= 2 || dim == 511;
  };
  const DecodeParams params = default_params(c);
  const auto want = reference::decode_attention(in, {}, params);
  const DecodeOptions o = with_kernel({});
  if (!plan_or_refused(decode_shape_of(in), o)) return;
  expect_nan_where(c, run(in, o, params), want, nan_expected, "one pass");
}

// A pool past maxStorageBufferRange (128 MiB on lavapipe) is read through device addresses;
// the tables point at its last blocks, past the range.
TEST_P(DecodeTest, CachePastTheStorageBufferRange) {
  const auto& dev = ctx().device_info();
  if (dev.max_storage_buffer_range > (uint64_t(1) << 30)) GTEST_SKIP() << "a pool past this device's range is too large for a test";
  DecodeCase c;
  c.query_dtype = c.cache_dtype = DType::f32;
  c.heads = 4;
  c.kv_heads = 2;
  c.head_size = 128;
  c.block_size = 16;
  c.lens = {1, 17, 250};
  const uint64_t block_bytes = uint64_t(c.kv_heads) * c.head_size * c.block_size * 4;
  c.extra_blocks = uint32_t(dev.max_storage_buffer_range / block_bytes) + 64;
  std::mt19937 rng(31);
  DecodeInputs in = make_decode_inputs(c, rng);
  const auto plan = plan_or_refused(decode_shape_of(in), {});
  if (!plan) return;
  EXPECT_TRUE(plan->data().choice().address) << plan->describe();
  const int32_t N = int32_t(in.key_cache.shape()[0]);
  const int64_t M = in.block_tables.shape()[1];
  int32_t next = N - 1;
  for (size_t s = 0; s < c.lens.size(); ++s)
    for (int64_t j = 0; j < (c.lens[s] + c.block_size - 1) / c.block_size; ++j) in.block_tables.as<int32_t>()[s * M + j] = next--;
  ASSERT_GT(uint64_t(next) * block_bytes, dev.max_storage_buffer_range);
  const auto got = run(in, with_kernel({}));
  EXPECT_LE(max_abs_diff(got.output, reference::decode_attention(in).output), tolerance(DType::f32, DType::f32));
}

// Pools past 4 GiB, read by device address: every block is reached from its own 64-bit start,
// also with blocks of 2 tokens, whose value loads are 4-byte words (counted from the pool's
// start, their index would pass 32 bits just past 4 GiB). Needs a device whose storage-buffer
// range is a few GiB and the memory for two such pools (the H200 here; lavapipe's 128 MiB
// range is covered by CachePastTheStorageBufferRange).
TEST_P(DecodeTest, AddressVariantReachesBlocksPastFourGibibytes) {
  const auto& dev = ctx().device_info();
  if (!dev.buffer_device_address || dev.max_storage_buffer_range < (uint64_t(1) << 31) ||
      dev.max_storage_buffer_range >= (uint64_t(1) << 33) || dev.device_local_bytes < (uint64_t(24) << 30))
    GTEST_SKIP() << "needs two pools past 4 GiB read by device address, on a device with a few GiB of storage-buffer range";
  // One pool is one allocation: past maxMemoryAllocationSize it is refused (Context::create_buffer),
  // as it is on NVIDIA, whose allocations are promised up to 2 MiB below 4 GiB.
  if (dev.max_memory_allocation_size != 0 && dev.max_memory_allocation_size <= (uint64_t(1) << 32) + (uint64_t(1) << 20))
    GTEST_SKIP() << "a pool past 4 GiB is one allocation past this device's maxMemoryAllocationSize of "
                 << dev.max_memory_allocation_size << " bytes";
  for (const uint32_t block_size : {2u, 16u}) {
    DecodeCase c;
    c.heads = 4;
    c.kv_heads = 2;
    c.head_size = 128;
    c.block_size = block_size;
    c.lens = {1, 3, 250, 33};
    SCOPED_TRACE(c.str());
    std::mt19937 rng(41);
    const DecodeInputs small = with_layout(make_decode_inputs(c, rng), layout());
    // The same blocks, moved past 4 GiB of each pool; the blocks before them stay zero.
    const size_t block_bytes = size_t(c.kv_heads) * c.head_size * c.block_size * 2;
    const int64_t first = int64_t((uint64_t(1) << 32) / block_bytes) + 8;
    const int64_t used = small.key_cache.shape()[0];
    DecodeShape shape = decode_shape_of(small);
    shape.num_blocks = uint32_t(first + used);
    const auto plan = plan_or_refused(shape, {});  // before allocating: the matrix kernel reads no cache by address
    if (!plan) continue;
    ASSERT_TRUE(plan->data().choice().address) << plan->describe();
    DecodeInputs in = small;
    std::vector<int64_t> key_dims = small.key_cache.shape().dims(), value_dims = small.value_cache.shape().dims();
    key_dims[0] = value_dims[0] = first + used;
    in.key_cache = HostTensor(DType::f16, Shape(key_dims));
    in.value_cache = HostTensor(DType::f16, Shape(value_dims));
    std::memcpy(static_cast<char*>(in.key_cache.data()) + first * block_bytes, small.key_cache.data(), small.key_cache.bytes());
    std::memcpy(static_cast<char*>(in.value_cache.data()) + first * block_bytes, small.value_cache.data(), small.value_cache.bytes());
    for (int64_t i = 0; i < in.block_tables.numel(); ++i) in.block_tables.as<int32_t>()[i] += int32_t(first);
    const auto got = decode_attention(ctx(), in, with_kernel({}));  // `in` is in this variant's layout already
    EXPECT_LE(max_abs_diff(got.output, reference::decode_attention(in).output), tolerance(DType::f16, DType::f16));
  }
}

// ---- head slices (DecodeTuning::slices): groups above 8 heads read their KV once ----

// A GQA group of more than 8 heads in one workgroup of slices of 8 heads (the matrix kernel,
// with slices=1): groups of 12, 16, 32 and 40 (two workgroups of 20) heads, MQA and two kv
// heads, every dtype pair, head sizes 64 to 256, blocks of 8 to 32, and on them one pass, a
// window with a soft cap, splits merged by the reduce pass and in the dispatch, longest first
// with ALiBi, sinks and LSE: the reference's outputs, and every plan with slices.
TEST_P(DecodeTest, HeadSlicesMatchTheReference) {
  if (!matrix_family() || layout() != KvLayout::vllm)
    GTEST_SKIP() << "head slices are the matrix kernel's, on the vllm layout's modules";
  const DecodeTuningScope slices(ctx(), "slices=1");
  const MatrixRun runs[] = {{DType::f16, DType::f16, 128, 16, 16, 1},       {DType::f16, DType::f16, 64, 8, 32, 1},
                            {DType::bf16, DType::bf16, 128, 32, 24, 2},     {DType::f16, DType::bf16, 256, 16, 32, 2},
                            {DType::bf16, DType::f16, 64, 16, 40, 1},       {DType::f16, DType::fp8_e4m3, 128, 16, 32, 1},
                            {DType::f16, DType::fp8_e5m2, 64, 8, 32, 2},    {DType::bf16, DType::fp8_e4m3, 128, 32, 12, 1}};
  uint32_t seed = 300;
  for (const MatrixRun& r : runs) {
    const uint32_t B = r.block_size;
    for (const auto& [name, v, o, p, lse] : option_sets(case_of(r, {0, 1, 7, 31, 32, 33, B - 1, B + 1, 301, 1000}),
                                                  with_kernel({}), false)) {
      SCOPED_TRACE(v.str() + ", " + name);
      std::mt19937 rng(++seed);
      const DecodeInputs in = make_decode_inputs(v, rng);
      const auto plan = plan_or_refused(shape_for(in, p, lse), o);
      ASSERT_TRUE(plan);
      EXPECT_GT(plan->data().choice().head_slices, 1u) << plan->describe();
      const DecodeResult want = reference::decode_attention(in, o, p, lse);
      expect_decode_near(decode_attention(ctx(), in, o, p, lse), want, tolerance(v.query_dtype, v.cache_dtype), lse, v.str());
    }
  }
}

// E4M3 NaN bytes with head slices (32 heads on 2 kv heads): each slice's subgroups find them
// after the loop over their own units: a NaN key makes its kv head's 16 heads NaN, a NaN value
// its dim of the other 16; one pass and split.
TEST_P(DecodeTest, HeadSlicesFp8E4m3NanIsNan) {
  if (!matrix_family() || layout() != KvLayout::vllm)
    GTEST_SKIP() << "head slices are the matrix kernel's, on the vllm layout's modules";
  const DecodeTuningScope slices(ctx(), "slices=1");
  DecodeCase c;
  c.cache_dtype = DType::fp8_e4m3;
  c.head_size = 64;
  c.heads = 32;
  c.kv_heads = 2;
  c.lens = {40, 300};
  std::mt19937 rng(12);
  DecodeInputs in = make_decode_inputs(c, rng);
  auto at = [&](int64_t seq, int64_t token) { return block_of_token(c, in, seq, token); };
  in.key_cache.as<uint8_t>()[key_cache_index(c, at(0, 3), 0, 5, 3)] = 0x7f;                   // seq 0: heads 0..15
  in.value_cache.as<uint8_t>()[value_cache_index(c, at(1, 290), 1, 20, 290 % c.block_size)] = 0xff;  // seq 1: dim 20 of heads 16..31
  auto nan_expected = [&](int64_t seq, int64_t head, int64_t dim) { return seq == 0 ? head < 16 : head >= 16 && dim == 20; };
  const DecodeParams params = default_params(c);
  const auto want = reference::decode_attention(in, {}, params);
  for (const SplitMode split : {SplitMode::single_pass, SplitMode::split}) {
    DecodeOptions o = with_kernel({});
    o.split = split;
    o.partition_tokens = split == SplitMode::split ? 256 : 0;
    const auto plan = plan_or_refused(decode_shape_of(in), o);
    ASSERT_TRUE(plan);
    EXPECT_GT(plan->data().choice().head_slices, 1u) << plan->describe();
    expect_nan_where(c, decode_attention(ctx(), in, o, params), want, nan_expected,
                     split == SplitMode::split ? "split" : "one pass");
  }
}

// ---- the token-major cache layouts (KvLayout nhd and hnd) ----

// The tests' re-laying of caches (with_layout, support/decode_case.hpp) puts every element where
// the layout's gather (the reference's, which reads each layout) finds it: the rows gathered from
// the re-laid caches are the vllm caches' rows, for f16, bf16 and fp8 caches.
TEST(DecodeLayoutsHelper, RelaidCachesGatherTheSameRows) {
  for (const DType cache : {DType::f16, DType::bf16, DType::fp8_e4m3}) {
    DecodeCase c;
    c.cache_dtype = cache;
    c.head_size = 64;
    c.block_size = 8;
    c.lens = {1, 17, 40};
    std::mt19937 rng(5);
    const DecodeInputs in = make_decode_inputs(c, rng);
    HostTensor starts(DType::i32, Shape{4});
    for (int i = 0, at = 0; i < 4; ++i) {
      starts.as<int32_t>()[i] = at;
      if (i < 3) at += int(c.lens[size_t(i)]);
    }
    const DType out = cache == DType::bf16 ? DType::bf16 : DType::f32;
    auto typed = [&](const HostTensor& t) {  // fp8 bytes (u8 in the inputs) as the cache dtype, for gather
      HostTensor copy(cache, t.shape());
      std::memcpy(copy.data(), t.data(), t.bytes());
      return copy;
    };
    const auto want =
        reference::gather(typed(in.key_cache), typed(in.value_cache), in.block_tables, starts, out, {}, KvLayout::vllm);
    for (const KvLayout layout : {KvLayout::nhd, KvLayout::hnd}) {
      SCOPED_TRACE(std::string(kv_layout_name(layout)) + " " + c.str());
      const DecodeInputs laid = with_layout(in, layout);
      const auto got =
          reference::gather(typed(laid.key_cache), typed(laid.value_cache), in.block_tables, starts, out, {}, layout);
      ASSERT_EQ(got.key.bytes(), want.key.bytes());
      EXPECT_EQ(std::memcmp(got.key.data(), want.key.data(), want.key.bytes()), 0);
      EXPECT_EQ(std::memcmp(got.value.data(), want.value.data(), want.value.bytes()), 0);
    }
  }
}

// The matrix kernel's token-major modules: every dtype pair it takes, head sizes 64 to 256,
// blocks of 8 to 32, MHA to a group of 32 (sliced over workgroups), the lengths around the unit
// and block edges, and on them one pass, a window with a soft cap, splits merged by the reduce
// pass and in the dispatch, longest first, ALiBi with sinks. (The scalar kernel's layouts run
// the whole suite as its scalar_nhd and scalar_hnd variants.)
TEST_P(DecodeTest, TokenMajorLayouts) {
  if (!matrix_family() || layout() == KvLayout::vllm)
    GTEST_SKIP() << "the matrix kernel's nhd and hnd modules (the other variants run the rest of the suite)";
  const MatrixRun runs[] = {{DType::f16, DType::f16, 128, 16, 8, 2},       {DType::f16, DType::f16, 64, 8, 4, 4},
                            {DType::bf16, DType::bf16, 128, 32, 16, 2},    {DType::f16, DType::bf16, 256, 16, 6, 2},
                            {DType::bf16, DType::f16, 64, 16, 32, 1},      {DType::f16, DType::fp8_e4m3, 128, 16, 8, 1},
                            {DType::f16, DType::fp8_e5m2, 64, 8, 4, 2},    {DType::bf16, DType::fp8_e4m3, 256, 32, 8, 2}};
  uint32_t seed = 100;
  for (const MatrixRun& r : runs) {
    const uint32_t B = r.block_size;
    for (const auto& [name, v, o, p, lse] : option_sets(case_of(r, {0, 1, 7, 8, 9, 31, 32, 33, B - 1, B + 1, 301}), {}, true)) {
      SCOPED_TRACE(v.str() + ", " + name);
      check(v, o, p, ++seed, lse);
    }
  }
}

// Block ids and lengths that only the device sees: skipped or clamped, flagged, nothing else read.
TEST_P(DecodeTest, DeviceSideBadIndicesAreFlaggedNotFollowed) {
  expect_bad_indices_flagged_not_followed(ctx(), with_kernel({}), {}, layout());
}

INSTANTIATE_TEST_SUITE_P(Kernels, DecodeTest, ::testing::ValuesIn(kDecodeVariants), decode_kernel_param_name);

}  // namespace
}  // namespace vkpaged::test
