// SPDX-License-Identifier: Apache-2.0
// Multi-query attention on the device against the CPU reference, on every attention kernel
// (support/attention_kernels.hpp): prefill from nothing, chunks after a cached prefix,
// speculative verification with tree masks, mixed engine steps, every layout and dtype pair,
// split and one pass, LSE, the non-finite rule, and device-side values the shaders must flag.
// Cases a kernel cannot run are skipped with the reason. Shapes stay small: lavapipe runs the
// shaders on the CPU.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstring>
#include <limits>

#include "support/attention_case.hpp"
#include "support/attention_kernels.hpp"
#include "support/decode_case.hpp"
#include "support/decode_check.hpp"
#include "support/expect_error.hpp"
#include "support/pool_window.hpp"
#include "support/test_context.hpp"
#include "ops/attention_validation.hpp"
#include "vkpaged/reference.hpp"

namespace vkpaged::test {
namespace {

// Each test runs on the kernel of its parameter, whatever the batch (automatic would send
// batches of single tokens to the decode kernels).
using AttentionTest = AttentionKernelTest;

TEST_P(AttentionTest, PrefillWithoutCachedPrefix) {
  AttentionCase c;
  c.lens = {1, 17, 40};
  c.new_tokens = {1, 17, 40};  // q = L: whole prompts
  check(c, default_params(c), options());
  c.query_dtype = c.cache_dtype = DType::f32;
  c.heads = c.kv_heads = 3;  // MHA
  check(c, default_params(c), options(), 2);
}

TEST_P(AttentionTest, OneTokenAfterALongPrefix) {
  AttentionCase c;
  c.lens = {300, 1, 161};
  c.new_tokens = {1, 1, 2};
  check(c, default_params(c), options());
}

TEST_P(AttentionTest, ChunksThatStartOrEndMidBlock) {
  AttentionCase c;
  c.block_size = 8;
  // Cached prefixes of 0, 1, B - 1, B and B + 1 positions, chunks that cross block edges.
  c.new_tokens = {3, 8, 9, 13, 5};
  c.lens = {0 + 3, 1 + 8, 7 + 9, 8 + 13, 9 + 5};
  check(c, default_params(c), options());
}

TEST_P(AttentionTest, WindowsShorterThanTheChunk) {
  AttentionCase c;
  c.lens = {30, 12, 70};
  c.new_tokens = {20, 12, 6};
  c.sliding_window = 5;
  c.alibi = true;
  AttentionParams p = default_params(c);
  p.softcap = 2.0f;
  check(c, p, options());
  c.sliding_window = 1;  // each token sees itself only
  check(c, p, options(), 2);
}

TEST_P(AttentionTest, TreeMasksThatHideAndShow) {
  AttentionCase c;
  c.lens = {50, 9, 20};
  c.new_tokens = {6, 9, 20};
  c.tree_mask = TreeMask::tree;  // draft trees; the 20-token chunk causal
  check(c, default_params(c), options());
  c.tree_mask = TreeMask::random;  // tokens that hide themselves and see later ones
  c.sinks = true;
  c.sliding_window = 4;  // shorter than the new tokens: it hides early new tokens the mask shows
  check(c, default_params(c), options(), 2);
}

TEST_P(AttentionTest, SinksWithEmptyRanges) {
  AttentionCase c;
  c.lens = {4, 10};
  c.new_tokens = {4, 3};
  c.tree_mask = TreeMask::random;
  for (bool sinks : {false, true}) {
    c.sinks = sinks;
    std::mt19937 rng(3);
    AttentionInputs in = make_attention_inputs(c, rng);
    // Request 0 has no cached prefix and a mask that hides everything: empty ranges, whose
    // outputs are 0 and whose LSE is -inf, or the sink's logit with sinks.
    for (int i = 0; i < 16; ++i) in.tree_mask.as<uint8_t>()[i] = 0;
    check_inputs(c, in, default_params(c), options());
    const auto want = reference::batch_attention(in, default_params(c), true);
    EXPECT_EQ(want.output.get(0), 0.0);
    if (sinks) EXPECT_FLOAT_EQ(float(want.lse.get(0)), in.sinks.as<float>()[0]);
    else EXPECT_TRUE(std::isinf(want.lse.get(0)));
  }
}

TEST_P(AttentionTest, MixedEngineStep) {
  // Decode requests, a chunk after a cached prefix, a speculative request and a whole prompt
  // in one call.
  AttentionCase c;
  c.heads = 8;
  c.kv_heads = 2;
  c.lens = {33, 1, 90, 57, 12};
  c.new_tokens = {1, 1, 24, 5, 12};
  check(c, default_params(c), options());
  c.tree_mask = TreeMask::tree;  // decode rows see themselves, the chunk is causal, the draft a tree
  c.alibi = c.sinks = true;
  check(c, default_params(c), options(), 2);
}

TEST_P(AttentionTest, Fp8CachesWithScales) {
  for (DType cache : {DType::fp8_e4m3, DType::fp8_e5m2}) {
    AttentionCase c;
    c.cache_dtype = cache;
    c.lens = {40, 21};
    c.new_tokens = {7, 21};
    c.fp8_scale = cache == DType::fp8_e4m3 ? 0.01f : 0.2f;
    check(c, default_params(c), options());
    c.query_dtype = DType::bf16;
    c.layout = KvLayout::hnd;
    check(c, default_params(c), options(), 2);
  }
}

TEST_P(AttentionTest, EveryLayoutAndDtypePair) {
  for (KvLayout layout : {KvLayout::vllm, KvLayout::nhd, KvLayout::hnd})
    for (DType query : {DType::f32, DType::f16, DType::bf16})
      for (DType cache : {DType::f32, DType::f16, DType::bf16, DType::fp8_e4m3, DType::fp8_e5m2}) {
        AttentionCase c;
        c.heads = 2;
        c.kv_heads = 1;
        c.layout = layout;
        c.query_dtype = query;
        c.cache_dtype = cache;
        c.lens = {19, 6};
        c.new_tokens = {4, 6};
        check(c, default_params(c), options(SplitMode::single_pass), uint32_t(layout) * 16 + uint32_t(query) * 5 + uint32_t(cache));
      }
}

TEST_P(AttentionTest, HeadSizesBlockSizesAndGqaRatios) {
  for (uint32_t D : {40u, 64u, 72u, 96u, 128u, 256u}) {
    AttentionCase c;
    c.head_size = D;
    c.lens = {9, 30};
    c.new_tokens = {9, 3};
    check(c, default_params(c), options(), D);
  }
  for (uint32_t B : {1u, 2u, 4u, 32u, 64u, 128u}) {
    AttentionCase c;
    c.block_size = B;
    c.lens = {B + 1, 2 * B + 3};
    c.new_tokens = {2, 5};
    c.layout = B % 2 ? KvLayout::nhd : KvLayout::vllm;
    check(c, default_params(c), options(), B);
  }
  {  // fp8 values of the vllm layout in blocks shorter than a 16-byte chunk of positions
    AttentionCase c;
    c.block_size = 8;
    c.cache_dtype = DType::fp8_e5m2;
    c.lens = {19, 40};
    c.new_tokens = {6, 13};
    check(c, default_params(c), options(), 8);
  }
  // Groups of 3, 12 (a tile of fewer tokens) and 40 heads (sliced into two workgroups).
  for (uint32_t group : {3u, 12u, 40u}) {
    AttentionCase c;
    c.heads = group;
    c.kv_heads = 1;
    c.lens = {20, 7};
    c.new_tokens = {5, 2};
    check(c, default_params(c), options(), group);
  }
}

TEST_P(AttentionTest, SplitMatchesOnePass) {
  AttentionCase c;
  c.lens = {700, 300, 5};
  c.new_tokens = {4, 2, 5};
  c.sinks = true;
  c.sliding_window = 400;
  c.tree_mask = TreeMask::tree;
  std::mt19937 rng(7);
  const AttentionInputs in = make_attention_inputs(c, rng);
  const AttentionParams p = default_params(c);
  const AttentionShape shape = attention_shape_of(in, p, true);
  const std::vector<int32_t> starts{0, 4, 6, 11};
  ASSERT_TRUE(AttentionPlan::create(ctx(), shape, starts, options(SplitMode::split, 256)).split());
  ASSERT_FALSE(AttentionPlan::create(ctx(), shape, starts, options(SplitMode::single_pass)).split());
  const auto split = batch_attention(ctx(), in, p, options(SplitMode::split, 256), true);
  const auto one_pass = batch_attention(ctx(), in, p, options(SplitMode::single_pass), true);
  const auto want = reference::batch_attention(in, p, true);
  expect_attention_near(split, want, tolerance(c.query_dtype, c.cache_dtype), true, "split");
  expect_attention_near(one_pass, want, tolerance(c.query_dtype, c.cache_dtype), true, "one pass");
  expect_attention_near(split, one_pass, tolerance(c.query_dtype, c.cache_dtype), true, "split against one pass");
}

TEST_P(AttentionTest, FeatureMixes) {
  AttentionCase c;
  c.heads = 6;
  c.kv_heads = 2;
  c.lens = {0 + 1, 16, 47, 100};
  c.new_tokens = {1, 16, 9, 3};
  for (uint32_t mask = 0; mask < 16; ++mask) {
    c.alibi = mask & 1;
    c.sinks = mask & 2;
    c.sliding_window = mask & 8 ? 37 : 0;
    AttentionParams p = default_params(c);
    p.scale = 0.3f;
    if (mask & 4) p.softcap = 3.0f;
    check(c, p, options(mask % 3 == 0 ? SplitMode::split : SplitMode::single_pass), mask);
  }
}

// ---- step 9: non-finite inputs reach the outputs as NaN, on both paths ----

TEST_P(AttentionTest, NonFiniteInputsMakeNaN) {
  for (DType dtype : {DType::f32, DType::f16}) {
  AttentionCase c;
  c.lens = {20, 12};
  c.new_tokens = {6, 12};
  c.query_dtype = c.cache_dtype = dtype;
  std::mt19937 rng(9);
  AttentionInputs in = make_attention_inputs(c, rng);
  const double inf = std::numeric_limits<double>::infinity(), nan = std::numeric_limits<double>::quiet_NaN();
  const int64_t H = c.heads, D = c.head_size;
  in.query.set(size_t((2 * H + 1) * D + 5), nan);  // request 0, token 2, head 1
  // Request 0, position 16 (new token 2): an infinite key, seen by new tokens 2..5 only.
  in.key_cache.set(size_t(key_index(c, block_of(c, in, 0, 16), 0, 3, 16 % c.block_size)), -inf);
  // Request 1, position 5: an infinite value in dim 7 of kv head 1, seen by tokens 5..11.
  in.value_cache.set(size_t(value_index(c, block_of(c, in, 1, 5), 1, 7, 5 % c.block_size)), inf);
  // Request 1, position 11 (the last): NaN in a key only the last token sees.
  in.key_cache.set(size_t(key_index(c, block_of(c, in, 1, 11), 1, 0, 11 % c.block_size)), nan);
  const AttentionParams p = default_params(c);
  if (!plan_or_refused(attention_shape_of(in, p, true), detail::host_query_starts(in.query_starts), options())) continue;
  const auto want = reference::batch_attention(in, p, true);
  // The reference marks what the contract says: token 2's head 1 (query), tokens 2..5 of
  // request 0 on kv head 0's heads (key), dim 7 of kv head 1's heads for tokens 5.. of request 1.
  EXPECT_TRUE(std::isnan(want.output.get(size_t((2 * H + 1) * D))));
  EXPECT_TRUE(std::isnan(want.output.get(size_t((3 * H + 0) * D))));
  EXPECT_FALSE(std::isnan(want.output.get(size_t((1 * H + 0) * D))));
  EXPECT_TRUE(std::isnan(want.output.get(size_t(((6 + 5) * H + 2) * D + 7))));
  EXPECT_FALSE(std::isnan(want.output.get(size_t(((6 + 5) * H + 2) * D + 6))));
  EXPECT_FALSE(std::isnan(want.output.get(size_t(((6 + 4) * H + 2) * D + 7))));
  // One pass, a split, and partitions shorter than the tile of the infinite value.
  for (const auto& o : {options(SplitMode::single_pass), options(SplitMode::split, 256)})
    expect_attention_near(batch_attention(ctx(), in, p, o, true), want, tolerance(dtype, dtype), true,
                          c.str() + (o.split == SplitMode::split ? " split" : " one pass"));
  AttentionParams capped = p;  // the soft cap would turn an infinite logit finite
  capped.softcap = 5.0f;
  expect_attention_near(batch_attention(ctx(), in, capped, options(), true), reference::batch_attention(in, capped, true),
                        tolerance(dtype, dtype), true, c.str() + " soft cap");
  }
}

// ---- decode batches ----

TEST_P(AttentionTest, SingleTokenBatchesRunOnTheDecodeKernels) {
  DecodeCase dc;
  dc.heads = 8;
  dc.kv_heads = 2;
  dc.head_size = 64;
  dc.lens = {1, 17, 300, 64};
  dc.alibi = dc.sinks = true;
  std::mt19937 rng(11);
  const DecodeInputs vllm = make_decode_inputs(dc, rng);
  DecodeOptions dopt;
  dopt.sliding_window = 50;
  DecodeParams dparams = default_params(dc);
  dparams.softcap = 4.0f;
  dparams.scale = 0.2f;
  // Every layout: the decode kernels read each.
  for (const KvLayout layout : {KvLayout::vllm, KvLayout::nhd, KvLayout::hnd}) {
    SCOPED_TRACE(kv_layout_name(layout));
    const DecodeInputs d = with_layout(vllm, layout);
    const DecodeResult want = decode_attention(ctx(), d, dopt, dparams, true);

    const AttentionInputs a = single_token_batch(d, dopt.sliding_window);
    const AttentionParams p = dparams;
    const AttentionShape shape = attention_shape_of(a, p, true);
    const std::vector<int32_t> starts{0, 1, 2, 3, 4};
    EXPECT_EQ(AttentionPlan::create(ctx(), shape, starts).kernel(), AttentionKernel::decode);

    // On the decode kernels: the decode's own result, bit for bit.
    const AttentionResult same = batch_attention(ctx(), a, p, {}, true);
    ASSERT_EQ(same.output.bytes(), want.output.bytes());
    EXPECT_EQ(std::memcmp(same.output.data(), want.output.data(), want.output.bytes()), 0);
    EXPECT_EQ(std::memcmp(same.lse.data(), want.lse.data(), want.lse.bytes()), 0);
    // On the attention kernel: within the contract's tolerance of it.
    const AttentionResult kernel_result = batch_attention(ctx(), a, p, options(), true);
    expect_decode_near({kernel_result.output, kernel_result.lse, {}}, want, tolerance(dc.query_dtype, dc.cache_dtype),
                       true, kernel_name() + " kernel against decode");
  }
}

// ---- values only the device sees ----

struct DeviceCall {
  std::vector<DeviceBuffer> keep;
  AttentionViews views;
};

TensorView upload(Context& ctx, DeviceCall& call, const HostTensor& t, DType dtype) {
  call.keep.push_back(ctx.create_buffer(std::max<size_t>((t.bytes() + 15) / 16 * 16, 16)));
  ctx.upload(call.keep.back().view(), t.data(), t.bytes());
  return call.keep.back().tensor(dtype, t.shape());
}

TEST_P(AttentionTest, DeviceSideBadValuesAreFlaggedAndNotFollowed) {
  AttentionCase c;
  c.lens = {20, 40, 33, 12};
  c.new_tokens = {2, 3, 4, 5};  // request 3 stays intact and must come out right
  std::mt19937 rng(5);
  const AttentionInputs in = make_attention_inputs(c, rng);
  const AttentionParams params = default_params(c);
  const std::vector<int32_t> starts{0, 2, 5, 9, 14};
  for (const SplitMode split : {SplitMode::single_pass, SplitMode::split}) {
    const AttentionPlan plan =
        AttentionPlan::create(ctx(), attention_shape_of(in, params), starts, options(split, split == SplitMode::split ? 256 : 0));
    HostTensor tables = in.block_tables;
    tables.as<int32_t>()[0] = 0x7fffffff;  // request 0: a block id far past N
    HostTensor lens = in.context_lens;
    lens.as<int32_t>()[1] = 1 << 30;  // request 1: a length far past M * B
    lens.as<int32_t>()[2] = 1;        // request 2: a length below its 4 new tokens
    DeviceCall call;
    auto& v = call.views;
    v.query = upload(ctx(), call, in.query, DType::f16);
    v.key_cache = upload(ctx(), call, in.key_cache, DType::f16);
    v.value_cache = upload(ctx(), call, in.value_cache, DType::f16);
    v.block_tables = upload(ctx(), call, tables, DType::i32);
    v.context_lens = upload(ctx(), call, lens, DType::i32);
    v.query_starts = upload(ctx(), call, in.query_starts, DType::i32);
    HostTensor output(DType::f16, in.query.shape());
    v.output = upload(ctx(), call, output, DType::f16);
    if (plan.scratch_bytes()) {
      call.keep.push_back(ctx().create_buffer(plan.scratch_bytes()));
      v.scratch = call.keep.back().view();
    }
    HostTensor zero(DType::u32, Shape{4});
    v.status = upload(ctx(), call, zero, DType::u32).memory;
    v.status.size = 4;
    ctx().run_and_wait([&](VkCommandBuffer cmd) { record_attention(ctx(), cmd, plan, v, params); });
    uint32_t flags = 0;
    ctx().download(v.status, &flags, 4);
    EXPECT_EQ(flags, kStatusBadBlockId | kStatusBadContextLen);
    ctx().download(v.output.memory, output.data(), output.bytes());
    const auto want = reference::batch_attention(in, params);
    const int64_t row = int64_t(c.heads) * c.head_size;
    for (int64_t i = 9 * row; i < 14 * row; ++i)
      ASSERT_NEAR(output.get(size_t(i)), want.output.get(size_t(i)), tolerance(DType::f16, DType::f16)) << i;

    // Query starts that fall on the device: flagged, and nothing read past the batch.
    HostTensor bad_starts = in.query_starts;
    bad_starts.as<int32_t>()[2] = 1;  // request 1 ends before it starts
    bad_starts.as<int32_t>()[4] = 1000;  // request 3 ends past T
    v.query_starts = upload(ctx(), call, bad_starts, DType::i32);
    v.context_lens = upload(ctx(), call, in.context_lens, DType::i32);
    v.block_tables = upload(ctx(), call, in.block_tables, DType::i32);
    v.status = upload(ctx(), call, zero, DType::u32).memory;
    v.status.size = 4;
    ctx().run_and_wait([&](VkCommandBuffer cmd) { record_attention(ctx(), cmd, plan, v, params); });
    ctx().download(v.status, &flags, 4);
    EXPECT_EQ(flags, kStatusBadQueryStarts);
  }
}

// Pools past maxStorageBufferRange (128 MiB on lavapipe) are read through device addresses:
// the case's blocks sit at the end of pools one range long, past it.
TEST_P(AttentionTest, CachesPastTheStorageBufferRange) {
  const auto& dev = ctx().device_info();
  if (const std::string why = past_range_skip_reason(dev); !why.empty()) GTEST_SKIP() << why;
  AttentionCase c;
  c.layout = KvLayout::hnd;
  c.lens = {70, 9};
  c.new_tokens = {6, 9};
  c.tree_mask = TreeMask::tree;
  std::mt19937 rng(17);
  const AttentionInputs in = make_attention_inputs(c, rng);
  const AttentionParams params = default_params(c);
  const int64_t small = in.key_cache.shape()[0];
  const uint64_t block_bytes = in.key_cache.bytes() / uint64_t(small);
  const int64_t big = int64_t(dev.max_storage_buffer_range / block_bytes) + 8;
  const int64_t first = big - small;  // the case's block b is the pool's block first + b
  HostTensor tables = in.block_tables;
  for (int64_t i = 0; i < tables.numel(); ++i) tables.as<int32_t>()[i] += int32_t(first);
  AttentionShape shape = attention_shape_of(in, params, true);
  shape.num_blocks = uint32_t(big);
  const std::vector<int32_t> starts{0, 6, 15};
  for (SplitMode split : {SplitMode::single_pass, SplitMode::split}) {
    const auto maybe = plan_or_refused(shape, starts, options(split, split == SplitMode::split ? 256 : 0));
    if (!maybe) continue;  // the matrix kernel reads pools through one descriptor
    const AttentionPlan& plan = *maybe;
    ASSERT_NE(plan.describe().find("device address"), std::string::npos) << plan.describe();
    DeviceCall call;
    auto& v = call.views;
    Shape pool = in.key_cache.shape();
    pool = Shape{big, pool[1], pool[2], pool[3]};
    for (auto [view, host] : {std::pair{&v.key_cache, &in.key_cache}, std::pair{&v.value_cache, &in.value_cache}}) {
      call.keep.push_back(ctx().create_buffer(size_t(big) * block_bytes));
      ctx().upload(call.keep.back().view(size_t(first) * block_bytes, host->bytes()), host->data(), host->bytes());
      *view = call.keep.back().tensor(DType::f16, pool);
    }
    v.query = upload(ctx(), call, in.query, DType::f16);
    v.block_tables = upload(ctx(), call, tables, DType::i32);
    v.context_lens = upload(ctx(), call, in.context_lens, DType::i32);
    v.query_starts = upload(ctx(), call, in.query_starts, DType::i32);
    v.tree_mask = upload(ctx(), call, in.tree_mask, DType::u8);
    v.tree_mask.memory.size = (v.tree_mask.memory.size + 3) / 4 * 4;
    HostTensor output(DType::f16, in.query.shape()), lse(DType::f32, Shape{15, 4});
    v.output = upload(ctx(), call, output, DType::f16);
    v.lse = upload(ctx(), call, lse, DType::f32);
    if (plan.scratch_bytes()) {
      call.keep.push_back(ctx().create_buffer(plan.scratch_bytes()));
      v.scratch = call.keep.back().view();
    }
    ctx().run_and_wait([&](VkCommandBuffer cmd) { record_attention(ctx(), cmd, plan, v, params); });
    ctx().download(v.output.memory, output.data(), output.bytes());
    ctx().download(v.lse.memory, lse.data(), lse.bytes());
    expect_attention_near({output, lse}, reference::batch_attention(in, params, true), tolerance(DType::f16, DType::f16),
                          true, plan.describe());
  }
}

// ---- refusals before anything is recorded ----

TEST_P(AttentionTest, RecordRefusesParamsAndViewsThatDisagreeWithThePlan) {
  AttentionCase c;
  c.cache_dtype = DType::fp8_e4m3;
  c.layout = KvLayout::nhd;
  c.tree_mask = TreeMask::tree;
  c.lens = {12, 30};
  c.new_tokens = {3, 4};
  std::mt19937 rng(13);
  const AttentionInputs in = make_attention_inputs(c, rng);
  const AttentionParams params = default_params(c);
  const std::vector<int32_t> starts{0, 3, 7};
  const AttentionPlan plan = AttentionPlan::create(ctx(), attention_shape_of(in, params), starts, options());
  EXPECT_EQ(plan.tree_mask_bytes(), 9u + 16u);
  DeviceCall call;
  auto& v = call.views;
  v.query = upload(ctx(), call, in.query, DType::f16);
  v.key_cache = upload(ctx(), call, in.key_cache, DType::u8);
  v.value_cache = upload(ctx(), call, in.value_cache, DType::u8);
  v.block_tables = upload(ctx(), call, in.block_tables, DType::i32);
  v.context_lens = upload(ctx(), call, in.context_lens, DType::i32);
  v.query_starts = upload(ctx(), call, in.query_starts, DType::i32);
  v.tree_mask = upload(ctx(), call, in.tree_mask, DType::u8);
  v.tree_mask.memory.size = 28;
  v.output = upload(ctx(), call, in.query, DType::f16);
  if (plan.scratch_bytes()) {
    call.keep.push_back(ctx().create_buffer(plan.scratch_bytes()));
    v.scratch = call.keep.back().view();
  }
  ctx().run_and_wait([&](VkCommandBuffer cmd) { record_attention(ctx(), cmd, plan, v, params); });  // as given: fine

  auto refused = [&](auto edit, const std::string& needle) {
    AttentionViews views = v;
    AttentionParams p = params;
    edit(views, p);
    expect_refused([&] { ctx().run_and_wait([&](VkCommandBuffer cmd) { record_attention(ctx(), cmd, plan, views, p); }); },
                   needle);
  };
  refused([](AttentionViews&, AttentionParams& p) { p.softcap = 1.0f; }, "softcap: 1, but the plan's shape.softcap is false");
  refused([](AttentionViews&, AttentionParams& p) { p.v_scale = -1.0f; }, "v_scale: -1");
  refused([](AttentionViews&, AttentionParams& p) { p.k_scale = 1e36f; }, "k_scale: 1e+36 is too large");
  refused([](AttentionViews& v, AttentionParams&) { v.key_cache.shape = Shape{v.key_cache.shape[0], 2, 16, 2, 16}; },
          "key_cache: shape [");
  refused([](AttentionViews& v, AttentionParams&) { v.query.shape = Shape{6, 4, 32}; }, "query: shape [6, 4, 32]");
  refused([](AttentionViews& v, AttentionParams&) { v.query_starts = TensorView{}; }, "query_starts: dtype");
  refused([](AttentionViews& v, AttentionParams&) { v.tree_mask.memory.size = 25; }, "tree_mask: a view of 25 bytes");
  refused([](AttentionViews& v, AttentionParams&) { v.output.dtype = DType::f32; }, "output: dtype f32");
  refused([](AttentionViews& v, AttentionParams&) { v.lse = TensorView{}; v.tree_mask = TensorView{}; }, "tree_mask: dtype f32");

  // At plan time: the decode kernels for a batch that is not all single tokens.
  AttentionOptions decode;
  decode.kernel = AttentionKernel::decode;
  expect_refused([&] { AttentionPlan::create(ctx(), attention_shape_of(in, params), starts, decode); }, "kernel: decode");
}

INSTANTIATE_TEST_SUITE_P(Kernels, AttentionTest, ::testing::ValuesIn(kAttentionKernels), attention_kernel_param_name);

}  // namespace
}  // namespace vkpaged::test
