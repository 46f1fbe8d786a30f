// Decode attention on the device against the CPU reference: shapes, ragged lengths, dtypes,
// features, both paths (one pass and split), and the refusals of the contract.
#include <gtest/gtest.h>

#include <cstring>

#include "support/decode_bad_indices.hpp"
#include "support/decode_bf16_range.hpp"
#include "support/decode_case.hpp"
#include "support/decode_check.hpp"
#include "support/expect_error.hpp"
#include "support/test_context.hpp"
#include "vkpaged/error.hpp"
#include "vkpaged/reference.hpp"

namespace vkpaged::test {
namespace {

class DecodeTest : public GpuTest {
 protected:
  // Runs the case on the device and the reference; checks output (and LSE) within tolerance.
  void check(const DecodeCase& c, DecodeOptions options, uint32_t seed = 1, bool lse = false) {
    std::mt19937 rng(seed);
    const DecodeInputs in = make_decode_inputs(c, rng);
    const DecodeResult want = reference::decode_attention(in, options, lse);
    const DecodeResult got = decode_attention(ctx(), in, options, lse);
    expect_decode_near(got, want, tolerance(c.query_dtype, c.cache_dtype), lse, c.str());
  }
};

TEST_F(DecodeTest, RaggedLengthsAroundBlockEdges) {
  for (uint32_t B : {8u, 16u, 32u}) {
    DecodeCase c;
    c.block_size = B;
    c.lens = {0, 1, B - 1, B, B + 1, 2 * B + 3, 301};
    for (DType t : {DType::f32, DType::f16}) {
      c.query_dtype = c.cache_dtype = t;
      check(c, default_options(c));
    }
  }
}

TEST_F(DecodeTest, HeadSizesAndGqaRatios) {
  for (uint32_t D : {64u, 80u, 96u, 112u, 128u, 256u}) {
    for (uint32_t ratio : {1u, 4u}) {
      DecodeCase c;
      c.head_size = D;
      c.kv_heads = 2;
      c.heads = 2 * ratio;
      c.lens = {5, 40, 129};
      check(c, default_options(c), D + ratio);
    }
  }
}

TEST_F(DecodeTest, EveryBlockSize) {
  for (uint32_t B : {1u, 2u, 4u, 8u, 16u, 32u, 64u, 128u}) {
    DecodeCase c;
    c.block_size = B;
    c.lens = {1, B + 1, 3 * B + 2};
    for (DType t : {DType::f32, DType::f16}) {
      c.query_dtype = c.cache_dtype = t;
      check(c, default_options(c), B);
    }
  }
}

TEST_F(DecodeTest, OddHeadSizesAndLargeGroups) {
  for (uint32_t D : {32u, 40u, 72u, 168u, 512u}) {
    DecodeCase c;
    c.head_size = D;
    c.lens = {3, 70};
    check(c, default_options(c), D);
  }
  DecodeCase mqa;  // 12 query heads on one kv head: more than one workgroup per kv head
  mqa.heads = 12;
  mqa.kv_heads = 1;
  mqa.lens = {33, 200};
  check(mqa, default_options(mqa));
}

TEST_F(DecodeTest, Bf16AndFp8Caches) {
  DecodeCase c;
  c.lens = {0, 1, 15, 16, 17, 250};
  c.query_dtype = c.cache_dtype = DType::bf16;
  check(c, default_options(c));
  for (DType fp8 : {DType::fp8_e4m3, DType::fp8_e5m2}) {
    c.query_dtype = DType::f16;
    c.cache_dtype = fp8;
    c.head_size = 128;  // a multiple of x = 16
    check(c, default_options(c));
    c.query_dtype = DType::f32;
    check(c, default_options(c));
  }
}

// The scalar kernel computes bf16 in f32: values from 2^-40 to 2^40 need no rescaling there
// (the matrix kernel's rescaling has its own test in test_decode_matrix.cpp).
TEST_F(DecodeTest, Bf16FarOutsideTheF16Range) {
  DecodeOptions o;
  o.kernel = DecodeKernel::scalar;
  expect_bf16_far_outside_f16_range_kept(ctx(), o);
  o.split = SplitMode::split;
  o.partition_tokens = 256;
  expect_bf16_far_outside_f16_range_kept(ctx(), o);
}

TEST_F(DecodeTest, FeaturesAloneAndCombined) {
  for (const FeatureMix& m : feature_mixes()) check(m.c, m.options, m.seed, /*lse=*/true);
}

TEST_F(DecodeTest, SlidingWindowEdges) {
  DecodeCase c;
  c.lens = {0, 1, 31, 32, 33, 64, 65, 600};
  for (uint32_t w : {1u, 16u, 32u, 33u, 1000u}) {
    DecodeOptions o = default_options(c);
    o.sliding_window = w;
    check(c, o, w);
  }
}

TEST_F(DecodeTest, SplitMatchesSinglePass) {
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
    DecodeOptions split = single;
    split.split = SplitMode::split;
    split.partition_tokens = 256;  // up to 12 partitions
    std::mt19937 rng(7);
    const DecodeInputs in = make_decode_inputs(c, rng);
    const auto a = decode_attention(ctx(), in, single, true);
    const auto b = decode_attention(ctx(), in, split, true);
    const auto ref = reference::decode_attention(in, single, true);
    const double tol = tolerance(c.query_dtype, c.cache_dtype);
    EXPECT_LE(max_abs_diff(a.output, b.output), tol);
    EXPECT_LE(max_abs_diff(b.output, ref.output), tol);
    EXPECT_LE(max_abs_diff(b.lse, ref.lse), 1e-3);
  }
}

// DecodeMerge::in_dispatch is for the matrix kernel: a split on the scalar kernel keeps its
// reduce pass, needs no counters and gives the same outputs, bit for bit.
TEST_F(DecodeTest, MergeInDispatchLeavesTheScalarKernelsSplitAsItIs) {
  DecodeCase c;
  c.heads = 8;
  c.kv_heads = 2;
  c.lens = {0, 1, 255, 256, 257, 1500};
  c.sinks = true;
  DecodeOptions reduce_pass = default_options(c);
  reduce_pass.kernel = DecodeKernel::scalar;
  reduce_pass.split = SplitMode::split;
  reduce_pass.partition_tokens = 256;
  DecodeOptions in_dispatch = reduce_pass;
  in_dispatch.merge = DecodeMerge::in_dispatch;
  std::mt19937 rng(8);
  const DecodeInputs in = make_decode_inputs(c, rng);
  const DecodePlan plan = DecodePlan::create(ctx(), decode_shape_of(in, true), in_dispatch);
  EXPECT_TRUE(plan.split());
  EXPECT_EQ(plan.merge_counter_bytes(), 0u);
  EXPECT_EQ(plan.describe().find("merged in the dispatch"), std::string::npos) << plan.describe();
  const auto a = decode_attention(ctx(), in, reduce_pass, true);
  const auto b = decode_attention(ctx(), in, in_dispatch, true);
  ASSERT_EQ(a.output.bytes(), b.output.bytes());
  EXPECT_EQ(std::memcmp(a.output.data(), b.output.data(), a.output.bytes()), 0);
  EXPECT_LE(max_abs_diff(b.output, reference::decode_attention(in, in_dispatch, true).output),
            tolerance(c.query_dtype, c.cache_dtype));
}

// The reduce pass gives each invocation a slice of the partitions and merges them 8 at a time
// (decode_reduce.comp): enough partitions for several rounds per slice, counts that are not a
// multiple of the slices, and a window that starts the range part-way in.
TEST_F(DecodeTest, SplitIntoManyPartitionsMatchesTheReference) {
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
      DecodeOptions split = default_options(c);
      split.sliding_window = window;
      split.split = SplitMode::split;
      split.partition_tokens = 256;  // 47 partitions for the longest sequence
      std::mt19937 rng(11);
      const DecodeInputs in = make_decode_inputs(c, rng);
      const auto got = decode_attention(ctx(), in, split, true);
      const auto ref = reference::decode_attention(in, split, true);
      EXPECT_LE(max_abs_diff(got.output, ref.output), tolerance(c.query_dtype, c.cache_dtype));
      EXPECT_LE(max_abs_diff(got.lse, ref.lse), 1e-3);
    }
  }
}

TEST_F(DecodeTest, PlanChoosesSplitForFewLongSequences) {
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

// A pool past maxStorageBufferRange (128 MiB on lavapipe) is read through device addresses;
// the tables point at its last blocks, past the range.
TEST_F(DecodeTest, PlanSplitsLongContextsOfAFullBatchOnTheScalarKernel) {
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
  check(c, default_options(c), 5, true);
}

TEST_F(DecodeTest, CachePastTheStorageBufferRange) {
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
  const int32_t N = int32_t(in.key_cache.shape()[0]);
  const int64_t M = in.block_tables.shape()[1];
  int32_t next = N - 1;
  for (size_t s = 0; s < c.lens.size(); ++s)
    for (int64_t j = 0; j < (c.lens[s] + c.block_size - 1) / c.block_size; ++j) in.block_tables.as<int32_t>()[s * M + j] = next--;
  ASSERT_GT(uint64_t(next) * block_bytes, dev.max_storage_buffer_range);
  const auto got = decode_attention(ctx(), in);
  EXPECT_NE(DecodePlan::create(ctx(), decode_shape_of(in)).describe().find("device address"), std::string::npos);
  EXPECT_LE(max_abs_diff(got.output, reference::decode_attention(in).output), tolerance(DType::f32, DType::f32));
}

// ---- refusals: every message names the argument and the value ----

// Pools past 4 GiB, read by device address: every block is reached from its own 64-bit start,
// also with blocks of 2 tokens, whose value loads are 4-byte words (counted from the pool's
// start, their index would pass 32 bits just past 4 GiB). Needs a device whose storage-buffer
// range is a few GiB and the memory for two such pools (the H200 here; lavapipe's 128 MiB
// range is covered by CachePastTheStorageBufferRange).
TEST_F(DecodeTest, AddressVariantReachesBlocksPastFourGibibytes) {
  const auto& dev = ctx().device_info();
  if (!dev.buffer_device_address || dev.max_storage_buffer_range < (uint64_t(1) << 31) ||
      dev.max_storage_buffer_range >= (uint64_t(1) << 33) || dev.device_local_bytes < (uint64_t(24) << 30))
    GTEST_SKIP() << "needs two pools past 4 GiB read by device address, on a device with a few GiB of storage-buffer range";
  for (const uint32_t block_size : {2u, 16u}) {
    DecodeCase c;
    c.heads = 4;
    c.kv_heads = 2;
    c.head_size = 128;
    c.block_size = block_size;
    c.lens = {1, 3, 250, 33};
    SCOPED_TRACE(c.str());
    std::mt19937 rng(41);
    const DecodeInputs small = make_decode_inputs(c, rng);
    // The same blocks, moved past 4 GiB of each pool; the blocks before them stay zero.
    const size_t block_bytes = size_t(c.kv_heads) * c.head_size * c.block_size * 2;
    const int64_t first = int64_t((uint64_t(1) << 32) / block_bytes) + 8;
    const int64_t used = small.key_cache.shape()[0];
    DecodeInputs in = small;
    std::vector<int64_t> key_dims = small.key_cache.shape().dims(), value_dims = small.value_cache.shape().dims();
    key_dims[0] = value_dims[0] = first + used;
    in.key_cache = HostTensor(DType::f16, Shape(key_dims));
    in.value_cache = HostTensor(DType::f16, Shape(value_dims));
    std::memcpy(static_cast<char*>(in.key_cache.data()) + first * block_bytes, small.key_cache.data(), small.key_cache.bytes());
    std::memcpy(static_cast<char*>(in.value_cache.data()) + first * block_bytes, small.value_cache.data(), small.value_cache.bytes());
    for (int64_t i = 0; i < in.block_tables.numel(); ++i) in.block_tables.as<int32_t>()[i] += int32_t(first);
    ASSERT_NE(DecodePlan::create(ctx(), decode_shape_of(in)).describe().find("device address"), std::string::npos);
    const auto got = decode_attention(ctx(), in);
    EXPECT_LE(max_abs_diff(got.output, reference::decode_attention(in).output), tolerance(DType::f16, DType::f16));
  }
}

TEST_F(DecodeTest, RefusesBadShapes) {
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
  o.softcap = -1.0f;
  expect_refused([&] { DecodePlan::create(ctx(), s, o); }, "softcap: -1");
  o = {};
  o.partition_tokens = 100;
  expect_refused([&] { DecodePlan::create(ctx(), s, o); }, "partition_tokens: 100");
}

TEST_F(DecodeTest, RefusesViewsThatDoNotFit) {
  DecodeCase c;
  std::mt19937 rng(4);
  const DecodeInputs in = make_decode_inputs(c, rng);
  const DecodeShape s = decode_shape_of(in);
  const auto plan = DecodePlan::create(ctx(), s);
  auto small = ctx().create_buffer(64);
  auto big = ctx().create_buffer(1 << 20);
  DecodeViews v;
  v.query = big.tensor(DType::f16, in.query.shape());
  v.key_cache = big.tensor(DType::f16, in.key_cache.shape());
  v.value_cache = big.tensor(DType::f16, in.value_cache.shape());
  v.block_tables = big.tensor(DType::i32, in.block_tables.shape());
  v.context_lens = big.tensor(DType::i32, in.context_lens.shape());
  v.output = big.tensor(DType::f16, in.query.shape());
  v.output.memory = small.view(0, 64);
  expect_refused([&] { ctx().run_and_wait([&](VkCommandBuffer cmd) { record_decode(ctx(), cmd, plan, v); }); },
                 "output: buffer view of 64 bytes is too small");
  v.output = big.tensor(DType::f16, in.query.shape());
  v.key_cache.memory.offset = 8;
  expect_refused([&] { ctx().run_and_wait([&](VkCommandBuffer cmd) { record_decode(ctx(), cmd, plan, v); }); },
                 "key_cache: offset 8 is not a multiple of 16");
  v.key_cache = big.tensor(DType::f32, in.key_cache.shape());
  expect_refused([&] { ctx().run_and_wait([&](VkCommandBuffer cmd) { record_decode(ctx(), cmd, plan, v); }); },
                 "key_cache: dtype f32 is not f16");
}

// Block ids and lengths that only the device sees: skipped or clamped, flagged, nothing else read.
TEST_F(DecodeTest, DeviceSideBadIndicesAreFlaggedNotFollowed) {
  expect_bad_indices_flagged_not_followed(ctx(), DecodeOptions{});
}

}  // namespace
}  // namespace vkpaged::test
