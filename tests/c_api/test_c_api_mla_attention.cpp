// SPDX-License-Identifier: Apache-2.0
// MLA attention through the C API (vkp_mla_plan_create, vkp_record_mla_attention): both cache
// forms, split and one pass, against reference::mla_attention; the plan's info as the C++
// plan's; and the refusals naming the argument.
#include <cmath>
#include <random>

#include "c_api/c_api_test_helpers.hpp"
#include "support/attention_case.hpp"
#include "support/decode_case.hpp"
#include "support/mla_case.hpp"
#include "vkpaged/mla_attention.hpp"
#include "vkpaged/reference.hpp"

namespace vkpaged::test {
namespace {

using namespace c_api_helpers;
using PlanPtr = std::unique_ptr<vkp_mla_plan, decltype(&vkp_mla_plan_destroy)>;

vkp_attention_shape c_shape(const AttentionShape& s) {
  vkp_attention_shape c;
  vkp_attention_shape_init(&c);
  c.num_requests = s.num_requests;
  c.num_query_tokens = s.num_query_tokens;
  c.num_heads = s.num_heads;
  c.num_kv_heads = s.num_kv_heads;
  c.head_size = s.head_size;
  c.block_size = s.block_size;
  c.num_blocks = s.num_blocks;
  c.max_blocks_per_seq = s.max_blocks_per_seq;
  c.max_context_len = s.max_context_len;
  c.query_dtype = vkp_dtype(s.query_dtype);
  c.cache_dtype = vkp_dtype(s.cache_dtype);
  c.kv_layout = vkp_kv_layout(s.kv_layout);
  c.sliding_window = s.sliding_window;
  c.softcap = s.softcap;
  c.alibi = s.alibi;
  c.sinks = s.sinks;
  c.lse = s.lse;
  c.tree_mask = s.tree_mask;
  return c;
}

MlaInputs draw(MlaCacheForm form, uint32_t seed) {
  MlaCase c;
  c.value_head_size = 64;
  c.rope_head_size = 16;
  c.form = form;
  c.attention.heads = 5;
  c.attention.lens = {300, 9, 1};
  c.attention.new_tokens = {3, 4, 1};
  c.attention.sinks = true;
  c.attention.alibi = true;
  std::mt19937 rng(seed);
  return make_mla_inputs(c, rng).mla;
}

class CApiMlaAttentionTest : public GpuTest {};

TEST_F(CApiMlaAttentionTest, BothFormsSplitAndOnePassMatchTheReference) {
  vkp_context* ctx = c_context();
  for (MlaCacheForm form : {MlaCacheForm::one_pool, MlaCacheForm::two_pools}) {
    for (vkp_split_mode split : {VKP_SPLIT_SINGLE_PASS, VKP_SPLIT_SPLIT}) {
      const MlaInputs in = draw(form, 11 + uint32_t(form));
      AttentionParams params;
      params.softcap = 3.0f;
      const MlaShape m = mla_shape_of(in, params, true);
      const vkp_attention_shape shape = c_shape(m.attention);
      const auto starts = std::vector<int32_t>(in.query_starts.as<int32_t>(),
                                               in.query_starts.as<int32_t>() + in.query_starts.numel());
      vkp_mla_options options;
      vkp_mla_options_init(&options);
      options.split = split;
      options.partition_tokens = split == VKP_SPLIT_SPLIT ? 256 : 0;
      // The portable kernel asked for by name, or the automatic choice (the tensor-core kernel where it runs).
      options.kernel = split == VKP_SPLIT_SPLIT ? VKP_ATTENTION_KERNEL_AUTOMATIC : VKP_ATTENTION_KERNEL_SCALAR;
      vkp_mla_plan* raw = nullptr;
      ASSERT_VKP_OK(vkp_mla_plan_create(ctx, &shape, m.value_head_size, vkp_mla_cache_form(form), starts.data(),
                                        starts.size(), &options, &raw));
      const PlanPtr plan(raw, &vkp_mla_plan_destroy);
      MlaOptions cpp_options;
      cpp_options.split = SplitMode(split);
      cpp_options.partition_tokens = options.partition_tokens;
      cpp_options.kernel = AttentionKernel(options.kernel);
      const MlaPlan cpp = MlaPlan::create(shared_context(), m, starts, cpp_options);
      vkp_mla_plan_info info;
      vkp_mla_plan_info_init(&info);
      ASSERT_VKP_OK(vkp_mla_plan_info_get(raw, &info));
      EXPECT_EQ(info.split, vkp_bool32(cpp.split()));
      EXPECT_EQ(info.split, vkp_bool32(split == VKP_SPLIT_SPLIT));
      EXPECT_EQ(info.num_partitions, cpp.num_partitions());
      EXPECT_EQ(info.kernel, vkp_attention_kernel(cpp.kernel()));
      if (options.kernel == VKP_ATTENTION_KERNEL_SCALAR) EXPECT_EQ(info.kernel, VKP_ATTENTION_KERNEL_SCALAR);
      EXPECT_EQ(info.scratch_bytes, cpp.scratch_bytes());
      EXPECT_EQ(std::string(vkp_mla_plan_describe(raw)), cpp.describe());

      const CTensor query = upload(ctx, in.query);
      CTensor pool, ckv, kpe, scratch;
      vkp_mla_views views;
      vkp_mla_views_init(&views);
      if (form == MlaCacheForm::one_pool) {
        views.mla_cache = (pool = upload(ctx, in.mla_cache)).view;
      } else {
        views.ckv_cache = (ckv = upload(ctx, in.ckv_cache)).view;
        views.kpe_cache = (kpe = upload(ctx, in.kpe_cache)).view;
      }
      const CTensor tables = upload(ctx, in.block_tables), lens = upload(ctx, in.context_lens);
      const CTensor d_starts = upload(ctx, in.query_starts), alibi = upload(ctx, in.alibi_slopes);
      const CTensor sinks = upload(ctx, in.sinks);
      const int64_t T = in.query.shape()[0], H = in.query.shape()[1];
      const CTensor output = zeros(ctx, in.query.dtype(), Shape{T, H, int64_t(m.value_head_size)});
      const CTensor lse = zeros(ctx, DType::f32, Shape{T, H});
      const CTensor status = zeros(ctx, DType::u32, Shape{1});
      views.query = query.view;
      views.block_tables = tables.view;
      views.context_lens = lens.view;
      views.query_starts = d_starts.view;
      views.alibi_slopes = alibi.view;
      views.sinks = sinks.view;
      views.output = output.view;
      views.lse = lse.view;
      views.status = status.view.memory;
      if (info.scratch_bytes) views.scratch = (scratch = zeros(ctx, DType::u8, Shape{int64_t(info.scratch_bytes)})).view.memory;
      const vkp_decode_params cparams = c_params(params);
      EXPECT_VKP_OK(run(ctx, [&](VkCommandBuffer cmd) { return vkp_record_mla_attention(ctx, cmd, raw, &views, &cparams); }));
      const AttentionResult want = reference::mla_attention(in, params, true);
      expect_attention_near({download(ctx, output), download(ctx, lse)}, want, tolerance(DType::f16, DType::f16), true,
                            std::string(form == MlaCacheForm::one_pool ? "one pool" : "two pools") +
                                (split == VKP_SPLIT_SPLIT ? " split" : " one pass"));
      EXPECT_EQ(download(ctx, status).as<uint32_t>()[0], 0u);
    }
  }
}

TEST_F(CApiMlaAttentionTest, RefusesNamingTheArgument) {
  vkp_context* ctx = c_context();
  const MlaInputs in = draw(MlaCacheForm::one_pool, 13);
  const MlaShape m = mla_shape_of(in, {}, false);
  const vkp_attention_shape shape = c_shape(m.attention);
  const std::vector<int32_t> starts(in.query_starts.as<int32_t>(), in.query_starts.as<int32_t>() + in.query_starts.numel());
  vkp_mla_plan* raw = nullptr;
  expect_refused(vkp_mla_plan_create(ctx, &shape, 36, VKP_MLA_ONE_POOL, starts.data(), starts.size(), nullptr, &raw),
                 "value_head_size: Dv = 36");
  EXPECT_EQ(raw, nullptr);
  expect_refused(vkp_mla_plan_create(ctx, &shape, 64, vkp_mla_cache_form(5), starts.data(), starts.size(), nullptr, &raw),
                 "cache_form: 5 is not a vkp_mla_cache_form");
  vkp_mla_options options;
  vkp_mla_options_init(&options);
  options.split = vkp_split_mode(9);
  expect_refused(vkp_mla_plan_create(ctx, &shape, 64, VKP_MLA_ONE_POOL, starts.data(), starts.size(), &options, &raw),
                 "options.split: 9");
  options.split = VKP_SPLIT_AUTOMATIC;
  options.kernel = vkp_attention_kernel(9);
  expect_refused(vkp_mla_plan_create(ctx, &shape, 64, VKP_MLA_ONE_POOL, starts.data(), starts.size(), &options, &raw),
                 "options.kernel: 9");
  options.kernel = VKP_ATTENTION_KERNEL_DECODE;
  expect_refused(vkp_mla_plan_create(ctx, &shape, 64, VKP_MLA_ONE_POOL, starts.data(), starts.size(), &options, &raw),
                 "kernel: 1 (MLA runs on automatic (0), scalar (2) or matrix (3)");
  expect_refused(vkp_mla_plan_create(ctx, nullptr, 64, VKP_MLA_ONE_POOL, starts.data(), starts.size(), nullptr, &raw),
                 "shape");
  ASSERT_VKP_OK(vkp_mla_plan_create(ctx, &shape, 64, VKP_MLA_ONE_POOL, starts.data(), starts.size(), nullptr, &raw));
  const PlanPtr plan(raw, &vkp_mla_plan_destroy);
  vkp_mla_views views;
  vkp_mla_views_init(&views);
  const CTensor query = upload(ctx, in.query);
  views.query = query.view;
  EXPECT_EQ(run(ctx, [&](VkCommandBuffer cmd) { return vkp_record_mla_attention(ctx, cmd, raw, &views, nullptr); }),
            VKP_ERROR_INVALID_ARGUMENT);
  EXPECT_NE(std::string(vkp_last_error()).find("mla_cache"), std::string::npos) << vkp_last_error();
  expect_refused(vkp_record_mla_attention(ctx, VK_NULL_HANDLE, raw, &views, nullptr), "cmd");
}

}  // namespace
}  // namespace vkpaged::test
