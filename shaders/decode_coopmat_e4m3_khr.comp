// SPDX-License-Identifier: Apache-2.0
#version 450
// decode_coopmat_e4m3.comp through VK_KHR_cooperative_matrix: the matrix kernel with E4M3's NaN
// search compiled in (common/decode_coopmat_kernel.glsl, "fp8 NaN").
#extension GL_GOOGLE_include_directive : require
#define VKP_KHR 1
#define VKP_TOKEN_MAJOR 0
#define VKP_HEAD_SLICES 0
#define VKP_TIMELINE 0
#define VKP_E4M3_NAN 1
#include "common/decode_coopmat_kernel.glsl"
