// SPDX-License-Identifier: Apache-2.0
// Bucket plans and start-up through the C API: vkp_attention_plan_create_bucket and the scratch
// query (what the C++ API answers), a pipeline set prepared by vkp_prepare (the plans made after
// it build nothing), the context's pipeline cache saved and loaded, and refusals that name the
// argument.
#include <cstring>
#include <mutex>
#include <vector>

#include "c_api/c_api_handles.hpp"
#include "c_api/c_api_test_helpers.hpp"
#include "vkpaged/attention.hpp"
#include "vkpaged/mla_attention.hpp"
#include "vkpaged/prepare.hpp"

namespace vkpaged::test {
namespace {

using namespace c_api_helpers;

using PipelineSetPtr = std::unique_ptr<vkp_pipeline_set, decltype(&vkp_pipeline_set_destroy)>;
using KvCachePtr = std::unique_ptr<vkp_kv_cache, decltype(&vkp_kv_cache_destroy)>;

vkp_attention_shape bucket(uint32_t requests, uint32_t tokens) {
  vkp_attention_shape s;
  vkp_attention_shape_init(&s);
  s.num_requests = requests;
  s.num_query_tokens = tokens;
  s.num_heads = 8;
  s.num_kv_heads = 2;
  s.head_size = 64;
  s.block_size = 16;
  s.num_blocks = 32;
  s.max_blocks_per_seq = 8;
  return s;
}

size_t pipelines_built(vkp_context* ctx) {
  auto& impl = ctx->context.impl();
  std::lock_guard lock(impl.pipeline_mutex);
  return impl.pipelines.size();
}

class CApiBucketTest : public GpuTest {};

TEST_F(CApiBucketTest, ABucketPlanSaysSoAndItsScratchIsKnownBeforeIt) {
  vkp_context* ctx = c_context();
  const vkp_attention_shape shape = bucket(4, 32);
  vkp_attention_options options;
  vkp_attention_options_init(&options);
  options.split = VKP_SPLIT_SPLIT;
  options.partition_tokens = 256;
  uint64_t scratch = 0;
  ASSERT_VKP_OK(vkp_attention_bucket_scratch_bytes(ctx, &shape, 16, &options, &scratch));
  vkp_attention_plan* raw = nullptr;
  ASSERT_VKP_OK(vkp_attention_plan_create_bucket(ctx, &shape, 16, &options, &raw));
  const AttentionPlanPtr plan(raw, &vkp_attention_plan_destroy);
  vkp_attention_plan_info info;
  vkp_attention_plan_info_init(&info);
  ASSERT_VKP_OK(vkp_attention_plan_info_get(plan.get(), &info));
  EXPECT_EQ(info.bucket, VKP_TRUE);
  EXPECT_EQ(info.max_query_tokens, 16u);
  EXPECT_EQ(info.scratch_bytes, scratch);
  EXPECT_GT(scratch, 0u);
  EXPECT_EQ(info.reserved1, 0u);
  // What the C++ API answers for the same bucket.
  const AttentionShape cpp{.num_requests = 4, .num_query_tokens = 32, .num_heads = 8, .num_kv_heads = 2, .head_size = 64,
                           .block_size = 16, .num_blocks = 32, .max_blocks_per_seq = 8};
  EXPECT_EQ(scratch, AttentionPlan::max_scratch_bytes(ctx->context, cpp, 16, {.split = SplitMode::split,
                                                                                .partition_tokens = 256}));
  // A plan from query starts is none.
  const int32_t starts[] = {0, 8, 16, 24, 32};
  ASSERT_VKP_OK(vkp_attention_plan_create(ctx, &shape, starts, 5, &options, &raw));
  const AttentionPlanPtr step(raw, &vkp_attention_plan_destroy);
  ASSERT_VKP_OK(vkp_attention_plan_info_get(step.get(), &info));
  EXPECT_EQ(info.bucket, VKP_FALSE);

  expect_refused(vkp_attention_plan_create_bucket(ctx, &shape, 33, nullptr, &raw),
                 "vkp_attention_plan_create_bucket: max_query_tokens: 33 exceeds T = num_query_tokens = 32");
  EXPECT_EQ(raw, nullptr);
  expect_refused(vkp_attention_bucket_scratch_bytes(ctx, &shape, 1, nullptr, nullptr), "bytes is NULL");
  vkp_attention_shape zeroed{};
  expect_refused(vkp_attention_plan_create_bucket(ctx, &zeroed, 1, nullptr, &raw), "shape: vkp_attention_shape.struct_size: 0");
}

TEST_F(CApiBucketTest, PrepareBuildsWhatThePlansThenFind) {
  vkp_context* ctx = c_context();
  vkp_kv_cache_shape cshape;
  vkp_kv_cache_shape_init(&cshape);
  cshape.num_kv_heads = 2;
  cshape.head_size = 64;
  cshape.block_size = 16;
  const vkp_kv_cache_options copts = kv_cache_options(32);
  vkp_kv_cache* raw_cache = nullptr;
  ASSERT_VKP_OK(vkp_kv_cache_create(ctx, &cshape, &copts, &raw_cache));
  const KvCachePtr cache(raw_cache, &vkp_kv_cache_destroy);

  vkp_pipeline_set* raw = nullptr;
  ASSERT_VKP_OK(vkp_pipeline_set_create(&raw));
  const PipelineSetPtr set(raw, &vkp_pipeline_set_destroy);
  vkp_attention_shape decode = bucket(4, 4), mixed = bucket(4, 32);
  ASSERT_VKP_OK(vkp_pipeline_set_add_attention(set.get(), &decode, 1, nullptr));
  ASSERT_VKP_OK(vkp_pipeline_set_add_attention(set.get(), &mixed, 16, nullptr));
  vkp_cache_write_kind kind;
  vkp_cache_write_kind_init(&kind);
  EXPECT_EQ(kind.block_size, 16u);
  EXPECT_EQ(kind.slot_dtype, VKP_DTYPE_I64);
  EXPECT_EQ(kind.cos_sin_dtype, VKP_DTYPE_F32);
  kind.rotary = VKP_TRUE;
  kind.rotary_dim = 64;
  ASSERT_VKP_OK(vkp_kv_cache_write_kind(cache.get(), &kind));
  EXPECT_EQ(kind.num_blocks, 32u);
  EXPECT_EQ(kind.num_kv_heads, 2u);
  EXPECT_EQ(kind.rotary, VKP_TRUE) << "the fields the cache does not know stay";
  EXPECT_EQ(kind.rotary_dim, 64u);
  ASSERT_VKP_OK(vkp_pipeline_set_add_cache_write(set.get(), &kind));

  vkp_prepare_report report;
  vkp_prepare_report_init(&report);
  ASSERT_VKP_OK(vkp_prepare(ctx, set.get(), &report));
  EXPECT_GE(report.pipelines, 3u);
  EXPECT_LE(report.created, report.pipelines);
  ASSERT_VKP_OK(vkp_prepare(ctx, set.get(), &report));
  EXPECT_EQ(report.created, 0u);
  ASSERT_VKP_OK(vkp_prepare(ctx, set.get(), nullptr));
  const size_t built = pipelines_built(ctx);
  vkp_attention_plan* plan = nullptr;
  ASSERT_VKP_OK(vkp_attention_plan_create_bucket(ctx, &mixed, 16, nullptr, &plan));
  vkp_attention_plan_destroy(plan);
  ASSERT_VKP_OK(vkp_attention_plan_create_bucket(ctx, &decode, 1, nullptr, &plan));
  vkp_attention_plan_destroy(plan);
  EXPECT_EQ(pipelines_built(ctx), built) << "the bucket plans found their pipelines built";

  // Refusals: planning's, named by entry; the structs' as they are added.
  vkp_pipeline_set* bad = nullptr;
  ASSERT_VKP_OK(vkp_pipeline_set_create(&bad));
  const PipelineSetPtr bad_set(bad, &vkp_pipeline_set_destroy);
  ASSERT_VKP_OK(vkp_pipeline_set_add_attention(bad, &mixed, 33, nullptr));
  expect_refused(vkp_prepare(ctx, bad, &report),
                 "vkp_prepare: attention[0]: max_query_tokens: 33 exceeds T = num_query_tokens = 32");
  kind.token_dtype = VKP_DTYPE_U8;
  ASSERT_VKP_OK(vkp_pipeline_set_add_cache_write(set.get(), &kind));
  expect_refused(vkp_prepare(ctx, set.get(), &report), "vkp_prepare: cache_writes[1].token_dtype: u8 is not f32, f16 or bf16");
  kind.rotary = 2;
  expect_refused(vkp_pipeline_set_add_cache_write(set.get(), &kind), "kind.rotary: 2 is not 0 or 1");
  kind.rotary = VKP_TRUE;
  kind.slot_dtype = vkp_dtype(77);
  expect_refused(vkp_pipeline_set_add_cache_write(set.get(), &kind), "kind.slot_dtype: 77");
  kind.struct_size = 0;
  expect_refused(vkp_pipeline_set_add_cache_write(set.get(), &kind), "kind: vkp_cache_write_kind.struct_size: 0");
  expect_refused(vkp_prepare(ctx, nullptr, nullptr), "set is NULL");
  expect_refused(vkp_pipeline_set_add_decode(nullptr, nullptr, nullptr), "set is NULL");
  vkp_pipeline_set* dead = nullptr;
  ASSERT_VKP_OK(vkp_pipeline_set_create(&dead));
  vkp_pipeline_set_destroy(dead);
  expect_refused(vkp_prepare(ctx, dead, nullptr), "is not a live vkp_pipeline_set");
  vkp_pipeline_set_destroy(dead);  // a second destroy is harmless
  expect_refused(vkp_pipeline_set_create(nullptr), "out is NULL");
}

// An MLA cache's write through C: vkp_kv_cache_write_kind gives its cache_kind and R, and
// vkp_prepare builds that write's pipeline (a context of its own: the record after it builds
// none); an unknown cache_kind is refused as the kind is added.
TEST_F(CApiBucketTest, AnMlaCachesWriteKindPreparesItsWrite) {
  vkp_external_device ext = shared_device();
  vkp_context* ctx = nullptr;
  ASSERT_VKP_OK(vkp_context_create_external(&ext, &ctx));
  const std::unique_ptr<vkp_context, decltype(&vkp_context_destroy)> own(ctx, &vkp_context_destroy);
  constexpr int64_t kLatent = 64, kRope = 32, kTokens = 5, kPositions = 64;
  vkp_kv_cache_shape cshape;
  vkp_kv_cache_shape_init(&cshape);
  cshape.num_kv_heads = 1;
  cshape.head_size = uint32_t(kLatent);
  cshape.block_size = 16;
  cshape.layout = VKP_KV_LAYOUT_NHD;
  cshape.kind = VKP_KV_CACHE_MLA_TWO_POOLS;
  cshape.rope_head_size = uint32_t(kRope);
  const vkp_kv_cache_options copts = kv_cache_options(32);
  vkp_kv_cache* raw_cache = nullptr;
  ASSERT_VKP_OK(vkp_kv_cache_create(ctx, &cshape, &copts, &raw_cache));
  const KvCachePtr cache(raw_cache, &vkp_kv_cache_destroy);

  vkp_cache_write_kind kind;
  vkp_cache_write_kind_init(&kind);
  EXPECT_EQ(kind.cache_kind, VKP_KV_CACHE_KEY_VALUE);
  EXPECT_EQ(kind.rope_head_size, 0u);
  kind.slot_dtype = VKP_DTYPE_I32;
  kind.rotary = VKP_TRUE;
  kind.rotary_style = VKP_ROTARY_GPTJ;
  kind.rotary_dim = uint32_t(kRope);
  ASSERT_VKP_OK(vkp_kv_cache_write_kind(cache.get(), &kind));
  EXPECT_EQ(kind.cache_kind, VKP_KV_CACHE_MLA_TWO_POOLS);
  EXPECT_EQ(kind.rope_head_size, uint32_t(kRope));
  EXPECT_EQ(kind.head_size, uint32_t(kLatent));
  EXPECT_EQ(kind.num_blocks, 32u);
  vkp_pipeline_set* raw = nullptr;
  ASSERT_VKP_OK(vkp_pipeline_set_create(&raw));
  const PipelineSetPtr set(raw, &vkp_pipeline_set_destroy);
  ASSERT_VKP_OK(vkp_pipeline_set_add_cache_write(set.get(), &kind));
  vkp_prepare_report report;
  vkp_prepare_report_init(&report);
  ASSERT_VKP_OK(vkp_prepare(ctx, set.get(), &report));
  EXPECT_EQ(report.pipelines, 1u);
  EXPECT_EQ(report.created, 1u) << "a context of its own had none";
  const size_t built = pipelines_built(ctx);

  HostTensor slot_values(DType::i32, Shape{kTokens});
  for (int64_t t = 0; t < kTokens; ++t) slot_values.as<int32_t>()[t] = int32_t(3 * t);  // distinct slots
  const CTensor kv_c = zeros(ctx, DType::f16, Shape{kTokens, kLatent});
  const CTensor k_pe = zeros(ctx, DType::f16, Shape{kTokens, kRope}), slots = upload(ctx, slot_values);
  const CTensor positions = zeros(ctx, DType::i64, Shape{kTokens});
  const CTensor cos_sin = zeros(ctx, DType::f32, Shape{kPositions, kRope});
  const vkp_mla_new_tokens tokens = mla_new_tokens(kv_c, k_pe, slots);
  const vkp_mla_rope_views rope = mla_rope(positions, cos_sin, VKP_ROTARY_GPTJ);
  EXPECT_VKP_OK(run(ctx, [&](VkCommandBuffer cmd) {
    return vkp_kv_cache_record_mla_reshape_and_cache(cache.get(), cmd, 0, &tokens, 1.0f, &rope);
  }));
  EXPECT_EQ(pipelines_built(ctx), built) << "the MLA write found its pipeline built";

  kind.cache_kind = vkp_kv_cache_kind(9);
  expect_refused(vkp_pipeline_set_add_cache_write(set.get(), &kind), "kind.cache_kind: 9 is not a vkp_kv_cache_kind");
}

// An MLA bucket through C: vkp_mla_plan_create_bucket's plan says so, its scratch is known before
// it (what the C++ API answers), vkp_pipeline_set_add_mla's entry is prepared so that the plan
// made after vkp_prepare builds nothing, and refusals name the argument.
TEST_F(CApiBucketTest, AnMlaBucketPlanIsPreparedAndItsScratchKnownBeforeIt) {
  vkp_external_device ext = shared_device();
  vkp_context* ctx = nullptr;
  ASSERT_VKP_OK(vkp_context_create_external(&ext, &ctx));
  const std::unique_ptr<vkp_context, decltype(&vkp_context_destroy)> own(ctx, &vkp_context_destroy);
  vkp_attention_shape shape = bucket(4, 32);
  shape.num_kv_heads = 1;
  shape.head_size = 80;  // Dv 64 + R 16
  shape.kv_layout = VKP_KV_LAYOUT_NHD;
  vkp_mla_options options;
  vkp_mla_options_init(&options);
  options.split = VKP_SPLIT_SPLIT;
  options.partition_tokens = 64;
  uint64_t scratch = 0;
  ASSERT_VKP_OK(vkp_mla_bucket_scratch_bytes(ctx, &shape, 64, VKP_MLA_TWO_POOLS, 16, &options, &scratch));
  EXPECT_GT(scratch, 0u);
  MlaShape cpp;
  cpp.attention = {.num_requests = 4, .num_query_tokens = 32, .num_heads = 8, .num_kv_heads = 1, .head_size = 80,
                   .block_size = 16, .num_blocks = 32, .max_blocks_per_seq = 8, .kv_layout = KvLayout::nhd};
  cpp.value_head_size = 64;
  cpp.cache_form = MlaCacheForm::two_pools;
  EXPECT_EQ(scratch, MlaPlan::max_scratch_bytes(ctx->context, cpp, 16, {.split = SplitMode::split, .partition_tokens = 64}));

  vkp_pipeline_set* raw_set = nullptr;
  ASSERT_VKP_OK(vkp_pipeline_set_create(&raw_set));
  const PipelineSetPtr set(raw_set, &vkp_pipeline_set_destroy);
  ASSERT_VKP_OK(vkp_pipeline_set_add_mla(set.get(), &shape, 64, VKP_MLA_TWO_POOLS, 16, &options));
  vkp_prepare_report report;
  vkp_prepare_report_init(&report);
  ASSERT_VKP_OK(vkp_prepare(ctx, set.get(), &report));
  EXPECT_GE(report.pipelines, 2u) << "the kernel and the split's merge";
  EXPECT_EQ(report.created, report.pipelines) << "a context of its own had none";
  const size_t built = pipelines_built(ctx);

  vkp_mla_plan* raw = nullptr;
  ASSERT_VKP_OK(vkp_mla_plan_create_bucket(ctx, &shape, 64, VKP_MLA_TWO_POOLS, 16, &options, &raw));
  const std::unique_ptr<vkp_mla_plan, decltype(&vkp_mla_plan_destroy)> plan(raw, &vkp_mla_plan_destroy);
  EXPECT_EQ(pipelines_built(ctx), built) << "the plan after vkp_prepare built none";
  vkp_mla_plan_info info;
  vkp_mla_plan_info_init(&info);
  ASSERT_VKP_OK(vkp_mla_plan_info_get(plan.get(), &info));
  EXPECT_EQ(info.bucket, VKP_TRUE);
  EXPECT_EQ(info.max_query_tokens, 16u);
  EXPECT_EQ(info.split, VKP_TRUE);
  EXPECT_EQ(info.scratch_bytes, scratch);
  // A plan from query starts is none.
  const int32_t starts[] = {0, 8, 16, 24, 32};
  ASSERT_VKP_OK(vkp_mla_plan_create(ctx, &shape, 64, VKP_MLA_TWO_POOLS, starts, 5, &options, &raw));
  const std::unique_ptr<vkp_mla_plan, decltype(&vkp_mla_plan_destroy)> step(raw, &vkp_mla_plan_destroy);
  ASSERT_VKP_OK(vkp_mla_plan_info_get(step.get(), &info));
  EXPECT_EQ(info.bucket, VKP_FALSE);
  EXPECT_EQ(info.max_query_tokens, 8u);

  expect_refused(vkp_mla_plan_create_bucket(ctx, &shape, 64, VKP_MLA_TWO_POOLS, 33, nullptr, &raw),
                 "vkp_mla_plan_create_bucket: max_query_tokens: 33 exceeds T = num_query_tokens = 32");
  EXPECT_EQ(raw, nullptr);
  expect_refused(vkp_mla_bucket_scratch_bytes(ctx, &shape, 64, VKP_MLA_TWO_POOLS, 1, nullptr, nullptr), "bytes is NULL");
  expect_refused(vkp_pipeline_set_add_mla(set.get(), &shape, 64, vkp_mla_cache_form(7), 1, nullptr),
                 "vkp_pipeline_set_add_mla: cache_form: 7 is not a vkp_mla_cache_form");
}

TEST_F(CApiBucketTest, ThePipelineCacheIsSavedAndLoadedAndAForeignOneRefused) {
  vkp_context* ctx = c_context();
  size_t size = 0;
  ASSERT_VKP_OK(vkp_context_pipeline_cache_data(ctx, nullptr, &size));
  ASSERT_GE(size, 32u);
  std::vector<uint8_t> blob(size + 64);
  size_t small = 8;
  expect_refused(vkp_context_pipeline_cache_data(ctx, blob.data(), &small), "size: 8 is less than the cache's");
  EXPECT_EQ(small, 8u);
  size_t room = blob.size();
  ASSERT_VKP_OK(vkp_context_pipeline_cache_data(ctx, blob.data(), &room));
  ASSERT_GE(room, 32u);
  blob.resize(room);
  EXPECT_VKP_OK(vkp_context_load_pipeline_cache(ctx, blob.data(), blob.size()));

  std::vector<uint8_t> foreign = blob;
  foreign[16] ^= 0xff;  // pipelineCacheUUID's first byte
  expect_refused(vkp_context_load_pipeline_cache(ctx, foreign.data(), foreign.size()),
                 "vkp_context_load_pipeline_cache: pipeline_cache: pipelineCacheUUID ");
  expect_refused(vkp_context_load_pipeline_cache(ctx, blob.data(), 10),
                 "pipeline_cache: 10 bytes are fewer than the 32 of a VkPipelineCacheHeaderVersionOne");
  expect_refused(vkp_context_load_pipeline_cache(ctx, nullptr, 40), "data is NULL");
  expect_refused(vkp_context_pipeline_cache_data(ctx, nullptr, nullptr), "size is NULL");
  expect_refused(vkp_context_load_pipeline_cache(nullptr, blob.data(), blob.size()), "context is NULL");
}

}  // namespace
}  // namespace vkpaged::test
