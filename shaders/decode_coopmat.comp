#version 450
// Paged decode attention on matrix units (common/decode_coopmat_kernel.glsl).
#define VKP_TIMELINE 0
#include "common/decode_coopmat_kernel.glsl"
