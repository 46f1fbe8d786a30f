// SPDX-License-Identifier: Apache-2.0
#version 450
// Fills a tensor with reproducible pseudo-random values in (-1, 1) (fp8: random codes below
// magnitude 2, never NaN). For benchmarks and tests that need large inputs without an upload.
#extension GL_GOOGLE_include_directive : require
#include "common/shader_interface.h"
layout(local_size_x = 256) in;
layout(push_constant) uniform PushBlock { FillRandomPush pc; };
layout(set = 0, binding = 0) writeonly buffer Data { uint words[]; };

uint hash(uint x) {  // lowbias32 (Chris Wellons)
  x ^= x >> 16; x *= 0x7feb352du; x ^= x >> 15; x *= 0x846ca68bu; x ^= x >> 16;
  return x;
}
float unit(uint h) { return float(h >> 8) * (2.0 / 16777216.0) - 1.0; }  // (-1, 1)

void main() {
  const uint per_row = gl_NumWorkGroups.x * gl_WorkGroupSize.x;
  for (uint i = gl_GlobalInvocationID.x + gl_GlobalInvocationID.y * per_row; i < pc.words; i += per_row * gl_NumWorkGroups.y) {
    const uint h = hash(i ^ hash(pc.seed + pc.word_offset));
    uint w;
    if (pc.dtype == DT_F32) w = floatBitsToUint(unit(h));
    else if (pc.dtype == DT_F16) w = packHalf2x16(vec2(unit(h), unit(hash(h))));
    else if (pc.dtype == DT_BF16) w = (floatBitsToUint(unit(h)) >> 16) | (floatBitsToUint(unit(hash(h))) & 0xffff0000u);
    else w = h & 0xbfbfbfbfu;  // fp8: exponent field below the top half, so |v| < 2 and never NaN
    words[pc.word_offset + i] = w;
  }
}
