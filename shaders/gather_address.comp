// SPDX-License-Identifier: Apache-2.0
#version 450
// gather over pools past maxStorageBufferRange, read through buffer device addresses.
#define VKP_ADDRESS 1
#include "common/gather.glsl"
