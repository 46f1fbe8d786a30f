// SPDX-License-Identifier: Apache-2.0
#version 450
// The KHR fragment layout of the 16x8x16 f16 product (A [16 x 16], B [16 x 8], f32 accumulator
// [16 x 8]): the shape of the NV matrix kernel, whose layout src/ops/fragment_layout_khr.cpp
// compares it with.
#extension GL_GOOGLE_include_directive : require
#define SHAPE_M 16
#define SHAPE_N 8
#define SHAPE_K 16
#include "common/fragment_layout_khr.glsl"
