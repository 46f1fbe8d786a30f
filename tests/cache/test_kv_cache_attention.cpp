// SPDX-License-Identifier: Apache-2.0
// KvCache's per-layer attention helpers in each layout: the AttentionShape (and DecodeShape) it
// makes, record_attention over one layer's pools for a mixed engine step (decode requests, a
// chunk after a cached prefix, a whole prompt) and a decode-only step, record_decode on the
// decode kernels, each against the CPU reference on that layer's pools as stored; and what the
// helpers refuse before recording (a layer out of range, a pool view given, a plan of another
// cache).
#include <gtest/gtest.h>

#include <algorithm>
#include <numeric>
#include <random>
#include <string>
#include <vector>

#include "ops/cache_test_helpers.hpp"
#include "support/attention_case.hpp"
#include "support/attention_kernels.hpp"
#include "support/decode_case.hpp"
#include "support/decode_check.hpp"
#include "support/expect_error.hpp"
#include "support/kv_cache_shapes.hpp"
#include "support/shuffled_block_tables.hpp"
#include "support/buffer_test.hpp"
#include "support/test_context.hpp"
#include "vkpaged/kv_cache.hpp"
#include "vkpaged/reference.hpp"
#include "vkpaged/utilities.hpp"

namespace vkpaged::test {
namespace {

using cache_helpers::random_tensor;

constexpr uint32_t kBlocks = 12, kHeads = 4;

// One step's requests: L_s (new tokens included) and q_s.
struct Step {
  std::vector<int32_t> lens, new_tokens;
  int32_t tokens() const { return std::accumulate(new_tokens.begin(), new_tokens.end(), 0); }
  std::vector<int32_t> starts() const {
    std::vector<int32_t> s{0};
    for (int32_t q : new_tokens) s.push_back(s.back() + q);
    return s;
  }
};

class KvCacheHelperTest : public BufferTest {
 protected:
  KvCacheShape shape(DType dtype) {
    KvCacheShape s = shape_of(2, 2, 64, 8, dtype);
    s.layout = layout_;
    return s;
  }
  void fill(const KvCache& cache, uint32_t seed) {
    ctx().run_and_wait([&](VkCommandBuffer cmd) {
      for (uint32_t l = 0; l < cache.shape().num_layers; ++l) {
        record_fill_random(ctx(), cmd, cache.key_cache(l), seed + 2 * l);
        record_fill_random(ctx(), cmd, cache.value_cache(l), seed + 2 * l + 1);
      }
    });
  }

  // Runs `step` on layer `layer` through KvCache::record_attention and checks it against the
  // reference on that layer's pools.
  void check_step(const KvCache& cache, uint32_t layer, const Step& step, const AttentionParams& params,
                  uint32_t seed, AttentionKernel expect_kernel) {
    const uint32_t B = cache.shape().block_size, D = cache.shape().head_size;
    const uint32_t M = uint32_t(*std::max_element(step.lens.begin(), step.lens.end()) + B - 1) / B;
    const int64_t S = int64_t(step.lens.size()), T = step.tokens();
    AttentionInputs in;
    in.query = random_tensor(DType::f16, Shape{T, kHeads, D}, seed);
    in.block_tables = shuffled_block_tables(step.lens, B, M, kBlocks, seed);
    in.context_lens = ints(step.lens);
    in.query_starts = ints(step.starts());
    in.cache_dtype = cache.shape().dtype;
    in.kv_layout = cache.shape().layout;

    AttentionShape batch;
    batch.num_requests = uint32_t(S);
    batch.num_query_tokens = uint32_t(T);
    batch.num_heads = kHeads;
    batch.max_blocks_per_seq = M;
    batch.lse = true;
    const std::vector<int32_t> starts = step.starts();
    const AttentionPlan plan = AttentionPlan::create(ctx(), cache.attention_shape(batch), starts);
    if (expect_kernel == AttentionKernel::automatic)
      expect_kernel = automatic_multi_query_kernel(ctx(), cache.attention_shape(batch), starts);
    EXPECT_EQ(plan.kernel(), expect_kernel) << plan.describe();
    AttentionViews v;
    v.query = put(in.query);
    v.block_tables = put(in.block_tables);
    v.context_lens = put(in.context_lens);
    v.query_starts = put(in.query_starts);
    v.output = device(DType::f16, Shape{T, kHeads, D});
    v.lse = device(DType::f32, Shape{T, kHeads});
    v.scratch = scratch(plan.scratch_bytes());
    ctx().run_and_wait([&](VkCommandBuffer cmd) { cache.record_attention(cmd, layer, plan, v, params); });

    in.key_cache = fetch_pool(cache.key_cache(layer));
    in.value_cache = fetch_pool(cache.value_cache(layer));
    const AttentionResult want = reference::batch_attention(in, params, true);
    AttentionResult got{HostTensor(DType::f16, v.output.shape), HostTensor(DType::f32, v.lse.shape)};
    ctx().download(v.output.memory, got.output.data(), got.output.bytes());
    ctx().download(v.lse.memory, got.lse.data(), got.lse.bytes());
    expect_attention_near(got, want, tolerance(DType::f16, cache.shape().dtype), true,
                          std::string(kv_layout_name(cache.shape().layout)) + " layer " + std::to_string(layer));
  }

  KvLayout layout_ = KvLayout::vllm;
};

class KvCacheAttentionTest : public KvCacheHelperTest, public ::testing::WithParamInterface<KvLayout> {
 protected:
  KvCacheAttentionTest() { layout_ = GetParam(); }
};

TEST_P(KvCacheAttentionTest, AttentionShapeComesFromTheCache) {
  KvCacheOptions o;
  o.num_blocks = 7;
  const KvCache cache(ctx(), shape(DType::fp8_e5m2), o);
  AttentionShape batch;
  batch.num_requests = 3;
  batch.num_query_tokens = 40;
  batch.num_heads = 8;
  batch.max_blocks_per_seq = 4;
  batch.max_context_len = 30;
  batch.query_dtype = DType::bf16;
  batch.sliding_window = 16;
  batch.tree_mask = batch.alibi = true;
  batch.num_kv_heads = 99;  // the cache's own values win
  batch.kv_layout = KvLayout(7);
  const AttentionShape s = cache.attention_shape(batch);
  EXPECT_EQ(s.num_requests, 3u);
  EXPECT_EQ(s.num_query_tokens, 40u);
  EXPECT_EQ(s.num_heads, 8u);
  EXPECT_EQ(s.max_blocks_per_seq, 4u);
  EXPECT_EQ(s.max_context_len, 30u);
  EXPECT_EQ(s.query_dtype, DType::bf16);
  EXPECT_EQ(s.sliding_window, 16u);
  EXPECT_TRUE(s.tree_mask && s.alibi && !s.sinks && !s.lse && !s.softcap);
  EXPECT_EQ(s.num_kv_heads, 2u);
  EXPECT_EQ(s.head_size, 64u);
  EXPECT_EQ(s.block_size, 8u);
  EXPECT_EQ(s.num_blocks, 7u);
  EXPECT_EQ(s.cache_dtype, DType::fp8_e5m2);
  EXPECT_EQ(s.kv_layout, GetParam());
}

TEST_P(KvCacheAttentionTest, MixedAndDecodeStepsMatchTheReference) {
  for (DType dtype : {DType::f16, DType::fp8_e4m3}) {
    SCOPED_TRACE(std::string(dtype_name(dtype)));
    KvCacheOptions o;
    o.num_blocks = kBlocks;
    const KvCache cache(ctx(), shape(dtype), o);
    fill(cache, 50);
    AttentionParams params;
    if (is_fp8_dtype(dtype)) params.k_scale = params.v_scale = 0.5f;
    // A decode request on one position, a whole prompt that ends mid-block, a chunk of 5 after
    // a cached prefix of 28, a decode request after B positions.
    // The multi-query kernel automatic picks here (the matrix kernel where the device runs it).
    check_step(cache, 1, {{1, 19, 33, 9}, {1, 19, 5, 1}}, params, 1, AttentionKernel::automatic);
    // Decode only: the decode kernels, on every layout.
    check_step(cache, 0, {{30, 1, 8, 17}, {1, 1, 1, 1}}, params, 2, AttentionKernel::decode);
  }
}

// On the vllm layout (the C API's RecordDecodeMatchesTheCppHelperAndTheReference runs every layout).
TEST_F(KvCacheHelperTest, RecordDecodeReadsTheLayersPools) {
  KvCacheOptions o;
  o.num_blocks = kBlocks;
  const KvCache cache(ctx(), shape(DType::f16), o);
  fill(cache, 60);
  const Step step{{30, 1, 8, 17}, {1, 1, 1, 1}};
  const uint32_t M = 4;
  DecodeInputs in;
  in.query = random_tensor(DType::f16, Shape{4, kHeads, 64}, 3);
  in.block_tables = shuffled_block_tables(step.lens, 8, M, kBlocks, 3);
  in.context_lens = ints(step.lens);
  DecodeShape batch;
  batch.num_seqs = 4;
  batch.num_heads = kHeads;
  batch.max_blocks_per_seq = M;
  const DecodePlan plan = DecodePlan::create(ctx(), cache.decode_shape(batch));
  DecodeViews v;
  v.query = put(in.query);
  v.block_tables = put(in.block_tables);
  v.context_lens = put(in.context_lens);
  v.output = device(DType::f16, Shape{4, kHeads, 64});
  v.scratch = scratch(plan.scratch_bytes());
  ctx().run_and_wait([&](VkCommandBuffer cmd) { cache.record_decode(cmd, 1, plan, v); });
  in.key_cache = fetch_pool(cache.key_cache(1));
  in.value_cache = fetch_pool(cache.value_cache(1));
  const DecodeResult want = reference::decode_attention(in);
  DecodeResult got;
  got.output = HostTensor(DType::f16, v.output.shape);
  ctx().download(v.output.memory, got.output.data(), got.output.bytes());
  expect_decode_near(got, want, tolerance(DType::f16, DType::f16), false, "layer 1");
}

TEST_P(KvCacheAttentionTest, RefusesBeforeRecording) {
  KvCacheOptions o;
  o.num_blocks = kBlocks;
  const KvCache cache(ctx(), shape(DType::f16), o);
  AttentionShape batch;
  batch.num_requests = 1;
  batch.num_query_tokens = 2;
  batch.num_heads = kHeads;
  batch.max_blocks_per_seq = 1;
  const std::vector<int32_t> starts = {0, 2};
  const AttentionPlan plan = AttentionPlan::create(ctx(), cache.attention_shape(batch), starts);
  AttentionShape other = cache.attention_shape(batch);
  other.num_blocks = kBlocks - 1;
  const AttentionPlan small = AttentionPlan::create(ctx(), other, starts);
  other = cache.attention_shape(batch);
  other.kv_layout = GetParam() == KvLayout::hnd ? KvLayout::nhd : KvLayout::hnd;
  const AttentionPlan relaid = AttentionPlan::create(ctx(), other, starts);
  AttentionViews v;
  v.query = device(DType::f16, Shape{2, kHeads, 64});
  v.block_tables = put(HostTensor(DType::i32, Shape{1, 1}));
  v.context_lens = put(ints({2}));
  v.query_starts = put(ints(starts));
  v.output = device(DType::f16, Shape{2, kHeads, 64});
  AttentionViews with_pool = v;
  with_pool.value_cache = cache.value_cache(0);

  DecodeShape decode_batch;
  decode_batch.num_seqs = 1;
  decode_batch.num_heads = kHeads;
  decode_batch.max_blocks_per_seq = 1;
  DecodeShape wrong = cache.decode_shape(decode_batch);
  wrong.head_size = 128;
  wrong.kv_layout = KvLayout::vllm;
  const DecodePlan decode_plan = DecodePlan::create(ctx(), wrong);
  DecodeViews dv;

  ctx().run_and_wait([&](VkCommandBuffer cmd) {
    expect_refused([&] { cache.record_attention(cmd, 2, plan, v); }, ErrorCode::invalid_argument,
                   {"record_attention", "layer 2 is outside [0, 2)"});
    expect_refused([&] { cache.record_attention(cmd, 0, plan, with_pool); }, ErrorCode::invalid_argument,
                   {"record_attention", "views.value_cache is given"});
    expect_refused([&] { cache.record_attention(cmd, 0, small, v); }, ErrorCode::invalid_argument,
                   {"record_attention", "num_blocks 11, the cache's is 12"});
    expect_refused([&] { cache.record_attention(cmd, 1, relaid, v); }, ErrorCode::invalid_argument,
                   {"record_attention", "kv_layout", std::string(kv_layout_name(GetParam()))});
    expect_refused([&] { cache.record_decode(cmd, 0, decode_plan, dv); }, ErrorCode::invalid_argument,
                   {"record_decode", "head_size 128, the cache's is 64"});
  });
}

INSTANTIATE_TEST_SUITE_P(Layouts, KvCacheAttentionTest, ::testing::Values(KvLayout::vllm, KvLayout::nhd, KvLayout::hnd),
                         [](const auto& info) { return std::string(kv_layout_name(info.param)); });

}  // namespace
}  // namespace vkpaged::test
