// C API: the KvCache (sizing, planning, allocation, per-layer views, whole-block copies).
#include <memory>

#include "c_api/c_api_convert.hpp"
#include "c_api/c_api_guard.hpp"
#include "c_api/c_api_handles.hpp"
#include "vkpaged/kv_cache.hpp"
#include "vkpaged/vkpaged.h"

using namespace vkpaged;
using namespace vkpaged::c_api;

static_assert(int(MemorySource::none) == VKP_MEMORY_SOURCE_NONE && int(MemorySource::heap_size) == VKP_MEMORY_SOURCE_HEAP_SIZE &&
              int(MemorySource::memory_budget) == VKP_MEMORY_SOURCE_MEMORY_BUDGET);

namespace {

KvCacheShape to_cpp(const vkp_kv_cache_shape* shape) {
  const auto& s = *require(shape, "shape");
  return {s.num_layers, s.num_kv_heads, s.head_size, s.block_size, to_dtype(s.dtype, "shape.dtype")};
}

vkp_kv_cache_shape to_c(const KvCacheShape& s) noexcept {
  return {s.num_layers, s.num_kv_heads, s.head_size, s.block_size, vkp_dtype(s.dtype)};
}

KvCacheOptions to_cpp(const vkp_kv_cache_options* options) {
  const auto& o = *require(options, "options");
  return {o.num_blocks, o.budget_bytes, o.budget_fraction, o.num_host_blocks};
}

vkp_kv_cache_sizing to_c(const KvCacheSizing& s) noexcept {
  return {s.num_blocks,  s.num_tokens,  s.block_bytes, s.bytes_per_block, s.pool_bytes,
          s.total_bytes, vkp_memory_source(s.fraction_of), s.fraction_of_bytes};
}

}  // namespace

extern "C" {

VKP_API void vkp_kv_cache_shape_init(vkp_kv_cache_shape* shape) {
  if (shape != nullptr) *shape = to_c(KvCacheShape{});
}

VKP_API vkp_status vkp_kv_cache_sizing_of(const vkp_kv_cache_shape* shape, uint32_t num_blocks,
                                          vkp_kv_cache_sizing* out) {
  return guarded("vkp_kv_cache_sizing_of",
                 [&] { *require(out, "out") = to_c(KvCache::sizing(to_cpp(shape), num_blocks)); });
}

VKP_API vkp_status vkp_kv_cache_blocks_for_budget(const vkp_kv_cache_shape* shape, uint64_t bytes, uint32_t* out) {
  return guarded("vkp_kv_cache_blocks_for_budget",
                 [&] { *require(out, "out") = KvCache::blocks_for_budget(to_cpp(shape), bytes); });
}

VKP_API vkp_status vkp_kv_cache_max_blocks_per_pool(const vkp_kv_cache_shape* shape,
                                                    uint64_t max_storage_buffer_range, uint32_t* out) {
  return guarded("vkp_kv_cache_max_blocks_per_pool", [&] {
    *require(out, "out") = KvCache::max_blocks_per_pool(to_cpp(shape), max_storage_buffer_range);
  });
}

VKP_API vkp_status vkp_kv_cache_plan(const vkp_device_info* device, const vkp_kv_cache_shape* shape,
                                     const vkp_kv_cache_options* options, vkp_kv_cache_sizing* out) {
  return guarded("vkp_kv_cache_plan", [&] {
    const DeviceInfo info = c_api::to_cpp(*require(device, "device"));
    *require(out, "out") = to_c(KvCache::plan(info, to_cpp(shape), to_cpp(options)));
  });
}

VKP_API vkp_status vkp_kv_cache_create(vkp_context* context, const vkp_kv_cache_shape* shape,
                                       const vkp_kv_cache_options* options, vkp_kv_cache** out) {
  return guarded("vkp_kv_cache_create", [&] {
    require(out, "out");
    *out = nullptr;
    auto& ctx = require(context, "context")->context;
    *out = new vkp_kv_cache{KvCache(ctx, to_cpp(shape), to_cpp(options))};
  });
}

VKP_API void vkp_kv_cache_destroy(vkp_kv_cache* cache) { delete cache; }

VKP_API vkp_status vkp_kv_cache_info_get(const vkp_kv_cache* cache, vkp_kv_cache_info* out) {
  return guarded("vkp_kv_cache_info_get", [&] {
    const KvCache& c = require(cache, "cache")->cache;
    *require(out, "out") = {to_c(c.shape()), c.num_blocks(), c.num_host_blocks(), c.num_tokens(), to_c(c.sizing()),
                            c.host_bytes()};
  });
}

VKP_API vkp_status vkp_kv_cache_layer(const vkp_kv_cache* cache, uint32_t layer, bool host,
                                      vkp_layer_cache_views* out) {
  return guarded("vkp_kv_cache_layer", [&] {
    const KvCache& c = require(cache, "cache")->cache;
    require(out, "out");
    const TensorView key = host ? c.host_key_cache(layer) : c.key_cache(layer);
    const TensorView value = host ? c.host_value_cache(layer) : c.value_cache(layer);
    *out = {c_api::to_c(key), c_api::to_c(value)};
  });
}

VKP_API vkp_status vkp_kv_cache_record_copy_blocks(const vkp_kv_cache* cache, VkCommandBuffer cmd,
                                                   const vkp_block_copy* pairs, size_t num_pairs) {
  return guarded("vkp_kv_cache_record_copy_blocks", [&] {
    const KvCache& c = require(cache, "cache")->cache;
    c.record_copy_blocks(require(cmd, "cmd"), to_pairs(pairs, num_pairs));
  });
}

VKP_API vkp_status vkp_kv_cache_record_swap_out(const vkp_kv_cache* cache, VkCommandBuffer cmd,
                                                const vkp_block_copy* pairs, size_t num_pairs) {
  return guarded("vkp_kv_cache_record_swap_out", [&] {
    const KvCache& c = require(cache, "cache")->cache;
    c.record_swap_out(require(cmd, "cmd"), to_pairs(pairs, num_pairs));
  });
}

VKP_API vkp_status vkp_kv_cache_record_swap_in(const vkp_kv_cache* cache, VkCommandBuffer cmd,
                                               const vkp_block_copy* pairs, size_t num_pairs) {
  return guarded("vkp_kv_cache_record_swap_in", [&] {
    const KvCache& c = require(cache, "cache")->cache;
    c.record_swap_in(require(cmd, "cmd"), to_pairs(pairs, num_pairs));
  });
}

}  // extern "C"
