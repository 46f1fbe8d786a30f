// SPDX-License-Identifier: Apache-2.0
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
#include "common/convert.glsl"
#include "common/strided_rows.glsl"
#include "common/softmax_state.glsl"
#include "common/attention_epilogue.glsl"

layout(local_size_x = 64) in;
layout(constant_id = MERGE_SC_HEAD_SIZE) const uint D = 128u;
layout(constant_id = MERGE_SC_DTYPE) const uint DTYPE = DT_F16;
layout(constant_id = MERGE_SC_WRITE_LSE) const bool WRITE_LSE = false;

layout(push_constant) uniform PushBlock { MergePush pc; };
layout(set = 0, binding = 0) readonly buffer OutputA { uint output_a[]; };
layout(set = 0, binding = 1) readonly buffer LseA { float lse_a[]; };
layout(set = 0, binding = 2) readonly buffer OutputB { uint output_b[]; };
layout(set = 0, binding = 3) readonly buffer LseB { float lse_b[]; };
layout(set = 0, binding = 4) writeonly buffer Output { uint output_words[]; };
layout(set = 0, binding = 5) writeonly buffer Lse { float lse_out[]; };

// A result's state from its LSE: the LSE is the max of a state whose sum is 1 (-inf: empty, sum
// 0); a NaN or +Inf LSE is no finite logits' and poisons the merge (NaN max).
void state_of_lse(float lse_value, out float m, out float l) {
  const bool poisoned = non_finite_bits(lse_value) && lse_value != VKP_NEG_INF;
  m = poisoned ? VKP_NAN : lse_value;
  l = lse_value == VKP_NEG_INF ? 0.0 : 1.0;
}

void main() {
  const uint seq = pc.first_seq + gl_WorkGroupID.y, head = gl_WorkGroupID.x;
  const uint row = seq * pc.num_heads + head;
  // The row's first words in the three strided outputs.
  const uint a_row = row_word(pc.output_a_rows, seq, head), b_row = row_word(pc.output_b_rows, seq, head);
  const uint out_row = row_word(pc.output_rows, seq, head);
  const float la = lse_a[pc.lse_a_offset + row];
  const float lb = lse_b[pc.lse_b_offset + row];
  float m, l, mb, lb_sum;
  state_of_lse(la, m, l);
  state_of_lse(lb, mb, lb_sum);
  const vec2 w = softmax_merge(m, l, mb, lb_sum);
  const RowFinish f = finish_row(m, l, false, 0.0);
  const uint per_word = DTYPE == DT_F32 ? 1u : 2u;
  for (uint i = gl_LocalInvocationID.x; i < D / per_word; i += gl_WorkGroupSize.x) {
    const vec4 a = unpack_word(output_a[a_row + i], DTYPE);
    const vec4 b = unpack_word(output_b[b_row + i], DTYPE);
    // An empty side's outputs are not used (they may be anything).
    const vec2 o = (la == VKP_NEG_INF ? vec2(0.0) : w.x * a.xy) + (lb == VKP_NEG_INF ? vec2(0.0) : w.y * b.xy);
    output_words[out_row + i] = pack_output(finish_output(o.x, f.factor), finish_output(o.y, f.factor), DTYPE);
  }
  if (WRITE_LSE && gl_LocalInvocationID.x == 0u) lse_out[pc.lse_offset + row] = f.lse;
}
