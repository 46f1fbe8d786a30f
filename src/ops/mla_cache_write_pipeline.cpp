// SPDX-License-Identifier: Apache-2.0
#include "ops/mla_cache_write_pipeline.hpp"

#include "common/mla_interface.h"
#include "embedded_shaders.hpp"

namespace vkpaged::detail {

vk::PipelineRequest mla_cache_write_request(const MlaCacheWritePipeline& p) {
  std::vector<uint32_t> spec(p.rope ? MLA_RESHAPE_ROPE_SC_COUNT : MLA_RESHAPE_SC_COUNT);
  spec[MLA_RESHAPE_SC_INPUT_DTYPE] = uint32_t(p.token_dtype);
  spec[MLA_RESHAPE_SC_CACHE_DTYPE] = uint32_t(p.cache_dtype);
  spec[MLA_RESHAPE_SC_SLOT_I64] = p.slot_i64 ? 1u : 0u;
  spec[MLA_RESHAPE_SC_TWO_POOLS] = p.two_pools ? 1u : 0u;
  if (!p.rope)
    return {p.address ? &vk::shader_mla_reshape_and_cache_address() : &vk::shader_mla_reshape_and_cache(),
            std::move(spec), MLA_RESHAPE_BINDING_COUNT, uint32_t(sizeof(shader::MlaReshapePush))};
  spec[MLA_RESHAPE_SC_ROTARY_STYLE] = uint32_t(p.rope_style);
  spec[MLA_RESHAPE_SC_COS_SIN_DTYPE] = uint32_t(p.rope->cos_sin_dtype);
  spec[MLA_RESHAPE_SC_POSITION_I64] = p.rope->position_i64 ? 1u : 0u;
  spec[MLA_RESHAPE_SC_TILE_FLOATS] = rotary_tiles(*p.rope).tile_floats();  // key tiles only: no query
  return {p.address ? &vk::shader_mla_reshape_and_cache_rope_address() : &vk::shader_mla_reshape_and_cache_rope(),
          std::move(spec), MLA_RESHAPE_ROPE_BINDING_COUNT,
          uint32_t(sizeof(shader::MlaReshapePush) + sizeof(shader::RotaryPush))};
}

}  // namespace vkpaged::detail
