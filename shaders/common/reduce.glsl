// SPDX-License-Identifier: Apache-2.0
// Workgroup-wide reductions of GROUP values per invocation (one per query head), for any
// subgroup size: with VKP_SUBGROUP the subgroup does the first step, else a shared-memory
// tree. `s_reduce` must hold GROUP * gl_WorkGroupSize.x floats. Every invocation gets the result.
// Requires: GROUP (const uint), WG (const uint), shared float s_reduce[].
#ifndef VKPAGED_REDUCE_GLSL
#define VKPAGED_REDUCE_GLSL

float combine(float a, float b, bool is_max) { return is_max ? max(a, b) : a + b; }

void workgroup_reduce(inout float v[GROUP], bool is_max) {
  const uint tid = gl_LocalInvocationID.x;
#if VKP_SUBGROUP
  for (uint g = 0u; g < GROUP; ++g) {
    // is_max is the same on every invocation (the barriers below need that), so whichever
    // operation this takes, every lane runs it (tests/shaders/check_subgroup_operands.py).
    float r;
    if (is_max) r = subgroupMax(v[g]);
    else r = subgroupAdd(v[g]);
    if (subgroupElect()) s_reduce[g * WG + gl_SubgroupID] = r;
  }
  barrier();
  for (uint g = 0u; g < GROUP; ++g) {
    float r = s_reduce[g * WG];
    for (uint s = 1u; s < gl_NumSubgroups; ++s) r = combine(r, s_reduce[g * WG + s], is_max);
    v[g] = r;
  }
  barrier();
#else
  for (uint g = 0u; g < GROUP; ++g) s_reduce[g * WG + tid] = v[g];
  barrier();
  for (uint stride = WG / 2u; stride > 0u; stride >>= 1u) {
    if (tid < stride)
      for (uint g = 0u; g < GROUP; ++g)
        s_reduce[g * WG + tid] = combine(s_reduce[g * WG + tid], s_reduce[g * WG + tid + stride], is_max);
    barrier();
  }
  for (uint g = 0u; g < GROUP; ++g) v[g] = s_reduce[g * WG];
  barrier();
#endif
}

#endif
