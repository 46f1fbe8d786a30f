// SPDX-License-Identifier: Apache-2.0
#version 450
// reshape_and_cache for MLA: kv_c and k_pe into the MLA pools (common/mla_reshape_and_cache.glsl).
#define VKP_ADDRESS 0
#define VKP_ROTARY 0
#include "common/mla_reshape_and_cache.glsl"
