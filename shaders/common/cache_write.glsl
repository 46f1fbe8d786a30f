// SPDX-License-Identifier: Apache-2.0
// What the cache writes share (reshape_and_cache.glsl, mla_reshape_and_cache.glsl): their
// first specialization constants, each at its kernel's own id, those of the rotary embedding
// fused into their VKP_ROTARY 1 modules (common/rotary.glsl; its rows are the input's), and
// the conversions of an input element to f32 bits and of f32 bits to a cache element.
// Requires: VKP_SC(NAME), the id of NAME in the kernel's interface (#define VKP_SC(name)
// RESHAPE_SC_##name; shader_interface.h, mla_interface.h); VKP_ROTARY; convert.glsl.
#ifndef VKPAGED_CACHE_WRITE_GLSL
#define VKPAGED_CACHE_WRITE_GLSL

layout(local_size_x = CACHE_OP_WORKGROUP) in;
layout(constant_id = VKP_SC(INPUT_DTYPE)) const uint INPUT_DTYPE = DT_F16;
layout(constant_id = VKP_SC(CACHE_DTYPE)) const uint CACHE_DTYPE = DT_F16;
layout(constant_id = VKP_SC(SLOT_I64)) const uint SLOT_I64 = 1u;
#include "common/cache_element.glsl"
const uint INPUT_PER_WORD = INPUT_DTYPE == DT_F32 ? 1u : 2u;

#if VKP_ROTARY
layout(constant_id = VKP_SC(ROTARY_STYLE)) const uint ROTARY_STYLE = ROTARY_STYLE_NEOX;
layout(constant_id = VKP_SC(COS_SIN_DTYPE)) const uint COS_SIN_DTYPE = DT_F32;
layout(constant_id = VKP_SC(POSITION_I64)) const uint POSITION_I64 = 1u;
layout(constant_id = VKP_SC(TILE_FLOATS)) const uint TILE_FLOATS = 256u;
const uint ROTARY_DTYPE = INPUT_DTYPE;
#endif

// Element i of a word of INPUT_DTYPE (f32, f16 or bf16) as f32 bits.
uint input_bits(uint word, uint i) {
  if (INPUT_DTYPE == DT_F32) return word;
  return element_to_f32_bits(i % 2u == 0u ? (word & 0xffffu) : (word >> 16), INPUT_DTYPE);
}

// f32 bits to the cache's element bits (fp8: scaled by inv_scale first).
uint encode(uint x, float inv_scale) {
  if (FP8) return quantize_fp8(x, inv_scale, CACHE_DTYPE);
  return f32_bits_to_float_element(x, CACHE_DTYPE);
}

#endif  // VKPAGED_CACHE_WRITE_GLSL
