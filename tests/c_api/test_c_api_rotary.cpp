// SPDX-License-Identifier: Apache-2.0
// Rotary embedding through the C API: the cos/sin cache, the recorded operator and the host
// convenience bit for bit what the C++ API computes, the references the C++ references; the
// fused reshape_and_cache in every cache layout equal to the two-kernel path and to the
// reference's caches of the keys the GPU rotated; positions out of range flagged on the device
// and refused on the host, naming them.
#include <cstring>
#include <numeric>
#include <vector>

#include "c_api/c_api_test_helpers.hpp"
#include "ops/cache_test_helpers.hpp"
#include "vkpaged/rotary.hpp"

namespace vkpaged::test {
namespace {

using namespace c_api_helpers;
using cache_helpers::bytes_equal;
using cache_helpers::key_cache_shape;
using cache_helpers::random_tensor;
using cache_helpers::value_cache_shape;
using cache_helpers::values_close;

class CApiRotaryTest : public GpuTest {};

HostTensor positions_of(std::initializer_list<int64_t> values, DType dtype = DType::i64) {
  HostTensor p(dtype, Shape{int64_t(values.size())});
  size_t i = 0;
  for (int64_t v : values) p.set(i++, double(v));
  return p;
}

// The cos/sin cache through C, checked against the C++ one.
HostTensor cos_sin_cache(uint32_t max_position, uint32_t rotary_dim, DType dtype) {
  HostTensor cache(dtype, Shape{int64_t(max_position), int64_t(rotary_dim)});
  vkp_host_tensor out = host_view(cache);
  EXPECT_VKP_OK(vkp_rotary_cos_sin_cache(max_position, rotary_dim, 10000.0, &out));
  EXPECT_TRUE(bytes_equal(cache, rotary_cos_sin_cache(max_position, rotary_dim, 10000.0, dtype)));
  return cache;
}

TEST_F(CApiRotaryTest, RecordedRotaryAndTheHostPathsMatchTheCppApi) {
  const int64_t T = 5, H = 4, Hkv = 2, D = 64;
  const uint32_t max_position = 20;
  for (vkp_rotary_style style : {VKP_ROTARY_NEOX, VKP_ROTARY_GPTJ}) {
    SCOPED_TRACE(int(style));
    const uint32_t rotary_dim = style == VKP_ROTARY_NEOX ? 64 : 32;  // full, and partial
    const HostTensor query = random_tensor(DType::f16, Shape{T, H, D}, 1);
    const HostTensor key = random_tensor(DType::f16, Shape{T, Hkv, D}, 2);
    const HostTensor positions = positions_of({19, 0, 7, 7, 3});
    const HostTensor cos_sin = cos_sin_cache(max_position, rotary_dim, DType::f32);

    // Recorded through C.
    vkp_context* cctx = c_context();
    const CTensor d_query = upload(cctx, query), d_key = upload(cctx, key);
    const CTensor d_positions = upload(cctx, positions), d_cos_sin = upload(cctx, cos_sin);
    const CTensor status = zeros(cctx, DType::u32, Shape{1});
    vkp_rotary_views views;
    vkp_rotary_views_init(&views);
    views.query = d_query.view;
    views.key = d_key.view;
    views.positions = d_positions.view;
    views.cos_sin_cache = d_cos_sin.view;
    views.status = status.view.memory;
    views.style = style;
    ASSERT_VKP_OK(run(cctx, [&](VkCommandBuffer cmd) { return vkp_record_rotary_embedding(cctx, cmd, &views); }));
    const HostTensor got_query = download(cctx, d_query), got_key = download(cctx, d_key);
    EXPECT_EQ(download(cctx, status).as<uint32_t>()[0], 0u);

    // The C++ API on the same inputs: the same bits.
    HostTensor cpp_query = query, cpp_key = key;
    rotary_embedding(ctx(), cpp_query, cpp_key, positions, cos_sin, RotaryStyle(style));
    EXPECT_TRUE(bytes_equal(got_query, cpp_query));
    EXPECT_TRUE(bytes_equal(got_key, cpp_key));

    // The host convenience through C: the same bits, written into the caller's arrays.
    HostTensor host_query = query, host_key = key;
    vkp_host_tensor hq = host_view(host_query), hk = host_view(host_key);
    const vkp_host_tensor hp = host_view(positions), hc = host_view(cos_sin);
    ASSERT_VKP_OK(vkp_rotary_embedding(cctx, &hq, &hk, &hp, &hc, style));
    EXPECT_TRUE(bytes_equal(host_query, cpp_query));
    EXPECT_TRUE(bytes_equal(host_key, cpp_key));
    // Queries alone (keys NULL), and keys alone (queries absent).
    HostTensor only_query = query, only_key = key;
    vkp_host_tensor oq = host_view(only_query), ok = host_view(only_key);
    const vkp_host_tensor absent{};
    ASSERT_VKP_OK(vkp_rotary_embedding(cctx, &oq, nullptr, &hp, &hc, style));
    ASSERT_VKP_OK(vkp_rotary_embedding(cctx, const_cast<vkp_host_tensor*>(&absent), &ok, &hp, &hc, style));
    EXPECT_TRUE(bytes_equal(only_query, cpp_query));
    EXPECT_TRUE(bytes_equal(only_key, cpp_key));

    // The C reference is the C++ reference; the device within the dtype's precision of it.
    HostTensor ref_query = query, ref_key = key;
    vkp_host_tensor rq = host_view(ref_query), rk = host_view(ref_key);
    ASSERT_VKP_OK(vkp_reference_rotary_embedding(&rq, &rk, &hp, &hc, style));
    HostTensor want_query = query, want_key = key;
    reference::rotary_embedding(want_query, want_key, positions, cos_sin, RotaryStyle(style));
    EXPECT_TRUE(bytes_equal(ref_query, want_query));
    EXPECT_TRUE(bytes_equal(ref_key, want_key));
    EXPECT_TRUE(values_close(got_query, want_query, DType::f16));
    EXPECT_TRUE(values_close(got_key, want_key, DType::f16));
  }
}

TEST_F(CApiRotaryTest, PositionsOutOfRangeAreFlaggedOnTheDeviceAndRefusedOnTheHost) {
  const int64_t T = 4, H = 2, D = 32;
  const HostTensor query = random_tensor(DType::f32, Shape{T, H, D}, 3);
  const HostTensor positions = positions_of({1, 2, 16, 3}, DType::i32);  // 16: one past the cache
  const HostTensor cos_sin = cos_sin_cache(16, 32, DType::f32);
  vkp_context* cctx = c_context();
  const CTensor d_query = upload(cctx, query), d_positions = upload(cctx, positions), d_cos_sin = upload(cctx, cos_sin);
  const CTensor status = zeros(cctx, DType::u32, Shape{1});
  vkp_rotary_views views;
  vkp_rotary_views_init(&views);
  views.query = d_query.view;
  views.positions = d_positions.view;
  views.cos_sin_cache = d_cos_sin.view;
  views.status = status.view.memory;
  ASSERT_VKP_OK(run(cctx, [&](VkCommandBuffer cmd) { return vkp_record_rotary_embedding(cctx, cmd, &views); }));
  EXPECT_EQ(download(cctx, status).as<uint32_t>()[0], VKP_STATUS_BAD_POSITION);
  const HostTensor got = download(cctx, d_query);
  const size_t row = size_t(H * D) * sizeof(float);
  EXPECT_EQ(std::memcmp(got.as<uint8_t>() + 2 * row, query.as<uint8_t>() + 2 * row, row), 0) << "token 2 changed";
  EXPECT_NE(std::memcmp(got.as<uint8_t>() + 3 * row, query.as<uint8_t>() + 3 * row, row), 0) << "token 3 unrotated";

  HostTensor host_query = query;
  vkp_host_tensor hq = host_view(host_query);
  const vkp_host_tensor hp = host_view(positions), hc = host_view(cos_sin);
  expect_refused(vkp_rotary_embedding(cctx, &hq, nullptr, &hp, &hc, VKP_ROTARY_NEOX), "positions[2]: 16");
  expect_refused(vkp_reference_rotary_embedding(&hq, nullptr, &hp, &hc, VKP_ROTARY_GPTJ), "positions[2]: 16");
  EXPECT_TRUE(bytes_equal(host_query, query)) << "a refused call wrote the queries";

  // The cos/sin cache: arguments and the caller's array checked, nothing written when refused.
  HostTensor cache(DType::f32, Shape{16, 32});
  std::memset(cache.data(), 0x7F, cache.bytes());
  const HostTensor before = cache;
  vkp_host_tensor out = host_view(cache);
  expect_refused(vkp_rotary_cos_sin_cache(16, 31, 10000.0, &out), "rotary_dim: 31");
  expect_refused(vkp_rotary_cos_sin_cache(0, 32, 10000.0, &out), "max_position: 0");
  expect_refused(vkp_rotary_cos_sin_cache(16, 32, -1.0, &out), "base: -1");
  expect_refused(vkp_rotary_cos_sin_cache(17, 32, 10000.0, &out), "out: f32 [16, 32] given where the result is f32 [17, 32]");
  out.dtype = VKP_DTYPE_I32;
  expect_refused(vkp_rotary_cos_sin_cache(16, 32, 10000.0, &out), "dtype: i32");
  EXPECT_TRUE(bytes_equal(cache, before));
}

// The fused operator against the two-kernel path and the references, in every layout.
TEST_F(CApiRotaryTest, FusedReshapeAndCacheMatchesTheTwoKernelPathInEveryLayout) {
  const int64_t T = 6, H = 4, Hkv = 2, D = 64, B = 8, N = 4;
  const vkp_kv_layout layouts[] = {VKP_KV_LAYOUT_VLLM, VKP_KV_LAYOUT_NHD, VKP_KV_LAYOUT_HND};
  for (vkp_kv_layout layout : layouts) {
    const DType cache_dtype = layout == VKP_KV_LAYOUT_HND ? DType::fp8_e5m2 : DType::f16;
    SCOPED_TRACE(std::string(kv_layout_name(KvLayout(layout))) + " " + std::string(dtype_name(cache_dtype)));
    const HostTensor query = random_tensor(DType::f16, Shape{T, H, D}, 10);
    const HostTensor key = random_tensor(DType::f16, Shape{T, Hkv, D}, 11);
    const HostTensor value = random_tensor(DType::f16, Shape{T, Hkv, D}, 12);
    HostTensor slots(DType::i64, Shape{T});
    const int64_t slot_values[] = {17, 3, -1, 30, 0, 9};  // one padding token
    std::memcpy(slots.data(), slot_values, sizeof(slot_values));
    const HostTensor positions = positions_of({5, 6, 7, 40, 0, 2});
    const HostTensor cos_sin = cos_sin_cache(64, 48, DType::f16);
    const HostTensor zero_keys(cache_dtype, key_cache_shape(KvLayout(layout), cache_dtype, N, Hkv, D, B));
    const HostTensor zero_values(cache_dtype, value_cache_shape(KvLayout(layout), N, Hkv, D, B));
    vkp_cache_scales scales;
    vkp_cache_scales_init(&scales);
    scales.k_scale = 0.5f;
    scales.v_scale = 0.25f;

    // Both paths write their own copies.
    vkp_context* cctx = c_context();
    struct Run {
      CTensor query, key, value, key_cache, value_cache, status;
    };
    auto make = [&] {
      return Run{upload(cctx, query),     upload(cctx, key),         upload(cctx, value),
                 upload(cctx, zero_keys), upload(cctx, zero_values), zeros(cctx, DType::u32, Shape{1})};
    };
    const Run fused = make(), two = make();
    const CTensor d_slots = upload(cctx, slots), d_positions = upload(cctx, positions), d_cos_sin = upload(cctx, cos_sin);
    auto cache_views = [&](const Run& r) {
      vkp_reshape_and_cache_views v;
      vkp_reshape_and_cache_views_init(&v);
      v.layout = layout;
      v.key = r.key.view;
      v.value = r.value.view;
      v.slot_mapping = d_slots.view;
      v.key_cache = r.key_cache.view;
      v.value_cache = r.value_cache.view;
      v.status = r.status.view.memory;
      return v;
    };
    vkp_rotary_inputs rotary;
    vkp_rotary_inputs_init(&rotary);
    rotary.style = VKP_ROTARY_GPTJ;
    rotary.query = fused.query.view;
    rotary.positions = d_positions.view;
    rotary.cos_sin_cache = d_cos_sin.view;
    const vkp_reshape_and_cache_views fused_views = cache_views(fused), two_views = cache_views(two);
    ASSERT_VKP_OK(run(cctx, [&](VkCommandBuffer cmd) {
      return vkp_record_reshape_and_cache_rotary(cctx, cmd, &fused_views, &rotary, &scales);
    }));
    vkp_rotary_views rotate;
    vkp_rotary_views_init(&rotate);
    rotate.style = VKP_ROTARY_GPTJ;
    rotate.query = two.query.view;
    rotate.key = two.key.view;
    rotate.positions = d_positions.view;
    rotate.cos_sin_cache = d_cos_sin.view;
    rotate.status = two.status.view.memory;
    ASSERT_VKP_OK(run(cctx, [&](VkCommandBuffer cmd) {
      vkp_status s = vkp_record_rotary_embedding(cctx, cmd, &rotate);
      if (s == VKP_OK) s = vkp_record_compute_barrier(cctx, cmd);
      if (s == VKP_OK) s = vkp_record_reshape_and_cache(cctx, cmd, &two_views, &scales);
      return s;
    }));
    const HostTensor rotated_key = download(cctx, fused.key), rotated_query = download(cctx, fused.query);
    const HostTensor fused_keys = download(cctx, fused.key_cache), fused_values = download(cctx, fused.value_cache);
    EXPECT_TRUE(bytes_equal(rotated_key, download(cctx, two.key)));
    EXPECT_TRUE(bytes_equal(rotated_query, download(cctx, two.query)));
    EXPECT_TRUE(bytes_equal(fused_keys, download(cctx, two.key_cache)));
    EXPECT_TRUE(bytes_equal(fused_values, download(cctx, two.value_cache)));
    // Every position lies inside the 64-row cache: nothing flagged.
    EXPECT_EQ(download(cctx, fused.status).as<uint32_t>()[0], 0u);

    // The reference's caches of the keys the GPU rotated: the same bytes.
    HostTensor want_keys = zero_keys, want_values = zero_values;
    vkp_host_tensor rk = host_view(rotated_key), hv = host_view(value), hs = host_view(slots);
    vkp_host_tensor wk = host_view(want_keys), wv = host_view(want_values);
    ASSERT_VKP_OK(vkp_reference_reshape_and_cache(&rk, &hv, &hs, &wk, &wv, &scales, layout));
    EXPECT_TRUE(bytes_equal(fused_keys, want_keys));
    EXPECT_TRUE(bytes_equal(fused_values, want_values));

    // The fused reference: the C++ one bit for bit, the device's rotation within f16 precision.
    HostTensor ref_query = query, ref_key = key, ref_keys = zero_keys, ref_values = zero_values;
    vkp_host_tensor q = host_view(ref_query), k = host_view(ref_key), kc = host_view(ref_keys), vc = host_view(ref_values);
    const vkp_host_tensor p = host_view(positions), cs = host_view(cos_sin);
    ASSERT_VKP_OK(vkp_reference_reshape_and_cache_rotary(&q, &k, &hv, &hs, &p, &cs, VKP_ROTARY_GPTJ, &kc, &vc, &scales,
                                                         layout));
    HostTensor cpp_query = query, cpp_key = key, cpp_keys = zero_keys, cpp_values = zero_values;
    reference::reshape_and_cache_rotary(cpp_query, cpp_key, value, slots, positions, cos_sin, RotaryStyle::gptj,
                                        cpp_keys, cpp_values, {0.5f, 0.25f}, KvLayout(layout));
    EXPECT_TRUE(bytes_equal(ref_query, cpp_query));
    EXPECT_TRUE(bytes_equal(ref_key, cpp_key));
    EXPECT_TRUE(bytes_equal(ref_keys, cpp_keys));
    EXPECT_TRUE(bytes_equal(ref_values, cpp_values));
    EXPECT_TRUE(values_close(rotated_key, ref_key, DType::f16));
    EXPECT_TRUE(values_close(rotated_query, ref_query, DType::f16));

    // A layout that does not match the caches is refused naming a cache, before recording.
    vkp_reshape_and_cache_views wrong = fused_views;
    wrong.layout = layout == VKP_KV_LAYOUT_VLLM ? VKP_KV_LAYOUT_HND : VKP_KV_LAYOUT_VLLM;
    EXPECT_VKP_OK(run(cctx, [&](VkCommandBuffer cmd) {
      expect_refused(vkp_record_reshape_and_cache_rotary(cctx, cmd, &wrong, &rotary, &scales), "_cache: ");
      return VKP_OK;
    }));
  }
}

}  // namespace
}  // namespace vkpaged::test
