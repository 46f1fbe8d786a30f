#version 450
// Merges two attention results over disjoint key sets (cascade attention: a shared prefix
// attended once, plus each sequence's own suffix): with m = max(lse_a, lse_b),
// out = (e^(lse_a - m) o_a + e^(lse_b - m) o_b) / (e^(lse_a - m) + e^(lse_b - m)) and
// lse = m + log(e^(lse_a - m) + e^(lse_b - m)). An empty side has lse = -inf: weight 0, its
// output not read. Non-finite states are not hidden (contract, Decode step 9): a NaN or +Inf
// LSE makes the row's outputs and LSE NaN; a NaN or infinite output element its merged element.
// One workgroup per (head, sequence); sequences past 65535 come in further dispatches.
#extension GL_GOOGLE_include_directive : require
#include "common/shader_interface.h"
#include "common/dtype.glsl"
#include "common/non_finite.glsl"

layout(local_size_x = 64) in;
layout(constant_id = MERGE_SC_HEAD_SIZE) const uint D = 128u;
layout(constant_id = MERGE_SC_DTYPE) const uint DTYPE = DT_F16;
layout(constant_id = MERGE_SC_WRITE_LSE) const bool WRITE_LSE = false;
#define NEG_INF uintBitsToFloat(0xff800000u)

layout(push_constant) uniform PushBlock { MergePush pc; };
layout(set = 0, binding = 0) readonly buffer OutputA { uint output_a[]; };
layout(set = 0, binding = 1) readonly buffer LseA { float lse_a[]; };
layout(set = 0, binding = 2) readonly buffer OutputB { uint output_b[]; };
layout(set = 0, binding = 3) readonly buffer LseB { float lse_b[]; };
layout(set = 0, binding = 4) writeonly buffer Output { uint output_words[]; };
layout(set = 0, binding = 5) writeonly buffer Lse { float lse_out[]; };

void main() {
  const uint row = (pc.first_seq + gl_WorkGroupID.y) * pc.num_heads + gl_WorkGroupID.x;
  const float la = lse_a[pc.lse_a_offset + row];
  const float lb = lse_b[pc.lse_b_offset + row];
  const bool poisoned = (non_finite(la) && la != NEG_INF) || (non_finite(lb) && lb != NEG_INF);
  const float m = max(la, lb);
  const float wa = la == NEG_INF ? 0.0 : exp(la - m);
  const float wb = lb == NEG_INF ? 0.0 : exp(lb - m);
  const float den = wa + wb;
  const float fa = poisoned ? VKP_QUIET_NAN : den > 0.0 ? wa / den : 0.0;
  const float fb = poisoned ? VKP_QUIET_NAN : den > 0.0 ? wb / den : 0.0;
  const uint per_word = DTYPE == DT_F32 ? 1u : 2u;
  for (uint i = gl_LocalInvocationID.x; i < D / per_word; i += gl_WorkGroupSize.x) {
    const uint w = row * D / per_word + i;
    const vec4 a = unpack_word(output_a[pc.output_a_offset + w], DTYPE);
    const vec4 b = unpack_word(output_b[pc.output_b_offset + w], DTYPE);
    vec2 o = (la == NEG_INF ? vec2(0.0) : fa * a.xy) + (lb == NEG_INF ? vec2(0.0) : fb * b.xy);
    o = vec2(nan_if_non_finite(o.x), nan_if_non_finite(o.y));
    uint word;
    if (DTYPE == DT_F32) word = floatBitsToUint(o.x);
    else if (DTYPE == DT_F16) word = packHalf2x16(o);
    else word = f32_to_bf16_bits(o.x) | (f32_to_bf16_bits(o.y) << 16);
    output_words[pc.output_offset + w] = word;
  }
  if (WRITE_LSE && gl_LocalInvocationID.x == 0u)
    lse_out[pc.lse_offset + row] = poisoned ? VKP_QUIET_NAN : den > 0.0 ? m + log(den) : NEG_INF;
}
