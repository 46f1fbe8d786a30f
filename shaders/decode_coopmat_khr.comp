// SPDX-License-Identifier: Apache-2.0
#version 450
// Paged decode attention on matrix units through VK_KHR_cooperative_matrix: the kernel of
// decode_coopmat.comp (common/decode_coopmat_kernel.glsl) with the KHR types and calls, for
// every cache dtype but E4M3 (decode_coopmat_e4m3_khr.comp). Compiled by the KHR compiler
// (docs/toolchain.md) and run as a full-subgroup dispatch.
#extension GL_GOOGLE_include_directive : require
#define VKP_KHR 1
#define VKP_TOKEN_MAJOR 0
#define VKP_HEAD_SLICES 0
#define VKP_TIMELINE 0
#define VKP_E4M3_NAN 0
#include "common/decode_coopmat_kernel.glsl"
