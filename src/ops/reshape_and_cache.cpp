// SPDX-License-Identifier: Apache-2.0
// Host side of shaders/reshape_and_cache.comp (and its _address variant for pools past
// maxStorageBufferRange): argument checks, then one dispatch. The checks, bindings and push
// constants are shared with the rotary form (reshape_and_cache_rotary.cpp).
#include "ops/reshape_and_cache.hpp"

#include <fmt/format.h>

#include <limits>

#include "ops/linear_grid.hpp"
#include "ops/scale_validation.hpp"
#include "ops/view_checks.hpp"
#include "vkpaged/error.hpp"

namespace vkpaged {

static_assert(kStatusBadSlot == STATUS_BAD_SLOT);

namespace detail {

CacheWrite check_cache_write(const ContextImpl& impl, const ReshapeAndCacheViews& v, const CacheScales& scales,
                             bool keys_written) {
  CacheWrite w;
  w.cache =
      cache_geometry("", v.layout, v.key_cache.dtype, v.key_cache.shape, v.value_cache.dtype, v.value_cache.shape);
  w.tokens = check_token_inputs(w.cache, v.key.dtype, v.key.shape, v.value.dtype, v.value.shape, v.slot_mapping.dtype,
                                v.slot_mapping.shape);
  check_scale("k_scale", scales.k_scale, w.cache.dtype);  // every cache dtype; only fp8 uses them
  check_scale("v_scale", scales.v_scale, w.cache.dtype);
  if (is_fp8_dtype(w.cache.dtype)) {
    w.inv_k_scale = 1.0f / scales.k_scale;
    w.inv_v_scale = 1.0f / scales.v_scale;
  }
  w.key = check_rows(impl, "key", v.key, keys_written);
  w.value = check_rows(impl, "value", v.value, false);
  // Only the keys and values take strides.
  check_contiguous("slot_mapping", v.slot_mapping);
  check_contiguous("key_cache", v.key_cache);
  check_contiguous("value_cache", v.value_cache);
  check_buffer(impl, "slot_mapping", v.slot_mapping.memory, v.slot_mapping.bytes(), 4);
  w.pools =
      cache_pool_access(impl, v.key_cache.memory, v.value_cache.memory, w.cache.pool_bytes(), w.cache.block_bytes());
  if (!v.status.empty()) check_buffer(impl, "status", v.status, 4, 4);
  if (uint64_t(w.cache.num_slots()) > std::numeric_limits<uint32_t>::max())  // pools past 4 GiB only
    throw Error(ErrorCode::unsupported,
                fmt::format("value_cache: N * B = {} slots is more than the shader's 32-bit slots hold ({})",
                            w.cache.num_slots(), std::numeric_limits<uint32_t>::max()));
  return w;
}

void bind_cache_write(const ContextImpl& impl, const ReshapeAndCacheViews& v, const CacheWrite& w, BoundView* bound) {
  bound[RESHAPE_BINDING_KEY] = impl.bind_view(v.key.memory);
  bound[RESHAPE_BINDING_VALUE] = impl.bind_view(v.value.memory);
  bound[RESHAPE_BINDING_SLOT_MAPPING] = impl.bind_view(v.slot_mapping.memory);
  bound[RESHAPE_BINDING_KEY_CACHE] = w.pools.key;
  bound[RESHAPE_BINDING_VALUE_CACHE] = w.pools.value;
  bound[RESHAPE_BINDING_STATUS] = impl.bind_view(v.status);
}

shader::ReshapeAndCachePush cache_write_push(const CacheWrite& w, const BoundView* bound, uint32_t groups_x) {
  // Sizes fit 32 bits: the inputs were checked against maxStorageBufferRange (< 4 GiB); pools
  // past it are addressed per block (cache_pool_access).
  shader::ReshapeAndCachePush push{};
  push.key_cache_address = w.pools.key_address;
  push.value_cache_address = w.pools.value_address;
  push.num_tokens = uint32_t(w.tokens);
  push.num_kv_heads = uint32_t(w.cache.num_kv_heads);
  push.head_size = uint32_t(w.cache.head_size);
  push.block_size = uint32_t(w.cache.block_size);
  push.num_slots = uint32_t(w.cache.num_slots());
  push.groups_x = groups_x;
  push.key_rows = rows_push(w.key, bound[RESHAPE_BINDING_KEY]);
  push.value_rows = rows_push(w.value, bound[RESHAPE_BINDING_VALUE]);
  push.slot_offset = bound[RESHAPE_BINDING_SLOT_MAPPING].word_offset;
  push.key_cache_offset = bound[RESHAPE_BINDING_KEY_CACHE].word_offset;
  push.value_cache_offset = bound[RESHAPE_BINDING_VALUE_CACHE].word_offset;
  push.status_offset = bound[RESHAPE_BINDING_STATUS].word_offset;
  push.inv_k_scale = w.inv_k_scale;
  push.inv_v_scale = w.inv_v_scale;
  return push;
}

CacheWritePipeline cache_write_pipeline(const ReshapeAndCacheViews& v, const CacheWrite& w) {
  return {.token_dtype = v.key.dtype,
          .cache_dtype = w.cache.dtype,
          .slot_i64 = v.slot_mapping.dtype == DType::i64,
          .layout = w.cache.layout,
          .address = w.pools.address};
}

}  // namespace detail

void record_reshape_and_cache(Context& context, VkCommandBuffer cmd, const ReshapeAndCacheViews& v,
                              const CacheScales& scales) {
  auto& impl = context.impl();
  const detail::CacheWrite w = detail::check_cache_write(impl, v, scales, false);
  if (w.tokens == 0) return;

  const auto& pipeline = impl.pipeline(detail::cache_write_request(detail::cache_write_pipeline(v, w)));
  std::array<detail::BoundView, RESHAPE_BINDING_COUNT> bound;
  detail::bind_cache_write(impl, v, w, bound.data());
  // One invocation per (token, kv head, 16-byte chunk of x elements).
  const uint64_t invocations =
      uint64_t(w.tokens) * uint64_t(w.cache.num_kv_heads) * uint64_t(w.cache.head_size / w.cache.pack());
  const auto grid = detail::linear_grid(invocations, CACHE_OP_WORKGROUP);
  const shader::ReshapeAndCachePush push = detail::cache_write_push(w, bound.data(), grid.x);
  impl.dispatch(cmd, pipeline, bound, &push, grid.x, grid.y, 1);
}

}  // namespace vkpaged
