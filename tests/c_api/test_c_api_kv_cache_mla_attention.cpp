// SPDX-License-Identifier: Apache-2.0
// MLA attention over a KvCache through the C API (vkp_kv_cache_mla_shape,
// vkp_kv_cache_record_mla_attention): the shape as the C++ cache makes it, a chunked step over
// layer 1 of both MLA kinds (bf16 and fp8 E4M3 pools) against reference::mla_attention on the
// rows stored there, and the refusals naming the argument, nothing written or recorded then.
#include <random>
#include <string>
#include <vector>

#include "c_api/c_api_test_helpers.hpp"
#include "support/attention_case.hpp"
#include "support/decode_case.hpp"
#include "support/mla_case.hpp"
#include "vkpaged/kv_cache.hpp"
#include "vkpaged/reference.hpp"

namespace vkpaged::test {
namespace {

using namespace c_api_helpers;
using PlanPtr = std::unique_ptr<vkp_mla_plan, decltype(&vkp_mla_plan_destroy)>;

constexpr uint32_t kDv = 64, kR = 32, kB = 16;

vkp_kv_cache_shape c_cache_shape(vkp_kv_cache_kind kind, vkp_dtype dtype) {
  vkp_kv_cache_shape s;
  vkp_kv_cache_shape_init(&s);
  s.num_layers = 2;
  s.num_kv_heads = 1;
  s.head_size = kDv;
  s.block_size = kB;
  s.dtype = dtype;
  s.layout = VKP_KV_LAYOUT_NHD;
  s.kind = kind;
  s.rope_head_size = kR;
  return s;
}

CachePtr make_cache(vkp_context* ctx, const vkp_kv_cache_shape& shape, uint32_t num_blocks) {
  const vkp_kv_cache_options options = kv_cache_options(num_blocks);
  vkp_kv_cache* raw = nullptr;
  EXPECT_VKP_OK(vkp_kv_cache_create(ctx, &shape, &options, &raw));
  return CachePtr(raw, &vkp_kv_cache_destroy);
}

class CApiKvCacheMlaAttentionTest : public GpuTest {};

TEST_F(CApiKvCacheMlaAttentionTest, MlaShapeIsTheCppCaches) {
  vkp_context* ctx = c_context();
  for (vkp_kv_cache_kind kind : {VKP_KV_CACHE_MLA_ONE_POOL, VKP_KV_CACHE_MLA_TWO_POOLS}) {
    const CachePtr cache = make_cache(ctx, c_cache_shape(kind, VKP_DTYPE_FP8_E4M3), 5);
    vkp_attention_shape batch = c_batch(2, 9, 16, 3);
    batch.num_kv_heads = 7;  // the cache's own values win
    batch.sliding_window = 12;
    vkp_attention_shape out;
    vkp_attention_shape_init(&out);
    uint32_t dv = 0;
    vkp_mla_cache_form form = vkp_mla_cache_form(9);
    ASSERT_VKP_OK(vkp_kv_cache_mla_shape(cache.get(), &batch, &out, &dv, &form));
    KvCacheOptions o;
    o.num_blocks = 5;
    const KvCache cpp(shared_context(), KvCacheShape{2, 1, kDv, kB, DType::fp8_e4m3, KvLayout::nhd, KvCacheKind(kind), kR},
                      o);
    AttentionShape cpp_batch;
    cpp_batch.num_requests = 2;
    cpp_batch.num_query_tokens = 9;
    cpp_batch.num_heads = 16;
    cpp_batch.max_blocks_per_seq = 3;
    cpp_batch.lse = true;
    cpp_batch.sliding_window = 12;
    const MlaShape want = cpp.mla_shape(cpp_batch);
    EXPECT_EQ(out.num_kv_heads, 1u);
    EXPECT_EQ(out.head_size, want.attention.head_size);
    EXPECT_EQ(out.head_size, kDv + kR);
    EXPECT_EQ(out.block_size, kB);
    EXPECT_EQ(out.num_blocks, 5u);
    EXPECT_EQ(out.cache_dtype, VKP_DTYPE_FP8_E4M3);
    EXPECT_EQ(out.kv_layout, VKP_KV_LAYOUT_NHD);
    EXPECT_EQ(out.num_heads, 16u);
    EXPECT_EQ(out.sliding_window, 12u);
    EXPECT_EQ(out.lse, VKP_TRUE);
    EXPECT_EQ(dv, want.value_head_size);
    EXPECT_EQ(int(form), int(want.cache_form));
    EXPECT_EQ(form, kind == VKP_KV_CACHE_MLA_ONE_POOL ? VKP_MLA_ONE_POOL : VKP_MLA_TWO_POOLS);
  }
}

TEST_F(CApiKvCacheMlaAttentionTest, RecordsOverTheLayersPoolsAsTheReference) {
  vkp_context* ctx = c_context();
  for (DType dtype : {DType::bf16, DType::fp8_e4m3}) {
    for (MlaCacheForm form : {MlaCacheForm::one_pool, MlaCacheForm::two_pools}) {
      const std::string label = std::string(dtype_name(dtype)) + (form == MlaCacheForm::one_pool ? " one" : " two");
      SCOPED_TRACE(label);
      MlaCase c;
      c.value_head_size = kDv;
      c.rope_head_size = kR;
      c.form = form;
      c.attention.heads = 4;
      c.attention.block_size = kB;
      c.attention.lens = {1, kB + 1, kB + 7, 2 * kB};  // a decode request, chunks after prefixes 0, B - 1, B
      c.attention.new_tokens = {1, kB + 1, 8, kB};
      c.attention.cache_dtype = dtype;
      c.attention.query_dtype = dtype == DType::bf16 ? DType::bf16 : DType::f16;
      std::mt19937 rng(uint32_t(dtype) * 2 + uint32_t(form));
      const MlaInputs in = make_mla_inputs(c, rng).mla;
      const HostTensor& any_pool = form == MlaCacheForm::one_pool ? in.mla_cache : in.ckv_cache;
      const vkp_kv_cache_kind kind = form == MlaCacheForm::one_pool ? VKP_KV_CACHE_MLA_ONE_POOL : VKP_KV_CACHE_MLA_TWO_POOLS;
      const CachePtr cache = make_cache(ctx, c_cache_shape(kind, vkp_dtype(dtype)), uint32_t(any_pool.shape()[0]));
      vkp_mla_cache_views pools;
      vkp_mla_cache_views_init(&pools);
      ASSERT_VKP_OK(vkp_kv_cache_mla_layer(cache.get(), 1, VKP_FALSE, &pools));
      for (const auto& [pool, rows] : {std::pair{&pools.mla_cache, &in.mla_cache}, std::pair{&pools.ckv_cache, &in.ckv_cache},
                                       std::pair{&pools.kpe_cache, &in.kpe_cache}})
        if (!rows->empty()) ASSERT_VKP_OK(vkp_upload(ctx, &pool->memory, rows->data(), rows->bytes()));

      const int64_t T = in.query.shape()[0], H = in.query.shape()[1];
      const vkp_attention_shape batch = c_batch(4, uint32_t(T), uint32_t(H), uint32_t(in.block_tables.shape()[1]));
      vkp_attention_shape shape;
      vkp_attention_shape_init(&shape);
      uint32_t dv = 0;
      vkp_mla_cache_form cache_form{};
      ASSERT_VKP_OK(vkp_kv_cache_mla_shape(cache.get(), &batch, &shape, &dv, &cache_form));
      shape.query_dtype = vkp_dtype(c.attention.query_dtype);
      const std::vector<int32_t> starts(in.query_starts.as<int32_t>(),
                                        in.query_starts.as<int32_t>() + in.query_starts.numel());
      vkp_mla_plan* raw = nullptr;
      ASSERT_VKP_OK(vkp_mla_plan_create(ctx, &shape, dv, cache_form, starts.data(), starts.size(), nullptr, &raw));
      const PlanPtr plan(raw, &vkp_mla_plan_destroy);
      vkp_mla_plan_info info;
      vkp_mla_plan_info_init(&info);
      ASSERT_VKP_OK(vkp_mla_plan_info_get(raw, &info));

      const CTensor query = upload(ctx, in.query), tables = upload(ctx, in.block_tables);
      const CTensor lens = upload(ctx, in.context_lens), d_starts = upload(ctx, in.query_starts);
      const CTensor output = zeros(ctx, c.attention.query_dtype, Shape{T, H, kDv});
      const CTensor lse = zeros(ctx, DType::f32, Shape{T, H});
      CTensor scratch;
      vkp_mla_views views = batch_views<vkp_mla_views>(query, tables, lens, d_starts, output);
      views.lse = lse.view;
      if (info.scratch_bytes)
        views.scratch = (scratch = zeros(ctx, DType::u8, Shape{int64_t(info.scratch_bytes)})).view.memory;
      const AttentionParams params = default_params(c.attention);
      const vkp_decode_params cparams = c_params(params);
      EXPECT_VKP_OK(run(ctx, [&](VkCommandBuffer cmd) {
        return vkp_kv_cache_record_mla_attention(cache.get(), cmd, 1, raw, &views, &cparams);
      }));
      const AttentionResult want = reference::mla_attention(in, params, true);
      expect_attention_near({download(ctx, output), download(ctx, lse)}, want,
                            tolerance(c.attention.query_dtype, dtype), true, label);
    }
  }
}

TEST_F(CApiKvCacheMlaAttentionTest, RefusesNamingTheArgument) {
  vkp_context* ctx = c_context();
  const CachePtr cache = make_cache(ctx, c_cache_shape(VKP_KV_CACHE_MLA_ONE_POOL, VKP_DTYPE_F16), 4);
  vkp_kv_cache_shape kv_shape = c_cache_shape(VKP_KV_CACHE_KEY_VALUE, VKP_DTYPE_F16);
  kv_shape.rope_head_size = 0;
  kv_shape.layout = VKP_KV_LAYOUT_VLLM;
  const CachePtr kv = make_cache(ctx, kv_shape, 4);
  const vkp_attention_shape batch = c_batch(1, 1, 4, 1);
  vkp_attention_shape shape;
  vkp_attention_shape_init(&shape);
  uint32_t dv = 77;
  vkp_mla_cache_form form = vkp_mla_cache_form(9);
  expect_refused(vkp_kv_cache_mla_shape(kv.get(), &batch, &shape, &dv, &form),
                 "vkp_kv_cache_mla_shape: KvCache: mla_shape: the cache holds key and value pools");
  EXPECT_EQ(dv, 77u);
  EXPECT_EQ(int(form), 9);
  EXPECT_EQ(shape.head_size, 0u);
  expect_refused(vkp_kv_cache_mla_shape(cache.get(), &batch, &shape, nullptr, &form), "value_head_size is NULL");
  expect_refused(vkp_kv_cache_mla_shape(cache.get(), &batch, &shape, &dv, nullptr), "cache_form is NULL");
  expect_refused(vkp_kv_cache_mla_shape(cache.get(), nullptr, &shape, &dv, &form), "batch is NULL");
  EXPECT_EQ(dv, 77u);
  ASSERT_VKP_OK(vkp_kv_cache_mla_shape(cache.get(), &batch, &shape, &dv, &form));

  const int32_t starts[] = {0, 1};
  vkp_mla_plan* raw = nullptr;
  ASSERT_VKP_OK(vkp_mla_plan_create(ctx, &shape, dv, form, starts, 2, nullptr, &raw));
  const PlanPtr plan(raw, &vkp_mla_plan_destroy);
  vkp_attention_shape wrong = shape;
  wrong.num_blocks = 3;
  vkp_mla_plan* raw_wrong = nullptr;
  ASSERT_VKP_OK(vkp_mla_plan_create(ctx, &wrong, dv, form, starts, 2, nullptr, &raw_wrong));
  const PlanPtr small(raw_wrong, &vkp_mla_plan_destroy);
  vkp_mla_cache_views pools;
  vkp_mla_cache_views_init(&pools);
  ASSERT_VKP_OK(vkp_kv_cache_mla_layer(cache.get(), 0, VKP_FALSE, &pools));

  const CTensor query = zeros(ctx, DType::f16, Shape{1, 4, kDv + kR}), output = zeros(ctx, DType::f16, Shape{1, 4, kDv});
  const CTensor tables = zeros(ctx, DType::i32, Shape{1, 1}), lens = zeros(ctx, DType::i32, Shape{1});
  const CTensor d_starts = zeros(ctx, DType::i32, Shape{2});
  vkp_mla_views views = batch_views<vkp_mla_views>(query, tables, lens, d_starts, output);
  vkp_mla_views with_pool = views;
  with_pool.mla_cache = pools.mla_cache;
  EXPECT_VKP_OK(run(ctx, [&](VkCommandBuffer cmd) {
    expect_refused(vkp_kv_cache_record_mla_attention(kv.get(), cmd, 0, raw, &views, nullptr),
                   "record_mla_attention: the cache holds key and value pools");
    expect_refused(vkp_kv_cache_record_mla_attention(cache.get(), cmd, 2, raw, &views, nullptr),
                   "layer 2 is outside [0, 2)");
    expect_refused(vkp_kv_cache_record_mla_attention(cache.get(), cmd, 0, raw, &with_pool, nullptr),
                   "views.mla_cache is given");
    expect_refused(vkp_kv_cache_record_mla_attention(cache.get(), cmd, 0, raw_wrong, &views, nullptr),
                   "num_blocks 3, the cache's is 4");
    expect_refused(vkp_kv_cache_record_mla_attention(cache.get(), cmd, 0, raw, nullptr, nullptr),
                   "vkp_kv_cache_record_mla_attention: views is NULL");
    expect_refused(vkp_kv_cache_record_mla_attention(cache.get(), cmd, 0, nullptr, &views, nullptr), "plan is NULL");
    return VKP_OK;
  }));
  expect_refused(vkp_kv_cache_record_mla_attention(cache.get(), VK_NULL_HANDLE, 0, raw, &views, nullptr),
                 "cmd is NULL");
}

}  // namespace
}  // namespace vkpaged::test
