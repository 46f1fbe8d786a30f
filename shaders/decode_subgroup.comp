// SPDX-License-Identifier: Apache-2.0
#version 450
// Decode attention with subgroup arithmetic for the workgroup reductions.
#define VKP_SUBGROUP 1
#define VKP_ADDRESS 0
#include "common/decode_kernel.glsl"
