// Host side of shaders/reshape_and_cache.comp (and its _address variant for pools past
// maxStorageBufferRange): argument checks, then one dispatch.
#include <fmt/format.h>

#include <array>
#include <limits>

#include "common/shader_interface.h"
#include "embedded_shaders.hpp"
#include "ops/cache_geometry.hpp"
#include "ops/cache_pool_access.hpp"
#include "ops/linear_grid.hpp"
#include "ops/scale_validation.hpp"
#include "ops/view_checks.hpp"
#include "vkpaged/cache_ops.hpp"
#include "vkpaged/error.hpp"

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
  detail::check_scale("k_scale", scales.k_scale, cache.dtype);  // every cache dtype; only fp8 uses them
  detail::check_scale("v_scale", scales.v_scale, cache.dtype);
  const float inv_k_scale = fp8 ? 1.0f / scales.k_scale : 1.0f;
  const float inv_v_scale = fp8 ? 1.0f / scales.v_scale : 1.0f;
  detail::check_buffer(impl, "key", v.key.memory, v.key.bytes(), 4);
  detail::check_buffer(impl, "value", v.value.memory, v.value.bytes(), 4);
  detail::check_buffer(impl, "slot_mapping", v.slot_mapping.memory, v.slot_mapping.bytes(), 4);
  const auto pools =
      detail::cache_pool_access(impl, v.key_cache.memory, v.value_cache.memory, cache.pool_bytes(), cache.block_bytes());
  if (!v.status.empty()) detail::check_buffer(impl, "status", v.status, 4, 4);
  if (uint64_t(cache.num_slots()) > std::numeric_limits<uint32_t>::max())  // pools past 4 GiB only
    throw Error(ErrorCode::unsupported,
                fmt::format("value_cache: N * B = {} slots is more than the shader's 32-bit slots hold ({})",
                            cache.num_slots(), std::numeric_limits<uint32_t>::max()));
  if (tokens == 0) return;

  std::array<uint32_t, RESHAPE_SC_COUNT> spec{};
  spec[RESHAPE_SC_INPUT_DTYPE] = uint32_t(v.key.dtype);
  spec[RESHAPE_SC_CACHE_DTYPE] = uint32_t(cache.dtype);
  spec[RESHAPE_SC_SLOT_I64] = v.slot_mapping.dtype == DType::i64 ? 1u : 0u;
  const auto& pipeline =
      impl.pipeline(pools.address ? vk::shader_reshape_and_cache_address() : vk::shader_reshape_and_cache(), spec,
                    RESHAPE_BINDING_COUNT, sizeof(shader::ReshapeAndCachePush));

  std::array<detail::BoundView, RESHAPE_BINDING_COUNT> bound;
  bound[RESHAPE_BINDING_KEY] = impl.bind_view(v.key.memory);
  bound[RESHAPE_BINDING_VALUE] = impl.bind_view(v.value.memory);
  bound[RESHAPE_BINDING_SLOT_MAPPING] = impl.bind_view(v.slot_mapping.memory);
  bound[RESHAPE_BINDING_KEY_CACHE] = pools.key;
  bound[RESHAPE_BINDING_VALUE_CACHE] = pools.value;
  bound[RESHAPE_BINDING_STATUS] = impl.bind_view(v.status);

  // Sizes fit 32 bits: the inputs were checked against maxStorageBufferRange (< 4 GiB); pools
  // past it are addressed per block (cache_pool_access).
  const uint64_t invocations =
      uint64_t(tokens) * uint64_t(cache.num_kv_heads) * uint64_t(cache.head_size / cache.pack());
  const auto grid = detail::linear_grid(invocations, CACHE_OP_WORKGROUP);
  shader::ReshapeAndCachePush push{};
  push.key_cache_address = pools.key_address;
  push.value_cache_address = pools.value_address;
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
