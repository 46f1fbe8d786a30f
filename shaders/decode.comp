// SPDX-License-Identifier: Apache-2.0
#version 450
// Decode attention with shared-memory reductions only (any Vulkan 1.2 device).
#define VKP_SUBGROUP 0
#define VKP_ADDRESS 0
#include "common/decode_kernel.glsl"
