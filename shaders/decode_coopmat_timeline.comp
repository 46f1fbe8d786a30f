// SPDX-License-Identifier: Apache-2.0
#version 450
// The matrix kernel that also writes when each subgroup passed a few points (a timeline for
// kernel work: DecodeOptions::timeline, `vkpaged bench --timeline DIR`, scripts/decode_timeline.py).
// One module for every cache dtype, E4M3's NaN search included.
#define VKP_KHR 0
#define VKP_TOKEN_MAJOR 0
#define VKP_HEAD_SLICES 0
#define VKP_TIMELINE 1
#define VKP_E4M3_NAN 1
#include "common/decode_coopmat_kernel.glsl"
