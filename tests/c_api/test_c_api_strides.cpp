// SPDX-License-Identifier: Apache-2.0
// vkp_tensor_view.strides through the C API: the keys and values of reshape_and_cache and the
// query and output of decode as slices of one fused projection [T, (H + 2 Hkv) * D] in one
// vkp_buffer (the reference's caches bit for bit; the contiguous decode's output bit for bit),
// zero strides from vkp_buffer_tensor and the cache's layer views (contiguous), and the
// refusals that name the view and the stride.
#include <cstring>
#include <numeric>
#include <random>

#include "c_api/c_api_test_helpers.hpp"
#include "ops/cache_test_helpers.hpp"
#include "support/decode_case.hpp"

namespace vkpaged::test {
namespace {

using namespace c_api_helpers;
using cache_helpers::bytes_equal;
using cache_helpers::key_cache_shape;
using cache_helpers::random_tensor;
using cache_helpers::value_cache_shape;

class CApiStridesTest : public GpuTest {};

// One buffer through the C API, and strided tensor views of it.
struct CBuffer {
  BufferPtr buffer{nullptr, &vkp_buffer_destroy};
  explicit CBuffer(size_t bytes) {
    vkp_buffer* b = nullptr;
    EXPECT_VKP_OK(vkp_buffer_create(c_context(), bytes, VKP_MEMORY_DEVICE, &b));
    buffer.reset(b);
  }
  // [rows, heads, d] of `dtype` at `offset` with a token and a head stride (elements).
  vkp_tensor_view rows(DType dtype, int64_t tokens, int64_t heads, int64_t d, size_t offset, int64_t token_stride,
                       int64_t head_stride) const {
    vkp_tensor_view v{};
    const size_t bytes = size_t((tokens - 1) * token_stride + (heads - 1) * head_stride + d) * dtype_size(dtype);
    v.memory = vkp_buffer_view_of(buffer.get(), offset, bytes);
    v.dtype = vkp_dtype(dtype);
    v.rank = 3;
    v.shape[0] = tokens;
    v.shape[1] = heads;
    v.shape[2] = d;
    v.strides[0] = token_stride;
    v.strides[1] = head_stride;
    return v;
  }
  // Host rows into the buffer at the view's strides, row by row.
  void put(const vkp_tensor_view& v, const HostTensor& rows) const {
    const size_t e = dtype_size(rows.dtype()), row = size_t(v.shape[2]) * e;
    for (int64_t t = 0; t < v.shape[0]; ++t)
      for (int64_t h = 0; h < v.shape[1]; ++h) {
        const vkp_buffer_view at = vkp_buffer_view_of(
            buffer.get(), v.memory.offset + size_t(t * v.strides[0] + h * v.strides[1]) * e, row);
        EXPECT_VKP_OK(vkp_upload(c_context(), &at, static_cast<const uint8_t*>(rows.data()) + (t * v.shape[1] + h) * row, row));
      }
  }
  HostTensor get(const vkp_tensor_view& v) const {
    HostTensor out(DType(v.dtype), Shape{v.shape[0], v.shape[1], v.shape[2]});
    const size_t e = dtype_size(out.dtype()), row = size_t(v.shape[2]) * e;
    for (int64_t t = 0; t < v.shape[0]; ++t)
      for (int64_t h = 0; h < v.shape[1]; ++h) {
        const vkp_buffer_view at = vkp_buffer_view_of(
            buffer.get(), v.memory.offset + size_t(t * v.strides[0] + h * v.strides[1]) * e, row);
        EXPECT_VKP_OK(vkp_download(c_context(), &at, static_cast<uint8_t*>(out.data()) + (t * v.shape[1] + h) * row, row));
      }
    return out;
  }
};

constexpr int64_t T = 6, H = 4, Hkv = 2, D = 32, N = 4, B = 4;

TEST_F(CApiStridesTest, ReshapeAndCacheTakesSlicesOfOneProjection) {
  const HostTensor key = random_tensor(DType::f16, Shape{T, Hkv, D}, 1);
  const HostTensor value = random_tensor(DType::f16, Shape{T, Hkv, D}, 2);
  HostTensor slots(DType::i64, Shape{T});
  std::iota(slots.as<int64_t>(), slots.as<int64_t>() + T, 3);
  HostTensor key_cache = random_tensor(DType::f16, key_cache_shape(DType::f16, N, Hkv, D, B), 3);
  HostTensor value_cache = random_tensor(DType::f16, value_cache_shape(N, Hkv, D, B), 4);
  const CTensor d_key_cache = upload(c_context(), key_cache), d_value_cache = upload(c_context(), value_cache);
  const CTensor d_slots = upload(c_context(), slots);

  const int64_t width = (H + 2 * Hkv) * D;
  const CBuffer fused(size_t(T * width) * 2 + 16);
  vkp_reshape_and_cache_views v;
  vkp_reshape_and_cache_views_init(&v);
  v.key = fused.rows(DType::f16, T, Hkv, D, 8 + size_t(H * D) * 2, width, D);
  v.value = fused.rows(DType::f16, T, Hkv, D, 8 + size_t((H + Hkv) * D) * 2, width, D);
  fused.put(v.key, key);
  fused.put(v.value, value);
  v.slot_mapping = d_slots.view;
  v.key_cache = d_key_cache.view;
  v.value_cache = d_value_cache.view;
  ASSERT_VKP_OK(run(c_context(), [&](VkCommandBuffer cmd) { return vkp_record_reshape_and_cache(c_context(), cmd, &v, nullptr); }));

  vkp_host_tensor hk = host_view(key), hv = host_view(value), hs = host_view(slots);
  vkp_host_tensor kc = host_view(key_cache), vc = host_view(value_cache);
  ASSERT_VKP_OK(vkp_reference_reshape_and_cache(&hk, &hv, &hs, &kc, &vc, nullptr, VKP_KV_LAYOUT_VLLM));
  EXPECT_TRUE(bytes_equal(download(c_context(), d_key_cache), key_cache));
  EXPECT_TRUE(bytes_equal(download(c_context(), d_value_cache), value_cache));
}

TEST_F(CApiStridesTest, DecodeReadsAndWritesStridedRows) {
  DecodeCase c;
  c.heads = H;
  c.kv_heads = Hkv;
  c.head_size = D;
  c.lens = {9, 1, 40};
  std::mt19937 rng(6);
  const DecodeInputs in = make_decode_inputs(c, rng);
  const int64_t S = int64_t(c.lens.size());
  vkp_decode_plan* raw = nullptr;
  {
    const vkp_decode_inputs cin = c_decode_inputs(in);
    vkp_decode_shape shape;
    vkp_decode_shape_init(&shape);
    ASSERT_VKP_OK(vkp_decode_shape_of(&cin, VKP_FALSE, &shape));
    ASSERT_VKP_OK(vkp_decode_plan_create(c_context(), &shape, nullptr, &raw));
  }
  const std::unique_ptr<vkp_decode_plan, decltype(&vkp_decode_plan_destroy)> plan(raw, &vkp_decode_plan_destroy);
  const DeviceDecodeInputs device(c_context(), in);
  const CTensor output = zeros(c_context(), DType::f16, Shape{S, H, D});
  vkp_decode_views views = device.views(output);
  for (int i = 0; i < 3; ++i) EXPECT_EQ(device.query.view.strides[i], 0) << "vkp_buffer_tensor: contiguous";
  ASSERT_VKP_OK(run(c_context(), [&](VkCommandBuffer cmd) { return vkp_record_decode(c_context(), cmd, raw, &views, nullptr); }));
  const HostTensor want = download(c_context(), output);

  // The query from a fused projection, the output head-major ([H, S, D]) in the same buffer.
  const int64_t width = (H + 2 * Hkv) * D;
  const size_t out_at = size_t(S * width) * 2 + 4;
  const CBuffer fused(out_at + size_t(H * S * D) * 2);
  views.query = fused.rows(DType::f16, S, H, D, 0, width, D);
  views.output = fused.rows(DType::f16, S, H, D, out_at, D, S * D);
  fused.put(views.query, in.query);
  ASSERT_VKP_OK(run(c_context(), [&](VkCommandBuffer cmd) { return vkp_record_decode(c_context(), cmd, raw, &views, nullptr); }));
  EXPECT_TRUE(bytes_equal(fused.get(views.output), want));

  // Refusals name the view and the stride.
  vkp_decode_views bad = views;
  bad.query.strides[0] = -width;
  expect_refused(run(c_context(), [&](VkCommandBuffer cmd) { return vkp_record_decode(c_context(), cmd, raw, &bad, nullptr); }),
                 "query: strides[0] is negative (-256)");
  bad = views;
  bad.output.strides[0] = D + 1;
  expect_refused(run(c_context(), [&](VkCommandBuffer cmd) { return vkp_record_decode(c_context(), cmd, raw, &bad, nullptr); }),
                 "output: token stride 33 elements (66 bytes) does not keep rows 4-byte aligned");
  bad = views;
  bad.context_lens.strides[0] = 2;
  expect_refused(run(c_context(), [&](VkCommandBuffer cmd) { return vkp_record_decode(c_context(), cmd, raw, &bad, nullptr); }),
                 "context_lens: strides [2] are not a contiguous [3] view's");
  // Strides past the rank are not read.
  bad = views;
  bad.context_lens.strides[3] = -7;
  EXPECT_VKP_OK(run(c_context(), [&](VkCommandBuffer cmd) { return vkp_record_decode(c_context(), cmd, raw, &bad, nullptr); }));
}

// A cache's layer views are contiguous: their strides come back zero.
TEST_F(CApiStridesTest, CacheLayerViewsAreContiguous) {
  vkp_kv_cache_shape shape;
  vkp_kv_cache_shape_init(&shape);
  shape.num_layers = 1;
  shape.num_kv_heads = Hkv;
  shape.head_size = D;
  shape.block_size = B;
  shape.dtype = VKP_DTYPE_F16;
  const vkp_kv_cache_options options = kv_cache_options(N);
  vkp_kv_cache* cache = nullptr;
  ASSERT_VKP_OK(vkp_kv_cache_create(c_context(), &shape, &options, &cache));
  vkp_layer_cache_views layer;
  vkp_layer_cache_views_init(&layer);
  EXPECT_VKP_OK(vkp_kv_cache_layer(cache, 0, VKP_FALSE, &layer));
  for (int i = 0; i < VKP_MAX_RANK; ++i) {
    EXPECT_EQ(layer.key_cache.strides[i], 0) << i;
    EXPECT_EQ(layer.value_cache.strides[i], 0) << i;
  }
  EXPECT_EQ(layer.key_cache.rank, 5);
  vkp_kv_cache_destroy(cache);
}

}  // namespace
}  // namespace vkpaged::test
