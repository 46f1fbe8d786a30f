// SPDX-License-Identifier: Apache-2.0
#version 450
// The matrix kernel (common/decode_coopmat_kernel.glsl) with head slices: a GQA group of more
// than 8 heads (up to 8 x DECODE_SC_MATRIX_HEAD_SLICES) in one workgroup, whose subgroups take 8
// heads each and read the group's keys and values once (the kernel's header, "Head slices"), for
// every cache dtype but E4M3 (decode_coopmat_slices_e4m3.comp); the vllm layout. The modules
// without head slices are compiled without this code.
#define VKP_KHR 0
#define VKP_TOKEN_MAJOR 0
#define VKP_HEAD_SLICES 1
#define VKP_TIMELINE 0
#define VKP_E4M3_NAN 0
#include "common/decode_coopmat_kernel.glsl"
