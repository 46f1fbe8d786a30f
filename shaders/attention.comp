// SPDX-License-Identifier: Apache-2.0
#version 450
// Multi-query attention over the paged cache, the portable kernel (common/attention_kernel.glsl).
#define VKP_ADDRESS 0
#include "common/attention_kernel.glsl"
