// SPDX-License-Identifier: Apache-2.0
#version 450
// reshape_and_cache for MLA with RoPE on k_pe on its way in, over pools past
// maxStorageBufferRange, written through buffer device addresses (common/mla_reshape_and_cache.glsl).
#define VKP_ADDRESS 1
#define VKP_ROTARY 1
#include "common/mla_reshape_and_cache.glsl"
