// SPDX-License-Identifier: Apache-2.0
#version 450
// reshape_and_cache for MLA with RoPE on k_pe on its way in (common/mla_reshape_and_cache.glsl).
#define VKP_ADDRESS 0
#define VKP_ROTARY 1
#include "common/mla_reshape_and_cache.glsl"
