// SPDX-License-Identifier: Apache-2.0
#version 450
// The KHR fragment layout of the 16x16x16 f16 product (A, B and the f32 accumulator [16 x 16]),
// the shape every vendor with VK_KHR_cooperative_matrix offers.
#extension GL_GOOGLE_include_directive : require
#define SHAPE_M 16
#define SHAPE_N 16
#define SHAPE_K 16
#include "common/fragment_layout_khr.glsl"
