// SPDX-License-Identifier: Apache-2.0
// KvCache's MLA attention helpers: the MlaShape it makes, and record_mla_attention over one
// layer's MLA pools (the other layer holding other rows) against reference::mla_attention on
// the rows as stored, in both cache forms, f16, bf16 and fp8 (E4M3, E5M2) caches, a decode step
// and a step of chunks after cached prefixes of 0, 1, B - 1, B, B + 1 positions, lengths 1,
// B - 1, B, B + 1 over shuffled block tables (slots past each length hold NaN); then what the
// helpers refuse before recording.
#include <gtest/gtest.h>

#include <random>
#include <string>
#include <vector>

#include "support/attention_case.hpp"
#include "support/decode_case.hpp"
#include "support/expect_error.hpp"
#include "support/mla_case.hpp"
#include "support/buffer_test.hpp"
#include "support/test_context.hpp"
#include "vkpaged/kv_cache.hpp"
#include "vkpaged/reference.hpp"
#include "vkpaged/utilities.hpp"

namespace vkpaged::test {
namespace {

constexpr uint32_t kDv = 64, kR = 16, kB = 8;

KvCacheShape mla_cache_shape(MlaCacheForm form, DType dtype) {
  KvCacheShape s;
  s.num_layers = 2;
  s.num_kv_heads = 1;
  s.head_size = kDv;
  s.block_size = kB;
  s.dtype = dtype;
  s.layout = KvLayout::nhd;
  s.kind = form == MlaCacheForm::one_pool ? KvCacheKind::mla_one_pool : KvCacheKind::mla_two_pools;
  s.rope_head_size = kR;
  return s;
}

std::string label_of(MlaCacheForm form, DType dtype, const char* step) {
  return std::string(dtype_name(dtype)) + (form == MlaCacheForm::one_pool ? " one pool " : " two pools ") + step;
}

class KvCacheMlaAttentionTest : public BufferTest {
 protected:
  HostTensor fetch(const TensorView& v, DType dtype) {
    HostTensor h(dtype, v.shape);
    ctx().download(v.memory, h.data(), h.bytes());
    return h;
  }
  // The drawn rows into layer `layer`'s pools (the cache has as many blocks as the draw).
  void store_rows(const KvCache& cache, uint32_t layer, const MlaInputs& in) {
    const MlaCacheViews pools = cache.mla_cache(layer);
    for (const auto& [pool, rows] : {std::pair{&pools.mla_cache, &in.mla_cache}, std::pair{&pools.ckv_cache, &in.ckv_cache},
                                     std::pair{&pools.kpe_cache, &in.kpe_cache}}) {
      ASSERT_EQ(pool->empty(), rows->empty());
      if (pool->empty()) continue;
      ASSERT_EQ(pool->bytes(), rows->bytes());
      ctx().upload(pool->memory, rows->data(), rows->bytes());
    }
  }

  // One step through KvCache::record_mla_attention on layer 1, layer 0 holding other rows,
  // against the reference on the step's rows.
  void check_step(MlaCacheForm form, DType cache_dtype, const std::vector<uint32_t>& lens,
                  const std::vector<uint32_t>& new_tokens, const char* step, uint32_t seed) {
    SCOPED_TRACE(label_of(form, cache_dtype, step));
    MlaCase c;
    c.value_head_size = kDv;
    c.rope_head_size = kR;
    c.form = form;
    c.attention.heads = 3;
    c.attention.block_size = kB;
    c.attention.lens = lens;
    c.attention.new_tokens = new_tokens;
    c.attention.cache_dtype = cache_dtype;
    c.attention.query_dtype = cache_dtype == DType::bf16 ? DType::bf16 : DType::f16;
    std::mt19937 rng(seed);
    const MlaInputs in = make_mla_inputs(c, rng).mla;
    const MlaInputs other = make_mla_inputs(c, rng).mla;  // the same geometry, other rows
    const HostTensor& any_pool = form == MlaCacheForm::one_pool ? in.mla_cache : in.ckv_cache;
    KvCacheOptions o;
    o.num_blocks = uint32_t(any_pool.shape()[0]);
    const KvCache cache(ctx(), mla_cache_shape(form, cache_dtype), o);
    store_rows(cache, 0, other);
    store_rows(cache, 1, in);

    const int64_t T = in.query.shape()[0], H = in.query.shape()[1];
    AttentionShape batch;
    batch.num_requests = uint32_t(lens.size());
    batch.num_query_tokens = uint32_t(T);
    batch.num_heads = uint32_t(H);
    batch.max_blocks_per_seq = uint32_t(in.block_tables.shape()[1]);
    batch.query_dtype = c.attention.query_dtype;
    batch.lse = true;
    const std::vector<int32_t> starts(in.query_starts.as<int32_t>(),
                                      in.query_starts.as<int32_t>() + in.query_starts.numel());
    const MlaPlan plan = MlaPlan::create(ctx(), cache.mla_shape(batch), starts);
    MlaViews v;
    v.query = put(in.query);
    v.block_tables = put(in.block_tables);
    v.context_lens = put(in.context_lens);
    v.query_starts = put(in.query_starts);
    v.output = device(c.attention.query_dtype, Shape{T, H, kDv});
    v.lse = device(DType::f32, Shape{T, H});
    v.scratch = scratch(plan.scratch_bytes());
    const AttentionParams params = default_params(c.attention);
    ctx().run_and_wait([&](VkCommandBuffer cmd) { cache.record_mla_attention(cmd, 1, plan, v, params); });

    const AttentionResult want = reference::mla_attention(in, params, true);
    const AttentionResult got{fetch(v.output, c.attention.query_dtype), fetch(v.lse, DType::f32)};
    expect_attention_near(got, want, tolerance(c.attention.query_dtype, cache_dtype), true,
                          label_of(form, cache_dtype, step));
  }
};

TEST_F(KvCacheMlaAttentionTest, MlaShapeComesFromTheCache) {
  for (MlaCacheForm form : {MlaCacheForm::one_pool, MlaCacheForm::two_pools}) {
    KvCacheOptions o;
    o.num_blocks = 7;
    const KvCache cache(ctx(), mla_cache_shape(form, DType::fp8_e5m2), o);
    AttentionShape batch;
    batch.num_requests = 3;
    batch.num_query_tokens = 40;
    batch.num_heads = 16;
    batch.max_blocks_per_seq = 4;
    batch.max_context_len = 30;
    batch.query_dtype = DType::bf16;
    batch.sliding_window = 16;
    batch.tree_mask = batch.sinks = true;
    batch.num_kv_heads = 99;  // the cache's own values win
    batch.head_size = 7;
    batch.kv_layout = KvLayout::vllm;
    const MlaShape m = cache.mla_shape(batch);
    const AttentionShape& s = m.attention;
    EXPECT_EQ(s.num_requests, 3u);
    EXPECT_EQ(s.num_query_tokens, 40u);
    EXPECT_EQ(s.num_heads, 16u);
    EXPECT_EQ(s.max_blocks_per_seq, 4u);
    EXPECT_EQ(s.max_context_len, 30u);
    EXPECT_EQ(s.query_dtype, DType::bf16);
    EXPECT_EQ(s.sliding_window, 16u);
    EXPECT_TRUE(s.tree_mask && s.sinks && !s.alibi && !s.lse && !s.softcap);
    EXPECT_EQ(s.num_kv_heads, 1u);
    EXPECT_EQ(s.head_size, kDv + kR);
    EXPECT_EQ(s.block_size, kB);
    EXPECT_EQ(s.num_blocks, 7u);
    EXPECT_EQ(s.cache_dtype, DType::fp8_e5m2);
    EXPECT_EQ(s.kv_layout, KvLayout::nhd);
    EXPECT_EQ(m.value_head_size, kDv);
    EXPECT_EQ(m.rope_head_size(), kR);
    EXPECT_EQ(m.cache_form, form);
  }
}

// Decode requests at lengths 1, B - 1, B, B + 1 and longer; a step of a whole prompt (a cached
// prefix of length 0) and chunks after cached prefixes of 1, B - 1, B and B + 1 positions (a
// request of no new tokens is not a step MlaPlan::create takes); every cache dtype but f32 (the
// ops tests have it), both forms.
TEST_F(KvCacheMlaAttentionTest, DecodeAndChunkStepsMatchTheReference) {
  uint32_t seed = 1;
  for (DType dtype : {DType::f16, DType::bf16, DType::fp8_e4m3, DType::fp8_e5m2}) {
    for (MlaCacheForm form : {MlaCacheForm::one_pool, MlaCacheForm::two_pools}) {
      check_step(form, dtype, {1, kB - 1, kB, kB + 1, 3 * kB + 5}, {1, 1, 1, 1, 1}, "decode", seed++);
      check_step(form, dtype, {6, 1 + 3, kB - 1 + 9, kB + 2, kB + 1 + kB}, {6, 3, 9, 2, kB}, "chunks", seed++);
    }
  }
}

TEST_F(KvCacheMlaAttentionTest, RefusesBeforeRecording) {
  KvCacheOptions o;
  o.num_blocks = 6;
  const KvCache cache(ctx(), mla_cache_shape(MlaCacheForm::two_pools, DType::f16), o);
  KvCacheShape kv_shape = mla_cache_shape(MlaCacheForm::one_pool, DType::f16);
  kv_shape.kind = KvCacheKind::key_value;
  kv_shape.rope_head_size = 0;
  kv_shape.layout = KvLayout::vllm;
  const KvCache kv(ctx(), kv_shape, o);
  AttentionShape batch;
  batch.num_requests = 1;
  batch.num_query_tokens = 2;
  batch.num_heads = 4;
  batch.max_blocks_per_seq = 1;
  const std::vector<int32_t> starts = {0, 2};
  const MlaShape fits = cache.mla_shape(batch);
  const MlaPlan plan = MlaPlan::create(ctx(), fits, starts);
  MlaShape other = fits;
  other.attention.num_blocks = 5;
  const MlaPlan small = MlaPlan::create(ctx(), other, starts);
  other = fits;
  other.cache_form = MlaCacheForm::one_pool;
  const MlaPlan one_pool = MlaPlan::create(ctx(), other, starts);
  other = fits;
  other.value_head_size = kDv - 8;  // the same Dk, another split into Dv and R
  const MlaPlan resplit = MlaPlan::create(ctx(), other, starts);
  other = fits;
  other.attention.cache_dtype = DType::bf16;
  const MlaPlan bf16 = MlaPlan::create(ctx(), other, starts);

  MlaViews v;
  v.query = device(DType::f16, Shape{2, 4, kDv + kR});
  v.block_tables = put(HostTensor(DType::i32, Shape{1, 1}));
  v.context_lens = device(DType::i32, Shape{1});
  v.query_starts = device(DType::i32, Shape{2});
  v.output = device(DType::f16, Shape{2, 4, kDv});
  MlaViews with_pool = v;
  with_pool.kpe_cache = cache.mla_cache(0).kpe_cache;

  expect_refused([&] { (void)kv.mla_shape(batch); }, ErrorCode::invalid_argument,
                 {"mla_shape", "the cache holds key and value pools"});
  ctx().run_and_wait([&](VkCommandBuffer cmd) {
    expect_refused([&] { kv.record_mla_attention(cmd, 0, plan, v); }, ErrorCode::invalid_argument,
                   {"record_mla_attention", "the cache holds key and value pools"});
    expect_refused([&] { cache.record_mla_attention(cmd, 2, plan, v); }, ErrorCode::invalid_argument,
                   {"record_mla_attention", "layer 2 is outside [0, 2)"});
    expect_refused([&] { cache.record_mla_attention(cmd, 0, plan, with_pool); }, ErrorCode::invalid_argument,
                   {"record_mla_attention", "views.kpe_cache is given"});
    expect_refused([&] { cache.record_mla_attention(cmd, 0, small, v); }, ErrorCode::invalid_argument,
                   {"record_mla_attention", "num_blocks 5, the cache's is 6", "mla_shape"});
    expect_refused([&] { cache.record_mla_attention(cmd, 1, one_pool, v); }, ErrorCode::invalid_argument,
                   {"record_mla_attention", "cache_form one_pool, the cache's is two_pools"});
    expect_refused([&] { cache.record_mla_attention(cmd, 1, resplit, v); }, ErrorCode::invalid_argument,
                   {"record_mla_attention", "value_head_size 56, the cache's is 64"});
    expect_refused([&] { cache.record_mla_attention(cmd, 1, bf16, v); }, ErrorCode::invalid_argument,
                   {"record_mla_attention", "cache_dtype bf16, the cache's is f16"});
  });
}

}  // namespace
}  // namespace vkpaged::test
