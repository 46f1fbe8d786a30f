// SPDX-License-Identifier: Apache-2.0
#version 450
// decode_coopmat_token_major.comp for E4M3 caches: with E4M3's NaN search compiled in.
#define VKP_KHR 0
#define VKP_TOKEN_MAJOR 1
#define VKP_HEAD_SLICES 0
#define VKP_TIMELINE 0
#define VKP_E4M3_NAN 1
#include "common/decode_coopmat_kernel.glsl"
