// SPDX-License-Identifier: Apache-2.0
// The specialization constants the portable attention kernels share (decode_kernel.glsl,
// attention_kernel.glsl, mla_attention_kernel.glsl), each at its kernel's own id, and the
// features of FEATURES. Requires: VKP_SC(NAME), the id of NAME in the kernel's interface
// (#define VKP_SC(name) DECODE_SC_##name; shader_interface.h, mla_interface.h).
#ifndef VKPAGED_ATTENTION_CONSTANTS_GLSL
#define VKPAGED_ATTENTION_CONSTANTS_GLSL

layout(local_size_x_id = VKP_SC(WORKGROUP)) in;
layout(constant_id = VKP_SC(BLOCK_SIZE)) const uint B = 16u;
layout(constant_id = VKP_SC(HEADS_PER_WORKGROUP)) const uint GROUP = 4u;
layout(constant_id = VKP_SC(QUERY_DTYPE)) const uint QUERY_DTYPE = DT_F16;
layout(constant_id = VKP_SC(CACHE_DTYPE)) const uint CACHE_DTYPE = DT_F16;
layout(constant_id = VKP_SC(FEATURES)) const uint FEATURES = 0u;
const uint WG = gl_WorkGroupSize.x;
#include "common/attention_features.glsl"  // ALIBI, SOFTCAP, SINKS, WINDOW, WRITE_LSE, SPLIT

#endif  // VKPAGED_ATTENTION_CONSTANTS_GLSL
