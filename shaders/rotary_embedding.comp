// SPDX-License-Identifier: Apache-2.0
#version 450
// rotary_embedding: rotates queries [T, H, D] and keys [T, Hkv, D] (strided views) in place by
// their tokens' positions (common/rotary.glsl), one tile of rows per workgroup.
#extension GL_GOOGLE_include_directive : require
#extension GL_EXT_control_flow_attributes : require

#include "common/shader_interface.h"
#include "common/convert.glsl"
#include "common/strided_rows.glsl"

layout(local_size_x = CACHE_OP_WORKGROUP) in;
layout(constant_id = ROTARY_SC_STYLE) const uint ROTARY_STYLE = ROTARY_STYLE_NEOX;
layout(constant_id = ROTARY_SC_DTYPE) const uint ROTARY_DTYPE = DT_F16;
layout(constant_id = ROTARY_SC_COS_SIN_DTYPE) const uint COS_SIN_DTYPE = DT_F32;
layout(constant_id = ROTARY_SC_POSITION_I64) const uint POSITION_I64 = 1u;
layout(constant_id = ROTARY_SC_TILE_FLOATS) const uint TILE_FLOATS = 256u;

layout(push_constant) uniform PushBlock { RotaryPush rp; };

layout(set = 0, binding = ROTARY_BINDING_QUERY) buffer Query { uint query_words[]; };
layout(set = 0, binding = ROTARY_BINDING_KEY) buffer Key { uint key_words[]; };
layout(set = 0, binding = ROTARY_BINDING_POSITIONS) readonly buffer Positions { uint position_words[]; };
layout(set = 0, binding = ROTARY_BINDING_COS_SIN) readonly buffer CosSin { uint cos_sin_words[]; };
layout(set = 0, binding = ROTARY_BINDING_STATUS) buffer Status { uint status[]; };

#include "common/rotary.glsl"

void main() {
  bool is_key;
  uint first, count;
  if (!rotary_tile_of(is_key, first, count)) return;
  rotate_rows_in_place(is_key, first, count);
}
