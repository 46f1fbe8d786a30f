// SPDX-License-Identifier: Apache-2.0
#version 450
// Paged decode attention on matrix units (common/decode_coopmat_kernel.glsl), for every cache
// dtype but E4M3, which has its own module (decode_coopmat_e4m3.comp).
#define VKP_KHR 0
#define VKP_TOKEN_MAJOR 0
#define VKP_HEAD_SLICES 0
#define VKP_TIMELINE 0
#define VKP_E4M3_NAN 0
#include "common/decode_coopmat_kernel.glsl"
