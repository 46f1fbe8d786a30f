// SPDX-License-Identifier: Apache-2.0
#version 450
// gather over pools bound as storage buffers (within maxStorageBufferRange).
#define VKP_ADDRESS 0
#include "common/gather.glsl"
