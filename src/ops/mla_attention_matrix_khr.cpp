// SPDX-License-Identifier: Apache-2.0
// Host side of shaders/mla_attention_matrix_khr.comp: the pipeline a plan on the MLA tensor-core
// kernel names. It takes the portable kernel's bindings, push constants, grid and merge
// (mla_attention.cpp records both); its specialization constants add the product shape and the
// value parts (common/mla_interface.h).
#include "common/mla_interface.h"
#include "embedded_shaders.hpp"
#include "ops/mla_attention_plan.hpp"

namespace vkpaged::detail {

vk::PipelineRequest mla_matrix_pipeline_request(const MlaShape& m, const AttentionChoice& c, uint32_t features) {
  std::vector<uint32_t> spec = mla_spec_constants(m, c, features, MLA_MATRIX_SC_COUNT);
  spec[MLA_MATRIX_SC_VALUE_PARTS] = c.value_parts;
  spec[MLA_MATRIX_SC_MATRIX_M] = c.product.m;
  spec[MLA_MATRIX_SC_MATRIX_N] = c.product.n;
  spec[MLA_MATRIX_SC_MATRIX_K] = c.product.k;
  return {c.address ? &vk::shader_mla_attention_matrix_address_khr() : &vk::shader_mla_attention_matrix_khr(),
          std::move(spec), ATTN_BINDING_COUNT, sizeof(shader::AttentionPush)};
}

}  // namespace vkpaged::detail
