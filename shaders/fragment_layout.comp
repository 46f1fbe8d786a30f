// SPDX-License-Identifier: Apache-2.0
#version 450
// Where the matrix kernel's fragments keep their elements (src/ops/fragment_layout.cpp):
// loads matrices whose elements are their own (row, column) codes and writes, per lane, the
// codes its components hold. decode_coopmat_kernel.glsl writes fragment components directly and is
// used only where these match the layout it assumes.
#extension GL_NV_cooperative_matrix : require
#extension GL_KHR_memory_scope_semantics : require
#extension GL_EXT_shader_explicit_arithmetic_types_float16 : require
#extension GL_EXT_shader_16bit_storage : require
#extension GL_KHR_shader_subgroup_basic : require

#include "common/shader_interface.h"

layout(local_size_x = 32) in;

// [0, 32 * FRAGMENT_SLOTS): lane l, slot i of the A operand [16 x 16] at l * FRAGMENT_SLOTS + i;
// then the B operand [16 x 8] and the f32 accumulator [16 x 8] the same way; then the three
// component counts. Slots past a count stay at FRAGMENT_UNUSED.
layout(set = 0, binding = 0) writeonly buffer Codes { uint codes[]; };

shared float16_t s_a[16 * 16];
shared float16_t s_b[16 * 8];
shared float s_c[16 * 8];

void main() {
  const uint lane = gl_LocalInvocationID.x;
  for (uint i = lane; i < 16u * 16u; i += 32u) s_a[i] = float16_t(i);         // row * 16 + column
  for (uint i = lane; i < 16u * 8u; i += 32u) s_b[i] = float16_t(i);          // row * 8 + column
  for (uint i = lane; i < 16u * 8u; i += 32u) s_c[i] = float(i);
  for (uint i = 0u; i < FRAGMENT_SLOTS; ++i) {
    codes[lane * FRAGMENT_SLOTS + i] = FRAGMENT_UNUSED;
    codes[(32u + lane) * FRAGMENT_SLOTS + i] = FRAGMENT_UNUSED;
    codes[(64u + lane) * FRAGMENT_SLOTS + i] = FRAGMENT_UNUSED;
  }
  barrier();

  fcoopmatNV<16, gl_ScopeSubgroup, 16, 16> a;
  fcoopmatNV<16, gl_ScopeSubgroup, 16, 8> b;
  fcoopmatNV<32, gl_ScopeSubgroup, 16, 8> c;
  coopMatLoadNV(a, s_a, 0u, 16u, false);
  coopMatLoadNV(b, s_b, 0u, 8u, false);
  coopMatLoadNV(c, s_c, 0u, 8u, false);
  for (int i = 0; i < a.length() && i < int(FRAGMENT_SLOTS); ++i) codes[lane * FRAGMENT_SLOTS + i] = uint(float(a[i]));
  for (int i = 0; i < b.length() && i < int(FRAGMENT_SLOTS); ++i) codes[(32u + lane) * FRAGMENT_SLOTS + i] = uint(float(b[i]));
  for (int i = 0; i < c.length() && i < int(FRAGMENT_SLOTS); ++i) codes[(64u + lane) * FRAGMENT_SLOTS + i] = uint(c[i]);
  if (lane == 0u) {
    codes[96u * FRAGMENT_SLOTS] = uint(a.length());
    codes[96u * FRAGMENT_SLOTS + 1u] = uint(b.length());
    codes[96u * FRAGMENT_SLOTS + 2u] = uint(c.length());
  }
}
