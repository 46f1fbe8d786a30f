// SPDX-License-Identifier: Apache-2.0
#version 450
// reshape_and_cache for MLA over pools past maxStorageBufferRange, written through buffer device
// addresses (common/mla_reshape_and_cache.glsl).
#define VKP_ADDRESS 1
#define VKP_ROTARY 0
#include "common/mla_reshape_and_cache.glsl"
