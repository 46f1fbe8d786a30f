// SPDX-License-Identifier: Apache-2.0
// C API: rotary embedding recorded into a caller's command buffer (alone, or fused into
// reshape_and_cache), the cos/sin cache, the host convenience and the CPU references.
#include "c_api/c_api_calls.hpp"
#include "c_api/c_api_convert.hpp"
#include "c_api/c_api_guard.hpp"
#include "c_api/c_api_handles.hpp"
#include "vkpaged/reference.hpp"
#include "vkpaged/rotary.hpp"
#include "vkpaged/vkpaged.h"

using namespace vkpaged;
using namespace vkpaged::c_api;

namespace {

// A nullable in-out tensor (query or key) given and not absent: its result is written back.
bool given(const vkp_host_tensor* tensor) { return tensor != nullptr && !(tensor->data == nullptr && tensor->rank == 0); }

void copy_back_if_given(const HostTensor& result, vkp_host_tensor* tensor, const char* name) {
  if (given(tensor)) copy_back(result, *tensor, name);
}

}  // namespace

static_assert(VKP_STATUS_BAD_POSITION == kStatusBadPosition);

extern "C" {

VKP_API vkp_status VKP_CALL vkp_record_rotary_embedding(vkp_context* context, VkCommandBuffer cmd,
                                                        const vkp_rotary_views* views) {
  return record_with("vkp_record_rotary_embedding", context, "context", cmd, [&](vkp_context& c) {
    record_rotary_embedding(c.context, cmd, to_cpp(views));
  });
}

VKP_API vkp_status VKP_CALL vkp_record_reshape_and_cache_rotary(vkp_context* context, VkCommandBuffer cmd,
                                                                const vkp_reshape_and_cache_views* views,
                                                                const vkp_rotary_inputs* rotary,
                                                                const vkp_cache_scales* scales) {
  return record_with("vkp_record_reshape_and_cache_rotary", context, "context", cmd, [&](vkp_context& c) {
    const ReshapeAndCacheViews v = c_api::to_cpp(views);
    const RotaryInputs r = c_api::to_cpp(rotary);
    record_reshape_and_cache_rotary(c.context, cmd, v, r, c_api::to_cpp(scales));
  });
}

VKP_API vkp_status VKP_CALL vkp_rotary_cos_sin_cache(uint32_t max_position, uint32_t rotary_dim, double base,
                                                     vkp_host_tensor* out) {
  return guarded("vkp_rotary_cos_sin_cache", [&] {
    require(out, "out");
    const DType dtype = to_dtype(out->dtype, "out.dtype");
    const HostTensor cache = rotary_cos_sin_cache(max_position, rotary_dim, base, dtype);
    copy_back(cache, *out, "out");
  });
}

// ---- host tensors: copied in, rotated, and copied back only on success ----

VKP_API vkp_status VKP_CALL vkp_rotary_embedding(vkp_context* context, vkp_host_tensor* query, vkp_host_tensor* key,
                                                 const vkp_host_tensor* positions,
                                                 const vkp_host_tensor* cos_sin_cache, vkp_rotary_style style) {
  return guarded("vkp_rotary_embedding", [&] {
    auto& ctx = require(context, "context")->context;
    HostTensor q = to_host_or_empty(query, "query");
    HostTensor k = to_host_or_empty(key, "key");
    const HostTensor p = to_host(*require(positions, "positions"), "positions");
    const HostTensor cs = to_host(*require(cos_sin_cache, "cos_sin_cache"), "cos_sin_cache");
    rotary_embedding(ctx, q, k, p, cs, to_rotary_style(style, "style"));
    copy_back_if_given(q, query, "query");
    copy_back_if_given(k, key, "key");
  });
}

VKP_API vkp_status VKP_CALL vkp_reference_rotary_embedding(vkp_host_tensor* query, vkp_host_tensor* key,
                                                           const vkp_host_tensor* positions,
                                                           const vkp_host_tensor* cos_sin_cache,
                                                           vkp_rotary_style style) {
  return guarded("vkp_reference_rotary_embedding", [&] {
    HostTensor q = to_host_or_empty(query, "query");
    HostTensor k = to_host_or_empty(key, "key");
    const HostTensor p = to_host(*require(positions, "positions"), "positions");
    const HostTensor cs = to_host(*require(cos_sin_cache, "cos_sin_cache"), "cos_sin_cache");
    reference::rotary_embedding(q, k, p, cs, to_rotary_style(style, "style"));
    copy_back_if_given(q, query, "query");
    copy_back_if_given(k, key, "key");
  });
}

VKP_API vkp_status VKP_CALL vkp_reference_reshape_and_cache_rotary(
    vkp_host_tensor* query, vkp_host_tensor* key, const vkp_host_tensor* value, const vkp_host_tensor* slot_mapping,
    const vkp_host_tensor* positions, const vkp_host_tensor* cos_sin_cache, vkp_rotary_style style,
    vkp_host_tensor* key_cache, vkp_host_tensor* value_cache, const vkp_cache_scales* scales, vkp_kv_layout layout) {
  return guarded("vkp_reference_reshape_and_cache_rotary", [&] {
    HostTensor q = to_host_or_empty(query, "query");
    HostTensor k = to_host(*require(key, "key"), "key");
    const HostTensor v = to_host(*require(value, "value"), "value");
    const HostTensor slots = to_host(*require(slot_mapping, "slot_mapping"), "slot_mapping");
    const HostTensor p = to_host(*require(positions, "positions"), "positions");
    const HostTensor cs = to_host(*require(cos_sin_cache, "cos_sin_cache"), "cos_sin_cache");
    HostTensor kc = to_host(*require(key_cache, "key_cache"), "key_cache");
    HostTensor vc = to_host(*require(value_cache, "value_cache"), "value_cache");
    const RotaryStyle s = to_rotary_style(style, "style");
    const CacheScales cache_scales = c_api::to_cpp(scales);
    reference::reshape_and_cache_rotary(q, k, v, slots, p, cs, s, kc, vc, cache_scales, to_kv_layout(layout, "layout"));
    copy_back_if_given(q, query, "query");
    copy_back(k, *key, "key");
    copy_back(kc, *key_cache, "key_cache");
    copy_back(vc, *value_cache, "value_cache");
  });
}

}  // extern "C"
