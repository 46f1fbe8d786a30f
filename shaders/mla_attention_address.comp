// SPDX-License-Identifier: Apache-2.0
#version 450
// Multi-head latent attention, the portable kernel (common/mla_attention_kernel.glsl), over MLA
// pools larger than maxStorageBufferRange (buffer device addresses).
#define VKP_ADDRESS 1
#include "common/mla_attention_kernel.glsl"
