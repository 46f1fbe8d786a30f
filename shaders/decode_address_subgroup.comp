// SPDX-License-Identifier: Apache-2.0
#version 450
// Decode attention over caches larger than maxStorageBufferRange (buffer device addresses),
// subgroup reductions.
#define VKP_SUBGROUP 1
#define VKP_ADDRESS 1
#include "common/decode_kernel.glsl"
