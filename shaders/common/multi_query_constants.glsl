// SPDX-License-Identifier: Apache-2.0
// The specialization constants of the portable multi-query kernels (attention_kernel.glsl,
// mla_attention_kernel.glsl): attention_constants.glsl's, the ROWS = TQ * GROUP (token, head)
// rows of a workgroup, the value phase's row parts (attention_phases.glsl), and tree masks.
// Requires: VKP_SC(NAME) as attention_constants.glsl.
#ifndef VKPAGED_MULTI_QUERY_CONSTANTS_GLSL
#define VKPAGED_MULTI_QUERY_CONSTANTS_GLSL

#include "common/attention_constants.glsl"  // WG, B, GROUP, QUERY_DTYPE, CACHE_DTYPE, FEATURES
layout(constant_id = VKP_SC(ROWS)) const uint ROWS = 16u;
layout(constant_id = VKP_SC(ROW_PARTS)) const uint ROW_PARTS = 1u;
const bool TREE_MASK = (FEATURES & FEATURE_TREE_MASK) != 0u;

#endif  // VKPAGED_MULTI_QUERY_CONSTANTS_GLSL
