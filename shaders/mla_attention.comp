// SPDX-License-Identifier: Apache-2.0
#version 450
// Multi-head latent attention over the paged MLA cache, the portable kernel
// (common/mla_attention_kernel.glsl), the pools bound as storage buffers.
#define VKP_ADDRESS 0
#include "common/mla_attention_kernel.glsl"
