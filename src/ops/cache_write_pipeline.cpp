// SPDX-License-Identifier: Apache-2.0
#include "ops/cache_write_pipeline.hpp"

#include "common/shader_interface.h"
#include "embedded_shaders.hpp"

namespace vkpaged::detail {

vk::PipelineRequest cache_write_request(const CacheWritePipeline& p) {
  std::vector<uint32_t> spec(p.rotary ? RESHAPE_ROTARY_SC_COUNT : RESHAPE_SC_COUNT);
  spec[RESHAPE_SC_INPUT_DTYPE] = uint32_t(p.token_dtype);
  spec[RESHAPE_SC_CACHE_DTYPE] = uint32_t(p.cache_dtype);
  spec[RESHAPE_SC_SLOT_I64] = p.slot_i64 ? 1u : 0u;
  spec[RESHAPE_SC_LAYOUT] = uint32_t(p.layout);
  if (!p.rotary)
    return {p.address ? &vk::shader_reshape_and_cache_address() : &vk::shader_reshape_and_cache(), std::move(spec),
            RESHAPE_BINDING_COUNT, uint32_t(sizeof(shader::ReshapeAndCachePush))};
  spec[RESHAPE_SC_ROTARY_STYLE] = uint32_t(p.rotary_style);
  spec[RESHAPE_SC_COS_SIN_DTYPE] = uint32_t(p.rotary->cos_sin_dtype);
  spec[RESHAPE_SC_POSITION_I64] = p.rotary->position_i64 ? 1u : 0u;
  spec[RESHAPE_SC_TILE_FLOATS] = rotary_tiles(*p.rotary).tile_floats();
  return {p.address ? &vk::shader_reshape_and_cache_rotary_address() : &vk::shader_reshape_and_cache_rotary(),
          std::move(spec), RESHAPE_ROTARY_BINDING_COUNT, uint32_t(sizeof(shader::ReshapeAndCacheRotaryPush))};
}

}  // namespace vkpaged::detail
