// The KvCache through the C API: sizing and planning as the C++ API answers, allocation,
// per-layer views, and whole-block copies and swaps moving exactly the blocks asked for.
#include <cstring>

#include "c_api/c_api_test_helpers.hpp"
#include "vkpaged/kv_cache.hpp"

namespace vkpaged::test {
namespace {

using namespace c_api_helpers;

using CachePtr = std::unique_ptr<vkp_kv_cache, decltype(&vkp_kv_cache_destroy)>;

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
  vkp_kv_cache_options options;
  vkp_kv_cache_options_init(&options);
  options.num_blocks = 8;
  options.num_host_blocks = 4;
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

}  // namespace
}  // namespace vkpaged::test
