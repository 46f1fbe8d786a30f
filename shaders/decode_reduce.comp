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

shared float s_reduce[WG];
shared float s_weight[WG];  // weights of one chunk of WG partitions

// Max (or sum) of every invocation's x, in every invocation.
float workgroup_combine(float x, bool take_max) {
  s_reduce[gl_LocalInvocationID.x] = x;
  barrier();
  for (uint stride = WG / 2u; stride > 0u; stride /= 2u) {
    if (gl_LocalInvocationID.x < stride) {
      const float other = s_reduce[gl_LocalInvocationID.x + stride];
      const float mine = s_reduce[gl_LocalInvocationID.x];
      s_reduce[gl_LocalInvocationID.x] = take_max ? max(mine, other) : mine + other;
    }
    barrier();
  }
  const float result = s_reduce[0];
  barrier();
  return result;
}

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

  // Partitions are spread over the invocations (a long context has many: one per invocation
  // keeps their loads in flight together instead of one after another).
  const uint row0 = (seq * pc.num_heads + head) * pc.num_partitions;
  const uint ml_base = pc.scratch_offset + pc.num_seqs * pc.num_heads * pc.num_partitions * D;
  float m = NEG_INF;
  for (uint p = first + tid; p < last; p += WG) m = max(m, scratch[ml_base + (row0 + p) * 2u]);
  m = workgroup_combine(m, true);
  float z = NEG_INF;
  if (SINKS) {
    z = sinks[pc.sinks_offset + head];
    m = max(m, z);
  }
  float part_den = 0.0;
  for (uint p = first + tid; p < last; p += WG) {
    const float mp = scratch[ml_base + (row0 + p) * 2u];
    if (mp != NEG_INF) part_den += exp(mp - m) * scratch[ml_base + (row0 + p) * 2u + 1u];
  }
  const float den = workgroup_combine(part_den, false) + (SINKS ? exp(z - m) : 0.0);
  const float inv = den > 0.0 ? 1.0 / den : 0.0;

  const uint per_word = QUERY_DTYPE == DT_F32 ? 1u : 2u;
  const uint words = D / per_word;
  float o[2][(D + 2u * WG - 1u) / (2u * WG) * 2u];  // [element of the word][word of this invocation]
  for (uint k = 0u; k < 2u; ++k)
    for (uint j = 0u; j < o[0].length(); ++j) o[k][j] = 0.0;
  for (uint chunk = first; chunk < last; chunk += WG) {
    const uint p = chunk + tid;
    const float mp = p < last ? scratch[ml_base + (row0 + p) * 2u] : NEG_INF;
    s_weight[tid] = mp == NEG_INF ? 0.0 : exp(mp - m) * inv;
    barrier();
    // Eight partitions' loads are issued before their sums; past `last` the weight is 0 and
    // the load repeats the last partition (WG is a multiple of 8).
    const uint count = min(WG, last - chunk);
    for (uint c = 0u; c < count; c += 8u)
      for (uint j = 0u; j < o[0].length(); ++j) {
        const uint i = tid + j * WG;
        if (i >= words) break;
        float v[8][2];
        for (uint k = 0u; k < 8u; ++k) {
          const uint base = pc.scratch_offset + (row0 + min(chunk + c + k, last - 1u)) * D + i * per_word;
          for (uint e = 0u; e < per_word; ++e) v[k][e] = scratch[base + e];
        }
        for (uint k = 0u; k < 8u; ++k)
          for (uint e = 0u; e < per_word; ++e) o[e][j] += s_weight[c + k] * v[k][e];
      }
    barrier();
  }
  for (uint j = 0u; j < o[0].length(); ++j) {
    const uint i = tid + j * WG;
    if (i >= words) break;
    const uint word = pc.output_offset + ((seq * pc.num_heads + head) * D) / per_word + i;
    if (QUERY_DTYPE == DT_F32) output_words[word] = floatBitsToUint(o[0][j]);
    else if (QUERY_DTYPE == DT_F16) output_words[word] = packHalf2x16(vec2(o[0][j], o[1][j]));
    else output_words[word] = f32_to_bf16_bits(o[0][j]) | (f32_to_bf16_bits(o[1][j]) << 16);
  }
  if (WRITE_LSE && tid == 0u) lse[pc.lse_offset + seq * pc.num_heads + head] = den > 0.0 ? m + log(den) : NEG_INF;
}
