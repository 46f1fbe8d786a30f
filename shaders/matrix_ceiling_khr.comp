// SPDX-License-Identifier: Apache-2.0
#version 450
// The device's cooperative-matrix ceiling (what `vkpaged bench --suite mla` divides FLOPs by):
// every subgroup multiplies the same A and B fragments ITER times into four accumulators (four
// independent chains, so that a product's latency hides behind the others), f16 A and B, f32
// accumulators, in the M x N x K shape the host picked from the device's list. A and B are all
// ones, so every element of the accumulators' sum is 4 * ITER * K, exactly: an invocation that
// holds another value counts itself in `wrong_invocations`, and the host refuses the
// measurement (src/ops/matrix_ceiling_khr.cpp).
#extension GL_KHR_cooperative_matrix : require
#extension GL_KHR_memory_scope_semantics : require
#extension GL_EXT_shader_explicit_arithmetic_types_float16 : require
#extension GL_EXT_shader_16bit_storage : require
#extension GL_KHR_shader_subgroup_basic : require

layout(local_size_x_id = 0) in;  // whole subgroups (a full-subgroup pipeline)
layout(constant_id = 1) const uint MM = 16u;
layout(constant_id = 2) const uint NN = 16u;
layout(constant_id = 3) const uint KK = 16u;
layout(constant_id = 4) const uint ITER = 1024u;
layout(constant_id = 5) const uint SLOTS = 64u;  // result slots, taken by subgroup index modulo SLOTS

layout(set = 0, binding = 0) readonly buffer Ones { float16_t ones[]; };  // A (M x K), then B (K x N)
layout(set = 0, binding = 1) writeonly buffer Result { float result[]; };  // SLOTS x M x N
layout(set = 0, binding = 2) buffer Status { uint wrong_invocations; };

#define A_MAT coopmat<float16_t, gl_ScopeSubgroup, MM, KK, gl_MatrixUseA>
#define B_MAT coopmat<float16_t, gl_ScopeSubgroup, KK, NN, gl_MatrixUseB>
#define C_MAT coopmat<float, gl_ScopeSubgroup, MM, NN, gl_MatrixUseAccumulator>

void main() {
  A_MAT a;
  B_MAT b;
  coopMatLoad(a, ones, 0u, KK, gl_CooperativeMatrixLayoutRowMajor);
  coopMatLoad(b, ones, MM * KK, NN, gl_CooperativeMatrixLayoutRowMajor);
  C_MAT c0 = C_MAT(0.0);
  C_MAT c1 = c0, c2 = c0, c3 = c0;
  for (uint i = 0u; i < ITER; ++i) {
    c0 = coopMatMulAdd(a, b, c0);
    c1 = coopMatMulAdd(a, b, c1);
    c2 = coopMatMulAdd(a, b, c2);
    c3 = coopMatMulAdd(a, b, c3);
  }
  const float expected = float(4u * ITER * KK);
  bool wrong = false;
  for (int k = 0; k < c0.length(); ++k) {
    c0[k] += c1[k] + c2[k] + c3[k];
    wrong = wrong || c0[k] != expected;
  }
  const uint subgroup = gl_WorkGroupID.x * gl_NumSubgroups + gl_SubgroupID;
  coopMatStore(c0, result, (subgroup % SLOTS) * MM * NN, NN, gl_CooperativeMatrixLayoutRowMajor);
  if (wrong) atomicAdd(wrong_invocations, 1u);
}
