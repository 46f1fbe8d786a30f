// SPDX-License-Identifier: Apache-2.0
#version 450
// Multi-head latent attention over the paged MLA cache on matrix units
// (common/mla_attention_matrix_kernel.glsl), the pools bound as storage buffers.
#extension GL_GOOGLE_include_directive : require  // glslang, which compiles the KHR kernels, wants it
#define VKP_ADDRESS 0
#include "common/mla_attention_matrix_kernel.glsl"
