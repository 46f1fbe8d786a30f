#version 450
// Merges the partitions of a split decode (decode.comp with DECODE_FEATURE_SPLIT): one
// workgroup per (query head, sequence). Each partition left an unnormalised output o_p with
// its max m_p and sum l_p; out = sum_p e^(m_p - M) o_p / (sum_p e^(m_p - M) l_p [+ e^(z - M)]).
// Sinks are counted once, here. Partitions outside [window start, len) were never written.
#extension GL_GOOGLE_include_directive : require
#include "common/shader_interface.h"
#include "common/dtype.glsl"

layout(local_size_x_id = REDUCE_SC_WORKGROUP) in;
layout(constant_id = REDUCE_SC_HEAD_SIZE) const uint D = 128u;
layout(constant_id = REDUCE_SC_QUERY_DTYPE) const uint QUERY_DTYPE = DT_F16;
layout(constant_id = REDUCE_SC_FEATURES) const uint FEATURES = 0u;
const uint WG = gl_WorkGroupSize.x;
const bool SINKS = (FEATURES & DECODE_FEATURE_SINKS) != 0u;
const bool WINDOW = (FEATURES & DECODE_FEATURE_WINDOW) != 0u;
const bool WRITE_LSE = (FEATURES & DECODE_FEATURE_LSE) != 0u;
#define NEG_INF uintBitsToFloat(0xff800000u)

layout(push_constant) uniform PushBlock { DecodePush pc; };
layout(set = 0, binding = REDUCE_BINDING_SCRATCH) readonly buffer Scratch { float scratch[]; };
layout(set = 0, binding = REDUCE_BINDING_CONTEXT_LENS) readonly buffer ContextLens { uint context_lens[]; };
layout(set = 0, binding = REDUCE_BINDING_OUTPUT) writeonly buffer Output { uint output_words[]; };
layout(set = 0, binding = REDUCE_BINDING_SINKS) readonly buffer Sinks { float sinks[]; };
layout(set = 0, binding = REDUCE_BINDING_LSE) writeonly buffer Lse { float lse[]; };

shared float s_weight[WG];

void main() {
  const uint head = gl_WorkGroupID.x;
  const uint seq = gl_WorkGroupID.y;
  const uint tid = gl_LocalInvocationID.x;

  // The same range arithmetic as the decode shader, so both agree on which partitions exist.
  uint len = min(context_lens[pc.context_lens_offset + seq], pc.context_cap);
  uint lo = 0u;
  if (WINDOW && pc.sliding_window > 0u && len > pc.sliding_window) lo = len - pc.sliding_window;
  const uint first = lo / pc.partition_tokens;
  const uint last = len == 0u ? first : (len - 1u) / pc.partition_tokens + 1u;  // exclusive

  const uint row0 = (seq * pc.num_heads + head) * pc.num_partitions;
  const uint ml_base = pc.scratch_offset + pc.num_seqs * pc.num_heads * pc.num_partitions * D;
  float m = NEG_INF;
  for (uint p = first; p < last; ++p) m = max(m, scratch[ml_base + (row0 + p) * 2u]);
  float z = NEG_INF;
  if (SINKS) {
    z = sinks[pc.sinks_offset + head];
    m = max(m, z);
  }
  float den = SINKS ? exp(z - m) : 0.0;
  for (uint p = first; p < last; ++p) {
    const float mp = scratch[ml_base + (row0 + p) * 2u];
    if (mp != NEG_INF) den += exp(mp - m) * scratch[ml_base + (row0 + p) * 2u + 1u];
  }
  const float inv = den > 0.0 ? 1.0 / den : 0.0;

  const uint per_word = QUERY_DTYPE == DT_F32 ? 1u : 2u;
  for (uint i = tid; i < D / per_word; i += WG) {
    float o[2] = float[2](0.0, 0.0);
    for (uint p = first; p < last; ++p) {
      const float mp = scratch[ml_base + (row0 + p) * 2u];
      if (mp == NEG_INF) continue;
      const float w = exp(mp - m) * inv;
      for (uint k = 0u; k < per_word; ++k) o[k] += w * scratch[pc.scratch_offset + (row0 + p) * D + i * per_word + k];
    }
    const uint word = pc.output_offset + ((seq * pc.num_heads + head) * D) / per_word + i;
    if (QUERY_DTYPE == DT_F32) output_words[word] = floatBitsToUint(o[0]);
    else if (QUERY_DTYPE == DT_F16) output_words[word] = packHalf2x16(vec2(o[0], o[1]));
    else output_words[word] = f32_to_bf16_bits(o[0]) | (f32_to_bf16_bits(o[1]) << 16);
  }
  if (WRITE_LSE && tid == 0u) lse[pc.lse_offset + seq * pc.num_heads + head] = den > 0.0 ? m + log(den) : NEG_INF;
}
