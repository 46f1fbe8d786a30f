// SPDX-License-Identifier: Apache-2.0
#version 450
// Decode attention with packed f16 arithmetic where the plan asks for it (VKPAGED_DECODE_TUNE's
// f16math; devices with shaderFloat16), shared-memory reductions.
#define VKP_SUBGROUP 0
#define VKP_ADDRESS 0
#define VKP_F16_MATH 1
#include "common/decode_kernel.glsl"
