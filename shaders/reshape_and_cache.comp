// SPDX-License-Identifier: Apache-2.0
#version 450
// reshape_and_cache over pools bound as storage buffers (within maxStorageBufferRange).
#define VKP_ADDRESS 0
#define VKP_ROTARY 0
#include "common/reshape_and_cache.glsl"
