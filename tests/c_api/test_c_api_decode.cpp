// SPDX-License-Identifier: Apache-2.0
// Decode attention through the C API: plans, recording into a command buffer with C views
// (bit for bit what the C++ API computes, within the contract's tolerance of the reference),
// the host convenience, the reference, and refusals that name the argument.
#include <cstring>
#include <limits>
#include <vector>

#include "c_api/c_api_test_helpers.hpp"
#include "support/decode_case.hpp"
#include "vkpaged/reference.hpp"

namespace vkpaged::test {
namespace {

using namespace c_api_helpers;

using PlanPtr = std::unique_ptr<vkp_decode_plan, decltype(&vkp_decode_plan_destroy)>;

vkp_decode_options c_options(const DecodeOptions& o) {
  vkp_decode_options c;
  vkp_decode_options_init(&c);
  c.sliding_window = o.sliding_window;
  c.split = vkp_split_mode(o.split);
  c.partition_tokens = o.partition_tokens;
  c.kernel = vkp_decode_kernel(o.kernel);
  c.order = vkp_decode_order(o.order);
  c.merge = vkp_decode_merge(o.merge);
  return c;
}

struct RecordedDecode {
  HostTensor output;
  HostTensor lse;
  uint32_t status = 0;
};

// Plans with the C API, uploads with the C API and records vkp_record_decode, with the params,
// into a command buffer of vkp_run_and_wait.
RecordedDecode record_through_c(const DecodeInputs& in, const DecodeOptions& options, const DecodeParams& params,
                                bool want_lse) {
  vkp_context* ctx = c_context();
  const vkp_decode_inputs cin = c_decode_inputs(in);
  vkp_decode_shape shape;
  vkp_decode_shape_init(&shape);
  EXPECT_VKP_OK(vkp_decode_shape_of(&cin, want_lse ? VKP_TRUE : VKP_FALSE, &shape));
  EXPECT_EQ(shape.softcap, VKP_FALSE) << "the inputs do not say";
  EXPECT_EQ(shape.kv_layout, VKP_KV_LAYOUT_VLLM);
  shape.softcap = params.softcap != 0.0f ? VKP_TRUE : VKP_FALSE;
  const vkp_decode_options copt = c_options(options);
  const vkp_decode_params cparams = c_params(params);
  vkp_decode_plan* raw = nullptr;
  EXPECT_VKP_OK(vkp_decode_plan_create(ctx, &shape, &copt, &raw));
  PlanPtr plan(raw, &vkp_decode_plan_destroy);
  vkp_decode_plan_info info;
  vkp_decode_plan_info_init(&info);
  EXPECT_VKP_OK(vkp_decode_plan_info_get(raw, &info));
  vkp_decode_shape plan_shape;
  vkp_decode_shape_init(&plan_shape);
  EXPECT_VKP_OK(vkp_decode_plan_shape_get(raw, &plan_shape));
  EXPECT_EQ(std::memcmp(&plan_shape, &shape, sizeof(shape)), 0);
  vkp_decode_options plan_options;
  vkp_decode_options_init(&plan_options);
  EXPECT_VKP_OK(vkp_decode_plan_options_get(raw, &plan_options));
  EXPECT_EQ(plan_options.split, copt.split);
  EXPECT_EQ(plan_options.kernel, copt.kernel);
  EXPECT_EQ(info.scratch_bytes, vkp_decode_plan_scratch_bytes(raw));
  EXPECT_EQ(plan_options.order, copt.order);
  EXPECT_EQ(info.order_bytes, info.longest_first ? 4u * shape.num_seqs * info.num_partitions : 0u);
  EXPECT_EQ(plan_options.merge, copt.merge);
  EXPECT_EQ(plan_options.sliding_window, copt.sliding_window);
  EXPECT_EQ(info.merge_counter_bytes, vkp_decode_plan_merge_counter_bytes(raw));
  EXPECT_NE(std::string(vkp_decode_plan_describe(raw)), "");

  const DeviceDecodeInputs device(ctx, in);
  const CTensor output = zeros(ctx, in.query.dtype(), in.query.shape());
  const CTensor lse = zeros(ctx, DType::f32, Shape{in.query.shape()[0], in.query.shape()[1]});
  const CTensor status = zeros(ctx, DType::u32, Shape{1});
  CTensor alibi, sinks, scratch, order, counters;
  vkp_decode_views views = device.views(output);
  if (shape.alibi) views.alibi_slopes = (alibi = upload(ctx, in.alibi_slopes)).view;
  if (shape.sinks) views.sinks = (sinks = upload(ctx, in.sinks)).view;
  if (shape.lse) views.lse = lse.view;
  if (info.scratch_bytes) {
    scratch = zeros(ctx, DType::u8, Shape{int64_t(info.scratch_bytes)});
    views.scratch = scratch.view.memory;
  }
  views.status = status.view.memory;
  if (info.merge_counter_bytes) {  // zero, as vkp_decode_views asks
    counters = zeros(ctx, DType::u8, Shape{int64_t(info.merge_counter_bytes)});
    views.merge_counters = counters.view.memory;
  }
  if (info.longest_first) {
    order = zeros(ctx, DType::u8, Shape{int64_t(info.order_bytes)});
    views.order = order.view.memory;
    EXPECT_VKP_OK(run(ctx, [&](VkCommandBuffer cmd) {
      return vkp_record_decode_order(ctx, cmd, raw, &views.context_lens, &views.order);
    }));
  }
  EXPECT_VKP_OK(run(ctx, [&](VkCommandBuffer cmd) { return vkp_record_decode(ctx, cmd, raw, &views, &cparams); }));
  RecordedDecode r;
  r.output = download(ctx, output);
  if (want_lse) r.lse = download(ctx, lse);
  r.status = download(ctx, status).as<uint32_t>()[0];
  return r;
}

struct DecodeParam {
  DecodeCase c;
  SplitMode split;
};
void PrintTo(const DecodeParam& p, std::ostream* os) { *os << p.c.str(); }

class CApiDecodeTest : public GpuTest, public ::testing::WithParamInterface<DecodeParam> {};

// The C path records the same work as the C++ path: identical bits, and the reference's values.
TEST_P(CApiDecodeTest, RecordedDecodeMatchesCppBitForBitAndTheReference) {
  const auto& [c, split] = GetParam();
  std::mt19937 rng(101);
  const DecodeInputs in = make_decode_inputs(c, rng);
  DecodeOptions options;
  options.split = split;
  DecodeParams params = default_params(c);
  params.softcap = c.alibi ? 20.0f : 0.0f;
  const bool want_lse = c.sinks;
  const RecordedDecode got = record_through_c(in, options, params, want_lse);
  EXPECT_EQ(got.status, 0u);
  const DecodeResult cpp = decode_attention(ctx(), in, options, params, want_lse);
  ASSERT_EQ(got.output.bytes(), cpp.output.bytes());
  EXPECT_EQ(std::memcmp(got.output.data(), cpp.output.data(), cpp.output.bytes()), 0) << c.str();
  const DecodeResult want = reference::decode_attention(in, options, params, want_lse);
  EXPECT_LE(max_abs_diff(got.output, want.output), tolerance(c.query_dtype, c.cache_dtype)) << c.str();
  if (want_lse) EXPECT_LE(max_abs_diff(got.lse, want.lse), 1e-3) << c.str();
}

DecodeCase make_case(DType q, DType cache, std::vector<uint32_t> lens, bool alibi, bool sinks) {
  DecodeCase c;
  c.query_dtype = q;
  c.cache_dtype = cache;
  c.lens = std::move(lens);
  c.alibi = alibi;
  c.sinks = sinks;
  c.heads = 8;
  c.kv_heads = 2;
  return c;
}

std::string case_name(const ::testing::TestParamInfo<DecodeParam>& info) {
  const DecodeCase& c = info.param.c;
  const SplitMode split = info.param.split;
  const char* mode = split == SplitMode::split ? "split" : split == SplitMode::single_pass ? "single_pass" : "auto";
  return std::string(dtype_name(c.query_dtype)) + "_" + std::string(dtype_name(c.cache_dtype)) + "_" + mode;
}

INSTANTIATE_TEST_SUITE_P(
    Cases, CApiDecodeTest,
    ::testing::Values(
        DecodeParam{make_case(DType::f16, DType::f16, {1, 17, 40}, false, false), SplitMode::automatic},
        DecodeParam{make_case(DType::f32, DType::f32, {0, 300, 700}, true, true), SplitMode::split},
        DecodeParam{make_case(DType::bf16, DType::bf16, {5, 260}, false, true), SplitMode::single_pass},
        DecodeParam{make_case(DType::f16, DType::fp8_e4m3, {33, 129}, false, false), SplitMode::automatic}),
    case_name);

class CApiDecodeHostTest : public GpuTest {};

TEST_F(CApiDecodeHostTest, ConvenienceAndReferenceMatchTheCppApi) {
  DecodeCase c = make_case(DType::f16, DType::fp8_e5m2, {3, 70, 513}, false, true);
  std::mt19937 rng(7);
  const DecodeInputs in = make_decode_inputs(c, rng);
  const DecodeOptions options;
  const DecodeParams params = default_params(c);
  const vkp_decode_inputs cin = c_decode_inputs(in);
  const vkp_decode_options copt = c_options(options);
  const vkp_decode_params cparams = c_params(params);
  HostTensor out(in.query.dtype(), in.query.shape()), ref(in.query.dtype(), in.query.shape());
  std::vector<float> lse(3 * 8), ref_lse(3 * 8);
  ASSERT_VKP_OK(
      vkp_decode_attention(c_context(), &cin, &copt, &cparams, out.data(), out.bytes(), lse.data(), lse.size()));
  ASSERT_VKP_OK(
      vkp_reference_decode_attention(&cin, &copt, &cparams, ref.data(), ref.bytes(), ref_lse.data(), ref_lse.size()));
  // The C reference is the C++ reference, bit for bit.
  const DecodeResult cpp_ref = reference::decode_attention(in, options, params, true);
  EXPECT_EQ(std::memcmp(ref.data(), cpp_ref.output.data(), ref.bytes()), 0);
  EXPECT_EQ(std::memcmp(ref_lse.data(), cpp_ref.lse.data(), ref_lse.size() * 4), 0);
  EXPECT_LE(max_abs_diff(out, ref), tolerance(c.query_dtype, c.cache_dtype));
  for (size_t i = 0; i < lse.size(); ++i) EXPECT_NEAR(lse[i], ref_lse[i], 1e-3) << i;
  // Without options, params and lse: the defaults (fp8 scales of 1 here).
  ASSERT_VKP_OK(vkp_reference_decode_attention(&cin, nullptr, nullptr, ref.data(), ref.bytes(), nullptr, 0));
  const DecodeResult defaults = reference::decode_attention(in, {}, {}, false);
  EXPECT_EQ(std::memcmp(ref.data(), defaults.output.data(), ref.bytes()), 0);
}

TEST_F(CApiDecodeHostTest, RefusesBadInputsNamingThem) {
  DecodeCase c = make_case(DType::f32, DType::f32, {3, 20}, false, false);
  std::mt19937 rng(8);
  const DecodeInputs in = make_decode_inputs(c, rng);
  vkp_decode_inputs cin = c_decode_inputs(in);
  HostTensor out(in.query.dtype(), in.query.shape());
  std::vector<float> lse(16);
  const std::vector<float> untouched(out.as<float>(), out.as<float>() + out.numel());
  expect_refused(vkp_decode_attention(c_context(), &cin, nullptr, nullptr, out.data(), out.bytes() - 4, nullptr, 0),
                 "output_bytes");
  expect_refused(vkp_reference_decode_attention(&cin, nullptr, nullptr, out.data(), out.bytes(), lse.data(), 15),
                 "lse_count: 15");
  vkp_decode_params bad_params;
  vkp_decode_params_init(&bad_params);
  bad_params.k_scale = 0.0f;
  expect_refused(vkp_decode_attention(c_context(), &cin, nullptr, &bad_params, out.data(), out.bytes(), nullptr, 0),
                 "k_scale");
  vkp_decode_params_init(&bad_params);
  bad_params.has_scale = VKP_TRUE;
  bad_params.scale = -1.0f;
  expect_refused(vkp_reference_decode_attention(&cin, nullptr, &bad_params, out.data(), out.bytes(), nullptr, 0),
                 "scale");
  vkp_decode_params_init(&bad_params);
  bad_params.softcap = -2.0f;
  expect_refused(vkp_decode_attention(c_context(), &cin, nullptr, &bad_params, out.data(), out.bytes(), nullptr, 0),
                 "softcap");
  vkp_decode_options bad;
  vkp_decode_options_init(&bad);
  bad.split = vkp_split_mode(9);
  expect_refused(vkp_decode_attention(c_context(), &cin, &bad, nullptr, out.data(), out.bytes(), nullptr, 0),
                 "options.split");
  HostTensor lens = in.context_lens;
  lens.as<int32_t>()[1] = 1000;
  cin.context_lens = host_view(lens);
  expect_refused(vkp_decode_attention(c_context(), &cin, nullptr, nullptr, out.data(), out.bytes(), nullptr, 0),
                 "context_lens[1]: 1000");
  cin = c_decode_inputs(in);
  cin.query.data = nullptr;
  expect_refused(vkp_reference_decode_attention(&cin, nullptr, nullptr, out.data(), out.bytes(), nullptr, 0),
                 "inputs.query: data is NULL");
  cin = c_decode_inputs(in);
  cin.cache_dtype = vkp_dtype(-1);
  expect_refused(vkp_decode_shape_of(&cin, VKP_FALSE, nullptr), "inputs.cache_dtype");
  EXPECT_EQ(std::memcmp(out.data(), untouched.data(), out.bytes()), 0) << "a refused call wrote the output";
}

// The kernel field goes both ways (options -> plan -> plan info), an unknown value is refused
// naming it, and the matrix kernel is refused as unsupported where it cannot run.
TEST_F(CApiDecodeHostTest, KernelChoiceRoundTripsAndIsChecked) {
  vkp_decode_options o;
  std::memset(&o, 0xff, sizeof(o));
  ASSERT_VKP_OK(vkp_decode_options_init(&o));
  EXPECT_EQ(o.kernel, VKP_KERNEL_AUTOMATIC);

  DecodeCase c = make_case(DType::f16, DType::f16, {3, 70}, false, false);
  std::mt19937 rng(9);
  const DecodeInputs in = make_decode_inputs(c, rng);
  const vkp_decode_inputs cin = c_decode_inputs(in);
  vkp_decode_shape shape;
  vkp_decode_shape_init(&shape);
  ASSERT_VKP_OK(vkp_decode_shape_of(&cin, VKP_FALSE, &shape));
  for (vkp_decode_kernel kernel : {VKP_KERNEL_AUTOMATIC, VKP_KERNEL_SCALAR}) {
    o.kernel = kernel;
    vkp_decode_plan* raw = nullptr;
    ASSERT_VKP_OK(vkp_decode_plan_create(c_context(), &shape, &o, &raw));
    PlanPtr plan(raw, &vkp_decode_plan_destroy);
    vkp_decode_options got;
    vkp_decode_options_init(&got);
    ASSERT_VKP_OK(vkp_decode_plan_options_get(raw, &got));
    EXPECT_EQ(got.kernel, kernel);
    if (kernel == VKP_KERNEL_SCALAR)
      EXPECT_EQ(std::string(vkp_decode_plan_describe(raw)).find("matrix units"), std::string::npos)
          << vkp_decode_plan_describe(raw);
  }
  // The scalar kernel asked for through C records what the C++ API computes with it.
  DecodeOptions scalar;
  scalar.kernel = DecodeKernel::scalar;
  const RecordedDecode got = record_through_c(in, scalar, default_params(c), false);
  const DecodeResult cpp = decode_attention(ctx(), in, scalar, default_params(c));
  ASSERT_EQ(got.output.bytes(), cpp.output.bytes());
  EXPECT_EQ(std::memcmp(got.output.data(), cpp.output.data(), cpp.output.bytes()), 0);

  vkp_decode_plan* raw = nullptr;
  o.kernel = vkp_decode_kernel(7);
  expect_refused(vkp_decode_plan_create(c_context(), &shape, &o, &raw), "options.kernel: 7");
  HostTensor out(in.query.dtype(), in.query.shape());
  expect_refused(vkp_reference_decode_attention(&cin, &o, nullptr, out.data(), out.bytes(), nullptr, 0),
                 "options.kernel: 7");
  o.kernel = VKP_KERNEL_MATRIX;
  // The matrix kernel takes 16-bit queries only: refused on every device for f32.
  vkp_decode_shape f32 = shape;
  f32.query_dtype = f32.cache_dtype = VKP_DTYPE_F32;
  expect_refused(vkp_decode_plan_create(c_context(), &f32, &o, &raw), "kernel: matrix", VKP_ERROR_UNSUPPORTED);
  // Without matrix units (lavapipe) it is refused for every shape.
  if (!ctx().device_info().cooperative_matrix) {
    expect_refused(vkp_decode_plan_create(c_context(), &shape, &o, &raw), "kernel: matrix", VKP_ERROR_UNSUPPORTED);
    EXPECT_EQ(raw, nullptr);
  } else {  // the adopted context was told the engine enabled them (c_api_test_helpers.hpp)
    ASSERT_VKP_OK(vkp_decode_plan_create(c_context(), &shape, &o, &raw));
    vkp_decode_plan_destroy(raw);
  }
}

// The order field goes both ways; a longest-first plan recorded through C (its list made with
// vkp_record_decode_order) computes what the C++ API does; misuse is refused naming the argument.
TEST_F(CApiDecodeHostTest, LongestFirstRecordsThroughCAndIsChecked) {
  vkp_decode_options o;
  vkp_decode_options_init(&o);
  EXPECT_EQ(o.order, VKP_ORDER_AUTOMATIC);

  DecodeCase c = make_case(DType::f16, DType::f16, {0, 1, 15, 16, 17, 700, 301}, true, true);
  std::mt19937 rng(13);
  const DecodeInputs in = make_decode_inputs(c, rng);
  for (SplitMode split : {SplitMode::single_pass, SplitMode::split}) {
    DecodeOptions longest;
    longest.order = DecodeOrder::longest_first;
    longest.split = split;
    longest.partition_tokens = split == SplitMode::split ? 256 : 0;
    const RecordedDecode got = record_through_c(in, longest, default_params(c), true);
    EXPECT_EQ(got.status, 0u);
    const DecodeResult cpp = decode_attention(ctx(), in, longest, default_params(c), true);
    ASSERT_EQ(got.output.bytes(), cpp.output.bytes());
    EXPECT_EQ(std::memcmp(got.output.data(), cpp.output.data(), cpp.output.bytes()), 0);
    const DecodeResult want = reference::decode_attention(in, longest, default_params(c), true);
    EXPECT_LE(max_abs_diff(got.output, want.output), tolerance(c.query_dtype, c.cache_dtype));
  }

  const vkp_decode_inputs cin = c_decode_inputs(in);
  vkp_decode_shape shape;
  vkp_decode_shape_init(&shape);
  ASSERT_VKP_OK(vkp_decode_shape_of(&cin, VKP_FALSE, &shape));
  vkp_decode_plan* raw = nullptr;
  o.order = vkp_decode_order(7);
  expect_refused(vkp_decode_plan_create(c_context(), &shape, &o, &raw), "options.order: 7");
  o.order = VKP_ORDER_GRID;
  o.merge = vkp_decode_merge(9);
  expect_refused(vkp_decode_plan_create(c_context(), &shape, &o, &raw), "options.merge: 9");
  o.merge = VKP_MERGE_REDUCE_PASS;
  ASSERT_VKP_OK(vkp_decode_plan_create(c_context(), &shape, &o, &raw));
  PlanPtr grid(raw, &vkp_decode_plan_destroy);
  vkp_decode_plan_info info;
  vkp_decode_plan_info_init(&info);
  ASSERT_VKP_OK(vkp_decode_plan_info_get(raw, &info));
  EXPECT_EQ(info.longest_first, VKP_FALSE);
  EXPECT_EQ(info.order_bytes, 0u);
  vkp_context* cctx = c_context();
  const CTensor lens = upload(cctx, in.context_lens);
  const CTensor list = zeros(cctx, DType::u8, Shape{64});
  expect_refused(run(cctx, [&](VkCommandBuffer cmd) { return vkp_record_decode_order(cctx, cmd, raw, &lens.view, &list.view.memory); }),
                 "plan: record_decode_order needs a plan made with DecodeOrder::longest_first");
  o.order = VKP_ORDER_LONGEST_FIRST;
  ASSERT_VKP_OK(vkp_decode_plan_create(c_context(), &shape, &o, &raw));
  PlanPtr longest(raw, &vkp_decode_plan_destroy);
  expect_refused(run(cctx, [&](VkCommandBuffer cmd) { return vkp_record_decode_order(cctx, cmd, raw, &lens.view, nullptr); }),
                 "order is NULL");
  const CTensor small = zeros(cctx, DType::u8, Shape{8});
  expect_refused(run(cctx, [&](VkCommandBuffer cmd) { return vkp_record_decode_order(cctx, cmd, raw, &lens.view, &small.view.memory); }),
                 "order:");
}

// One plan, per-call values that change from call to call: each record computes what the C++
// API does with those values; values that contradict the plan's shape are refused naming them.
TEST_F(CApiDecodeHostTest, PerCallParamsChangeBetweenCallsOfOnePlan) {
  DecodeCase c = make_case(DType::f16, DType::fp8_e4m3, {9, 300}, false, true);
  std::mt19937 rng(31);
  const DecodeInputs in = make_decode_inputs(c, rng);
  vkp_context* cctx = c_context();
  const vkp_decode_inputs cin = c_decode_inputs(in);
  vkp_decode_shape shape;
  vkp_decode_shape_init(&shape);
  ASSERT_VKP_OK(vkp_decode_shape_of(&cin, VKP_FALSE, &shape));
  shape.softcap = VKP_TRUE;
  vkp_decode_plan* raw = nullptr;
  ASSERT_VKP_OK(vkp_decode_plan_create(cctx, &shape, nullptr, &raw));
  PlanPtr plan(raw, &vkp_decode_plan_destroy);
  vkp_decode_shape got_shape;
  vkp_decode_shape_init(&got_shape);
  ASSERT_VKP_OK(vkp_decode_plan_shape_get(raw, &got_shape));
  EXPECT_EQ(got_shape.softcap, VKP_TRUE);

  const DeviceDecodeInputs device(cctx, in);
  const CTensor sinks = upload(cctx, in.sinks);
  const CTensor output = zeros(cctx, in.query.dtype(), in.query.shape());
  vkp_decode_views views = device.views(output);
  views.sinks = sinks.view;
  CTensor scratch;  // where the device's planner splits (not on lavapipe)
  if (vkp_decode_plan_scratch_bytes(raw) > 0) {
    scratch = zeros(cctx, DType::u8, Shape{int64_t(vkp_decode_plan_scratch_bytes(raw))});
    views.scratch = scratch.view.memory;
  }

  DecodeParams a = default_params(c), b = default_params(c);
  a.softcap = 30.0f;
  b.softcap = 4.0f;
  b.scale = 0.05f;
  b.k_scale *= 2.0f;
  std::vector<HostTensor> outputs;
  for (const DecodeParams& p : {a, b}) {
    const vkp_decode_params cp = c_params(p);
    ASSERT_VKP_OK(run(cctx, [&](VkCommandBuffer cmd) { return vkp_record_decode(cctx, cmd, raw, &views, &cp); }));
    outputs.push_back(download(cctx, output));
    const DecodeResult cpp = decode_attention(ctx(), in, {}, p);
    EXPECT_EQ(std::memcmp(outputs.back().data(), cpp.output.data(), cpp.output.bytes()), 0);
    EXPECT_LE(max_abs_diff(outputs.back(), reference::decode_attention(in, {}, p).output),
              tolerance(c.query_dtype, c.cache_dtype));
  }
  EXPECT_NE(std::memcmp(outputs[0].data(), outputs[1].data(), outputs[0].bytes()), 0) << "the params changed nothing";

  // Refused before anything is recorded: no soft cap for a plan with one (NULL params are the
  // defaults, softcap 0), a soft cap for a plan without, values out of range.
  vkp_decode_params capped = c_params(a);
  vkp_decode_params off = c_params(a);
  off.softcap = 0.0f;
  vkp_decode_shape plain = shape;
  plain.softcap = VKP_FALSE;
  vkp_decode_plan* raw_plain = nullptr;
  ASSERT_VKP_OK(vkp_decode_plan_create(cctx, &plain, nullptr, &raw_plain));
  PlanPtr plain_plan(raw_plain, &vkp_decode_plan_destroy);
  vkp_decode_params nan_scale = c_params(a);
  nan_scale.has_scale = VKP_TRUE;
  nan_scale.scale = std::numeric_limits<float>::quiet_NaN();
  EXPECT_VKP_OK(run(cctx, [&](VkCommandBuffer cmd) {
    expect_refused(vkp_record_decode(cctx, cmd, raw, &views, nullptr), "softcap");
    expect_refused(vkp_record_decode(cctx, cmd, raw, &views, &off), "softcap");
    expect_refused(vkp_record_decode(cctx, cmd, raw_plain, &views, &capped), "softcap");
    expect_refused(vkp_record_decode(cctx, cmd, raw, &views, &nan_scale), "scale");
    return VKP_OK;
  }));

  // Decode reads every cache layout; a value outside vkp_kv_layout is refused, naming it.
  vkp_decode_shape nhd = shape;
  nhd.kv_layout = VKP_KV_LAYOUT_NHD;
  vkp_decode_plan* raw_nhd = nullptr;
  ASSERT_VKP_OK(vkp_decode_plan_create(cctx, &nhd, nullptr, &raw_nhd));
  const PlanPtr nhd_plan(raw_nhd, &vkp_decode_plan_destroy);
  vkp_decode_shape unknown = shape;
  unknown.kv_layout = static_cast<vkp_kv_layout>(7);
  vkp_decode_plan* refused = nullptr;
  expect_refused(vkp_decode_plan_create(cctx, &unknown, nullptr, &refused), "kv_layout");
  EXPECT_EQ(refused, nullptr);
}

TEST_F(CApiDecodeHostTest, PlanAndRecordRefusalsNameTheArgument) {
  vkp_decode_shape shape;
  vkp_decode_shape_init(&shape);
  shape.num_seqs = 2;
  shape.num_heads = 8;
  shape.num_kv_heads = 2;
  shape.head_size = 64;
  shape.block_size = 16;
  shape.num_blocks = 8;
  shape.max_blocks_per_seq = 4;
  shape.query_dtype = VKP_DTYPE_F16;
  shape.cache_dtype = VKP_DTYPE_F16;
  vkp_decode_plan* raw = nullptr;
  vkp_decode_shape bad = shape;
  bad.head_size = 33;
  expect_refused(vkp_decode_plan_create(c_context(), &bad, nullptr, &raw), "head_size: 33");
  bad = shape;
  bad.num_heads = 7;
  expect_refused(vkp_decode_plan_create(c_context(), &bad, nullptr, &raw), "num_heads: 7");
  bad = shape;
  bad.query_dtype = vkp_dtype(42);
  expect_refused(vkp_decode_plan_create(c_context(), &bad, nullptr, &raw), "shape.query_dtype: 42");
  EXPECT_EQ(raw, nullptr);

  ASSERT_VKP_OK(vkp_decode_plan_create(c_context(), &shape, nullptr, &raw));
  PlanPtr plan(raw, &vkp_decode_plan_destroy);
  const CTensor query = zeros(c_context(), DType::f16, Shape{2, 8, 60});  // wrong head size
  vkp_decode_views views;
  vkp_decode_views_init(&views);
  views.query = query.view;
  // Refused inside a real command buffer, which stays valid and empty.
  EXPECT_VKP_OK(run(c_context(), [&](VkCommandBuffer cmd) {
    expect_refused(vkp_record_decode(c_context(), cmd, raw, &views, nullptr), "query: shape [2, 8, 60]");
    views.query.rank = 9;
    expect_refused(vkp_record_decode(c_context(), cmd, raw, &views, nullptr), "query: rank 9");
    return VKP_OK;
  }));
  // A plan belongs to the context it was made on.
  vkp_context* other = nullptr;
  vkp_external_device ext = shared_device();
  ASSERT_VKP_OK(vkp_context_create_external(&ext, &other));
  EXPECT_VKP_OK(run(c_context(), [&](VkCommandBuffer cmd) {
    expect_refused(vkp_record_decode(other, cmd, raw, &views, nullptr), "plan: created on another context");
    return VKP_OK;
  }));
  vkp_context_destroy(other);
}

}  // namespace
}  // namespace vkpaged::test
