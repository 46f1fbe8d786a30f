// SPDX-License-Identifier: Apache-2.0
#version 450
// Whether a GLSL compiler knows GL_KHR_cooperative_matrix (scripts/khr-compiler.sh and
// cmake/ShaderCompilers.cmake compile this): a product and what shaders/*_khr.comp use besides.
#extension GL_KHR_cooperative_matrix : require
#extension GL_KHR_memory_scope_semantics : require
#extension GL_EXT_shader_explicit_arithmetic_types_float16 : require
#extension GL_EXT_shader_16bit_storage : require

layout(local_size_x = 32) in;
layout(set = 0, binding = 0) readonly buffer Inputs { float16_t inputs[]; };
layout(set = 0, binding = 1) writeonly buffer Outputs { float outputs[]; };

void main() {
  coopmat<float16_t, gl_ScopeSubgroup, 16, 16, gl_MatrixUseA> a;
  coopmat<float16_t, gl_ScopeSubgroup, 16, 8, gl_MatrixUseB> b;
  coopmat<float, gl_ScopeSubgroup, 16, 8, gl_MatrixUseAccumulator> c = coopmat<float, gl_ScopeSubgroup, 16, 8, gl_MatrixUseAccumulator>(0.0);
  coopMatLoad(a, inputs, 0u, 16u, gl_CooperativeMatrixLayoutRowMajor);
  coopMatLoad(b, inputs, 256u, 8u, gl_CooperativeMatrixLayoutRowMajor);
  c = coopMatMulAdd(a, b, c);
  for (int i = 0; i < c.length(); ++i) c[i] *= 2.0;
  coopMatStore(c, outputs, 0u, 8u, gl_CooperativeMatrixLayoutRowMajor);
}
