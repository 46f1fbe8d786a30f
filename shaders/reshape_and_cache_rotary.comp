// SPDX-License-Identifier: Apache-2.0
#version 450
// reshape_and_cache with rotary embedding of the keys on their way into the cache (and of the
// queries in place), over pools bound as storage buffers (within maxStorageBufferRange).
#define VKP_ADDRESS 0
#define VKP_ROTARY 1
#include "common/reshape_and_cache.glsl"
