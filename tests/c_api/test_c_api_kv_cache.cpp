// SPDX-License-Identifier: Apache-2.0
// The KvCache through the C API: sizing and planning as the C++ API answers, allocation,
// per-layer views, whole-block copies and swaps moving exactly the blocks asked for, the
// per-layer reshape_and_cache (with and without rotary) in the cache's layout, and decode shapes.
#include <cstring>

#include "c_api/c_api_test_helpers.hpp"
#include "ops/cache_test_helpers.hpp"
#include "vkpaged/kv_cache.hpp"
#include "vkpaged/rotary.hpp"

namespace vkpaged::test {
namespace {

using namespace c_api_helpers;

class CApiKvCacheTest : public GpuTest {
 protected:
  static vkp_kv_cache_shape c_shape() {
    vkp_kv_cache_shape s;
    vkp_kv_cache_shape_init(&s);
    s.num_layers = 2;
    s.num_kv_heads = 2;
    s.head_size = 64;
    return s;  // block size 16, f16
  }
  static KvCacheShape cpp_shape() { return {2, 2, 64, 16, DType::f16}; }
};

TEST_F(CApiKvCacheTest, SizesAndPlansAsTheCppApi) {
  const vkp_kv_cache_shape shape = c_shape();
  EXPECT_EQ(shape.block_size, 16u);
  EXPECT_EQ(shape.dtype, VKP_DTYPE_F16);
  vkp_kv_cache_sizing sizing;
  vkp_kv_cache_sizing_init(&sizing);
  ASSERT_VKP_OK(vkp_kv_cache_sizing_of(&shape, 100, &sizing));
  const KvCacheSizing want = KvCache::sizing(cpp_shape(), 100);
  EXPECT_EQ(sizing.total_bytes, want.total_bytes);
  EXPECT_EQ(sizing.block_bytes, want.block_bytes);
  EXPECT_EQ(sizing.num_tokens, want.num_tokens);
  uint32_t blocks = 0;
  ASSERT_VKP_OK(vkp_kv_cache_blocks_for_budget(&shape, 1 << 20, &blocks));
  EXPECT_EQ(blocks, KvCache::blocks_for_budget(cpp_shape(), 1 << 20));
  ASSERT_VKP_OK(vkp_kv_cache_max_blocks_per_pool(&shape, 1 << 24, &blocks));
  EXPECT_EQ(blocks, KvCache::max_blocks_per_pool(cpp_shape(), 1 << 24));

  vkp_device_info info;
  vkp_device_info_init(&info);
  ASSERT_VKP_OK(vkp_context_device_info(c_context(), &info));
  vkp_kv_cache_options options;
  vkp_kv_cache_options_init(&options);
  options.budget_fraction = 0.01;
  ASSERT_VKP_OK(vkp_kv_cache_plan(&info, &shape, &options, &sizing));
  // The same memory figures on both sides: free memory moves between two reads on a busy GPU.
  DeviceInfo device = ctx().device_info();
  device.memory_budget = info.memory_budget;
  device.device_local_free_bytes = info.device_local_free_bytes;
  const KvCacheSizing planned = KvCache::plan(device, cpp_shape(), {.budget_fraction = 0.01});
  EXPECT_EQ(sizing.num_blocks, planned.num_blocks);
  EXPECT_EQ(int(sizing.fraction_of), int(planned.fraction_of));
  EXPECT_EQ(sizing.fraction_of_bytes, planned.fraction_of_bytes);
  EXPECT_EQ(info.memory_budget, vkp_bool32(ctx().device_info().memory_budget));
  EXPECT_EQ(info.device_local_bytes, ctx().device_info().device_local_bytes);
  EXPECT_EQ(info.cooperative_matrix, vkp_bool32(ctx().device_info().cooperative_matrix));
  // The free memory crosses the C API: a device that reports half its memory free sizes from it.
  info.memory_budget = VKP_TRUE;
  info.device_local_free_bytes = info.device_local_bytes / 2;
  ASSERT_VKP_OK(vkp_kv_cache_plan(&info, &shape, &options, &sizing));
  EXPECT_EQ(sizing.fraction_of, VKP_MEMORY_SOURCE_MEMORY_BUDGET);
  EXPECT_EQ(sizing.fraction_of_bytes, info.device_local_bytes / 2);

  vkp_kv_cache_shape bad = shape;
  bad.head_size = 60;
  expect_refused(vkp_kv_cache_sizing_of(&bad, 1, &sizing), "60");
  bad = shape;
  bad.dtype = vkp_dtype(33);
  expect_refused(vkp_kv_cache_sizing_of(&bad, 1, &sizing), "shape.dtype: 33");
  vkp_kv_cache_options_init(&options);
  vkp_kv_cache* cache = nullptr;
  expect_refused(vkp_kv_cache_create(c_context(), &shape, &options, &cache), "KvCache");
  EXPECT_EQ(cache, nullptr);
}

TEST_F(CApiKvCacheTest, CopiesAndSwapsWholeBlocksInEveryLayer) {
  const vkp_kv_cache_shape shape = c_shape();
  const vkp_kv_cache_options options = kv_cache_options(8, 4);
  vkp_kv_cache* raw = nullptr;
  ASSERT_VKP_OK(vkp_kv_cache_create(c_context(), &shape, &options, &raw));
  CachePtr cache(raw, &vkp_kv_cache_destroy);
  vkp_kv_cache_info info;
  vkp_kv_cache_info_init(&info);
  ASSERT_VKP_OK(vkp_kv_cache_info_get(raw, &info));
  EXPECT_EQ(info.num_blocks, 8u);
  EXPECT_EQ(info.num_host_blocks, 4u);
  vkp_kv_cache_shape got_shape;
  vkp_kv_cache_shape_init(&got_shape);
  ASSERT_VKP_OK(vkp_kv_cache_shape_get(raw, &got_shape));
  EXPECT_EQ(std::memcmp(&got_shape, &shape, sizeof(shape)), 0);
  vkp_kv_cache_sizing sizing;
  vkp_kv_cache_sizing_init(&sizing);
  ASSERT_VKP_OK(vkp_kv_cache_sizing_get(raw, &sizing));
  EXPECT_EQ(sizing.num_blocks, 8u);
  EXPECT_EQ(sizing.total_bytes, KvCache::sizing(cpp_shape(), 8).total_bytes);
  const size_t block = size_t(sizing.block_bytes);

  // Random device pools, zeroed host pools.
  vkp_layer_cache_views device[2], host[2];
  for (uint32_t l = 0; l < 2; ++l) {
    vkp_layer_cache_views_init(&device[l]);
    vkp_layer_cache_views_init(&host[l]);
    ASSERT_VKP_OK(vkp_kv_cache_layer(raw, l, VKP_FALSE, &device[l]));
    ASSERT_VKP_OK(vkp_kv_cache_layer(raw, l, VKP_TRUE, &host[l]));
    EXPECT_EQ(device[l].key_cache.rank, 5);
    EXPECT_EQ(device[l].key_cache.shape[0], 8);
    EXPECT_EQ(host[l].value_cache.shape[0], 4);
  }
  ASSERT_VKP_OK(run(c_context(), [&](VkCommandBuffer cmd) {
    vkp_status s = VKP_OK;
    for (uint32_t l = 0; l < 2 && s == VKP_OK; ++l) {
      s = vkp_record_fill_random(c_context(), cmd, &device[l].key_cache, 10 + l);
      if (s == VKP_OK) s = vkp_record_fill_random(c_context(), cmd, &device[l].value_cache, 20 + l);
    }
    return s;
  }));
  const std::vector<uint8_t> zeros(4 * block);
  for (uint32_t l = 0; l < 2; ++l) {
    ASSERT_VKP_OK(vkp_upload(c_context(), &host[l].key_cache.memory, zeros.data(), 4 * block));
    ASSERT_VKP_OK(vkp_upload(c_context(), &host[l].value_cache.memory, zeros.data(), 4 * block));
  }
  auto pool = [&](const vkp_tensor_view& v, size_t blocks) {
    std::vector<uint8_t> bytes(blocks * block);
    EXPECT_VKP_OK(vkp_download(c_context(), &v.memory, bytes.data(), bytes.size()));
    return bytes;
  };
  auto same_block = [&](const std::vector<uint8_t>& a, size_t ia, const std::vector<uint8_t>& b, size_t ib) {
    return std::memcmp(a.data() + ia * block, b.data() + ib * block, block) == 0;
  };

  const vkp_block_copy out[] = {{3, 1}, {5, 0}};
  const vkp_block_copy copy[] = {{3, 7}};
  ASSERT_VKP_OK(run(c_context(), [&](VkCommandBuffer cmd) {
    vkp_status s = vkp_kv_cache_record_swap_out(raw, cmd, out, 2);
    if (s == VKP_OK) s = vkp_kv_cache_record_copy_blocks(raw, cmd, copy, 1);
    return s;
  }));
  for (uint32_t l = 0; l < 2; ++l) {
    for (auto* views : {&device[l].key_cache, &device[l].value_cache}) {
      const auto d = pool(*views, 8);
      const auto h = pool(views == &device[l].key_cache ? host[l].key_cache : host[l].value_cache, 4);
      EXPECT_TRUE(same_block(d, 3, h, 1)) << "layer " << l;
      EXPECT_TRUE(same_block(d, 5, h, 0)) << "layer " << l;
      EXPECT_TRUE(same_block(d, 3, d, 7)) << "layer " << l;
      EXPECT_FALSE(same_block(d, 3, d, 4)) << "layer " << l;
    }
  }
  const vkp_block_copy in[] = {{0, 2}};
  ASSERT_VKP_OK(run(c_context(), [&](VkCommandBuffer cmd) { return vkp_kv_cache_record_swap_in(raw, cmd, in, 1); }));
  const auto d = pool(device[1].value_cache, 8);
  EXPECT_TRUE(same_block(d, 5, d, 2));

  vkp_layer_cache_views views;
  vkp_layer_cache_views_init(&views);
  expect_refused(vkp_kv_cache_layer(raw, 2, VKP_FALSE, &views), "2");
  const vkp_block_copy bad[] = {{0, 4}};
  EXPECT_VKP_OK(run(c_context(), [&](VkCommandBuffer cmd) {
    expect_refused(vkp_kv_cache_record_swap_out(raw, cmd, bad, 1), "pairs[0].dst: block id 4");
    return VKP_OK;
  }));
}

// A cache in the hnd layout: its views say so, the per-layer reshape_and_cache writes what the
// reference writes in that layout (the keys rotated on their way in where rotary is given), and
// decode shapes take the cache's geometry.
TEST_F(CApiKvCacheTest, WritesNewTokensInItsLayoutAndGivesDecodeShapes) {
  vkp_kv_cache_shape shape = c_shape();
  shape.layout = VKP_KV_LAYOUT_HND;
  const vkp_kv_cache_options options = kv_cache_options(4);
  vkp_kv_cache* raw = nullptr;
  ASSERT_VKP_OK(vkp_kv_cache_create(c_context(), &shape, &options, &raw));
  CachePtr cache(raw, &vkp_kv_cache_destroy);
  vkp_kv_cache_shape got_shape;
  vkp_kv_cache_shape_init(&got_shape);
  ASSERT_VKP_OK(vkp_kv_cache_shape_get(raw, &got_shape));
  EXPECT_EQ(got_shape.layout, VKP_KV_LAYOUT_HND);

  const int64_t T = 5, H = 4, Hkv = 2, D = 64, B = 16, N = 4;
  vkp_layer_cache_views layers[2];
  const HostTensor zero_pool(DType::f16, Shape{N, Hkv, B, D});
  for (uint32_t l = 0; l < 2; ++l) {
    vkp_layer_cache_views_init(&layers[l]);
    ASSERT_VKP_OK(vkp_kv_cache_layer(raw, l, VKP_FALSE, &layers[l]));
    EXPECT_EQ(layers[l].layout, VKP_KV_LAYOUT_HND);
    ASSERT_EQ(layers[l].key_cache.rank, 4);
    EXPECT_EQ(layers[l].key_cache.shape[2], B) << "hnd: [N, Hkv, B, D]";
    ASSERT_VKP_OK(vkp_upload(c_context(), &layers[l].key_cache.memory, zero_pool.data(), zero_pool.bytes()));
    ASSERT_VKP_OK(vkp_upload(c_context(), &layers[l].value_cache.memory, zero_pool.data(), zero_pool.bytes()));
  }

  const HostTensor query = cache_helpers::random_tensor(DType::f16, Shape{T, H, D}, 80);
  const HostTensor key = cache_helpers::random_tensor(DType::f16, Shape{T, Hkv, D}, 81);
  const HostTensor value = cache_helpers::random_tensor(DType::f16, Shape{T, Hkv, D}, 82);
  HostTensor slots(DType::i64, Shape{T});
  const int64_t slot_values[] = {63, 0, 17, 18, -1};
  std::memcpy(slots.data(), slot_values, sizeof(slot_values));
  HostTensor positions(DType::i64, Shape{T});
  const int64_t position_values[] = {0, 1, 2, 30, 31};
  std::memcpy(positions.data(), position_values, sizeof(position_values));
  const HostTensor cos_sin = rotary_cos_sin_cache(32, 64, 10000.0, DType::f32);
  vkp_context* cctx = c_context();
  const CTensor d_query = upload(cctx, query), d_key = upload(cctx, key), d_value = upload(cctx, value);
  const CTensor d_plain_key = upload(cctx, key);
  const CTensor d_slots = upload(cctx, slots), d_positions = upload(cctx, positions), d_cos_sin = upload(cctx, cos_sin);
  const CTensor status = zeros(cctx, DType::u32, Shape{1});
  vkp_new_tokens rotated;
  vkp_new_tokens_init(&rotated);
  rotated.key = d_key.view;
  rotated.value = d_value.view;
  rotated.slot_mapping = d_slots.view;
  rotated.status = status.view.memory;
  vkp_new_tokens plain = rotated;
  plain.key = d_plain_key.view;
  vkp_rotary_inputs rotary;
  vkp_rotary_inputs_init(&rotary);
  rotary.query = d_query.view;
  rotary.positions = d_positions.view;
  rotary.cos_sin_cache = d_cos_sin.view;
  ASSERT_VKP_OK(run(cctx, [&](VkCommandBuffer cmd) {
    vkp_status s = vkp_kv_cache_record_reshape_and_cache(raw, cmd, 1, &rotated, &rotary, nullptr);
    if (s == VKP_OK) s = vkp_kv_cache_record_reshape_and_cache(raw, cmd, 0, &plain, nullptr, nullptr);
    return s;
  }));
  EXPECT_EQ(download(cctx, status).as<uint32_t>()[0], 0u);
  const HostTensor rotated_key = download(cctx, d_key);
  EXPECT_FALSE(cache_helpers::bytes_equal(rotated_key, key)) << "the keys were not rotated";
  EXPECT_FALSE(cache_helpers::bytes_equal(download(cctx, d_query), query)) << "the queries were not rotated";
  // Layer 1 holds the rotated keys, layer 0 the keys as given, each where the reference puts them.
  for (uint32_t l = 0; l < 2; ++l) {
    SCOPED_TRACE(l);
    HostTensor want_keys = zero_pool, want_values = zero_pool;
    vkp_host_tensor k = host_view(l == 1 ? rotated_key : key), v = host_view(value), s = host_view(slots);
    vkp_host_tensor kc = host_view(want_keys), vc = host_view(want_values);
    ASSERT_VKP_OK(vkp_reference_reshape_and_cache(&k, &v, &s, &kc, &vc, nullptr, VKP_KV_LAYOUT_HND));
    HostTensor got_keys(DType::f16, zero_pool.shape()), got_values(DType::f16, zero_pool.shape());
    ASSERT_VKP_OK(vkp_download(cctx, &layers[l].key_cache.memory, got_keys.data(), got_keys.bytes()));
    ASSERT_VKP_OK(vkp_download(cctx, &layers[l].value_cache.memory, got_values.data(), got_values.bytes()));
    EXPECT_TRUE(cache_helpers::bytes_equal(got_keys, want_keys));
    EXPECT_TRUE(cache_helpers::bytes_equal(got_values, want_values));
  }
  EXPECT_VKP_OK(run(cctx, [&](VkCommandBuffer cmd) {
    expect_refused(vkp_kv_cache_record_reshape_and_cache(raw, cmd, 2, &plain, nullptr, nullptr), "layer");
    vkp_new_tokens wrong = plain;
    wrong.key.shape[2] = 32;  // not the cache's head size
    wrong.key.memory.size /= 2;
    expect_refused(vkp_kv_cache_record_reshape_and_cache(raw, cmd, 0, &wrong, nullptr, nullptr), "key");
    return VKP_OK;
  }));

  // A decode shape: the batch's fields, the cache's geometry whatever the batch held there.
  vkp_decode_shape batch;
  vkp_decode_shape_init(&batch);
  batch.num_seqs = 3;
  batch.num_heads = 8;
  batch.max_blocks_per_seq = 2;
  batch.max_context_len = 20;
  batch.query_dtype = VKP_DTYPE_F32;
  batch.softcap = VKP_TRUE;
  batch.lse = VKP_TRUE;
  batch.num_kv_heads = 99;
  batch.head_size = 7;
  batch.cache_dtype = VKP_DTYPE_BF16;
  vkp_decode_shape got;
  vkp_decode_shape_init(&got);
  ASSERT_VKP_OK(vkp_kv_cache_decode_shape(raw, &batch, &got));
  EXPECT_EQ(got.num_seqs, 3u);
  EXPECT_EQ(got.num_heads, 8u);
  EXPECT_EQ(got.max_blocks_per_seq, 2u);
  EXPECT_EQ(got.max_context_len, 20u);
  EXPECT_EQ(got.query_dtype, VKP_DTYPE_F32);
  EXPECT_EQ(got.softcap, VKP_TRUE);
  EXPECT_EQ(got.lse, VKP_TRUE);
  EXPECT_EQ(got.alibi, VKP_FALSE);
  EXPECT_EQ(got.num_kv_heads, 2u);
  EXPECT_EQ(got.head_size, 64u);
  EXPECT_EQ(got.block_size, 16u);
  EXPECT_EQ(got.num_blocks, 4u);
  EXPECT_EQ(got.cache_dtype, VKP_DTYPE_F16);
  EXPECT_EQ(got.kv_layout, VKP_KV_LAYOUT_HND);
  // Decode reads every layout: a plan for this cache is made.
  vkp_decode_plan* plan = nullptr;
  ASSERT_VKP_OK(vkp_decode_plan_create(cctx, &got, nullptr, &plan));
  vkp_decode_plan_destroy(plan);
}

}  // namespace
}  // namespace vkpaged::test
