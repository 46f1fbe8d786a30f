// SPDX-License-Identifier: Apache-2.0
// C API: cache operations recorded into a caller's command buffer (reshape_and_cache,
// copy_blocks, swap_blocks, gather, absmax), fill_random, the bandwidth probe, and the CPU
// references of the cache operations.
#include <fmt/format.h>

#include <memory>
#include <vector>

#include "c_api/c_api_calls.hpp"
#include "c_api/c_api_convert.hpp"
#include "c_api/c_api_guard.hpp"
#include "c_api/c_api_handles.hpp"
#include "vkpaged/cache_ops.hpp"
#include "vkpaged/reference.hpp"
#include "vkpaged/utilities.hpp"
#include "vkpaged/vkpaged.h"

using namespace vkpaged;
using namespace vkpaged::c_api;

namespace {

// "layers[2]" style names, so that refusals point at the C array element.
std::vector<LayerCacheViews> to_layers(const vkp_layer_cache_views* layers, size_t count, const char* name) {
  check_count(count, sizeof(vkp_layer_cache_views), name);
  std::vector<LayerCacheViews> v;
  size_t i = 0;
  for (const auto& l : read_struct_array(layers, count, name)) {
    const std::string element = fmt::format("{}[{}]", name, i++);
    v.push_back(to_cpp(l, element));
  }
  return v;
}

// The C measurements take at least one repetition (the C++ ones round up to one).
void require_repetitions(int32_t repetitions) {
  if (repetitions < 1)
    throw Error(ErrorCode::invalid_argument, fmt::format("repetitions: must be at least 1, got {}", repetitions));
}

vkp_bandwidth to_c(const BandwidthMeasurement& m) {
  vkp_bandwidth b = defaults_of<vkp_bandwidth>();
  b.bytes = m.bytes;
  b.median_ns = m.median_ns;
  b.bytes_per_second = m.bytes_per_second();
  return b;
}

// The read behind a handle, which must have been created on `context`.
const StreamingRead& read_on(vkp_context* context, const vkp_streaming_read* read, const char* name = "read") {
  require(read, name);
  if (&read->read.context() != &context->context)
    throw Error(ErrorCode::invalid_argument, fmt::format("{}: created on another context", name));
  return read->read;
}

}  // namespace

extern "C" {

VKP_API vkp_status VKP_CALL vkp_record_reshape_and_cache(vkp_context* context, VkCommandBuffer cmd,
                                                const vkp_reshape_and_cache_views* views,
                                                const vkp_cache_scales* scales) {
  return record_with("vkp_record_reshape_and_cache", context, "context", cmd, [&](vkp_context& c) {
    const ReshapeAndCacheViews d = c_api::to_cpp(views);
    record_reshape_and_cache(c.context, cmd, d, c_api::to_cpp(scales));
  });
}

VKP_API vkp_status VKP_CALL vkp_record_copy_blocks(vkp_context* context, VkCommandBuffer cmd,
                                          const vkp_layer_cache_views* layers, size_t num_layers,
                                          const vkp_block_copy* pairs, size_t num_pairs) {
  return record_with("vkp_record_copy_blocks", context, "context", cmd, [&](vkp_context& c) {
    record_copy_blocks(c.context, cmd, to_layers(layers, num_layers, "layers"), to_pairs(pairs, num_pairs));
  });
}

VKP_API vkp_status VKP_CALL vkp_record_swap_blocks(vkp_context* context, VkCommandBuffer cmd, const vkp_layer_cache_views* src,
                                          size_t num_src, const vkp_layer_cache_views* dst, size_t num_dst,
                                          const vkp_block_copy* pairs, size_t num_pairs) {
  return record_with("vkp_record_swap_blocks", context, "context", cmd, [&](vkp_context& c) {
    record_swap_blocks(c.context, cmd, to_layers(src, num_src, "src"), to_layers(dst, num_dst, "dst"),
                       to_pairs(pairs, num_pairs));
  });
}

VKP_API vkp_status VKP_CALL vkp_record_gather(vkp_context* context, VkCommandBuffer cmd, const vkp_gather_views* views,
                                     const vkp_cache_scales* scales) {
  return record_with("vkp_record_gather", context, "context", cmd, [&](vkp_context& c) {
    record_gather(c.context, cmd, c_api::to_cpp(views), c_api::to_cpp(scales));
  });
}

VKP_API vkp_status VKP_CALL vkp_record_absmax(vkp_context* context, VkCommandBuffer cmd, const vkp_tensor_view* x,
                                     const vkp_buffer_view* amax_out) {
  return record_with("vkp_record_absmax", context, "context", cmd, [&](vkp_context& c) {
    record_absmax(c.context, cmd, to_cpp(*require(x, "x"), "x"), to_cpp(*require(amax_out, "amax_out")));
  });
}

VKP_API vkp_status VKP_CALL vkp_fp8_scale_from_amax(float amax, vkp_dtype fp8_format, float* scale) {
  return guarded("vkp_fp8_scale_from_amax", [&] {
    require(scale, "scale");
    *scale = fp8_scale_from_amax(amax, to_dtype(fp8_format, "fp8_format"));
  });
}

VKP_API vkp_status VKP_CALL vkp_record_fill_random(vkp_context* context, VkCommandBuffer cmd, const vkp_tensor_view* view,
                                          uint32_t seed) {
  return record_with("vkp_record_fill_random", context, "context", cmd, [&](vkp_context& c) {
    record_fill_random(c.context, cmd, to_cpp(*require(view, "view"), "view"), seed);
  });
}

VKP_API vkp_status VKP_CALL vkp_measure_read_bandwidth(vkp_context* context, size_t bytes, int32_t repetitions,
                                              vkp_bandwidth* out) {
  return guarded("vkp_measure_read_bandwidth", [&] {
    auto& ctx = require(context, "context")->context;
    const StructOut result(out, "out");
    require_repetitions(repetitions);
    result.set(to_c(measure_read_bandwidth(ctx, bytes, repetitions)));
  });
}

VKP_API vkp_status VKP_CALL vkp_streaming_read_create(vkp_context* context, size_t bytes, vkp_streaming_read** out) {
  return guarded("vkp_streaming_read_create", [&] {
    require(out, "out");
    *out = nullptr;
    auto& ctx = require(context, "context")->context;
    *out = adopt(std::make_unique<vkp_streaming_read>(vkp_streaming_read{StreamingRead(ctx, bytes)}).release(), context);
  });
}

VKP_API void VKP_CALL vkp_streaming_read_destroy(vkp_streaming_read* read) {
  destroy_handle("vkp_streaming_read_destroy", read, "read");
}

VKP_API size_t VKP_CALL vkp_streaming_read_bytes(const vkp_streaming_read* read) {
  return guarded_value("vkp_streaming_read_bytes", size_t(0), [&] { return require(read, "read")->read.bytes(); });
}

VKP_API vkp_status VKP_CALL vkp_record_streaming_read(vkp_context* context, VkCommandBuffer cmd, const vkp_streaming_read* read) {
  return guarded("vkp_record_streaming_read", [&] {
    require(context, "context");
    require(cmd, "cmd");
    read_on(context, read).record(cmd);
  });
}

VKP_API vkp_status VKP_CALL vkp_record_streaming_read_of(vkp_context* context, VkCommandBuffer cmd,
                                                         const vkp_buffer_view* data, const vkp_buffer_view* sink) {
  return record_with("vkp_record_streaming_read_of", context, "context", cmd, [&](vkp_context& c) {
    record_streaming_read(c.context, cmd, to_cpp(*require(data, "data")), to_cpp(*require(sink, "sink")));
  });
}

VKP_API vkp_status VKP_CALL vkp_measure_streaming_read(vkp_context* context, const vkp_streaming_read* read, int32_t repetitions,
                                              vkp_bandwidth* out) {
  return guarded("vkp_measure_streaming_read", [&] {
    auto& ctx = require(context, "context")->context;
    const StreamingRead& cpp_read = read_on(context, read);
    const StructOut result(out, "out");
    require_repetitions(repetitions);
    result.set(to_c(measure_read_bandwidth(ctx, cpp_read, repetitions)));
  });
}

VKP_API vkp_status VKP_CALL vkp_measure_streaming_read_after(vkp_context* context, const vkp_streaming_read* read,
                                                    const vkp_streaming_read* untimed_before, int32_t repetitions,
                                                    vkp_bandwidth* out) {
  return guarded("vkp_measure_streaming_read_after", [&] {
    auto& ctx = require(context, "context")->context;
    const StreamingRead& cpp_read = read_on(context, read);
    const StreamingRead& before = read_on(context, untimed_before, "untimed_before");
    const StructOut result(out, "out");
    require_repetitions(repetitions);
    result.set(to_c(measure_read_bandwidth_after(ctx, cpp_read, before, repetitions)));
  });
}

// ---- CPU references: the caller's arrays are copied in, and results copied back only on success ----

VKP_API vkp_status VKP_CALL vkp_reference_reshape_and_cache(const vkp_host_tensor* key, const vkp_host_tensor* value,
                                                   const vkp_host_tensor* slot_mapping, vkp_host_tensor* key_cache,
                                                   vkp_host_tensor* value_cache, const vkp_cache_scales* scales,
                                                   vkp_kv_layout layout) {
  return guarded("vkp_reference_reshape_and_cache", [&] {
    const HostTensor k = to_host(*require(key, "key"), "key");
    const HostTensor v = to_host(*require(value, "value"), "value");
    const HostTensor slots = to_host(*require(slot_mapping, "slot_mapping"), "slot_mapping");
    HostTensor kc = to_host(*require(key_cache, "key_cache"), "key_cache");
    HostTensor vc = to_host(*require(value_cache, "value_cache"), "value_cache");
    const CacheScales s = c_api::to_cpp(scales);
    reference::reshape_and_cache(k, v, slots, kc, vc, s, to_kv_layout(layout, "layout"));
    copy_back(kc, *key_cache, "key_cache");
    copy_back(vc, *value_cache, "value_cache");
  });
}

VKP_API vkp_status VKP_CALL vkp_reference_copy_blocks(vkp_host_tensor* key_cache, vkp_host_tensor* value_cache,
                                             const vkp_block_copy* pairs, size_t num_pairs, vkp_kv_layout layout) {
  return guarded("vkp_reference_copy_blocks", [&] {
    HostTensor kc = to_host(*require(key_cache, "key_cache"), "key_cache");
    HostTensor vc = to_host(*require(value_cache, "value_cache"), "value_cache");
    const std::vector<BlockCopy> p = to_pairs(pairs, num_pairs);
    reference::copy_blocks(kc, vc, p, to_kv_layout(layout, "layout"));
    copy_back(kc, *key_cache, "key_cache");
    copy_back(vc, *value_cache, "value_cache");
  });
}

VKP_API vkp_status VKP_CALL vkp_reference_swap_blocks(const vkp_host_tensor* src_key_cache,
                                             const vkp_host_tensor* src_value_cache, vkp_host_tensor* dst_key_cache,
                                             vkp_host_tensor* dst_value_cache, const vkp_block_copy* pairs,
                                             size_t num_pairs, vkp_kv_layout layout) {
  return guarded("vkp_reference_swap_blocks", [&] {
    const HostTensor sk = to_host(*require(src_key_cache, "src_key_cache"), "src_key_cache");
    const HostTensor sv = to_host(*require(src_value_cache, "src_value_cache"), "src_value_cache");
    HostTensor dk = to_host(*require(dst_key_cache, "dst_key_cache"), "dst_key_cache");
    HostTensor dv = to_host(*require(dst_value_cache, "dst_value_cache"), "dst_value_cache");
    const std::vector<BlockCopy> p = to_pairs(pairs, num_pairs);
    reference::swap_blocks(sk, sv, dk, dv, p, to_kv_layout(layout, "layout"));
    copy_back(dk, *dst_key_cache, "dst_key_cache");
    copy_back(dv, *dst_value_cache, "dst_value_cache");
  });
}

VKP_API vkp_status VKP_CALL vkp_reference_gather(const vkp_host_tensor* key_cache, const vkp_host_tensor* value_cache,
                                        const vkp_host_tensor* block_tables, const vkp_host_tensor* seq_starts,
                                        const vkp_cache_scales* scales, vkp_kv_layout layout,
                                        vkp_host_tensor* key_out, vkp_host_tensor* value_out) {
  return guarded("vkp_reference_gather", [&] {
    const HostTensor kc = to_host(*require(key_cache, "key_cache"), "key_cache");
    const HostTensor vc = to_host(*require(value_cache, "value_cache"), "value_cache");
    const HostTensor tables = to_host(*require(block_tables, "block_tables"), "block_tables");
    const HostTensor starts = to_host(*require(seq_starts, "seq_starts"), "seq_starts");
    require(key_out, "key_out");
    require(value_out, "value_out");
    const DType out_dtype = to_dtype(key_out->dtype, "key_out.dtype");
    const CacheScales s = c_api::to_cpp(scales);
    const auto result = reference::gather(kc, vc, tables, starts, out_dtype, s, to_kv_layout(layout, "layout"));
    // Both outputs are checked before either is written.
    check_matches(result.key, *key_out, "key_out");
    check_matches(result.value, *value_out, "value_out");
    copy_back(result.key, *key_out, "key_out");
    copy_back(result.value, *value_out, "value_out");
  });
}

VKP_API vkp_status VKP_CALL vkp_reference_absmax(const vkp_host_tensor* x, float* out) {
  return guarded("vkp_reference_absmax", [&] {
    const HostTensor t = to_host(*require(x, "x"), "x");
    auto* result = require(out, "out");
    *result = reference::absmax(t);
  });
}

}  // extern "C"
