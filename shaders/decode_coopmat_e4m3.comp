// SPDX-License-Identifier: Apache-2.0
#version 450
// Paged decode attention on matrix units for E4M3 caches: the same kernel with E4M3's NaN
// search compiled in (common/decode_coopmat_kernel.glsl, "fp8 NaN"), which the other dtypes'
// module goes without.
#define VKP_KHR 0
#define VKP_TOKEN_MAJOR 0
#define VKP_HEAD_SLICES 0
#define VKP_TIMELINE 0
#define VKP_E4M3_NAN 1
#include "common/decode_coopmat_kernel.glsl"
