// SPDX-License-Identifier: Apache-2.0
#version 450
// Multi-head latent attention on matrix units (common/mla_attention_matrix_kernel.glsl) over MLA
// pools larger than maxStorageBufferRange (buffer device addresses).
#extension GL_GOOGLE_include_directive : require  // glslang, which compiles the KHR kernels, wants it
#define VKP_ADDRESS 1
#include "common/mla_attention_matrix_kernel.glsl"
