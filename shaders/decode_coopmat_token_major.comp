// SPDX-License-Identifier: Apache-2.0
#version 450
// The matrix kernel (common/decode_coopmat_kernel.glsl) on token-major caches (KvLayout nhd and
// hnd, the specialization constant DECODE_SC_KV_LAYOUT; the kernel's header, "Token-major
// layouts"), for every cache dtype but E4M3 (decode_coopmat_token_major_e4m3.comp). The vllm
// layout's modules (decode_coopmat.comp) are compiled without this code.
#define VKP_KHR 0
#define VKP_TOKEN_MAJOR 1
#define VKP_HEAD_SLICES 0
#define VKP_TIMELINE 0
#define VKP_E4M3_NAN 0
#include "common/decode_coopmat_kernel.glsl"
