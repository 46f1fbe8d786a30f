// SPDX-License-Identifier: Apache-2.0
// C API: the KvCache (sizing, planning, allocation, per-layer views, whole-block copies, the
// per-layer reshape_and_cache, decode, attention and MLA shapes, decode, attention and MLA
// attention over a layer).
#include <memory>

#include "c_api/c_api_calls.hpp"
#include "c_api/c_api_convert.hpp"
#include "c_api/c_api_guard.hpp"
#include "c_api/c_api_handles.hpp"
#include "c_api/c_api_mla.hpp"
#include "vkpaged/kv_cache.hpp"
#include "vkpaged/vkpaged.h"

using namespace vkpaged;
using namespace vkpaged::c_api;

namespace {

KvCacheShape to_cpp(const vkp_kv_cache_shape* shape) { return c_api::to_cpp(read_struct(shape, "shape"), "shape"); }
KvCacheOptions to_cpp(const vkp_kv_cache_options* options) { return c_api::to_cpp(read_struct(options, "options"), "options"); }

// Whole-block copies recorded by one of the cache's functions (copy, swap out, swap in).
vkp_status record_block_pairs(const char* function, const vkp_kv_cache* cache, VkCommandBuffer cmd,
                              const vkp_block_copy* pairs, size_t num_pairs,
                              void (KvCache::*record)(VkCommandBuffer, Span<const BlockCopy>) const) {
  return record_with(function, cache, "cache", cmd,
                     [&](const vkp_kv_cache& h) { (h.cache.*record)(cmd, to_pairs(pairs, num_pairs)); });
}

// The batch's shape completed with the cache's geometry: `complete` is KvCache::decode_shape or
// KvCache::attention_shape.
template <typename CShape, typename Shape>
vkp_status complete_shape(const char* function, const vkp_kv_cache* cache, const CShape* batch, CShape* out,
                          Shape (KvCache::*complete)(const Shape&) const noexcept) {
  return guarded(function, [&] {
    const KvCache& c = require(cache, "cache")->cache;
    const Shape b = c_api::to_cpp(read_struct(batch, "batch"), "batch");
    StructOut(out, "out").set(c_api::to_c((c.*complete)(b)));
  });
}

// The plan behind a handle, which must have been made on the cache's context (its pipelines
// belong to that context's device).
template <typename Plan>
const auto& plan_for(const vkp_kv_cache* cache, const Plan* plan) {
  const auto& p = require(plan, "plan")->plan;
  if (plan->context != cache->context)
    throw Error(ErrorCode::invalid_argument, "plan: created on another context than the cache's");
  return p;
}

// Decode, attention or MLA attention over one layer: the plan (made on the cache's context), the
// views and the params, checked in the order of the arguments, then `record` (a KvCache::record_*).
template <typename PlanHandle, typename CViews, typename Plan, typename Views>
vkp_status record_layer(const char* function, const vkp_kv_cache* cache, VkCommandBuffer cmd, uint32_t layer,
                        const PlanHandle* plan, const CViews* views, const vkp_decode_params* params,
                        void (KvCache::*record)(VkCommandBuffer, uint32_t, const Plan&, const Views&, const DecodeParams&)
                            const) {
  return record_with(function, cache, "cache", cmd, [&](const vkp_kv_cache& h) {
    const Plan& p = plan_for(cache, plan);
    const Views v = c_api::to_cpp(views);
    (h.cache.*record)(cmd, layer, p, v, to_params(params));
  });
}

}  // namespace

extern "C" {

VKP_API vkp_status VKP_CALL vkp_kv_cache_sizing_of(const vkp_kv_cache_shape* shape, uint32_t num_blocks,
                                          vkp_kv_cache_sizing* out) {
  return guarded("vkp_kv_cache_sizing_of", [&] {
    const KvCacheShape s = to_cpp(shape);
    StructOut(out, "out").set(to_c(KvCache::sizing(s, num_blocks)));
  });
}

VKP_API vkp_status VKP_CALL vkp_kv_cache_blocks_for_budget(const vkp_kv_cache_shape* shape, uint64_t bytes, uint32_t* out) {
  return guarded("vkp_kv_cache_blocks_for_budget", [&] {
    const KvCacheShape s = to_cpp(shape);
    auto* result = require(out, "out");
    *result = KvCache::blocks_for_budget(s, bytes);
  });
}

VKP_API vkp_status VKP_CALL vkp_kv_cache_max_blocks_per_pool(const vkp_kv_cache_shape* shape,
                                                    uint64_t max_storage_buffer_range, uint32_t* out) {
  return guarded("vkp_kv_cache_max_blocks_per_pool", [&] {
    const KvCacheShape s = to_cpp(shape);
    auto* result = require(out, "out");
    *result = KvCache::max_blocks_per_pool(s, max_storage_buffer_range);
  });
}

VKP_API vkp_status VKP_CALL vkp_kv_cache_plan(const vkp_device_info* device, const vkp_kv_cache_shape* shape,
                                     const vkp_kv_cache_options* options, vkp_kv_cache_sizing* out) {
  return guarded("vkp_kv_cache_plan", [&] {
    const DeviceInfo info = c_api::to_cpp(read_struct(device, "device"), "device");
    const KvCacheShape s = to_cpp(shape);
    const KvCacheOptions o = to_cpp(options);
    const StructOut result(out, "out");
    result.set(to_c(KvCache::plan(info, s, o)));
  });
}

VKP_API vkp_status VKP_CALL vkp_kv_cache_create(vkp_context* context, const vkp_kv_cache_shape* shape,
                                       const vkp_kv_cache_options* options, vkp_kv_cache** out) {
  return guarded("vkp_kv_cache_create", [&] {
    require(out, "out");
    *out = nullptr;
    auto& ctx = require(context, "context")->context;
    const KvCacheShape s = to_cpp(shape);
    const KvCacheOptions o = to_cpp(options);
    *out = adopt(new vkp_kv_cache{KvCache(ctx, s, o), context}, context);
  });
}

VKP_API void VKP_CALL vkp_kv_cache_destroy(vkp_kv_cache* cache) { destroy_handle("vkp_kv_cache_destroy", cache, "cache"); }

// vkp_kv_cache_info's fields: each the KvCache getter of its name.
#define VKP_KV_CACHE_INFO_FIELDS(X) X(num_blocks) X(num_host_blocks) X(num_tokens) X(host_bytes)
VKP_INFO_GETTER(vkp_kv_cache_info_get, vkp_kv_cache, cache, vkp_kv_cache_info, cache, VKP_KV_CACHE_INFO_FIELDS)

VKP_GETTER(vkp_kv_cache_shape_get, vkp_kv_cache, cache, vkp_kv_cache_shape, to_c(h.cache.shape()))

VKP_GETTER(vkp_kv_cache_sizing_get, vkp_kv_cache, cache, vkp_kv_cache_sizing, to_c(h.cache.sizing()))

VKP_API vkp_status VKP_CALL vkp_kv_cache_layer(const vkp_kv_cache* cache, uint32_t layer, vkp_bool32 host,
                                      vkp_layer_cache_views* out) {
  return guarded("vkp_kv_cache_layer", [&] {
    const KvCache& c = require(cache, "cache")->cache;
    const bool on_host = to_bool(host, "host");
    StructOut(out, "out").set(to_c(LayerCacheViews{on_host ? c.host_key_cache(layer) : c.key_cache(layer),
                                                    on_host ? c.host_value_cache(layer) : c.value_cache(layer),
                                                    c.shape().layout}));
  });
}

VKP_API vkp_status VKP_CALL vkp_kv_cache_record_copy_blocks(const vkp_kv_cache* cache, VkCommandBuffer cmd,
                                                   const vkp_block_copy* pairs, size_t num_pairs) {
  return record_block_pairs("vkp_kv_cache_record_copy_blocks", cache, cmd, pairs, num_pairs, &KvCache::record_copy_blocks);
}

VKP_API vkp_status VKP_CALL vkp_kv_cache_record_swap_out(const vkp_kv_cache* cache, VkCommandBuffer cmd,
                                                   const vkp_block_copy* pairs, size_t num_pairs) {
  return record_block_pairs("vkp_kv_cache_record_swap_out", cache, cmd, pairs, num_pairs, &KvCache::record_swap_out);
}

VKP_API vkp_status VKP_CALL vkp_kv_cache_record_swap_in(const vkp_kv_cache* cache, VkCommandBuffer cmd,
                                                   const vkp_block_copy* pairs, size_t num_pairs) {
  return record_block_pairs("vkp_kv_cache_record_swap_in", cache, cmd, pairs, num_pairs, &KvCache::record_swap_in);
}

VKP_API vkp_status VKP_CALL vkp_kv_cache_record_reshape_and_cache(const vkp_kv_cache* cache, VkCommandBuffer cmd,
                                                                  uint32_t layer, const vkp_new_tokens* tokens,
                                                                  const vkp_rotary_inputs* rotary,
                                                                  const vkp_cache_scales* scales) {
  return record_with("vkp_kv_cache_record_reshape_and_cache", cache, "cache", cmd, [&](const vkp_kv_cache& h) {
    const NewTokens d = c_api::to_cpp(tokens);
    const CacheScales s = c_api::to_cpp(scales);
    if (rotary != nullptr)
      h.cache.record_reshape_and_cache(cmd, layer, d, c_api::to_cpp(rotary), s);
    else
      h.cache.record_reshape_and_cache(cmd, layer, d, s);
  });
}

VKP_API vkp_status VKP_CALL vkp_kv_cache_mla_layer(const vkp_kv_cache* cache, uint32_t layer, vkp_bool32 host,
                                                   vkp_mla_cache_views* out) {
  return guarded("vkp_kv_cache_mla_layer", [&] {
    const KvCache& c = require(cache, "cache")->cache;
    const bool on_host = to_bool(host, "host");
    const StructOut result(out, "out");
    result.set(c_api::to_c(on_host ? c.host_mla_cache(layer) : c.mla_cache(layer), result.blank()));
  });
}

VKP_API vkp_status VKP_CALL vkp_kv_cache_record_mla_reshape_and_cache(const vkp_kv_cache* cache, VkCommandBuffer cmd,
                                                                      uint32_t layer, const vkp_mla_new_tokens* tokens,
                                                                      float scale, const vkp_mla_rope_views* rope) {
  return record_with("vkp_kv_cache_record_mla_reshape_and_cache", cache, "cache", cmd, [&](const vkp_kv_cache& h) {
    const MlaNewTokens d = c_api::to_cpp(tokens);
    if (!rope) {
      h.cache.record_mla_reshape_and_cache(cmd, layer, d, scale);
      return;
    }
    const MlaRopeViews r = c_api::to_cpp(rope);
    h.cache.record_mla_reshape_and_cache(cmd, layer, d, scale, &r);
  });
}

VKP_API vkp_status VKP_CALL vkp_kv_cache_decode_shape(const vkp_kv_cache* cache, const vkp_decode_shape* batch,
                                                      vkp_decode_shape* out) {
  return complete_shape("vkp_kv_cache_decode_shape", cache, batch, out, &KvCache::decode_shape);
}

VKP_API vkp_status VKP_CALL vkp_kv_cache_attention_shape(const vkp_kv_cache* cache, const vkp_attention_shape* batch,
                                                         vkp_attention_shape* out) {
  return complete_shape("vkp_kv_cache_attention_shape", cache, batch, out, &KvCache::attention_shape);
}

VKP_API vkp_status VKP_CALL vkp_kv_cache_record_decode(const vkp_kv_cache* cache, VkCommandBuffer cmd, uint32_t layer,
                                                       const vkp_decode_plan* plan, const vkp_decode_views* views,
                                                       const vkp_decode_params* params) {
  return record_layer("vkp_kv_cache_record_decode", cache, cmd, layer, plan, views, params, &KvCache::record_decode);
}

VKP_API vkp_status VKP_CALL vkp_kv_cache_record_attention(const vkp_kv_cache* cache, VkCommandBuffer cmd, uint32_t layer,
                                                          const vkp_attention_plan* plan, const vkp_attention_views* views,
                                                          const vkp_decode_params* params) {
  return record_layer("vkp_kv_cache_record_attention", cache, cmd, layer, plan, views, params,
                      &KvCache::record_attention);
}

VKP_API vkp_status VKP_CALL vkp_kv_cache_mla_shape(const vkp_kv_cache* cache, const vkp_attention_shape* batch,
                                                   vkp_attention_shape* out, uint32_t* value_head_size,
                                                   vkp_mla_cache_form* cache_form) {
  return guarded("vkp_kv_cache_mla_shape", [&] {
    const KvCache& c = require(cache, "cache")->cache;
    const AttentionShape b = c_api::to_cpp(read_struct(batch, "batch"), "batch");
    const StructOut result(out, "out");
    uint32_t* dv = require(value_head_size, "value_head_size");
    vkp_mla_cache_form* form = require(cache_form, "cache_form");
    const MlaShape m = c.mla_shape(b);  // refuses a key_value cache before anything is written
    result.set(c_api::to_c(m.attention));
    *dv = m.value_head_size;
    *form = vkp_mla_cache_form(m.cache_form);
  });
}

VKP_API vkp_status VKP_CALL vkp_kv_cache_record_mla_attention(const vkp_kv_cache* cache, VkCommandBuffer cmd,
                                                              uint32_t layer, const vkp_mla_plan* plan,
                                                              const vkp_mla_views* views, const vkp_decode_params* params) {
  return record_layer("vkp_kv_cache_record_mla_attention", cache, cmd, layer, plan, views, params,
                      &KvCache::record_mla_attention);
}

}  // extern "C"
