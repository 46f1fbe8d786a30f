// SPDX-License-Identifier: Apache-2.0
#version 450
// Decode attention over caches larger than maxStorageBufferRange (buffer device addresses),
// shared-memory reductions.
#define VKP_SUBGROUP 0
#define VKP_ADDRESS 1
#include "common/decode_kernel.glsl"
