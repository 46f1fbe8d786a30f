// Host side of shaders/reshape_and_cache.comp: argument checks, then one dispatch.
#include <array>

#include "common/shader_interface.h"
#include "embedded_shaders.hpp"
#include "ops/cache_geometry.hpp"
#include "ops/linear_grid.hpp"
#include "ops/view_checks.hpp"
#include "vkpaged/cache_ops.hpp"

namespace vkpaged {

static_assert(kStatusBadSlot == STATUS_BAD_SLOT);

void record_reshape_and_cache(Context& context, VkCommandBuffer cmd, const ReshapeAndCacheViews& v,
                              const CacheScales& scales) {
  auto& impl = context.impl();
  const auto cache =
      detail::cache_geometry("", v.key_cache.dtype, v.key_cache.shape, v.value_cache.dtype, v.value_cache.shape);
  const int64_t tokens = detail::check_token_inputs(cache, v.key.dtype, v.key.shape, v.value.dtype, v.value.shape,
                                                    v.slot_mapping.dtype, v.slot_mapping.shape);
  const bool fp8 = is_fp8_dtype(cache.dtype);
  const float inv_k_scale = fp8 ? detail::inverse_cache_scale("k_scale", scales.k_scale) : 1.0f;
  const float inv_v_scale = fp8 ? detail::inverse_cache_scale("v_scale", scales.v_scale) : 1.0f;
  detail::check_buffer(impl, "key", v.key.memory, v.key.bytes(), 4);
  detail::check_buffer(impl, "value", v.value.memory, v.value.bytes(), 4);
  detail::check_buffer(impl, "slot_mapping", v.slot_mapping.memory, v.slot_mapping.bytes(), 4);
  detail::check_buffer(impl, "key_cache", v.key_cache.memory, cache.pool_bytes(), 16);
  detail::check_buffer(impl, "value_cache", v.value_cache.memory, cache.pool_bytes(), 16);
  if (!v.status.empty()) detail::check_buffer(impl, "status", v.status, 4, 4);
  if (tokens == 0) return;

  std::array<uint32_t, RESHAPE_SC_COUNT> spec{};
  spec[RESHAPE_SC_INPUT_DTYPE] = uint32_t(v.key.dtype);
  spec[RESHAPE_SC_CACHE_DTYPE] = uint32_t(cache.dtype);
  spec[RESHAPE_SC_SLOT_I64] = v.slot_mapping.dtype == DType::i64 ? 1u : 0u;
  const auto& pipeline =
      impl.pipeline(vk::shader_reshape_and_cache(), spec, RESHAPE_BINDING_COUNT, sizeof(shader::ReshapeAndCachePush));

  std::array<detail::BoundView, RESHAPE_BINDING_COUNT> bound;
  bound[RESHAPE_BINDING_KEY] = impl.bind_view(v.key.memory);
  bound[RESHAPE_BINDING_VALUE] = impl.bind_view(v.value.memory);
  bound[RESHAPE_BINDING_SLOT_MAPPING] = impl.bind_view(v.slot_mapping.memory);
  bound[RESHAPE_BINDING_KEY_CACHE] = impl.bind_view(v.key_cache.memory);
  bound[RESHAPE_BINDING_VALUE_CACHE] = impl.bind_view(v.value_cache.memory);
  bound[RESHAPE_BINDING_STATUS] = impl.bind_view(v.status);

  // Sizes fit 32 bits: every view was checked against maxStorageBufferRange (< 4 GiB).
  const uint64_t invocations =
      uint64_t(tokens) * uint64_t(cache.num_kv_heads) * uint64_t(cache.head_size / cache.pack());
  const auto grid = detail::linear_grid(invocations, CACHE_OP_WORKGROUP);
  shader::ReshapeAndCachePush push{};
  push.num_tokens = uint32_t(tokens);
  push.num_kv_heads = uint32_t(cache.num_kv_heads);
  push.head_size = uint32_t(cache.head_size);
  push.block_size = uint32_t(cache.block_size);
  push.num_slots = uint32_t(cache.num_slots());
  push.groups_x = grid.x;
  push.key_offset = bound[RESHAPE_BINDING_KEY].word_offset;
  push.value_offset = bound[RESHAPE_BINDING_VALUE].word_offset;
  push.slot_offset = bound[RESHAPE_BINDING_SLOT_MAPPING].word_offset;
  push.key_cache_offset = bound[RESHAPE_BINDING_KEY_CACHE].word_offset;
  push.value_cache_offset = bound[RESHAPE_BINDING_VALUE_CACHE].word_offset;
  push.status_offset = bound[RESHAPE_BINDING_STATUS].word_offset;
  push.inv_k_scale = inv_k_scale;
  push.inv_v_scale = inv_v_scale;
  impl.dispatch(cmd, pipeline, bound, &push, grid.x, grid.y, 1);
}

}  // namespace vkpaged
