// SPDX-License-Identifier: Apache-2.0
// Start-up (vkpaged/prepare.hpp): Context::prepare builds every pipeline of the buckets' plans and
// the cache writes before the first step, so that the step's plans and records build none
// (counted in the context's pipeline registry); the context's pipeline cache saved after it
// loads into a new context; a blob of another device or driver, or a damaged one, is refused
// with the reason and changes nothing.
#include <gtest/gtest.h>

#include <algorithm>
#include <cstring>
#include <mutex>
#include <string>
#include <vector>

#include "ops/fragment_layout.hpp"
#include "ops/fragment_layout_khr.hpp"
#include "support/expect_error.hpp"
#include "support/test_context.hpp"
#include "vk/context_impl.hpp"
#include "vkpaged/attention.hpp"
#include "vkpaged/error.hpp"
#include "vkpaged/kv_cache.hpp"
#include "vkpaged/mla_attention.hpp"
#include "vkpaged/mla_cache_ops.hpp"
#include "vkpaged/prepare.hpp"
#include "vkpaged/rotary.hpp"

namespace vkpaged::test {
namespace {

// Pipelines in the context's registry: every one it ever built (none is removed).
size_t pipelines_built(Context& ctx) {
  auto& impl = ctx.impl();
  std::lock_guard lock(impl.pipeline_mutex);
  return impl.pipelines.size();
}

ContextOptions fresh_options() {
  ContextOptions o;
  o.validation = validation_wanted();
  return o;
}

constexpr uint32_t kHeads = 8, kKvHeads = 2, kHeadSize = 64, kBlockSize = 16, kBlocks = 32, kMaxBlocksPerSeq = 8;
constexpr uint32_t kRequests = 4, kStepTokens = 32, kChunk = 16, kMaxPosition = kMaxBlocksPerSeq * kBlockSize;

KvCacheShape cache_shape() {
  KvCacheShape s;
  s.num_kv_heads = kKvHeads;
  s.head_size = kHeadSize;
  s.block_size = kBlockSize;
  return s;
}

// The batches of an engine's two buckets: decode steps (every request one token) and mixed steps.
struct EngineBatches {
  AttentionShape decode, mixed;
};
EngineBatches engine_batches() {
  AttentionShape decode;
  decode.num_requests = decode.num_query_tokens = kRequests;
  decode.num_heads = kHeads;
  decode.max_blocks_per_seq = kMaxBlocksPerSeq;
  AttentionShape mixed = decode;
  mixed.num_query_tokens = kStepTokens;
  return {decode, mixed};
}

// An engine's two buckets and its cache write with rotary.
PipelineSet engine_set(const KvCache& cache) {
  const auto [decode, mixed] = engine_batches();
  PipelineSet set;
  set.attention.push_back({cache.attention_shape(decode), 1, {}});
  set.attention.push_back({cache.attention_shape(mixed), kChunk, {}});
  set.cache_writes.push_back(CacheWriteKind::of(cache, DType::f16, RotaryWrite{RotaryStyle::neox, kHeadSize}));
  return set;
}

// One step of each bucket, run: the cache write with rotary, then attention.
void run_steps(Context& ctx, const KvCache& cache, const PipelineSet& set) {
  auto zeros = [&](size_t bytes) {
    DeviceBuffer b = ctx.create_buffer(bytes, MemoryKind::host_visible);
    std::memset(b.mapped(), 0, bytes);
    return b;
  };
  const int64_t T = kStepTokens, S = kRequests;
  DeviceBuffer query = zeros(T * kHeads * kHeadSize * 2), key = zeros(T * kKvHeads * kHeadSize * 2),
               value = zeros(T * kKvHeads * kHeadSize * 2), output = zeros(T * kHeads * kHeadSize * 2),
               slots = zeros(T * 8), positions = zeros(T * 8), cos_sin = zeros(kMaxPosition * kHeadSize * 4),
               tables = zeros(S * kMaxBlocksPerSeq * 4), lens = zeros(S * 4), starts = zeros((S + 1) * 4);
  for (const AttentionBucket& b : set.attention) {
    const AttentionPlan plan = AttentionPlan::create_bucket(ctx, b.shape, b.max_query_tokens, b.options);
    const int64_t t = plan.shape().num_query_tokens;
    DeviceBuffer scratch = ctx.create_buffer(std::max<size_t>(4, plan.scratch_bytes()));
    ctx.run_and_wait([&](VkCommandBuffer cmd) {
      const Shape kv{t, kKvHeads, kHeadSize}, q{t, kHeads, kHeadSize};
      cache.record_reshape_and_cache(cmd, 0,
                                     {.key = key.tensor(DType::f16, kv), .value = value.tensor(DType::f16, kv),
                                      .slot_mapping = slots.tensor(DType::i64, Shape{t})},
                                     RotaryInputs{query.tensor(DType::f16, q), positions.tensor(DType::i64, Shape{t}),
                                                  cos_sin.tensor(DType::f32, Shape{kMaxPosition, kHeadSize})});
      record_compute_barrier(ctx, cmd);
      AttentionViews v;
      v.query = query.tensor(DType::f16, q);
      v.block_tables = tables.tensor(DType::i32, Shape{S, kMaxBlocksPerSeq});
      v.context_lens = lens.tensor(DType::i32, Shape{S});
      v.query_starts = starts.tensor(DType::i32, Shape{S + 1});
      v.output = output.tensor(DType::f16, q);
      if (plan.scratch_bytes() > 0) v.scratch = scratch.view(0, plan.scratch_bytes());
      cache.record_attention(cmd, 0, plan, v);
    });
  }
}

TEST(PreparedPipelinesTest, TheStepsAfterPrepareBuildNoPipeline) {
  Context ctx(fresh_options());
  KvCache cache(ctx, cache_shape(), {.num_blocks = kBlocks});
  const PipelineSet set = engine_set(cache);
  const size_t before = pipelines_built(ctx);
  const PrepareReport report = ctx.prepare(set);
  // The decode kernel, the attention kernel, the rotary cache write (and a split's merges).
  EXPECT_GE(report.pipelines, 3u);
  EXPECT_EQ(report.created, report.pipelines) << "a fresh context had none of them";
  // (A device with matrix units also built its fragment-layout probe, as DecodePlan::create would.)
  const size_t prepared = pipelines_built(ctx);
  EXPECT_GE(prepared, before + report.created);
  EXPECT_EQ(ctx.prepare(set).created, 0u) << "a second prepare finds them all";

  run_steps(ctx, cache, set);
  EXPECT_EQ(pipelines_built(ctx), prepared) << "the plans and records after prepare built none";
  EXPECT_EQ(ctx.validation_message_count(), 0u);
}

TEST(PreparedPipelinesTest, DecodePlansAndTheirOrderPass) {
  Context ctx(fresh_options());
  DecodeShape shape;
  shape.num_seqs = kRequests;
  shape.num_heads = kHeads;
  shape.num_kv_heads = kKvHeads;
  shape.head_size = kHeadSize;
  shape.block_size = kBlockSize;
  shape.num_blocks = kBlocks;
  shape.max_blocks_per_seq = kMaxBlocksPerSeq;
  DecodeOptions options;
  options.order = DecodeOrder::longest_first;
  options.split = SplitMode::split;
  options.partition_tokens = 256;
  shape.max_blocks_per_seq = 40;  // 640 positions: three partitions
  PipelineSet set;
  set.decode.push_back({shape, options});
  const PrepareReport report = ctx.prepare(set);
  EXPECT_EQ(report.pipelines, 3u) << "the decode kernel, the reduce pass and the order list";
  const size_t after = pipelines_built(ctx);
  const DecodePlan plan = DecodePlan::create(ctx, shape, options);
  EXPECT_TRUE(plan.longest_first());
  EXPECT_TRUE(plan.split());
  EXPECT_EQ(pipelines_built(ctx), after);
}

// An MLA cache's writes (both forms, with and without the rope on k_pe, i32 slots): prepared from
// CacheWriteKind::of, the records after it build no pipeline; an odd rope width is refused,
// naming the entry, before anything is built.
TEST(PreparedPipelinesTest, AnMlaCachesWritesAfterPrepareBuildNoPipeline) {
  constexpr int64_t kLatent = 64, kRope = 32, kTokens = 5, kPositions = 64;
  for (KvCacheKind kind : {KvCacheKind::mla_one_pool, KvCacheKind::mla_two_pools}) {
    SCOPED_TRACE(kind == KvCacheKind::mla_one_pool ? "one pool" : "two pools");
    Context ctx(fresh_options());
    KvCacheShape shape;
    shape.kind = kind;
    shape.num_kv_heads = 1;
    shape.head_size = uint32_t(kLatent);
    shape.rope_head_size = uint32_t(kRope);
    shape.block_size = kBlockSize;
    shape.layout = KvLayout::nhd;
    KvCache cache(ctx, shape, {.num_blocks = kBlocks});
    PipelineSet set;
    set.cache_writes.push_back(CacheWriteKind::of(cache, DType::f16, {}, DType::i32));
    set.cache_writes.push_back(
        CacheWriteKind::of(cache, DType::f16, RotaryWrite{RotaryStyle::gptj, uint32_t(kRope)}, DType::i32));
    PipelineSet odd = set;
    odd.cache_writes[1].rotary->rotary_dim = 3;
    const size_t before = pipelines_built(ctx);
    expect_refused([&] { ctx.prepare(odd); }, "cache_writes[1].rotary: ");
    EXPECT_EQ(pipelines_built(ctx), before) << "a refused set builds nothing";

    const PrepareReport report = ctx.prepare(set);
    EXPECT_EQ(report.pipelines, 2u) << "the MLA write and its rope variant";
    EXPECT_EQ(report.created, 2u);
    const size_t prepared = pipelines_built(ctx);
    EXPECT_EQ(prepared, before + 2);
    EXPECT_EQ(ctx.prepare(set).created, 0u);

    auto zeros = [&](size_t bytes) {
      DeviceBuffer b = ctx.create_buffer(bytes, MemoryKind::host_visible);
      std::memset(b.mapped(), 0, bytes);
      return b;
    };
    DeviceBuffer kv_c = zeros(kTokens * kLatent * 2), k_pe = zeros(kTokens * kRope * 2), slots = zeros(kTokens * 4),
                 positions = zeros(kTokens * 8), cos_sin = zeros(kPositions * kRope * 4);
    for (int32_t t = 0; t < int32_t(kTokens); ++t) static_cast<int32_t*>(slots.mapped())[t] = 3 * t;  // distinct slots
    const MlaNewTokens tokens{kv_c.tensor(DType::f16, Shape{kTokens, kLatent}),
                              k_pe.tensor(DType::f16, Shape{kTokens, kRope}),
                              slots.tensor(DType::i32, Shape{kTokens}), {}};
    const MlaRopeViews rope{positions.tensor(DType::i64, Shape{kTokens}),
                            cos_sin.tensor(DType::f32, Shape{kPositions, kRope}), RotaryStyle::gptj};
    ctx.run_and_wait([&](VkCommandBuffer cmd) {
      cache.record_mla_reshape_and_cache(cmd, 0, tokens);
      record_compute_barrier(ctx, cmd);
      cache.record_mla_reshape_and_cache(cmd, 0, tokens, 1.0f, &rope);
    });
    EXPECT_EQ(pipelines_built(ctx), prepared) << "the records after prepare built none";
    EXPECT_EQ(ctx.validation_message_count(), 0u);
  }
}

// An MLA cache's buckets (decode steps; mixed steps split, with CSR page tables): prepared, the
// plans MlaPlan::create_bucket makes after it build no pipeline; a longest request past the
// bucket's tokens is refused, naming the entry, before anything is built.
TEST(PreparedPipelinesTest, MlaBucketsPlansAfterPrepareBuildNoPipeline) {
  Context ctx(fresh_options());
  KvCacheShape shape;
  shape.kind = KvCacheKind::mla_one_pool;
  shape.num_kv_heads = 1;
  shape.head_size = 64;
  shape.rope_head_size = 16;
  shape.block_size = kBlockSize;
  shape.layout = KvLayout::nhd;
  KvCache cache(ctx, shape, {.num_blocks = kBlocks});
  auto [decode, mixed] = engine_batches();
  mixed.csr_page_table = true;
  PipelineSet set;
  set.mla.push_back({cache.mla_shape(decode), 1, {}});
  set.mla.push_back({cache.mla_shape(mixed), kChunk, {.split = SplitMode::split, .partition_tokens = 64}});
  // The context's probes of the matrix kernels' fragment layouts are device facts, not the set's.
  detail::khr_fragment_layout(ctx);
  PipelineSet wrong = set;
  wrong.mla[1].max_query_tokens = kStepTokens + 1;
  const size_t before = pipelines_built(ctx);
  expect_refused([&] { ctx.prepare(wrong); }, "mla[1]: max_query_tokens: 33 exceeds T = num_query_tokens = 32");
  EXPECT_EQ(pipelines_built(ctx), before) << "a refused set builds nothing";

  const PrepareReport report = ctx.prepare(set);
  // The decode bucket's kernel; the mixed bucket's kernel, its merge and the CSR expansion.
  EXPECT_GE(report.pipelines, 4u);
  EXPECT_EQ(report.created, report.pipelines) << "a fresh context had none of them";
  const size_t prepared = pipelines_built(ctx);
  EXPECT_EQ(prepared, before + report.created);
  for (const MlaBucket& b : set.mla) {
    const MlaPlan plan = MlaPlan::create_bucket(ctx, b.shape, b.max_query_tokens, b.options);
    EXPECT_TRUE(plan.bucket());
    SCOPED_TRACE(plan.describe());
    // The decode bucket's automatic split is the device's choice (a GPU of many compute units
    // splits it); the mixed bucket's forced one is the plan's.
    if (b.options.split != SplitMode::automatic) EXPECT_EQ(plan.split(), b.options.split == SplitMode::split);
  }
  EXPECT_EQ(pipelines_built(ctx), prepared) << "the plans after prepare built none";
  EXPECT_EQ(ctx.validation_message_count(), 0u);
}

TEST(PreparedPipelinesTest, RefusalsNameTheEntryAndBuildNothing) {
  Context ctx(fresh_options());
  KvCache cache(ctx, cache_shape(), {.num_blocks = kBlocks});
  PipelineSet set = engine_set(cache);
  set.attention[1].max_query_tokens = kStepTokens + 1;
  set.cache_writes[0].rotary->rotary_dim = 3;
  // The context's probes of the matrix kernels' fragment layouts (device facts, each built once,
  // at the first plan that asks, where the device has cooperative matrices) are not the set's.
  detail::matrix_fragment_mismatch(ctx);
  detail::khr_fragment_layout(ctx);
  const size_t before = pipelines_built(ctx);
  try {
    ctx.prepare(set);
    ADD_FAILURE() << "prepare took a bucket whose longest request exceeds its tokens";
  } catch (const Error& e) {
    EXPECT_EQ(e.code(), ErrorCode::invalid_argument);
    EXPECT_EQ(std::string(e.what()), "attention[1]: max_query_tokens: 33 exceeds T = num_query_tokens = 32");
  }
  set.attention[1].max_query_tokens = kChunk;
  try {
    ctx.prepare(set);
    ADD_FAILURE() << "prepare took an odd rotary_dim";
  } catch (const Error& e) {
    EXPECT_EQ(e.code(), ErrorCode::invalid_argument);
    EXPECT_EQ(std::string(e.what()).rfind("cache_writes[0].rotary: ", 0), 0u) << e.what();
  }
  EXPECT_EQ(pipelines_built(ctx), before) << "a refused set builds nothing";
}

// ---- the pipeline cache ----

std::string load_refusal(Context& ctx, const std::vector<uint8_t>& blob) {
  try {
    ctx.load_pipeline_cache(blob);
  } catch (const Error& e) {
    EXPECT_EQ(e.code(), ErrorCode::invalid_argument) << e.what();
    return e.what();
  }
  return "";
}

TEST(PipelineCacheTest, ASavedCacheLoadsIntoTheNextContext) {
  std::vector<uint8_t> blob;
  PipelineSet set;
  {
    Context first(fresh_options());
    KvCache cache(first, cache_shape(), {.num_blocks = kBlocks});
    set = engine_set(cache);
    first.prepare(set);
    blob = first.pipeline_cache_data();
  }
  ASSERT_GE(blob.size(), sizeof(VkPipelineCacheHeaderVersionOne));
  Context next(fresh_options());
  EXPECT_EQ(load_refusal(next, blob), "");
  // Builds after the load work as before (from the cache where the driver keeps one).
  const PrepareReport report = next.prepare(set);
  EXPECT_EQ(report.created, report.pipelines);
  EXPECT_EQ(next.validation_message_count(), 0u);
}

TEST(PipelineCacheTest, ABlobOfAnotherDeviceOrDriverOrADamagedOneIsRefusedWithTheReason) {
  Context& ctx = shared_context();
  const std::vector<uint8_t> good = ctx.pipeline_cache_data();
  ASSERT_GE(good.size(), 32u);
  VkPipelineCacheHeaderVersionOne h;
  std::memcpy(&h, good.data(), sizeof(h));
  auto with = [&](auto edit) {
    std::vector<uint8_t> b = good;
    VkPipelineCacheHeaderVersionOne e = h;
    edit(e);
    std::memcpy(b.data(), &e, sizeof(e));
    return b;
  };
  const std::string device = ctx.device_info().name;

  std::string why = load_refusal(ctx, with([](auto& e) { e.pipelineCacheUUID[3] ^= 0x5a; }));
  EXPECT_NE(why.find("pipeline_cache: pipelineCacheUUID "), std::string::npos) << why;
  EXPECT_NE(why.find("a cache of another driver or driver version"), std::string::npos) << why;
  why = load_refusal(ctx, with([](auto& e) { e.vendorID ^= 0xffffu; }));
  EXPECT_EQ(why.rfind("pipeline_cache: vendorID ", 0), 0u) << why;
  EXPECT_NE(why.find("is not device " + device + "'s "), std::string::npos) << why;
  EXPECT_NE(why.find("(a cache of another device)"), std::string::npos) << why;
  why = load_refusal(ctx, with([](auto& e) { e.deviceID += 1; }));
  EXPECT_NE(why.find("pipeline_cache: deviceID "), std::string::npos) << why;
  EXPECT_NE(why.find("(a cache of another device)"), std::string::npos) << why;
  why = load_refusal(ctx, with([](auto& e) { e.headerVersion = VkPipelineCacheHeaderVersion(2); }));
  EXPECT_EQ(why.rfind("pipeline_cache: headerVersion 2 is not VK_PIPELINE_CACHE_HEADER_VERSION_ONE (1)", 0), 0u) << why;
  why = load_refusal(ctx, with([&](auto& e) { e.headerSize = uint32_t(good.size() + 1); }));
  EXPECT_EQ(why.rfind("pipeline_cache: headerSize ", 0), 0u) << why;
  why = load_refusal(ctx, std::vector<uint8_t>(good.begin(), good.begin() + 10));
  EXPECT_EQ(why, "pipeline_cache: 10 bytes are fewer than the 32 of a VkPipelineCacheHeaderVersionOne (not a pipeline "
                 "cache, or a truncated one)");
  EXPECT_EQ(load_refusal(ctx, {}), "pipeline_cache: 0 bytes are fewer than the 32 of a VkPipelineCacheHeaderVersionOne "
                                   "(not a pipeline cache, or a truncated one)");
  // A refusal changed nothing: the context's own blob still loads.
  EXPECT_EQ(load_refusal(ctx, good), "");
}

}  // namespace
}  // namespace vkpaged::test
