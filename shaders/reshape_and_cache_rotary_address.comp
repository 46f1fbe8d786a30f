// SPDX-License-Identifier: Apache-2.0
#version 450
// reshape_and_cache with rotary embedding of the keys on their way into the cache (and of the
// queries in place), over pools past maxStorageBufferRange, written through buffer device addresses.
#define VKP_ADDRESS 1
#define VKP_ROTARY 1
#include "common/reshape_and_cache.glsl"
