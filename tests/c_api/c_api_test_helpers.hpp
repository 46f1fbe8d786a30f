// SPDX-License-Identifier: Apache-2.0
#pragma once
// Helpers of the C API tests: one C context for the binary that adopts the shared test
// context's device (so the validation layer's messages reach GpuTest's check), device
// tensors owned through the C API, and "refused, naming X" checks.
#include <gtest/gtest.h>

#include <algorithm>
#include <memory>
#include <string>
#include <type_traits>
#include <utility>
#include <vector>

#include "support/test_context.hpp"
#include "vk/context_impl.hpp"
#include "vkpaged/attention.hpp"
#include "vkpaged/decode.hpp"
#include "vkpaged/tensor.hpp"
#include "vkpaged/vkpaged.h"

#define EXPECT_VKP_OK(expr) EXPECT_EQ((expr), VKP_OK) << vkp_last_error()
#define ASSERT_VKP_OK(expr) ASSERT_EQ((expr), VKP_OK) << vkp_last_error()

namespace vkpaged::test::c_api_helpers {

using BufferPtr = std::unique_ptr<vkp_buffer, decltype(&vkp_buffer_destroy)>;
using CachePtr = std::unique_ptr<vkp_kv_cache, decltype(&vkp_kv_cache_destroy)>;
using AttentionPlanPtr = std::unique_ptr<vkp_attention_plan, decltype(&vkp_attention_plan_destroy)>;
using DecodePlanPtr = std::unique_ptr<vkp_decode_plan, decltype(&vkp_decode_plan_destroy)>;

// A buffer made through the C API and a tensor view of all of it.
struct CTensor {
  BufferPtr buffer{nullptr, &vkp_buffer_destroy};
  vkp_tensor_view view{};
};

// The shared test context's device and queue family to adopt, no optional feature claimed.
inline vkp_external_device shared_device() {
  Context& shared = shared_context();
  vkp_external_device ext;
  vkp_external_device_init(&ext);
  ext.instance = shared.instance();
  ext.physical_device = shared.physical_device();
  ext.device = shared.device();
  ext.queue_family = shared.queue_family();
  return ext;
}

// Created on first use, adopting shared_context()'s device; destroyed before it when the tests
// end (destroy_before_shared_context).
inline vkp_context* c_context() {
  static vkp_context* const context = [] {
    Context& shared = shared_context();
    vkp_external_device ext = shared_device();
    // vkpaged's own context enables the matrix units and what they need wherever the device
    // has them: the adopted one is told what the shared one enabled (ContextImpl's record, not
    // device_info(): under a validation layer older than VK_KHR_cooperative_matrix the
    // extension stays off although the device has it).
    const detail::ContextImpl& enabled = shared.impl();
    ext.buffer_device_address = enabled.buffer_device_address ? VKP_TRUE : VKP_FALSE;
    ext.cooperative_matrix = enabled.cooperative_matrix ? VKP_TRUE : VKP_FALSE;
    ext.vulkan_memory_model = enabled.vulkan_memory_model ? VKP_TRUE : VKP_FALSE;
    ext.vulkan_memory_model_device_scope = enabled.vulkan_memory_model_device_scope ? VKP_TRUE : VKP_FALSE;
    ext.cooperative_matrix_khr = enabled.cooperative_matrix_khr ? VKP_TRUE : VKP_FALSE;
    vkp_context* c = nullptr;
    if (vkp_context_create_external(&ext, &c) != VKP_OK) ADD_FAILURE() << vkp_last_error();
    destroy_before_shared_context([c] { vkp_context_destroy(c); });
    return c;
  }();
  return context;
}

// A refusal: the status and a message that contains `name`.
inline void expect_refused(vkp_status status, const std::string& name, vkp_status want = VKP_ERROR_INVALID_ARGUMENT) {
  EXPECT_EQ(status, want) << vkp_status_name(status) << ": " << vkp_last_error();
  const std::string message = vkp_last_error();
  EXPECT_NE(message.find(name), std::string::npos) << "message '" << message << "' does not name " << name;
}

inline CTensor upload(vkp_context* ctx, const HostTensor& host, vkp_memory_kind kind = VKP_MEMORY_DEVICE) {
  CTensor t;
  vkp_buffer* buffer = nullptr;
  // At least 16 bytes, so that empty tensors still have a buffer to bind.
  EXPECT_VKP_OK(vkp_buffer_create(ctx, std::max<size_t>(host.bytes(), 16), kind, &buffer));
  t.buffer.reset(buffer);
  const auto dims = host.shape().dims();
  EXPECT_VKP_OK(vkp_buffer_tensor(buffer, vkp_dtype(host.dtype()), dims.data(), int32_t(dims.size()), 0, &t.view));
  EXPECT_VKP_OK(vkp_upload(ctx, &t.view.memory, host.data(), host.bytes()));
  return t;
}

inline CTensor zeros(vkp_context* ctx, DType dtype, const Shape& shape, vkp_memory_kind kind = VKP_MEMORY_DEVICE) {
  return upload(ctx, HostTensor(dtype, shape), kind);
}

inline HostTensor download(vkp_context* ctx, const CTensor& tensor) {
  HostTensor h(DType(tensor.view.dtype),
               Shape(std::vector<int64_t>(tensor.view.shape, tensor.view.shape + tensor.view.rank)));
  EXPECT_VKP_OK(vkp_download(ctx, &tensor.view.memory, h.data(), h.bytes()));
  return h;
}

// A decode batch's dense inputs uploaded (the query, the pools, block tables and lengths, in that
// order) and the views of them with `output`.
struct DeviceDecodeInputs {
  CTensor query, key, value, tables, lens;
  DeviceDecodeInputs(vkp_context* ctx, const DecodeInputs& in)
      : query(upload(ctx, in.query)), key(upload(ctx, in.key_cache)), value(upload(ctx, in.value_cache)),
        tables(upload(ctx, in.block_tables)), lens(upload(ctx, in.context_lens)) {}
  vkp_decode_views views(const CTensor& output) const {
    vkp_decode_views v;
    vkp_decode_views_init(&v);
    v.query = query.view;
    v.key_cache = key.view;
    v.value_cache = value.view;
    v.block_tables = tables.view;
    v.context_lens = lens.view;
    v.output = output.view;
    return v;
  }
};

// The views a cache's multi-query record reads beside its pools: the query, block tables,
// lengths, query starts and the output (Views: vkp_attention_views or vkp_mla_views).
template <class Views>
Views batch_views(const CTensor& query, const CTensor& tables, const CTensor& lens, const CTensor& starts,
                  const CTensor& output) {
  Views v;
  if constexpr (std::is_same_v<Views, vkp_mla_views>)
    vkp_mla_views_init(&v);
  else
    vkp_attention_views_init(&v);
  v.query = query.view;
  v.block_tables = tables.view;
  v.context_lens = lens.view;
  v.query_starts = starts.view;
  v.output = output.view;
  return v;
}

// A C description of host memory (the C API reads it, or writes it where it says so).
inline vkp_host_tensor host_view(const HostTensor& tensor) {
  vkp_host_tensor h{};
  h.data = const_cast<void*>(tensor.data());
  h.dtype = vkp_dtype(tensor.dtype());
  h.rank = tensor.shape().rank();
  for (int i = 0; i < h.rank; ++i) h.shape[i] = tensor.shape()[i];
  return h;
}

// The fields host decode and attention inputs share (C: vkp_decode_inputs or vkp_attention_inputs,
// Cpp: DecodeInputs or AttentionInputs). Absent tensors stay absent: host_view of an empty
// HostTensor is what the C init leaves.
template <class C, class Cpp>
void set_shared_inputs(C& c, const Cpp& in) {
  c.query = host_view(in.query);
  c.key_cache = host_view(in.key_cache);
  c.value_cache = host_view(in.value_cache);
  c.block_tables = host_view(in.block_tables);
  c.context_lens = host_view(in.context_lens);
  c.alibi_slopes = host_view(in.alibi_slopes);
  c.sinks = host_view(in.sinks);
  c.kv_indptr = host_view(in.kv_indptr);
  c.kv_indices = host_view(in.kv_indices);
  c.kv_last_page_len = host_view(in.kv_last_page_len);
  c.max_blocks_per_seq = in.max_blocks_per_seq;
  c.cache_dtype = vkp_dtype(in.cache_dtype);
}

// The C form of host decode inputs, every field.
inline vkp_decode_inputs c_decode_inputs(const DecodeInputs& in) {
  vkp_decode_inputs c;
  vkp_decode_inputs_init(&c);
  set_shared_inputs(c, in);
  return c;
}

// The C form of host attention inputs, every field.
inline vkp_attention_inputs c_attention_inputs(const AttentionInputs& in) {
  vkp_attention_inputs c;
  vkp_attention_inputs_init(&c);
  set_shared_inputs(c, in);
  c.query_starts = host_view(in.query_starts);
  c.tree_mask = host_view(in.tree_mask);
  c.kv_layout = vkp_kv_layout(in.kv_layout);
  c.sliding_window = in.sliding_window;
  return c;
}

// KvCache options of `num_blocks` device blocks (and `num_host_blocks` of swap space, where
// not 0), the rest the defaults.
inline vkp_kv_cache_options kv_cache_options(uint32_t num_blocks, uint32_t num_host_blocks = 0) {
  vkp_kv_cache_options options;
  vkp_kv_cache_options_init(&options);
  options.num_blocks = num_blocks;
  if (num_host_blocks != 0) options.num_host_blocks = num_host_blocks;
  return options;
}

// A batch's attention shape for a cache to complete (vkp_kv_cache_attention_shape), with LSE.
inline vkp_attention_shape c_batch(uint32_t requests, uint32_t tokens, uint32_t heads, uint32_t max_blocks) {
  vkp_attention_shape b;
  vkp_attention_shape_init(&b);
  b.num_requests = requests;
  b.num_query_tokens = tokens;
  b.num_heads = heads;
  b.max_blocks_per_seq = max_blocks;
  b.lse = VKP_TRUE;
  return b;
}

// The C form of per-call values (AttentionParams is DecodeParams).
inline vkp_decode_params c_params(const DecodeParams& p) {
  vkp_decode_params c;
  vkp_decode_params_init(&c);
  c.has_scale = p.scale.has_value() ? VKP_TRUE : VKP_FALSE;
  c.scale = p.scale.value_or(0.0f);
  c.softcap = p.softcap;
  c.k_scale = p.k_scale;
  c.v_scale = p.v_scale;
  return c;
}

// One layer's new MLA tokens (no status word) and the rope's views, as the C structs.
inline vkp_mla_new_tokens mla_new_tokens(const CTensor& kv_c, const CTensor& k_pe, const CTensor& slot_mapping) {
  vkp_mla_new_tokens tokens;
  vkp_mla_new_tokens_init(&tokens);
  tokens.kv_c = kv_c.view;
  tokens.k_pe = k_pe.view;
  tokens.slot_mapping = slot_mapping.view;
  return tokens;
}
inline vkp_mla_rope_views mla_rope(const CTensor& positions, const CTensor& cos_sin_cache, vkp_rotary_style style) {
  vkp_mla_rope_views rope;
  vkp_mla_rope_views_init(&rope);
  rope.style = style;
  rope.positions = positions.view;
  rope.cos_sin_cache = cos_sin_cache.view;
  return rope;
}

// vkp_run_and_wait with a C++ callable as the record callback.
template <typename Record>
vkp_status run(vkp_context* ctx, Record&& record) {
  using R = std::remove_reference_t<Record>;
  return vkp_run_and_wait(
      ctx, [](VkCommandBuffer cmd, void* user) -> vkp_status { return (*static_cast<R*>(user))(cmd); },
      const_cast<void*>(static_cast<const void*>(&record)));
}

}  // namespace vkpaged::test::c_api_helpers
