// SPDX-License-Identifier: Apache-2.0
#version 450
// D = A B + C as one VK_KHR_cooperative_matrix product of the first subgroup: f16 A and B, f32 C
// and D, all 16 x 16 and row-major (src/ops/fragment_layout_khr.cpp: the check of the KHR path
// against the CPU).
#extension GL_KHR_cooperative_matrix : require
#extension GL_KHR_memory_scope_semantics : require
#extension GL_EXT_shader_explicit_arithmetic_types_float16 : require
#extension GL_EXT_shader_16bit_storage : require
#extension GL_KHR_shader_subgroup_basic : require

layout(local_size_x_id = 0) in;  // the device's largest subgroup size (full subgroups)

layout(set = 0, binding = 0) readonly buffer A { float16_t a[]; };
layout(set = 0, binding = 1) readonly buffer B { float16_t b[]; };
layout(set = 0, binding = 2) readonly buffer C { float c[]; };
layout(set = 0, binding = 3) writeonly buffer D { float d[]; };

void main() {
  if (gl_SubgroupID != 0u) return;
  coopmat<float16_t, gl_ScopeSubgroup, 16, 16, gl_MatrixUseA> ma;
  coopmat<float16_t, gl_ScopeSubgroup, 16, 16, gl_MatrixUseB> mb;
  coopmat<float, gl_ScopeSubgroup, 16, 16, gl_MatrixUseAccumulator> mc;
  coopMatLoad(ma, a, 0u, 16u, gl_CooperativeMatrixLayoutRowMajor);
  coopMatLoad(mb, b, 0u, 16u, gl_CooperativeMatrixLayoutRowMajor);
  coopMatLoad(mc, c, 0u, 16u, gl_CooperativeMatrixLayoutRowMajor);
  mc = coopMatMulAdd(ma, mb, mc);
  coopMatStore(mc, d, 0u, 16u, gl_CooperativeMatrixLayoutRowMajor);
}
