// SPDX-License-Identifier: Apache-2.0
// Multi-query attention through the C API: plans made from host query starts, recording into a
// command buffer with C views (bit for bit what the C++ API computes, within the contract's
// tolerance of the reference) in every cache layout with tree masks, windows, ALiBi, sinks,
// soft caps and fp8 scales; the host convenience and the reference; what the plan chose; and
// refusals that name the argument.
#include <cstring>
#include <vector>

#include "c_api/c_api_test_helpers.hpp"
#include "support/attention_case.hpp"
#include "support/decode_case.hpp"
#include "vkpaged/reference.hpp"

namespace vkpaged::test {
namespace {

using namespace c_api_helpers;

vkp_attention_options c_options(AttentionKernel kernel, SplitMode split = SplitMode::automatic,
                                uint32_t partition_tokens = 0) {
  vkp_attention_options o;
  vkp_attention_options_init(&o);
  o.kernel = vkp_attention_kernel(kernel);
  o.split = vkp_split_mode(split);
  o.partition_tokens = partition_tokens;
  return o;
}

AttentionOptions cpp_options(const vkp_attention_options& o) {
  return {AttentionKernel(o.kernel), SplitMode(o.split), o.partition_tokens};
}

std::vector<int32_t> starts_of(const AttentionInputs& in) {
  std::vector<int32_t> starts(size_t(in.query_starts.numel()));
  for (size_t i = 0; i < starts.size(); ++i) starts[i] = int32_t(in.query_starts.get(i));
  return starts;
}

// A u8 tree mask whose view covers whole 32-bit words (vkp_attention_views.tree_mask).
CTensor upload_tree_mask(vkp_context* ctx, const HostTensor& mask) {
  CTensor t;
  vkp_buffer* buffer = nullptr;
  EXPECT_VKP_OK(vkp_buffer_create(ctx, std::max<size_t>((mask.bytes() + 15) / 16 * 16, 16), VKP_MEMORY_DEVICE, &buffer));
  t.buffer.reset(buffer);
  const int64_t dims[] = {mask.shape()[0]};
  EXPECT_VKP_OK(vkp_buffer_tensor(buffer, VKP_DTYPE_U8, dims, 1, 0, &t.view));
  t.view.memory.size = (t.view.memory.size + 3) / 4 * 4;
  EXPECT_VKP_OK(vkp_upload(ctx, &t.view.memory, mask.data(), mask.bytes()));
  return t;
}

// Plans through C (its shape from vkp_attention_shape_of), checks what the plan says against
// the C++ plan of the same arguments, uploads through C and records vkp_record_attention.
AttentionResult record_through_c(const AttentionInputs& in, const AttentionParams& params,
                                 const vkp_attention_options& options, bool want_lse, uint32_t* status_out) {
  vkp_context* ctx = c_context();
  const vkp_attention_inputs cin = c_attention_inputs(in);
  const vkp_decode_params cparams = c_params(params);
  vkp_attention_shape shape;
  vkp_attention_shape_init(&shape);
  EXPECT_VKP_OK(vkp_attention_shape_of(&cin, &cparams, want_lse ? VKP_TRUE : VKP_FALSE, &shape));
  const std::vector<int32_t> starts = starts_of(in);
  vkp_attention_plan* raw = nullptr;
  EXPECT_VKP_OK(vkp_attention_plan_create(ctx, &shape, starts.data(), starts.size(), &options, &raw));
  AttentionPlanPtr plan(raw, &vkp_attention_plan_destroy);

  // What the plan says: the C++ plan's answers, the shape and options as given.
  const AttentionShape cpp_shape = attention_shape_of(in, params, want_lse);
  const AttentionPlan cpp = AttentionPlan::create(shared_context(), cpp_shape, starts, cpp_options(options));
  vkp_attention_plan_info info;
  vkp_attention_plan_info_init(&info);
  EXPECT_VKP_OK(vkp_attention_plan_info_get(raw, &info));
  EXPECT_EQ(int(info.kernel), int(cpp.kernel()));
  EXPECT_EQ(info.max_query_tokens, cpp.max_query_tokens());
  EXPECT_EQ(info.split, vkp_bool32(cpp.split()));
  EXPECT_EQ(info.num_partitions, cpp.num_partitions());
  EXPECT_EQ(info.tree_mask_bytes, cpp.tree_mask_bytes());
  EXPECT_EQ(info.scratch_bytes, cpp.scratch_bytes());
  EXPECT_EQ(info.reserved0, 0u);
  EXPECT_EQ(std::string(vkp_attention_plan_describe(raw)), cpp.describe());
  vkp_attention_shape plan_shape;
  vkp_attention_shape_init(&plan_shape);
  EXPECT_VKP_OK(vkp_attention_plan_shape_get(raw, &plan_shape));
  EXPECT_EQ(std::memcmp(&plan_shape, &shape, sizeof(shape)), 0);
  EXPECT_EQ(plan_shape.kv_layout, vkp_kv_layout(in.kv_layout));
  EXPECT_EQ(plan_shape.softcap, vkp_bool32(params.softcap > 0.0f));
  vkp_attention_options plan_options;
  vkp_attention_options_init(&plan_options);
  EXPECT_VKP_OK(vkp_attention_plan_options_get(raw, &plan_options));
  EXPECT_EQ(std::memcmp(&plan_options, &options, sizeof(options)), 0);

  const CTensor query = upload(ctx, in.query), key = upload(ctx, in.key_cache), value = upload(ctx, in.value_cache);
  const CTensor tables = upload(ctx, in.block_tables), lens = upload(ctx, in.context_lens);
  const CTensor d_starts = upload(ctx, in.query_starts);
  const int64_t T = in.query.shape()[0], H = in.query.shape()[1];
  const CTensor output = zeros(ctx, in.query.dtype(), in.query.shape());
  const CTensor lse = zeros(ctx, DType::f32, Shape{T, H});
  const CTensor status = zeros(ctx, DType::u32, Shape{1});
  CTensor mask, alibi, sinks, scratch;
  vkp_attention_views views;
  vkp_attention_views_init(&views);
  views.query = query.view;
  views.key_cache = key.view;
  views.value_cache = value.view;
  views.block_tables = tables.view;
  views.context_lens = lens.view;
  views.query_starts = d_starts.view;
  views.output = output.view;
  if (shape.lse) views.lse = lse.view;
  if (shape.tree_mask) views.tree_mask = (mask = upload_tree_mask(ctx, in.tree_mask)).view;
  if (shape.alibi) views.alibi_slopes = (alibi = upload(ctx, in.alibi_slopes)).view;
  if (shape.sinks) views.sinks = (sinks = upload(ctx, in.sinks)).view;
  if (info.scratch_bytes) {
    scratch = zeros(ctx, DType::u8, Shape{int64_t(info.scratch_bytes)});
    views.scratch = scratch.view.memory;
  }
  views.status = status.view.memory;
  EXPECT_VKP_OK(run(ctx, [&](VkCommandBuffer cmd) { return vkp_record_attention(ctx, cmd, raw, &views, &cparams); }));
  AttentionResult r;
  r.output = download(ctx, output);
  if (want_lse) r.lse = download(ctx, lse);
  *status_out = download(ctx, status).as<uint32_t>()[0];
  return r;
}

struct CApiAttentionParam {
  AttentionCase c;
  AttentionKernel kernel;
  float softcap;
  SplitMode split = SplitMode::automatic;
};
void PrintTo(const CApiAttentionParam& p, std::ostream* os) { *os << p.c.str(); }

class CApiAttentionTest : public GpuTest, public ::testing::WithParamInterface<CApiAttentionParam> {};

// The C path records what the C++ path does: identical bits, and the reference's values.
TEST_P(CApiAttentionTest, RecordedAttentionMatchesCppBitForBitAndTheReference) {
  const CApiAttentionParam& p = GetParam();
  std::mt19937 rng(17);
  const AttentionInputs in = make_attention_inputs(p.c, rng);
  AttentionParams params = default_params(p.c);
  params.softcap = p.softcap;
  const vkp_attention_options options = c_options(p.kernel, p.split, p.split == SplitMode::split ? 256 : 0);
  const bool want_lse = p.c.sinks || p.c.alibi;
  uint32_t status = 99;
  const AttentionResult got = record_through_c(in, params, options, want_lse, &status);
  EXPECT_EQ(status, 0u);
  const AttentionResult cpp = batch_attention(ctx(), in, params, cpp_options(options), want_lse);
  ASSERT_EQ(got.output.bytes(), cpp.output.bytes());
  EXPECT_EQ(std::memcmp(got.output.data(), cpp.output.data(), cpp.output.bytes()), 0) << p.c.str();
  if (want_lse) EXPECT_EQ(std::memcmp(got.lse.data(), cpp.lse.data(), cpp.lse.bytes()), 0) << p.c.str();
  expect_attention_near(got, reference::batch_attention(in, params, want_lse),
                        tolerance(p.c.query_dtype, p.c.cache_dtype), want_lse, p.c.str());
}

AttentionCase attention_case(KvLayout layout, DType q, DType cache, std::vector<uint32_t> lens,
                             std::vector<uint32_t> new_tokens) {
  AttentionCase c;
  c.layout = layout;
  c.query_dtype = q;
  c.cache_dtype = cache;
  c.lens = std::move(lens);
  c.new_tokens = std::move(new_tokens);
  return c;
}

CApiAttentionParam with(AttentionCase c, AttentionKernel kernel, float softcap, SplitMode split = SplitMode::automatic) {
  return {std::move(c), kernel, softcap, split};
}

std::vector<CApiAttentionParam> attention_cases() {
  std::vector<CApiAttentionParam> cases;
  // A mixed step (decode rows, a chunk after a prefix, a whole prompt), vllm layout.
  cases.push_back(with(attention_case(KvLayout::vllm, DType::f16, DType::f16, {33, 1, 40, 12}, {1, 1, 9, 12}),
                       AttentionKernel::automatic, 0.0f));
  // nhd: speculative trees with sinks and a window, f32.
  AttentionCase tree = attention_case(KvLayout::nhd, DType::f32, DType::f32, {20, 9}, {6, 9});
  tree.tree_mask = TreeMask::tree;
  tree.sinks = true;
  tree.sliding_window = 7;
  cases.push_back(with(tree, AttentionKernel::scalar, 0.0f));
  // hnd: an fp8 cache with scales, ALiBi and a soft cap, split into partitions.
  AttentionCase fp8 = attention_case(KvLayout::hnd, DType::bf16, DType::fp8_e4m3, {300, 17}, {3, 17});
  fp8.alibi = true;
  fp8.fp8_scale = 0.01f;
  cases.push_back(with(fp8, AttentionKernel::scalar, 15.0f, SplitMode::split));
  // A batch of single tokens on the decode kernels.
  cases.push_back(with(attention_case(KvLayout::vllm, DType::f16, DType::f16, {5, 70, 1}, {1, 1, 1}),
                       AttentionKernel::decode, 0.0f));
  return cases;
}

std::string attention_name(const ::testing::TestParamInfo<CApiAttentionParam>& info) {
  const AttentionCase& c = info.param.c;
  return std::string(kv_layout_name(c.layout)) + "_" + std::string(dtype_name(c.query_dtype)) + "_" +
         std::string(dtype_name(c.cache_dtype)) + "_" + std::to_string(info.index);
}

INSTANTIATE_TEST_SUITE_P(Cases, CApiAttentionTest, ::testing::ValuesIn(attention_cases()), attention_name);

class CApiAttentionHostTest : public GpuTest {};

TEST_F(CApiAttentionHostTest, ConvenienceAndReferenceMatchTheCppApi) {
  AttentionCase c = attention_case(KvLayout::nhd, DType::f16, DType::f16, {40, 3, 25}, {4, 3, 25});
  c.sinks = true;
  c.tree_mask = TreeMask::random;
  std::mt19937 rng(23);
  const AttentionInputs in = make_attention_inputs(c, rng);
  AttentionParams params = default_params(c);
  params.scale = 0.3f;
  params.softcap = 8.0f;
  const vkp_attention_inputs cin = c_attention_inputs(in);
  const vkp_decode_params cparams = c_params(params);
  const vkp_attention_options options = c_options(AttentionKernel::scalar);
  const int64_t T = in.query.shape()[0], H = in.query.shape()[1];
  HostTensor out(in.query.dtype(), in.query.shape()), ref(in.query.dtype(), in.query.shape());
  std::vector<float> lse(size_t(T * H)), ref_lse(size_t(T * H));
  ASSERT_VKP_OK(
      vkp_batch_attention(c_context(), &cin, &options, &cparams, out.data(), out.bytes(), lse.data(), lse.size()));
  ASSERT_VKP_OK(vkp_reference_batch_attention(&cin, &cparams, ref.data(), ref.bytes(), ref_lse.data(), ref_lse.size()));
  // The C reference is the C++ reference, bit for bit; the device path what C++ computes.
  const AttentionResult cpp_ref = reference::batch_attention(in, params, true);
  EXPECT_EQ(std::memcmp(ref.data(), cpp_ref.output.data(), ref.bytes()), 0);
  EXPECT_EQ(std::memcmp(ref_lse.data(), cpp_ref.lse.data(), ref_lse.size() * 4), 0);
  const AttentionResult cpp = batch_attention(ctx(), in, params, cpp_options(options), true);
  EXPECT_EQ(std::memcmp(out.data(), cpp.output.data(), out.bytes()), 0);
  EXPECT_EQ(std::memcmp(lse.data(), cpp.lse.data(), lse.size() * 4), 0);
  // The shape the inputs give, the soft cap from the params.
  vkp_attention_shape shape;
  vkp_attention_shape_init(&shape);
  ASSERT_VKP_OK(vkp_attention_shape_of(&cin, &cparams, VKP_TRUE, &shape));
  const AttentionShape want = attention_shape_of(in, params, true);
  EXPECT_EQ(shape.num_requests, want.num_requests);
  EXPECT_EQ(shape.num_query_tokens, want.num_query_tokens);
  EXPECT_EQ(shape.kv_layout, VKP_KV_LAYOUT_NHD);
  EXPECT_EQ(shape.softcap, VKP_TRUE);
  EXPECT_EQ(shape.tree_mask, VKP_TRUE);
  EXPECT_EQ(shape.sinks, VKP_TRUE);
  EXPECT_EQ(shape.lse, VKP_TRUE);
  // Without options, params and LSE: the defaults.
  ASSERT_VKP_OK(vkp_reference_batch_attention(&cin, nullptr, ref.data(), ref.bytes(), nullptr, 0));
  const AttentionResult defaults = reference::batch_attention(in, {}, false);
  EXPECT_EQ(std::memcmp(ref.data(), defaults.output.data(), ref.bytes()), 0);
  ASSERT_VKP_OK(vkp_attention_shape_of(&cin, nullptr, VKP_FALSE, &shape));
  EXPECT_EQ(shape.softcap, VKP_FALSE);
  EXPECT_EQ(shape.lse, VKP_FALSE);
}

TEST_F(CApiAttentionHostTest, RefusesBadArgumentsNamingThemAndWritesNothing) {
  AttentionCase c = attention_case(KvLayout::hnd, DType::f32, DType::f32, {10, 20}, {2, 5});
  std::mt19937 rng(29);
  const AttentionInputs in = make_attention_inputs(c, rng);
  vkp_attention_inputs cin = c_attention_inputs(in);
  HostTensor out(in.query.dtype(), in.query.shape());
  std::memset(out.data(), 0x5A, out.bytes());
  const HostTensor untouched = out;
  std::vector<float> lse(2);
  expect_refused(vkp_batch_attention(c_context(), &cin, nullptr, nullptr, out.data(), out.bytes() - 4, nullptr, 0),
                 "output_bytes: " + std::to_string(out.bytes() - 4) + " is less than T * H * D * 4");
  expect_refused(vkp_reference_batch_attention(&cin, nullptr, out.data(), out.bytes(), lse.data(), lse.size()),
                 "lse_count: 2 is less than T * H = 28");
  vkp_decode_params params;
  vkp_decode_params_init(&params);
  params.v_scale = -1.0f;
  expect_refused(vkp_batch_attention(c_context(), &cin, nullptr, &params, out.data(), out.bytes(), nullptr, 0),
                 "v_scale");
  HostTensor lens = in.context_lens;
  lens.as<int32_t>()[0] = 1;  // below its request's 2 new tokens
  cin.context_lens = host_view(lens);
  expect_refused(vkp_reference_batch_attention(&cin, nullptr, out.data(), out.bytes(), nullptr, 0), "context_lens[0]");
  cin = c_attention_inputs(in);
  cin.kv_layout = VKP_KV_LAYOUT_VLLM;  // caches given in hnd
  expect_refused(vkp_batch_attention(c_context(), &cin, nullptr, nullptr, out.data(), out.bytes(), nullptr, 0),
                 "key_cache");
  EXPECT_EQ(std::memcmp(out.data(), untouched.data(), out.bytes()), 0) << "a refused call wrote the output";

  // Plans: query starts checked against the shape, the decode kernels refused for chunks.
  cin = c_attention_inputs(in);
  vkp_attention_shape shape;
  vkp_attention_shape_init(&shape);
  ASSERT_VKP_OK(vkp_attention_shape_of(&cin, nullptr, VKP_FALSE, &shape));
  vkp_attention_plan* raw = nullptr;
  const int32_t wrong_end[] = {0, 2, 6};
  expect_refused(vkp_attention_plan_create(c_context(), &shape, wrong_end, 3, nullptr, &raw),
                 "query_starts[2]: 6 is not T = num_query_tokens = 7");
  const int32_t starts[] = {0, 2, 7};
  const vkp_attention_options decode = c_options(AttentionKernel::decode);
  const vkp_status refused = vkp_attention_plan_create(c_context(), &shape, starts, 3, &decode, &raw);
  EXPECT_NE(refused, VKP_OK);
  EXPECT_NE(std::string(vkp_last_error()).find("kernel"), std::string::npos) << vkp_last_error();
  vkp_attention_shape bad = shape;
  bad.head_size = 33;
  expect_refused(vkp_attention_plan_create(c_context(), &bad, starts, 3, nullptr, &raw), "head_size: 33");
  EXPECT_EQ(raw, nullptr);

  // Recording: the views against the plan, the params, the plan's context.
  ASSERT_VKP_OK(vkp_attention_plan_create(c_context(), &shape, starts, 3, nullptr, &raw));
  AttentionPlanPtr plan(raw, &vkp_attention_plan_destroy);
  const CTensor query = zeros(c_context(), DType::f32, Shape{7, int64_t(c.heads), 40});  // wrong head size
  vkp_attention_views views;
  vkp_attention_views_init(&views);
  views.query = query.view;
  vkp_decode_params softcap;
  vkp_decode_params_init(&softcap);
  softcap.softcap = 5.0f;  // the plan's shape has no soft cap
  vkp_context* other = nullptr;
  vkp_external_device ext = shared_device();
  ASSERT_VKP_OK(vkp_context_create_external(&ext, &other));
  EXPECT_VKP_OK(run(c_context(), [&](VkCommandBuffer cmd) {
    expect_refused(vkp_record_attention(c_context(), cmd, raw, &views, nullptr), "query: shape [7, 4, 40]");
    expect_refused(vkp_record_attention(c_context(), cmd, raw, &views, &softcap), "softcap");
    expect_refused(vkp_record_attention(other, cmd, raw, &views, nullptr), "plan: created on another context");
    return VKP_OK;
  }));
  vkp_context_destroy(other);
}

}  // namespace
}  // namespace vkpaged::test
