// SPDX-License-Identifier: Apache-2.0
// Cache operations through the C API against the C API's references, byte for byte:
// reshape_and_cache, copy_blocks, swap_blocks (device <-> host-visible), gather, absmax and the
// fp8 scale, fill_random against the C++ API; refusals that name the argument.
#include <array>
#include <cstring>
#include <numeric>

#include "c_api/c_api_test_helpers.hpp"
#include "ops/cache_test_helpers.hpp"
#include "vkpaged/utilities.hpp"

namespace vkpaged::test {
namespace {

using namespace c_api_helpers;
using cache_helpers::bytes_equal;
using cache_helpers::key_cache_shape;
using cache_helpers::random_tensor;
using cache_helpers::value_cache_shape;

class CApiCacheOpsTest : public GpuTest {};

struct Pools {
  HostTensor key, value;
  CTensor d_key, d_value;
  vkp_layer_cache_views views() const {
    vkp_layer_cache_views v;
    vkp_layer_cache_views_init(&v);
    v.key_cache = d_key.view;
    v.value_cache = d_value.view;
    return v;
  }
};

// A gather of two requests: block tables [2, 3] of `ids` (i32) and the requests' token bounds [3].
struct GatherBatch {
  HostTensor tables{DType::i32, Shape{2, 3}}, starts{DType::i32, Shape{3}};
  GatherBatch(const std::array<int32_t, 6>& ids, const std::array<int32_t, 3>& bounds) {
    std::memcpy(tables.data(), ids.data(), sizeof(ids));
    std::memcpy(starts.data(), bounds.data(), sizeof(bounds));
  }
};

// Gather views of the pools, the batch's device tables and bounds, and the outputs.
vkp_gather_views gather_views(const vkp_tensor_view& key_cache, const vkp_tensor_view& value_cache, const CTensor& tables,
                              const CTensor& starts, const CTensor& key_out, const CTensor& value_out) {
  vkp_gather_views v;
  vkp_gather_views_init(&v);
  v.key_cache = key_cache;
  v.value_cache = value_cache;
  v.block_tables = tables.view;
  v.seq_starts = starts.view;
  v.key_out = key_out.view;
  v.value_out = value_out.view;
  return v;
}

Pools make_pools(DType dtype, int64_t n, int64_t hkv, int64_t d, int64_t b, uint32_t seed,
                 vkp_memory_kind kind = VKP_MEMORY_DEVICE) {
  Pools p;
  p.key = random_tensor(dtype, key_cache_shape(dtype, n, hkv, d, b), seed);
  p.value = random_tensor(dtype, value_cache_shape(n, hkv, d, b), seed + 1);
  p.d_key = upload(c_context(), p.key, kind);
  p.d_value = upload(c_context(), p.value, kind);
  return p;
}

TEST_F(CApiCacheOpsTest, ReshapeAndCacheMatchesTheReferenceBitExactly) {
  for (DType cache : {DType::f16, DType::fp8_e4m3}) {
    const int64_t T = 30, Hkv = 2, D = 64, B = 8, N = 6;
    const HostTensor key = random_tensor(DType::f16, Shape{T, Hkv, D}, 1);
    const HostTensor value = random_tensor(DType::f16, Shape{T, Hkv, D}, 2);
    HostTensor slots(DType::i64, Shape{T});
    std::vector<int64_t> order(size_t(N * B));
    std::iota(order.begin(), order.end(), 0);
    std::shuffle(order.begin(), order.end(), std::mt19937(3));
    for (int64_t t = 0; t < T; ++t) slots.as<int64_t>()[t] = t % 7 == 3 ? -1 : order[size_t(t)];
    Pools pools = make_pools(cache, N, Hkv, D, B, 4);
    const CTensor d_key = upload(c_context(), key), d_value = upload(c_context(), value);
    const CTensor d_slots = upload(c_context(), slots);
    const CTensor status = zeros(c_context(), DType::u32, Shape{1});
    vkp_cache_scales scales;
    vkp_cache_scales_init(&scales);
    scales.k_scale = 0.5f;
    scales.v_scale = 2.0f;
    vkp_reshape_and_cache_views v;
    vkp_reshape_and_cache_views_init(&v);
    v.key = d_key.view;
    v.value = d_value.view;
    v.slot_mapping = d_slots.view;
    v.key_cache = pools.d_key.view;
    v.value_cache = pools.d_value.view;
    v.status = status.view.memory;
    ASSERT_VKP_OK(run(c_context(), [&](VkCommandBuffer cmd) {
      return vkp_record_reshape_and_cache(c_context(), cmd, &v, &scales);
    }));
    vkp_host_tensor hk = host_view(key), hv = host_view(value), hs = host_view(slots);
    vkp_host_tensor kc = host_view(pools.key), vc = host_view(pools.value);
    ASSERT_VKP_OK(vkp_reference_reshape_and_cache(&hk, &hv, &hs, &kc, &vc, &scales, VKP_KV_LAYOUT_VLLM));
    EXPECT_TRUE(bytes_equal(download(c_context(), pools.d_key), pools.key)) << dtype_name(cache);
    EXPECT_TRUE(bytes_equal(download(c_context(), pools.d_value), pools.value)) << dtype_name(cache);
    EXPECT_EQ(download(c_context(), status).as<uint32_t>()[0], 0u);

    // Refused before recording, naming the view; the reference refuses a slot past N * B.
    v.slot_mapping.dtype = VKP_DTYPE_F32;
    EXPECT_VKP_OK(run(c_context(), [&](VkCommandBuffer cmd) {
      expect_refused(vkp_record_reshape_and_cache(c_context(), cmd, &v, &scales), "slot_mapping");
      return VKP_OK;
    }));
    slots.as<int64_t>()[0] = N * B;
    expect_refused(vkp_reference_reshape_and_cache(&hk, &hv, &hs, &kc, &vc, &scales, VKP_KV_LAYOUT_VLLM), "48");
  }
}

TEST_F(CApiCacheOpsTest, CopyBlocksMatchesTheReferenceInEveryLayer) {
  Pools layers[] = {make_pools(DType::f16, 8, 2, 64, 16, 10), make_pools(DType::fp8_e5m2, 8, 1, 64, 8, 20)};
  const vkp_layer_cache_views views[] = {layers[0].views(), layers[1].views()};
  const vkp_block_copy pairs[] = {{0, 3}, {0, 5}, {7, 1}};
  ASSERT_VKP_OK(run(c_context(), [&](VkCommandBuffer cmd) {
    return vkp_record_copy_blocks(c_context(), cmd, views, 2, pairs, 3);
  }));
  for (auto& l : layers) {
    vkp_host_tensor k = host_view(l.key), v = host_view(l.value);
    ASSERT_VKP_OK(vkp_reference_copy_blocks(&k, &v, pairs, 3, VKP_KV_LAYOUT_VLLM));
    EXPECT_TRUE(bytes_equal(download(c_context(), l.d_key), l.key));
    EXPECT_TRUE(bytes_equal(download(c_context(), l.d_value), l.value));
  }
  const vkp_block_copy bad[] = {{1, 2}, {3, 8}};
  EXPECT_VKP_OK(run(c_context(), [&](VkCommandBuffer cmd) {
    expect_refused(vkp_record_copy_blocks(c_context(), cmd, views, 2, bad, 2), "pairs[1].dst: block id 8");
    expect_refused(vkp_record_copy_blocks(c_context(), cmd, views, 2, nullptr, 2), "pairs is NULL");
    vkp_layer_cache_views odd[] = {views[0], views[1]};
    odd[1].value_cache.dtype = VKP_DTYPE_F16;
    expect_refused(vkp_record_copy_blocks(c_context(), cmd, odd, 2, pairs, 3), "layers[1].value_cache");
    return VKP_OK;
  }));
}

TEST_F(CApiCacheOpsTest, SwapBlocksOutToHostVisibleAndBackIn) {
  Pools device = make_pools(DType::bf16, 10, 2, 64, 16, 30);
  Pools host = make_pools(DType::bf16, 4, 2, 64, 16, 40, VKP_MEMORY_HOST_VISIBLE);
  const vkp_layer_cache_views d = device.views(), h = host.views();
  const vkp_block_copy out[] = {{7, 0}, {2, 3}, {9, 1}};
  ASSERT_VKP_OK(run(c_context(), [&](VkCommandBuffer cmd) {
    const vkp_status s = vkp_record_swap_blocks(c_context(), cmd, &d, 1, &h, 1, out, 3);
    VkMemoryBarrier barrier{VK_STRUCTURE_TYPE_MEMORY_BARRIER};
    barrier.srcAccessMask = VK_ACCESS_TRANSFER_WRITE_BIT;
    barrier.dstAccessMask = VK_ACCESS_HOST_READ_BIT;
    vkCmdPipelineBarrier(cmd, VK_PIPELINE_STAGE_TRANSFER_BIT, VK_PIPELINE_STAGE_HOST_BIT, 0, 1, &barrier, 0, nullptr,
                         0, nullptr);
    return s;
  }));
  vkp_host_tensor dk = host_view(device.key), dv = host_view(device.value);
  vkp_host_tensor hk = host_view(host.key), hv = host_view(host.value);
  ASSERT_VKP_OK(vkp_reference_swap_blocks(&dk, &dv, &hk, &hv, out, 3, VKP_KV_LAYOUT_VLLM));
  EXPECT_EQ(std::memcmp(vkp_buffer_mapped(host.d_key.buffer.get()), host.key.data(), host.key.bytes()), 0);
  EXPECT_EQ(std::memcmp(vkp_buffer_mapped(host.d_value.buffer.get()), host.value.data(), host.value.bytes()), 0);

  const vkp_block_copy in[] = {{0, 5}, {3, 0}};
  ASSERT_VKP_OK(run(c_context(), [&](VkCommandBuffer cmd) {
    return vkp_record_swap_blocks(c_context(), cmd, &h, 1, &d, 1, in, 2);
  }));
  ASSERT_VKP_OK(vkp_reference_swap_blocks(&hk, &hv, &dk, &dv, in, 2, VKP_KV_LAYOUT_VLLM));
  EXPECT_TRUE(bytes_equal(download(c_context(), device.d_key), device.key));
  EXPECT_TRUE(bytes_equal(download(c_context(), device.d_value), device.value));

  EXPECT_VKP_OK(run(c_context(), [&](VkCommandBuffer cmd) {
    expect_refused(vkp_record_swap_blocks(c_context(), cmd, &d, 1, &h, 0, out, 3), "dst: 0 layers");
    expect_refused(vkp_record_swap_blocks(c_context(), cmd, &d, 1, &h, 1, in, 2), "pairs[0].dst: block id 5");
    return VKP_OK;
  }));
}

TEST_F(CApiCacheOpsTest, GatherMatchesTheReferenceBitExactly) {
  const int64_t N = 9, Hkv = 2, D = 64, B = 8;
  Pools pools = make_pools(DType::fp8_e4m3, N, Hkv, D, B, 50);
  const GatherBatch batch({4, 0, 7, 2, 8, 1}, {0, 19, 40});
  const HostTensor &tables = batch.tables, &starts = batch.starts;
  const CTensor d_tables = upload(c_context(), tables), d_starts = upload(c_context(), starts);
  const CTensor key_out = zeros(c_context(), DType::f32, Shape{40, Hkv, D});
  const CTensor value_out = zeros(c_context(), DType::f32, Shape{40, Hkv, D});
  const CTensor status = zeros(c_context(), DType::u32, Shape{1});
  vkp_cache_scales scales;
  vkp_cache_scales_init(&scales);
  scales.k_scale = 0.25f;
  scales.v_scale = 0.5f;
  vkp_gather_views v = gather_views(pools.d_key.view, pools.d_value.view, d_tables, d_starts, key_out, value_out);
  v.status = status.view.memory;
  ASSERT_VKP_OK(run(c_context(), [&](VkCommandBuffer cmd) { return vkp_record_gather(c_context(), cmd, &v, &scales); }));

  HostTensor want_key(DType::f32, Shape{40, Hkv, D}), want_value(DType::f32, Shape{40, Hkv, D});
  const vkp_host_tensor kc = host_view(pools.key), vc = host_view(pools.value);
  const vkp_host_tensor bt = host_view(tables), ss = host_view(starts);
  vkp_host_tensor ko = host_view(want_key), vo = host_view(want_value);
  ASSERT_VKP_OK(vkp_reference_gather(&kc, &vc, &bt, &ss, &scales, VKP_KV_LAYOUT_VLLM, &ko, &vo));
  EXPECT_TRUE(bytes_equal(download(c_context(), key_out), want_key));
  EXPECT_TRUE(bytes_equal(download(c_context(), value_out), want_value));
  EXPECT_EQ(download(c_context(), status).as<uint32_t>()[0], 0u);

  vo.shape[0] = 39;
  expect_refused(vkp_reference_gather(&kc, &vc, &bt, &ss, &scales, VKP_KV_LAYOUT_VLLM, &ko, &vo), "value_out");
}

// The nhd and hnd layouts through the layout field of each views struct, against the references
// given the same layout, byte for byte.
TEST_F(CApiCacheOpsTest, EveryOperatorTakesTheLayoutOfItsViews) {
  const int64_t N = 6, Hkv = 2, D = 64, B = 8, T = 20;
  for (vkp_kv_layout layout : {VKP_KV_LAYOUT_NHD, VKP_KV_LAYOUT_HND}) {
    const KvLayout cpp_layout = KvLayout(layout);
    SCOPED_TRACE(std::string(kv_layout_name(cpp_layout)));
    HostTensor key_cache = random_tensor(DType::bf16, key_cache_shape(cpp_layout, DType::bf16, N, Hkv, D, B), 70);
    HostTensor value_cache = random_tensor(DType::bf16, value_cache_shape(cpp_layout, N, Hkv, D, B), 71);
    const CTensor d_key_cache = upload(c_context(), key_cache), d_value_cache = upload(c_context(), value_cache);

    // reshape_and_cache
    const HostTensor key = random_tensor(DType::f32, Shape{T, Hkv, D}, 72);
    const HostTensor value = random_tensor(DType::f32, Shape{T, Hkv, D}, 73);
    HostTensor slots(DType::i32, Shape{T});
    std::vector<int32_t> order(size_t(N * B));
    std::iota(order.begin(), order.end(), 0);
    std::shuffle(order.begin(), order.end(), std::mt19937(74));
    for (int64_t t = 0; t < T; ++t) slots.as<int32_t>()[t] = t == 4 ? -1 : order[size_t(t)];
    const CTensor d_key = upload(c_context(), key), d_value = upload(c_context(), value), d_slots = upload(c_context(), slots);
    vkp_reshape_and_cache_views write;
    vkp_reshape_and_cache_views_init(&write);
    write.layout = layout;
    write.key = d_key.view;
    write.value = d_value.view;
    write.slot_mapping = d_slots.view;
    write.key_cache = d_key_cache.view;
    write.value_cache = d_value_cache.view;
    ASSERT_VKP_OK(run(c_context(), [&](VkCommandBuffer cmd) {
      return vkp_record_reshape_and_cache(c_context(), cmd, &write, nullptr);
    }));
    vkp_host_tensor hk = host_view(key), hv = host_view(value), hs = host_view(slots);
    vkp_host_tensor kc = host_view(key_cache), vc = host_view(value_cache);
    ASSERT_VKP_OK(vkp_reference_reshape_and_cache(&hk, &hv, &hs, &kc, &vc, nullptr, layout));
    EXPECT_TRUE(bytes_equal(download(c_context(), d_key_cache), key_cache));
    EXPECT_TRUE(bytes_equal(download(c_context(), d_value_cache), value_cache));

    // copy_blocks
    vkp_layer_cache_views layer;
    vkp_layer_cache_views_init(&layer);
    layer.layout = layout;
    layer.key_cache = d_key_cache.view;
    layer.value_cache = d_value_cache.view;
    const vkp_block_copy pairs[] = {{0, 3}, {5, 1}};
    ASSERT_VKP_OK(run(c_context(), [&](VkCommandBuffer cmd) {
      return vkp_record_copy_blocks(c_context(), cmd, &layer, 1, pairs, 2);
    }));
    ASSERT_VKP_OK(vkp_reference_copy_blocks(&kc, &vc, pairs, 2, layout));
    EXPECT_TRUE(bytes_equal(download(c_context(), d_key_cache), key_cache));
    EXPECT_TRUE(bytes_equal(download(c_context(), d_value_cache), value_cache));

    // gather
    const GatherBatch batch({3, 0, 5, 1, 2, 4}, {0, 17, 30});
    const HostTensor &tables = batch.tables, &starts = batch.starts;
    const CTensor d_tables = upload(c_context(), tables), d_starts = upload(c_context(), starts);
    const CTensor key_out = zeros(c_context(), DType::f16, Shape{30, Hkv, D});
    const CTensor value_out = zeros(c_context(), DType::f16, Shape{30, Hkv, D});
    vkp_gather_views read = gather_views(d_key_cache.view, d_value_cache.view, d_tables, d_starts, key_out, value_out);
    read.layout = layout;
    ASSERT_VKP_OK(run(c_context(), [&](VkCommandBuffer cmd) { return vkp_record_gather(c_context(), cmd, &read, nullptr); }));
    HostTensor want_key(DType::f16, Shape{30, Hkv, D}), want_value(DType::f16, Shape{30, Hkv, D});
    const vkp_host_tensor bt = host_view(tables), ss = host_view(starts);
    vkp_host_tensor ko = host_view(want_key), vo = host_view(want_value);
    ASSERT_VKP_OK(vkp_reference_gather(&kc, &vc, &bt, &ss, nullptr, layout, &ko, &vo));
    EXPECT_TRUE(bytes_equal(download(c_context(), key_out), want_key));
    EXPECT_TRUE(bytes_equal(download(c_context(), value_out), want_value));

    // The vllm layout's shapes are not this layout's: refused naming the cache.
    layer.layout = VKP_KV_LAYOUT_VLLM;
    read.layout = VKP_KV_LAYOUT_VLLM;
    EXPECT_VKP_OK(run(c_context(), [&](VkCommandBuffer cmd) {
      expect_refused(vkp_record_copy_blocks(c_context(), cmd, &layer, 1, pairs, 2), "layers[0].");
      expect_refused(vkp_record_gather(c_context(), cmd, &read, nullptr), "_cache: ");
      return VKP_OK;
    }));
    expect_refused(vkp_reference_copy_blocks(&kc, &vc, pairs, 2, VKP_KV_LAYOUT_VLLM), "_cache");
  }
}

TEST_F(CApiCacheOpsTest, AbsmaxAndFp8Scale) {
  const HostTensor x = random_tensor(DType::bf16, Shape{1000}, 60);
  const CTensor d_x = upload(c_context(), x);
  const CTensor amax = zeros(c_context(), DType::f32, Shape{1});
  ASSERT_VKP_OK(run(c_context(), [&](VkCommandBuffer cmd) {
    return vkp_record_absmax(c_context(), cmd, &d_x.view, &amax.view.memory);
  }));
  const vkp_host_tensor hx = host_view(x);
  float want = -1;
  ASSERT_VKP_OK(vkp_reference_absmax(&hx, &want));
  EXPECT_EQ(download(c_context(), amax).as<float>()[0], want);
  float scale = 0;
  ASSERT_VKP_OK(vkp_fp8_scale_from_amax(want, VKP_DTYPE_FP8_E4M3, &scale));
  EXPECT_EQ(scale, fp8_scale_from_amax(want, DType::fp8_e4m3));
  expect_refused(vkp_fp8_scale_from_amax(want, VKP_DTYPE_F16, &scale), "fp8_format: f16");
  expect_refused(vkp_fp8_scale_from_amax(-1.0f, VKP_DTYPE_FP8_E5M2, &scale), "amax: -1");
  vkp_tensor_view ints = d_x.view;
  ints.dtype = VKP_DTYPE_I32;
  EXPECT_VKP_OK(run(c_context(), [&](VkCommandBuffer cmd) {
    expect_refused(vkp_record_absmax(c_context(), cmd, &ints, &amax.view.memory), "x: dtype i32");
    return VKP_OK;
  }));
}

TEST_F(CApiCacheOpsTest, FillRandomMatchesTheCppApi) {
  const CTensor c_filled = zeros(c_context(), DType::f16, Shape{64, 10});
  ASSERT_VKP_OK(run(c_context(), [&](VkCommandBuffer cmd) {
    return vkp_record_fill_random(c_context(), cmd, &c_filled.view, 1234);
  }));
  DeviceBuffer cpp = ctx().create_buffer(64 * 10 * 2);
  ctx().run_and_wait(
      [&](VkCommandBuffer cmd) { record_fill_random(ctx(), cmd, cpp.tensor(DType::f16, Shape{64, 10}), 1234); });
  HostTensor want(DType::f16, Shape{64, 10});
  ctx().download(cpp.view(), want.data(), want.bytes());
  const HostTensor got = download(c_context(), c_filled);
  EXPECT_TRUE(bytes_equal(got, want));
  for (int64_t i = 0; i < got.numel(); ++i) ASSERT_LT(std::abs(got.get(size_t(i))), 1.0) << i;
}

}  // namespace
}  // namespace vkpaged::test
