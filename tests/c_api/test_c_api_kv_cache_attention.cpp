// SPDX-License-Identifier: Apache-2.0
// KvCache's per-layer attention helpers through the C API, in each cache layout: the attention
// shape a cache makes (its own fields, the batch's kept), vkp_kv_cache_record_attention for a
// mixed engine step and a decode-only step and vkp_kv_cache_record_decode, each bit for bit what
// the C++ helpers record on a C++ cache filled alike, and within the contract's tolerance of the
// CPU reference on the layer's pools as stored; and what the C calls refuse before recording (a
// layer out of range, a pool view given, a plan of another cache or of another context, per-call
// values that contradict the plan).
#include <algorithm>
#include <cstring>
#include <numeric>
#include <random>
#include <string>
#include <vector>

#include "c_api/c_api_test_helpers.hpp"
#include "ops/cache_test_helpers.hpp"
#include "support/attention_case.hpp"
#include "support/buffer_test.hpp"
#include "support/decode_case.hpp"
#include "support/decode_check.hpp"
#include "support/shuffled_block_tables.hpp"
#include "vkpaged/kv_cache.hpp"
#include "vkpaged/reference.hpp"
#include "vkpaged/utilities.hpp"

namespace vkpaged::test {
namespace {

using namespace c_api_helpers;

constexpr uint32_t kLayers = 2, kKvHeads = 2, kHeadSize = 64, kBlockSize = 8, kBlocks = 12, kHeads = 4;

// One step's requests: L_s (the new tokens included) and q_s.
struct Step {
  std::vector<int32_t> lens, new_tokens;
  int64_t requests() const { return int64_t(lens.size()); }
  int64_t tokens() const { return std::accumulate(new_tokens.begin(), new_tokens.end(), int64_t(0)); }
  uint32_t width() const { return uint32_t(*std::max_element(lens.begin(), lens.end()) + kBlockSize - 1) / kBlockSize; }
  std::vector<int32_t> starts() const {
    std::vector<int32_t> s{0};
    for (int32_t q : new_tokens) s.push_back(s.back() + q);
    return s;
  }
};

bool same_bytes(const HostTensor& a, const HostTensor& b) {
  return a.bytes() == b.bytes() && std::memcmp(a.data(), b.data(), a.bytes()) == 0;
}

// The same cache twice: through the C API on the C context, and a C++ KvCache on the shared
// context, each pool filled with the same reproducible values.
class CApiKvCacheAttentionTest : public BufferTest, public ::testing::WithParamInterface<KvLayout> {
 protected:
  void make_caches(DType dtype) {
    vkp_kv_cache_shape shape;
    vkp_kv_cache_shape_init(&shape);
    shape.num_layers = kLayers;
    shape.num_kv_heads = kKvHeads;
    shape.head_size = kHeadSize;
    shape.block_size = kBlockSize;
    shape.dtype = vkp_dtype(dtype);
    shape.layout = vkp_kv_layout(GetParam());
    const vkp_kv_cache_options options = kv_cache_options(kBlocks);
    vkp_kv_cache* raw = nullptr;
    ASSERT_VKP_OK(vkp_kv_cache_create(c_context(), &shape, &options, &raw));
    c_cache_.reset(raw);
    KvCacheOptions o;
    o.num_blocks = kBlocks;
    const KvCacheShape cpp_shape{kLayers, kKvHeads, kHeadSize, kBlockSize, dtype, GetParam()};
    cpp_cache_ = std::make_unique<KvCache>(ctx(), cpp_shape, o);

    for (uint32_t l = 0; l < kLayers; ++l) {
      vkp_layer_cache_views_init(&layers_[l]);
      ASSERT_VKP_OK(vkp_kv_cache_layer(raw, l, VKP_FALSE, &layers_[l]));
    }
    ASSERT_VKP_OK(run(c_context(), [&](VkCommandBuffer cmd) {
      vkp_status s = VKP_OK;
      for (uint32_t l = 0; l < kLayers && s == VKP_OK; ++l) {
        s = vkp_record_fill_random(c_context(), cmd, &layers_[l].key_cache, 40 + 2 * l);
        if (s == VKP_OK) s = vkp_record_fill_random(c_context(), cmd, &layers_[l].value_cache, 41 + 2 * l);
      }
      return s;
    }));
    ctx().run_and_wait([&](VkCommandBuffer cmd) {
      for (uint32_t l = 0; l < kLayers; ++l) {
        record_fill_random(ctx(), cmd, cpp_cache_->key_cache(l), 40 + 2 * l);
        record_fill_random(ctx(), cmd, cpp_cache_->value_cache(l), 41 + 2 * l);
      }
    });
    for (uint32_t l = 0; l < kLayers; ++l) {
      ASSERT_TRUE(same_bytes(pool(layers_[l].key_cache), fetch_pool(cpp_cache_->key_cache(l)))) << "layer " << l;
      ASSERT_TRUE(same_bytes(pool(layers_[l].value_cache), fetch_pool(cpp_cache_->value_cache(l)))) << "layer " << l;
    }
  }

  // A pool as stored (fp8 as its bytes, which the reference reads with the cache dtype).
  HostTensor pool(const vkp_tensor_view& v) {
    const DType t = is_fp8_dtype(DType(v.dtype)) ? DType::u8 : DType(v.dtype);
    HostTensor h(t, Shape(std::vector<int64_t>(v.shape, v.shape + v.rank)));
    EXPECT_VKP_OK(vkp_download(c_context(), &v.memory, h.data(), h.bytes()));
    return h;
  }
  // A zero-filled device tensor of the C++ side (an output).
  TensorView cpp_zeros(DType dtype, Shape shape) { return put(HostTensor(dtype, shape)); }
  CTensor c_scratch(uint64_t bytes) {
    CTensor t;
    if (bytes == 0) return t;  // absent
    vkp_buffer* buffer = nullptr;
    EXPECT_VKP_OK(vkp_buffer_create(c_context(), bytes, VKP_MEMORY_DEVICE, &buffer));
    t.buffer.reset(buffer);
    t.view.memory = vkp_buffer_view_of(buffer, 0, bytes);
    return t;
  }

  // One step on layer `layer`: vkp_kv_cache_record_attention against KvCache::record_attention
  // (bit for bit) and against the reference.
  void check_attention(uint32_t layer, const Step& step, const DecodeParams& params, uint32_t seed,
                       AttentionKernel expect_kernel, const std::string& label) {
    SCOPED_TRACE(label);
    const int64_t S = step.requests(), T = step.tokens();
    const std::vector<int32_t> starts = step.starts();
    AttentionInputs in;
    in.query = cache_helpers::random_tensor(DType::f16, Shape{T, kHeads, kHeadSize}, seed);
    in.block_tables = shuffled_block_tables(step.lens, kBlockSize, step.width(), kBlocks, seed);
    in.context_lens = ints(step.lens);
    in.query_starts = ints(starts);
    in.cache_dtype = cpp_cache_->shape().dtype;
    in.kv_layout = GetParam();

    // Through C: the plan's shape from the cache, the pools left to it.
    const vkp_attention_shape batch = c_batch(uint32_t(S), uint32_t(T), kHeads, step.width());
    vkp_attention_shape shape;
    vkp_attention_shape_init(&shape);
    ASSERT_VKP_OK(vkp_kv_cache_attention_shape(c_cache_.get(), &batch, &shape));
    vkp_attention_plan* raw = nullptr;
    ASSERT_VKP_OK(vkp_attention_plan_create(c_context(), &shape, starts.data(), starts.size(), nullptr, &raw));
    const AttentionPlanPtr plan(raw, &vkp_attention_plan_destroy);
    vkp_attention_plan_info info;
    vkp_attention_plan_info_init(&info);
    ASSERT_VKP_OK(vkp_attention_plan_info_get(raw, &info));
    if (expect_kernel == AttentionKernel::automatic) {
      // The multi-query kernel automatic picks: the matrix kernel where this context runs it.
      vkp_attention_options matrix;
      vkp_attention_options_init(&matrix);
      matrix.kernel = VKP_ATTENTION_KERNEL_MATRIX;
      vkp_attention_plan* probe = nullptr;
      const vkp_status status = vkp_attention_plan_create(c_context(), &shape, starts.data(), starts.size(), &matrix, &probe);
      vkp_attention_plan_destroy(probe);
      ASSERT_TRUE(status == VKP_OK || status == VKP_ERROR_UNSUPPORTED) << vkp_last_error();
      expect_kernel = status == VKP_OK ? AttentionKernel::matrix : AttentionKernel::scalar;
    }
    EXPECT_EQ(int(info.kernel), int(expect_kernel)) << vkp_attention_plan_describe(raw);
    vkp_context* cctx = c_context();
    const CTensor query = upload(cctx, in.query), tables = upload(cctx, in.block_tables);
    const CTensor lens = upload(cctx, in.context_lens), d_starts = upload(cctx, in.query_starts);
    const CTensor output = zeros(cctx, DType::f16, Shape{T, kHeads, kHeadSize});
    const CTensor lse = zeros(cctx, DType::f32, Shape{T, kHeads});
    const CTensor status = zeros(cctx, DType::u32, Shape{1});
    const CTensor c_scratch_buffer = c_scratch(info.scratch_bytes);
    vkp_attention_views views = batch_views<vkp_attention_views>(query, tables, lens, d_starts, output);
    views.lse = lse.view;
    views.scratch = c_scratch_buffer.view.memory;
    views.status = status.view.memory;
    const vkp_decode_params cparams = c_params(params);
    ASSERT_VKP_OK(run(cctx, [&](VkCommandBuffer cmd) {
      return vkp_kv_cache_record_attention(c_cache_.get(), cmd, layer, raw, &views, &cparams);
    }));
    EXPECT_EQ(download(cctx, status).as<uint32_t>()[0], 0u);
    const AttentionResult got{download(cctx, output), download(cctx, lse)};

    // Through C++, on the C++ cache.
    AttentionShape cpp_batch;
    cpp_batch.num_requests = uint32_t(S);
    cpp_batch.num_query_tokens = uint32_t(T);
    cpp_batch.num_heads = kHeads;
    cpp_batch.max_blocks_per_seq = step.width();
    cpp_batch.lse = true;
    const AttentionPlan cpp_plan = AttentionPlan::create(ctx(), cpp_cache_->attention_shape(cpp_batch), starts);
    EXPECT_EQ(std::string(vkp_attention_plan_describe(raw)), cpp_plan.describe());
    AttentionViews v;
    v.query = put(in.query);
    v.block_tables = put(in.block_tables);
    v.context_lens = put(in.context_lens);
    v.query_starts = put(in.query_starts);
    v.output = cpp_zeros(DType::f16, Shape{T, kHeads, kHeadSize});
    v.lse = cpp_zeros(DType::f32, Shape{T, kHeads});
    v.scratch = scratch(cpp_plan.scratch_bytes());
    ctx().run_and_wait([&](VkCommandBuffer cmd) { cpp_cache_->record_attention(cmd, layer, cpp_plan, v, params); });
    EXPECT_TRUE(same_bytes(got.output, fetch(v.output))) << "the output differs from the C++ helper's";
    EXPECT_TRUE(same_bytes(got.lse, fetch(v.lse))) << "the LSE differs from the C++ helper's";

    // Against the reference on the layer's pools as stored.
    in.key_cache = pool(layers_[layer].key_cache);
    in.value_cache = pool(layers_[layer].value_cache);
    const AttentionResult want = reference::batch_attention(in, params, true);
    expect_attention_near(got, want, tolerance(DType::f16, cpp_cache_->shape().dtype), true,
                          std::string(kv_layout_name(GetParam())) + " layer " + std::to_string(layer));
  }

  CachePtr c_cache_{nullptr, &vkp_kv_cache_destroy};
  std::unique_ptr<KvCache> cpp_cache_;
  vkp_layer_cache_views layers_[kLayers]{};
};

// The cache's fields whatever the batch held there; the batch's fields as given; the caller's
// struct_size kept; the C++ helper's shape field for field.
TEST_P(CApiKvCacheAttentionTest, AttentionShapeComesFromTheCache) {
  make_caches(DType::fp8_e5m2);
  vkp_attention_shape batch;
  vkp_attention_shape_init(&batch);
  batch.num_requests = 3;
  batch.num_query_tokens = 40;
  batch.num_heads = 8;
  batch.max_blocks_per_seq = 4;
  batch.max_context_len = 30;
  batch.query_dtype = VKP_DTYPE_BF16;
  batch.sliding_window = 16;
  batch.tree_mask = batch.alibi = batch.softcap = VKP_TRUE;
  batch.num_kv_heads = 99;  // the cache's own values win
  batch.head_size = 7;
  batch.block_size = 3;
  batch.num_blocks = 1;
  batch.cache_dtype = VKP_DTYPE_F32;
  batch.kv_layout = GetParam() == KvLayout::hnd ? VKP_KV_LAYOUT_NHD : VKP_KV_LAYOUT_HND;
  vkp_attention_shape s;
  vkp_attention_shape_init(&s);
  ASSERT_VKP_OK(vkp_kv_cache_attention_shape(c_cache_.get(), &batch, &s));
  EXPECT_EQ(s.struct_size, sizeof(vkp_attention_shape));
  EXPECT_EQ(s.num_requests, 3u);
  EXPECT_EQ(s.num_query_tokens, 40u);
  EXPECT_EQ(s.num_heads, 8u);
  EXPECT_EQ(s.max_blocks_per_seq, 4u);
  EXPECT_EQ(s.max_context_len, 30u);
  EXPECT_EQ(s.query_dtype, VKP_DTYPE_BF16);
  EXPECT_EQ(s.sliding_window, 16u);
  EXPECT_TRUE(s.tree_mask && s.alibi && s.softcap && !s.sinks && !s.lse);
  EXPECT_EQ(s.num_kv_heads, kKvHeads);
  EXPECT_EQ(s.head_size, kHeadSize);
  EXPECT_EQ(s.block_size, kBlockSize);
  EXPECT_EQ(s.num_blocks, kBlocks);
  EXPECT_EQ(s.cache_dtype, VKP_DTYPE_FP8_E5M2);
  EXPECT_EQ(s.kv_layout, vkp_kv_layout(GetParam()));

  AttentionShape cpp_batch;
  cpp_batch.num_requests = 3;
  cpp_batch.num_query_tokens = 40;
  cpp_batch.num_heads = 8;
  cpp_batch.max_blocks_per_seq = 4;
  cpp_batch.max_context_len = 30;
  cpp_batch.query_dtype = DType::bf16;
  cpp_batch.sliding_window = 16;
  cpp_batch.tree_mask = cpp_batch.alibi = cpp_batch.softcap = true;
  const AttentionShape want = cpp_cache_->attention_shape(cpp_batch);
  vkp_attention_shape plan_shape;
  vkp_attention_shape_init(&plan_shape);
  // The C shape makes the plan the C++ shape makes: what the plan reports is that shape.
  const int32_t starts[] = {0, 10, 30, 40};
  batch.max_context_len = 0;
  ASSERT_VKP_OK(vkp_kv_cache_attention_shape(c_cache_.get(), &batch, &s));
  s.tree_mask = s.alibi = s.softcap = VKP_FALSE;  // plain enough for any device
  s.sliding_window = 0;
  s.query_dtype = VKP_DTYPE_F16;
  vkp_attention_plan* raw = nullptr;
  ASSERT_VKP_OK(vkp_attention_plan_create(c_context(), &s, starts, 4, nullptr, &raw));
  const AttentionPlanPtr plan(raw, &vkp_attention_plan_destroy);
  ASSERT_VKP_OK(vkp_attention_plan_shape_get(raw, &plan_shape));
  EXPECT_EQ(plan_shape.num_kv_heads, want.num_kv_heads);
  EXPECT_EQ(plan_shape.head_size, want.head_size);
  EXPECT_EQ(plan_shape.block_size, want.block_size);
  EXPECT_EQ(plan_shape.num_blocks, want.num_blocks);
  EXPECT_EQ(int(plan_shape.cache_dtype), int(want.cache_dtype));
  EXPECT_EQ(int(plan_shape.kv_layout), int(want.kv_layout));

  // An older caller's output is written up to its size only: the C ABI's rule, here too.
  vkp_attention_shape older;
  std::memset(&older, 0xAB, sizeof(older));
  older.struct_size = 4;  // no release had it
  expect_refused(vkp_kv_cache_attention_shape(c_cache_.get(), &batch, &older),
                 "out: vkp_attention_shape.struct_size: 4 is not a size");
  EXPECT_EQ(older.num_requests, 0xABABABABu) << "a refused call wrote its output";
}

// A mixed step (a decode request on one position, a whole prompt that ends mid-block, a chunk of
// 5 after a cached prefix of 28, a decode request after B positions) on layer 1 and a decode-only
// step on layer 0, with f16 and fp8 caches (the fp8 scales given per call).
TEST_P(CApiKvCacheAttentionTest, RecordAttentionMatchesTheCppHelperAndTheReference) {
  for (DType dtype : {DType::f16, DType::fp8_e4m3}) {
    SCOPED_TRACE(std::string(dtype_name(dtype)));
    make_caches(dtype);
    DecodeParams params;
    if (is_fp8_dtype(dtype)) params.k_scale = params.v_scale = 0.5f;
    // The multi-query kernel automatic picks here (the matrix kernel where the device runs it).
    check_attention(1, {{1, 19, 33, 9}, {1, 19, 5, 1}}, params, 1, AttentionKernel::automatic, "mixed step");
    // Decode only: the decode kernels, on every layout.
    check_attention(0, {{30, 1, 8, 17}, {1, 1, 1, 1}}, params, 2, AttentionKernel::decode, "decode step");
  }
}

// vkp_kv_cache_record_decode on the decode kernels, in each layout, with a logit scale given per call.
TEST_P(CApiKvCacheAttentionTest, RecordDecodeMatchesTheCppHelperAndTheReference) {
  make_caches(DType::f16);
  vkp_decode_shape batch;
  vkp_decode_shape_init(&batch);
  batch.num_seqs = 4;
  batch.num_heads = kHeads;
  const Step step{{30, 1, 8, 17}, {1, 1, 1, 1}};
  batch.max_blocks_per_seq = step.width();
  batch.lse = VKP_TRUE;
  vkp_decode_shape shape;
  vkp_decode_shape_init(&shape);
  ASSERT_VKP_OK(vkp_kv_cache_decode_shape(c_cache_.get(), &batch, &shape));
  vkp_decode_plan* raw = nullptr;
  ASSERT_VKP_OK(vkp_decode_plan_create(c_context(), &shape, nullptr, &raw));
  const DecodePlanPtr plan(raw, &vkp_decode_plan_destroy);
  DecodeParams params;
  params.scale = 0.09f;
  DecodeInputs in;
  in.query = cache_helpers::random_tensor(DType::f16, Shape{4, kHeads, kHeadSize}, 3);
  in.block_tables = shuffled_block_tables(step.lens, kBlockSize, step.width(), kBlocks, 3);
  in.context_lens = ints(step.lens);

  vkp_context* cctx = c_context();
  const CTensor query = upload(cctx, in.query), tables = upload(cctx, in.block_tables);
  const CTensor lens = upload(cctx, in.context_lens);
  const CTensor output = zeros(cctx, DType::f16, Shape{4, kHeads, kHeadSize});
  const CTensor lse = zeros(cctx, DType::f32, Shape{4, kHeads});
  const CTensor c_scratch_buffer = c_scratch(vkp_decode_plan_scratch_bytes(raw));
  vkp_decode_views views;
  vkp_decode_views_init(&views);
  views.query = query.view;
  views.block_tables = tables.view;
  views.context_lens = lens.view;
  views.output = output.view;
  views.lse = lse.view;
  views.scratch = c_scratch_buffer.view.memory;
  const vkp_decode_params cparams = c_params(params);
  ASSERT_VKP_OK(run(cctx, [&](VkCommandBuffer cmd) {
    return vkp_kv_cache_record_decode(c_cache_.get(), cmd, 1, raw, &views, &cparams);
  }));
  const DecodeResult got{download(cctx, output), download(cctx, lse)};

  DecodeShape cpp_batch;
  cpp_batch.num_seqs = 4;
  cpp_batch.num_heads = kHeads;
  cpp_batch.max_blocks_per_seq = step.width();
  cpp_batch.lse = true;
  const DecodePlan cpp_plan = DecodePlan::create(ctx(), cpp_cache_->decode_shape(cpp_batch));
  EXPECT_EQ(std::string(vkp_decode_plan_describe(raw)), cpp_plan.describe());
  DecodeViews v;
  v.query = put(in.query);
  v.block_tables = put(in.block_tables);
  v.context_lens = put(in.context_lens);
  v.output = cpp_zeros(DType::f16, Shape{4, kHeads, kHeadSize});
  v.lse = cpp_zeros(DType::f32, Shape{4, kHeads});
  v.scratch = scratch(cpp_plan.scratch_bytes());
  ctx().run_and_wait([&](VkCommandBuffer cmd) { cpp_cache_->record_decode(cmd, 1, cpp_plan, v, params); });
  EXPECT_TRUE(same_bytes(got.output, fetch(v.output))) << "the output differs from the C++ helper's";
  EXPECT_TRUE(same_bytes(got.lse, fetch(v.lse))) << "the LSE differs from the C++ helper's";

  in.key_cache = pool(layers_[1].key_cache);
  in.value_cache = pool(layers_[1].value_cache);
  in.cache_dtype = DType::f16;
  in.kv_layout = GetParam();
  const DecodeResult want = reference::decode_attention(in, {}, params, true);
  expect_decode_near(got, want, tolerance(DType::f16, DType::f16), true, "layer 1");
  // The scale was used: without it the reference differs.
  EXPECT_GT(max_abs_diff(got.output, reference::decode_attention(in).output), tolerance(DType::f16, DType::f16));
}

TEST_P(CApiKvCacheAttentionTest, RefusesBeforeRecording) {
  make_caches(DType::f16);
  vkp_context* cctx = c_context();
  vkp_kv_cache* cache = c_cache_.get();
  vkp_attention_shape batch;
  vkp_attention_shape_init(&batch);
  batch.num_requests = 1;
  batch.num_query_tokens = 2;
  batch.num_heads = kHeads;
  batch.max_blocks_per_seq = 1;
  const int32_t starts[] = {0, 2};
  vkp_attention_shape shape;
  vkp_attention_shape_init(&shape);
  ASSERT_VKP_OK(vkp_kv_cache_attention_shape(cache, &batch, &shape));
  auto make_plan = [&](vkp_context* on, const vkp_attention_shape& s) {
    vkp_attention_plan* p = nullptr;
    EXPECT_VKP_OK(vkp_attention_plan_create(on, &s, starts, 2, nullptr, &p));
    return AttentionPlanPtr(p, &vkp_attention_plan_destroy);
  };
  const AttentionPlanPtr plan = make_plan(cctx, shape);
  vkp_attention_shape other = shape;
  other.num_blocks = kBlocks - 1;
  const AttentionPlanPtr small = make_plan(cctx, other);
  other = shape;
  other.kv_layout = GetParam() == KvLayout::hnd ? VKP_KV_LAYOUT_NHD : VKP_KV_LAYOUT_HND;
  const AttentionPlanPtr relaid = make_plan(cctx, other);
  // A plan of the same shape made on another context (adopting the same device).
  vkp_external_device ext = shared_device();
  vkp_context* raw_other = nullptr;
  ASSERT_VKP_OK(vkp_context_create_external(&ext, &raw_other));
  const std::unique_ptr<vkp_context, decltype(&vkp_context_destroy)> other_context(raw_other, &vkp_context_destroy);
  AttentionPlanPtr foreign = make_plan(raw_other, shape);

  const CTensor query = zeros(cctx, DType::f16, Shape{2, kHeads, kHeadSize});
  const CTensor tables = zeros(cctx, DType::i32, Shape{1, 1});
  const CTensor lens = upload(cctx, ints({2})), d_starts = upload(cctx, ints({0, 2}));
  const CTensor output = zeros(cctx, DType::f16, Shape{2, kHeads, kHeadSize});
  vkp_attention_views views = batch_views<vkp_attention_views>(query, tables, lens, d_starts, output);
  vkp_attention_views with_pool = views;
  with_pool.value_cache = layers_[0].value_cache;
  vkp_decode_params softcap;
  vkp_decode_params_init(&softcap);
  softcap.softcap = 30.0f;  // the plan has no soft cap

  vkp_decode_shape decode_batch;
  vkp_decode_shape_init(&decode_batch);
  decode_batch.num_seqs = 1;
  decode_batch.num_heads = kHeads;
  decode_batch.max_blocks_per_seq = 1;
  vkp_decode_shape wrong;
  vkp_decode_shape_init(&wrong);
  ASSERT_VKP_OK(vkp_kv_cache_decode_shape(cache, &decode_batch, &wrong));
  wrong.head_size = 128;
  wrong.kv_layout = VKP_KV_LAYOUT_VLLM;
  vkp_decode_plan* raw_decode = nullptr;
  ASSERT_VKP_OK(vkp_decode_plan_create(cctx, &wrong, nullptr, &raw_decode));
  const DecodePlanPtr decode_plan(raw_decode, &vkp_decode_plan_destroy);
  vkp_decode_views decode_views;
  vkp_decode_views_init(&decode_views);
  decode_views.key_cache = layers_[1].key_cache;
  // On the vllm layout, a plan of this cache: then the pool view given is what is refused.
  DecodePlanPtr fitting(nullptr, &vkp_decode_plan_destroy);
  if (GetParam() == KvLayout::vllm) {
    vkp_decode_shape fits;
    vkp_decode_shape_init(&fits);
    ASSERT_VKP_OK(vkp_kv_cache_decode_shape(cache, &decode_batch, &fits));
    vkp_decode_plan* raw_fitting = nullptr;
    ASSERT_VKP_OK(vkp_decode_plan_create(cctx, &fits, nullptr, &raw_fitting));
    fitting.reset(raw_fitting);
  }

  const std::string layout(kv_layout_name(GetParam()));
  ASSERT_VKP_OK(run(cctx, [&](VkCommandBuffer cmd) {
    expect_refused(vkp_kv_cache_record_attention(cache, cmd, kLayers, plan.get(), &views, nullptr),
                   "vkp_kv_cache_record_attention: KvCache: record_attention: layer 2 is outside [0, 2)");
    expect_refused(vkp_kv_cache_record_attention(cache, cmd, 0, plan.get(), &with_pool, nullptr),
                   "views.value_cache is given, but the cache supplies the layer's pools");
    expect_refused(vkp_kv_cache_record_attention(cache, cmd, 0, small.get(), &views, nullptr),
                   "num_blocks 11, the cache's is 12");
    expect_refused(vkp_kv_cache_record_attention(cache, cmd, 1, relaid.get(), &views, nullptr),
                   "the cache's is " + layout);
    expect_refused(vkp_kv_cache_record_attention(cache, cmd, 0, foreign.get(), &views, nullptr),
                   "vkp_kv_cache_record_attention: plan: created on another context than the cache's");
    expect_refused(vkp_kv_cache_record_attention(cache, cmd, 0, plan.get(), &views, &softcap), "softcap");
    expect_refused(vkp_kv_cache_record_decode(cache, cmd, 0, decode_plan.get(), &decode_views, nullptr),
                   "vkp_kv_cache_record_decode: KvCache: record_decode: the plan's shape has head_size 128, the "
                   "cache's is 64");
    expect_refused(vkp_kv_cache_record_decode(cache, cmd, kLayers, decode_plan.get(), &decode_views, nullptr),
                   "record_decode: layer 2 is outside [0, 2)");
    if (fitting)
      expect_refused(vkp_kv_cache_record_decode(cache, cmd, 1, fitting.get(), &decode_views, nullptr),
                     "record_decode: views.key_cache is given");
    return VKP_OK;  // the command buffer holds nothing from the refused calls and is submitted
  }));
  foreign.reset();  // before its context
}

INSTANTIATE_TEST_SUITE_P(Layouts, CApiKvCacheAttentionTest,
                         ::testing::Values(KvLayout::vllm, KvLayout::nhd, KvLayout::hnd),
                         [](const auto& info) { return std::string(kv_layout_name(info.param)); });

}  // namespace
}  // namespace vkpaged::test
