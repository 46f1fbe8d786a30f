// SPDX-License-Identifier: Apache-2.0
#version 450
// Streams a buffer with 16-byte loads, as a decode kernel should, to measure the read
// bandwidth a Vulkan compute shader gets on this device. The XOR of what was read is written
// only when it equals an impossible key, so the loads cannot be optimised away.
#extension GL_GOOGLE_include_directive : require
#include "common/shader_interface.h"
layout(local_size_x = 256) in;
layout(push_constant) uniform PushBlock { ReadBandwidthPush pc; };
layout(set = 0, binding = 0) readonly buffer Data { uvec4 data[]; };
layout(set = 0, binding = 1) writeonly buffer Sink { uint sink[]; };

void main() {
  const uint threads = gl_NumWorkGroups.x * gl_WorkGroupSize.x;
  uvec4 acc = uvec4(0u);
  for (uint i = gl_GlobalInvocationID.x; i < pc.vec4_count; i += threads) acc ^= data[i];
  const uint x = acc.x ^ acc.y ^ acc.z ^ acc.w;
  if (x == pc.impossible) sink[0] = x;
}
