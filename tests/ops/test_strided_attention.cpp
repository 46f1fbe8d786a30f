// SPDX-License-Identifier: Apache-2.0
// Strided views (TensorView::strides) in decode and multi-query attention: the queries a slice of
// one fused projection [T, (H + 2 Hkv) * D] (the keys' and values' parts NaN, so that a read
// outside the query's rows shows), the outputs written into part of each row of a larger buffer
// or head-major ([H, T, D]: a head stride other than D). Each case runs the same plan twice, on
// contiguous views and on the strided ones: the outputs must be the same bits, the LSE too, the
// contiguous run within the contract's tolerance of the CPU reference, and no byte of the output
// buffers outside the output rows may change. Every kernel on every layout, the dtype pairs of
// the contract, ragged lengths, one pass and split (the matrix kernels skip where the device has
// no cooperative matrices, as on lavapipe).
#include <gtest/gtest.h>

#include <memory>
#include <random>
#include <string>
#include <vector>

#include "ops/attention_validation.hpp"  // host_query_starts
#include "support/attention_case.hpp"
#include "support/attention_kernels.hpp"
#include "support/decode_case.hpp"
#include "support/decode_check.hpp"
#include "support/decode_kernels.hpp"
#include "support/strided_views.hpp"
#include "vkpaged/attention.hpp"
#include "vkpaged/decode.hpp"
#include "vkpaged/reference.hpp"

namespace vkpaged::test {
namespace {

// Where the strided run puts the output: beside other columns in each token's row, or head-major.
enum class OutputPlace { row_part, head_major };

Slice output_slice(OutputPlace place, int64_t tokens, int64_t heads, int64_t head_size, DType dtype) {
  // A row of [D pad | H * D output | 3 D pad] per token, 8 bytes into the buffer; or [H, T, D] 4 bytes in.
  if (place == OutputPlace::row_part)
    return {8 + size_t(head_size) * dtype_size(dtype), (heads + 4) * head_size, head_size};
  return {4, head_size, tokens * head_size};
}

size_t image_bytes(const Slice& s, int64_t tokens, int64_t heads, int64_t head_size, DType dtype) {
  return s.offset + size_t((tokens - 1) * s.token_stride + (heads - 1) * s.head_stride + head_size) * dtype_size(dtype) + 64;
}

// The device arrays every run of a case shares (caches, page tables, starts), contiguous.
struct SharedViews {
  std::vector<DeviceBuffer> keep;
  TensorView upload(Context& ctx, const HostTensor& t, DType as) {
    keep.push_back(ctx.create_buffer(std::max<size_t>(t.bytes(), 16)));
    if (t.bytes()) ctx.upload(keep.back().view(), t.data(), t.bytes());
    return keep.back().tensor(as, t.shape());
  }
  BufferView scratch(Context& ctx, size_t bytes) {
    if (bytes == 0) return {};
    keep.push_back(ctx.create_buffer(bytes));
    return keep.back().view();
  }
};

// One run's query, output and LSE: contiguous buffers, or the fused projection and the output
// slice.
struct RunViews {
  TensorView query, output, lse;
};

struct StridedRun {
  std::unique_ptr<DeviceImage> fused, out;
  FusedProjection projection;
  Slice output;
  std::vector<uint8_t> outside_before;
};

// The query rows into a fused projection (4 bytes in: views need not start on 16 bytes) and an
// output slice of `place`.
StridedRun strided_run(Context& ctx, const HostTensor& query, int64_t kv_heads, OutputPlace place, RunViews& views) {
  const int64_t T = query.shape()[0], H = query.shape()[1], D = query.shape()[2];
  const DType dt = query.dtype();
  StridedRun r;
  r.projection = fused_projection(T, H, kv_heads, D, dt, 4);
  r.fused = std::make_unique<DeviceImage>(ctx, r.projection.bytes + 16);
  r.fused->put(r.projection.q, query);
  r.fused->upload();
  r.output = output_slice(place, T, H, D, dt);
  r.out = std::make_unique<DeviceImage>(ctx, image_bytes(r.output, T, H, D, dt), 0x5a);
  r.outside_before = r.out->outside({{r.output, dt, query.shape()}});
  views.query = r.fused->view(r.projection.q, dt, query.shape());
  views.output = r.out->view(r.output, dt, query.shape());
  return r;
}

// The strided run's output, after checking that nothing outside its rows changed.
HostTensor strided_output(StridedRun& r, DType dt, const Shape& shape, const std::string& label) {
  r.out->download();
  EXPECT_TRUE(r.out->outside({{r.output, dt, shape}}) == r.outside_before)
      << label << ": bytes outside the output rows changed";
  return r.out->get(r.output, dt, shape);
}

// ---- decode ----

class StridedDecodeTest : public DecodeKernelTest {
 protected:
  // The case on this variant, contiguous then strided (the output placed at `place`).
  void check_case(const DecodeCase& c, const DecodeOptions& o, OutputPlace place, uint32_t seed) {
    SCOPED_TRACE(c.str());
    std::mt19937 rng(seed);
    const DecodeInputs vllm = make_decode_inputs(c, rng);
    const DecodeParams params = default_params(c);
    const std::optional<DecodePlan> plan = plan_or_refused(shape_for(vllm, params, true), o);
    if (!plan) return;
    if (o.split != SplitMode::automatic) EXPECT_EQ(plan->split(), o.split == SplitMode::split) << plan->describe();
    const DecodeInputs in = with_layout(vllm, layout());
    const int64_t S = int64_t(c.lens.size()), H = c.heads, D = c.head_size;
    const DType cache_as = is_fp8_dtype(c.cache_dtype) ? DType::u8 : c.cache_dtype;

    SharedViews shared;
    DecodeViews v;
    v.key_cache = shared.upload(ctx(), in.key_cache, cache_as);
    v.value_cache = shared.upload(ctx(), in.value_cache, cache_as);
    v.block_tables = shared.upload(ctx(), in.block_tables, DType::i32);
    v.context_lens = shared.upload(ctx(), in.context_lens, DType::i32);
    v.scratch = shared.scratch(ctx(), plan->scratch_bytes());
    auto run = [&](const RunViews& views) {
      DecodeViews call = v;
      call.query = views.query;
      call.output = views.output;
      call.lse = views.lse;
      ctx().run_and_wait([&](VkCommandBuffer cmd) { record_decode(ctx(), cmd, *plan, call, params); });
    };

    // Contiguous: the reference's tolerance.
    RunViews contiguous;
    contiguous.query = shared.upload(ctx(), in.query, c.query_dtype);
    contiguous.output = shared.upload(ctx(), HostTensor(c.query_dtype, Shape{S, H, D}), c.query_dtype);
    contiguous.lse = shared.upload(ctx(), HostTensor(DType::f32, Shape{S, H}), DType::f32);
    run(contiguous);
    DecodeResult got{HostTensor(c.query_dtype, Shape{S, H, D}), HostTensor(DType::f32, Shape{S, H})};
    ctx().download(contiguous.output.memory, got.output.data(), got.output.bytes());
    ctx().download(contiguous.lse.memory, got.lse.data(), got.lse.bytes());
    DecodeOptions reference_options = o;
    expect_decode_near(got, reference::decode_attention(vllm, reference_options, params, true),
                       tolerance(c.query_dtype, c.cache_dtype), true, c.str());

    // Strided: the same bits.
    RunViews strided;
    StridedRun r = strided_run(ctx(), in.query, c.kv_heads, place, strided);
    strided.lse = shared.upload(ctx(), HostTensor(DType::f32, Shape{S, H}), DType::f32);
    run(strided);
    const std::string label = c.str() + (place == OutputPlace::row_part ? ", output in part of each row" : ", head-major output");
    EXPECT_TRUE(same_bits(strided_output(r, c.query_dtype, Shape{S, H, D}, label), got.output)) << label;
    HostTensor lse(DType::f32, Shape{S, H});
    ctx().download(strided.lse.memory, lse.data(), lse.bytes());
    EXPECT_TRUE(same_bits(lse, got.lse)) << label;
  }
};

// The dtype pairs of the contract (f32, f16, bf16 queries; f16, bf16, fp8 caches) over ragged
// lengths, one pass and split (a reduce pass writes the split's outputs), both output places.
TEST_P(StridedDecodeTest, FusedProjectionGivesTheContiguousBits) {
  struct Pair {
    DType query, cache;
  };
  const Pair pairs[] = {{DType::f16, DType::f16},      {DType::bf16, DType::bf16},     {DType::f32, DType::f16},
                        {DType::f16, DType::fp8_e4m3}, {DType::bf16, DType::fp8_e5m2}, {DType::f32, DType::bf16}};
  uint32_t seed = 1;
  for (const Pair& p : pairs)
    for (const SplitMode split : {SplitMode::single_pass, SplitMode::split}) {
      DecodeCase c;
      c.query_dtype = p.query;
      c.cache_dtype = p.cache;
      c.heads = 8;
      c.kv_heads = 2;
      c.head_size = 64;
      c.lens = {1, 300, 0, 530, 16};  // up to 3 partitions of 256 tokens when split
      DecodeOptions o;
      o.split = split;
      if (split == SplitMode::split) o.partition_tokens = 256;
      check_case(c, o, seed % 2 == 0 ? OutputPlace::row_part : OutputPlace::head_major, seed);
      ++seed;
    }
}

// MQA and MHA groups, and a head size whose rows are not a multiple of 16 bytes in f32.
TEST_P(StridedDecodeTest, GroupsAndHeadSizes) {
  DecodeCase c;
  c.query_dtype = c.cache_dtype = DType::f16;
  c.heads = 6;
  c.kv_heads = 1;
  c.head_size = 32;
  c.lens = {20, 3};
  check_case(c, {}, OutputPlace::head_major, 3);
  c.kv_heads = 6;
  c.query_dtype = DType::f32;
  c.head_size = 40;  // 160-byte rows
  c.cache_dtype = DType::f32;
  check_case(c, {}, OutputPlace::row_part, 4);
}

INSTANTIATE_TEST_SUITE_P(Kernels, StridedDecodeTest, ::testing::ValuesIn(kDecodeVariants), decode_kernel_param_name);

// ---- multi-query attention ----

class StridedAttentionTest : public AttentionKernelTest {
 protected:
  void check_case(const AttentionCase& c, const AttentionOptions& o, OutputPlace place, uint32_t seed) {
    SCOPED_TRACE(c.str());
    std::mt19937 rng(seed);
    const AttentionInputs in = make_attention_inputs(c, rng);
    const AttentionParams params = default_params(c);
    const std::vector<int32_t> starts = detail::host_query_starts(in.query_starts);
    const std::optional<AttentionPlan> plan = plan_or_refused(attention_shape_of(in, params, true), starts, o);
    if (!plan) return;
    if (o.split != SplitMode::automatic) EXPECT_EQ(plan->split(), o.split == SplitMode::split) << plan->describe();
    check_plan(c, in, params, *plan, place);
  }

  // Both runs of one plan (any kernel family: the decode kernels too).
  void check_plan(const AttentionCase& c, const AttentionInputs& in, const AttentionParams& params,
                  const AttentionPlan& plan, OutputPlace place) {
    const int64_t T = in.query.shape()[0], H = c.heads, D = c.head_size;
    const DType cache_as = is_fp8_dtype(c.cache_dtype) ? DType::u8 : c.cache_dtype;
    SharedViews shared;
    AttentionViews v;
    v.key_cache = shared.upload(ctx(), in.key_cache, cache_as);
    v.value_cache = shared.upload(ctx(), in.value_cache, cache_as);
    v.block_tables = shared.upload(ctx(), in.block_tables, DType::i32);
    v.context_lens = shared.upload(ctx(), in.context_lens, DType::i32);
    v.query_starts = shared.upload(ctx(), in.query_starts, DType::i32);
    v.scratch = shared.scratch(ctx(), plan.scratch_bytes());
    auto run = [&](const RunViews& views) {
      AttentionViews call = v;
      call.query = views.query;
      call.output = views.output;
      call.lse = views.lse;
      ctx().run_and_wait([&](VkCommandBuffer cmd) { record_attention(ctx(), cmd, plan, call, params); });
    };

    RunViews contiguous;
    contiguous.query = shared.upload(ctx(), in.query, c.query_dtype);
    contiguous.output = shared.upload(ctx(), HostTensor(c.query_dtype, Shape{T, H, D}), c.query_dtype);
    contiguous.lse = shared.upload(ctx(), HostTensor(DType::f32, Shape{T, H}), DType::f32);
    run(contiguous);
    AttentionResult got{HostTensor(c.query_dtype, Shape{T, H, D}), HostTensor(DType::f32, Shape{T, H})};
    ctx().download(contiguous.output.memory, got.output.data(), got.output.bytes());
    ctx().download(contiguous.lse.memory, got.lse.data(), got.lse.bytes());
    expect_attention_near(got, reference::batch_attention(in, params, true), tolerance(c.query_dtype, c.cache_dtype),
                          true, c.str());

    RunViews strided;
    StridedRun r = strided_run(ctx(), in.query, c.kv_heads, place, strided);
    strided.lse = shared.upload(ctx(), HostTensor(DType::f32, Shape{T, H}), DType::f32);
    run(strided);
    const std::string label = c.str() + " (" + plan.describe() + ")";
    EXPECT_TRUE(same_bits(strided_output(r, c.query_dtype, Shape{T, H, D}, label), got.output)) << label;
    HostTensor lse(DType::f32, Shape{T, H});
    ctx().download(strided.lse.memory, lse.data(), lse.bytes());
    EXPECT_TRUE(same_bits(lse, got.lse)) << label;
  }
};

// Ragged engine steps (decode rows, chunks after cached prefixes, a whole prompt) in every layout
// and dtype pair, one pass and split (the merge pass writes the split's outputs).
TEST_P(StridedAttentionTest, FusedProjectionGivesTheContiguousBits) {
  struct Pair {
    DType query, cache;
    KvLayout layout;
  };
  const Pair pairs[] = {{DType::f16, DType::f16, KvLayout::vllm},       {DType::bf16, DType::bf16, KvLayout::nhd},
                        {DType::f32, DType::f16, KvLayout::hnd},        {DType::f16, DType::fp8_e4m3, KvLayout::nhd},
                        {DType::bf16, DType::fp8_e5m2, KvLayout::vllm}, {DType::f32, DType::bf16, KvLayout::vllm}};
  uint32_t seed = 1;
  for (const Pair& p : pairs)
    for (const SplitMode split : {SplitMode::single_pass, SplitMode::split}) {
      AttentionCase c;
      c.query_dtype = p.query;
      c.cache_dtype = p.cache;
      c.layout = p.layout;
      c.heads = 4;
      c.kv_heads = 2;
      c.head_size = 32;
      c.lens = {300, 1, 520, 9};  // up to 3 partitions of 256 positions when split
      c.new_tokens = {5, 1, 12, 9};
      check_case(c, options(split, split == SplitMode::split ? 256 : 0),
                 seed % 2 == 0 ? OutputPlace::row_part : OutputPlace::head_major, seed);
      ++seed;
    }
}

INSTANTIATE_TEST_SUITE_P(Kernels, StridedAttentionTest, ::testing::ValuesIn(kAttentionKernels), attention_kernel_param_name);

// A step of single tokens on its decode plan (AttentionKernel::automatic): record_attention hands
// the strided views to the decode kernels.
class StridedAttentionAsDecodeTest : public StridedAttentionTest {};

TEST_P(StridedAttentionAsDecodeTest, SingleTokenStepsOnTheDecodeKernels) {
  AttentionCase c;
  c.heads = 8;
  c.kv_heads = 2;
  c.head_size = 64;
  c.lens = {30, 1, 77};
  c.new_tokens = {1, 1, 1};
  std::mt19937 rng(5);
  const AttentionInputs in = make_attention_inputs(c, rng);
  const AttentionParams params = default_params(c);
  const AttentionPlan plan = AttentionPlan::create(ctx(), attention_shape_of(in, params, true),
                                                   detail::host_query_starts(in.query_starts));
  ASSERT_EQ(plan.kernel(), AttentionKernel::decode) << plan.describe();
  check_plan(c, in, params, plan, OutputPlace::row_part);
  check_plan(c, in, params, plan, OutputPlace::head_major);
}

INSTANTIATE_TEST_SUITE_P(Automatic, StridedAttentionAsDecodeTest, ::testing::Values(AttentionKernel::automatic),
                         attention_kernel_param_name);

}  // namespace
}  // namespace vkpaged::test
