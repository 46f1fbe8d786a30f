// SPDX-License-Identifier: Apache-2.0
// Where VK_KHR_cooperative_matrix fragments keep their elements, for the product shape
// SHAPE_M x SHAPE_N x SHAPE_K with f16 A and B and an f32 accumulator (src/ops/fragment_layout_khr.cpp):
// loads matrices whose elements are their own codes (row * columns + column) and writes, for
// each lane of the first subgroup, the codes its components hold. The including shader defines
// the shape; the host runs it only where the device lists that shape.
#extension GL_KHR_cooperative_matrix : require
#extension GL_KHR_memory_scope_semantics : require
#extension GL_EXT_shader_explicit_arithmetic_types_float16 : require
#extension GL_KHR_shader_subgroup_basic : require

#include "common/fragment_layout_khr.h"

// The device's largest subgroup size (specialization constant 0): the pipeline requires full
// subgroups, and the workgroup may still hold several smaller ones.
layout(local_size_x_id = 0) in;

layout(set = 0, binding = 0) writeonly buffer Codes { uint codes[]; };

shared float16_t s_a[SHAPE_M * SHAPE_K];
shared float16_t s_b[SHAPE_K * SHAPE_N];
shared float s_c[SHAPE_M * SHAPE_N];

uint code_index(uint fragment, uint lane, uint slot) {
  return KHR_FRAGMENT_HEADER + (fragment * KHR_FRAGMENT_LANES + lane) * KHR_FRAGMENT_SLOTS + slot;
}

void main() {
  const uint tid = gl_LocalInvocationID.x;
  for (uint i = tid; i < uint(SHAPE_M * SHAPE_K); i += gl_WorkGroupSize.x) s_a[i] = float16_t(i);
  for (uint i = tid; i < uint(SHAPE_K * SHAPE_N); i += gl_WorkGroupSize.x) s_b[i] = float16_t(i);
  for (uint i = tid; i < uint(SHAPE_M * SHAPE_N); i += gl_WorkGroupSize.x) s_c[i] = float(i);
  barrier();

  coopmat<float16_t, gl_ScopeSubgroup, SHAPE_M, SHAPE_K, gl_MatrixUseA> a;
  coopmat<float16_t, gl_ScopeSubgroup, SHAPE_K, SHAPE_N, gl_MatrixUseB> b;
  coopmat<float, gl_ScopeSubgroup, SHAPE_M, SHAPE_N, gl_MatrixUseAccumulator> c;
  coopMatLoad(a, s_a, 0u, uint(SHAPE_K), gl_CooperativeMatrixLayoutRowMajor);
  coopMatLoad(b, s_b, 0u, uint(SHAPE_N), gl_CooperativeMatrixLayoutRowMajor);
  coopMatLoad(c, s_c, 0u, uint(SHAPE_N), gl_CooperativeMatrixLayoutRowMajor);
  if (gl_SubgroupID != 0u) return;

  const uint lane = gl_SubgroupInvocationID;
  if (lane >= KHR_FRAGMENT_LANES) return;
  for (uint i = 0u; i < KHR_FRAGMENT_SLOTS; ++i) {
    const int k = int(i);
    codes[code_index(0u, lane, i)] = k < a.length() ? uint(float(a[k])) : KHR_FRAGMENT_UNUSED;
    codes[code_index(1u, lane, i)] = k < b.length() ? uint(float(b[k])) : KHR_FRAGMENT_UNUSED;
    codes[code_index(2u, lane, i)] = k < c.length() ? uint(c[k]) : KHR_FRAGMENT_UNUSED;
  }
  if (lane == 0u) {
    codes[0] = gl_SubgroupSize;
    codes[1] = uint(a.length());
    codes[2] = uint(b.length());
    codes[3] = uint(c.length());
  }
}
