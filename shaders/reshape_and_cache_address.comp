#version 450
// reshape_and_cache over pools past maxStorageBufferRange, written through buffer device addresses.
#define VKP_ADDRESS 1
#include "common/reshape_and_cache.glsl"
