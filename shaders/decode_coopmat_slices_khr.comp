// SPDX-License-Identifier: Apache-2.0
#version 450
// decode_coopmat_slices.comp through VK_KHR_cooperative_matrix (docs/toolchain.md).
#extension GL_GOOGLE_include_directive : require
#define VKP_KHR 1
#define VKP_TOKEN_MAJOR 0
#define VKP_HEAD_SLICES 1
#define VKP_TIMELINE 0
#define VKP_E4M3_NAN 0
#include "common/decode_coopmat_kernel.glsl"
