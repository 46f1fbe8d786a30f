// SPDX-License-Identifier: Apache-2.0
#version 450
// reshape_and_cache over pools past maxStorageBufferRange, written through buffer device addresses.
#define VKP_ADDRESS 1
#define VKP_ROTARY 0
#include "common/reshape_and_cache.glsl"
