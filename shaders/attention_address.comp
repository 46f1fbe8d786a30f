// SPDX-License-Identifier: Apache-2.0
#version 450
// Multi-query attention over caches larger than maxStorageBufferRange (buffer device addresses).
#define VKP_ADDRESS 1
#include "common/attention_kernel.glsl"
