// SPDX-License-Identifier: Apache-2.0
#version 450
// absmax: max |x| over a tensor (f32, f16 or bf16), for fp8 scale calibration.
//
// Grid-stride over the tensor's words, a shared-memory reduction per workgroup, then one
// atomicMax into the output. Magnitudes are compared as f32 bit patterns: for non-negative
// floats the unsigned order of the bits is the numeric order (and a NaN sorts above Inf, so a
// NaN in x gives a NaN amax rather than hiding it).
#extension GL_GOOGLE_include_directive : require

#include "common/shader_interface.h"
#include "common/convert.glsl"

layout(local_size_x = CACHE_OP_WORKGROUP) in;
layout(constant_id = ABSMAX_SC_DTYPE) const uint DTYPE = DT_F32;

const uint PER_WORD = DTYPE == DT_F32 ? 1u : 2u;

layout(push_constant) uniform PushBlock { AbsmaxPush pc; };

layout(set = 0, binding = ABSMAX_BINDING_X) readonly buffer Input { uint x_words[]; };
layout(set = 0, binding = ABSMAX_BINDING_AMAX) buffer Amax { uint amax_bits[]; };

shared uint s_max[CACHE_OP_WORKGROUP];

void main() {
  const uint tid = gl_LocalInvocationID.x;
  const uint stride = gl_NumWorkGroups.x * CACHE_OP_WORKGROUP;
  uint m = 0u;
  for (uint w = gl_WorkGroupID.x * CACHE_OP_WORKGROUP + tid; w < pc.num_words; w += stride) {
    const uint word = x_words[pc.x_offset + w];
    if (DTYPE == DT_F32) {
      m = max(m, word & 0x7fffffffu);
    } else {
      m = max(m, element_to_f32_bits(word & 0xffffu, DTYPE) & 0x7fffffffu);
      if (w * 2u + 1u < pc.num_elements) m = max(m, element_to_f32_bits(word >> 16, DTYPE) & 0x7fffffffu);
    }
  }
  s_max[tid] = m;
  barrier();
  for (uint width = CACHE_OP_WORKGROUP / 2u; width > 0u; width /= 2u) {
    if (tid < width) s_max[tid] = max(s_max[tid], s_max[tid + width]);
    barrier();
  }
  if (tid == 0u) atomicMax(amax_bits[pc.amax_offset], s_max[0]);
}
