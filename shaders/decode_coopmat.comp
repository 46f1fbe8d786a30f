#version 450
// Paged decode attention on matrix units (VK_NV_cooperative_matrix), for f16 queries and an
// f16 cache: the same contract and outputs as decode_kernel.glsl, run when a plan asks for
// DecodeKernel::matrix on a device with the extension and 32-wide subgroups (decode.cpp).
//
// Why: with a GQA group the scalar kernel spends more issue slots on the group's products than
// the memory system needs to stream the cache (bench/RESULTS.md). Here the products run on the
// matrix units.
//
// A workgroup takes one sequence, GROUP (<= 8) query heads of one kv head and one partition;
// each of its subgroups walks its own units of 16 tokens (units sub, sub + SUBGROUPS, ...)
// with its own online softmax, and the subgroups merge at the end. Per unit:
//   load    the unit's keys and values (16 tokens of one block and kv head) with 16-byte
//           loads, neighbouring lanes on neighbouring bytes, one unit ahead into registers,
//           then into the subgroup's tiles in shared memory; value slots outside [lo, hi)
//           are zeroed there (they may hold anything, even NaN, and 0 * NaN is NaN);
//   scores  S[16 tokens x 8 heads] = K[16 x D] * Q^T[D x 8] as D/8 products 16x8x8 (the key
//           tile keeps the cache's [D/8][16][8] order: each 8-dim slice is row-major 16x8);
//   softmax lane (head h = lane % 8, tokens 4*(lane/8)..+3) reads S from shared memory and
//           applies scale, soft cap, ALiBi and the masks; probabilities are rounded to f16
//           (what the product uses, and what the sum adds up);
//   values  O^T[D x 8] += V^T[D x 16] * P[16 x 8] as D/16 products 16x8x16 (value tile
//           [D][16], row-major).
// Measured on an H200 (bench/RESULTS.md): products loaded straight from the cache with
// coopMatLoad ran at under half the bandwidth; staging through shared memory is what works.
// The running max is lazy: the accumulators are rescaled only when a head's tile max passes
// its reference by more than RESCALE_SLACK (e^8 still fits f16 probabilities easily), because
// rescaling an accumulator of opaque layout means a round trip through shared memory.
// Cooperative-matrix loads from the uvec4 tiles count offsets and strides in uvec4s (8 f16).
#extension GL_GOOGLE_include_directive : require
#extension GL_NV_cooperative_matrix : require
#extension GL_KHR_memory_scope_semantics : require
#extension GL_EXT_shader_explicit_arithmetic_types_float16 : require
#extension GL_EXT_shader_16bit_storage : require
#extension GL_KHR_shader_subgroup_basic : require
#extension GL_KHR_shader_subgroup_shuffle : require
#extension GL_KHR_shader_subgroup_vote : require

#include "common/shader_interface.h"
#include "common/dtype.glsl"

layout(local_size_x_id = DECODE_SC_WORKGROUP) in;
layout(constant_id = DECODE_SC_HEAD_SIZE) const uint D = 128u;
layout(constant_id = DECODE_SC_BLOCK_SIZE) const uint B = 16u;
layout(constant_id = DECODE_SC_HEADS_PER_WORKGROUP) const uint GROUP = 8u;
layout(constant_id = DECODE_SC_FEATURES) const uint FEATURES = 0u;
// Tuning: load the next unit while computing this one (registers for a second unit), and keep
// the query's fragments in registers (else reload them from shared memory for every unit).
layout(constant_id = DECODE_SC_MATRIX_PREFETCH) const bool PREFETCH = true;
layout(constant_id = DECODE_SC_MATRIX_QUERY_REGISTERS) const bool QUERY_REGISTERS = true;

const uint WG = gl_WorkGroupSize.x;
const uint SUBGROUP = 32u;                 // the host picks this shader only for 32-wide subgroups
const uint SUBGROUPS = WG / SUBGROUP;
const uint UNIT = 16u;                     // tokens per unit
const uint HEADS = 8u;                     // N of the products; heads >= GROUP are zero
const uint KEY_CHUNKS = D / 8u;
const uint VALUE_CHUNKS = D / 16u;
const uint TILE_LOADS = D * 2u / SUBGROUP;  // uvec4 loads per lane for the keys (and again for the values) of a unit
const uint NO_BLOCK = 0xffffffffu;
const float RESCALE_SLACK = 8.0;
const bool ALIBI = (FEATURES & DECODE_FEATURE_ALIBI) != 0u;
const bool SOFTCAP = (FEATURES & DECODE_FEATURE_SOFTCAP) != 0u;
const bool SINKS = (FEATURES & DECODE_FEATURE_SINKS) != 0u;
const bool WINDOW = (FEATURES & DECODE_FEATURE_WINDOW) != 0u;
const bool WRITE_LSE = (FEATURES & DECODE_FEATURE_LSE) != 0u;
const bool SPLIT = (FEATURES & DECODE_FEATURE_SPLIT) != 0u;
#define NEG_INF uintBitsToFloat(0xff800000u)

layout(push_constant) uniform PushBlock { DecodePush pc; };


layout(set = 0, binding = DECODE_BINDING_QUERY) readonly buffer Query { uint query_words[]; };
layout(set = 0, binding = DECODE_BINDING_KEY_CACHE) readonly buffer KeyCache { uvec4 key16[]; };
layout(set = 0, binding = DECODE_BINDING_VALUE_CACHE) readonly buffer ValueCache { uvec4 value16[]; };
layout(set = 0, binding = DECODE_BINDING_BLOCK_TABLES) readonly buffer BlockTables { uint block_tables[]; };
layout(set = 0, binding = DECODE_BINDING_CONTEXT_LENS) readonly buffer ContextLens { uint context_lens[]; };
layout(set = 0, binding = DECODE_BINDING_OUTPUT) writeonly buffer Output { uint output_words[]; };
layout(set = 0, binding = DECODE_BINDING_ALIBI) readonly buffer Alibi { float alibi_slopes[]; };
layout(set = 0, binding = DECODE_BINDING_SINKS) readonly buffer Sinks { float sinks[]; };
layout(set = 0, binding = DECODE_BINDING_LSE) writeonly buffer Lse { float lse[]; };
layout(set = 0, binding = DECODE_BINDING_SCRATCH) writeonly buffer Scratch { float scratch[]; };
layout(set = 0, binding = DECODE_BINDING_STATUS) buffer Status { uint status[]; };

shared float16_t s_query[HEADS * D];                // [head][d], heads past the group zero
shared uvec4 s_key[SUBGROUPS * D * 2u];             // per subgroup [D/8][16 tokens] x 8 f16
shared uvec4 s_value[SUBGROUPS * D * 2u];           // per subgroup [D][16 tokens] as 2 x 8 f16
shared float s_scores[SUBGROUPS * 2u * UNIT * HEADS];  // per subgroup, two halves of [token][head]
shared float16_t s_prob[SUBGROUPS * UNIT * HEADS];  // per subgroup [token][head]
shared float s_chunk[SUBGROUPS * 16u * HEADS];      // per subgroup, one [16 dims][head] chunk
shared float s_max[SUBGROUPS * HEADS];
shared float s_sum[SUBGROUPS * HEADS];
shared float s_weight[SUBGROUPS * HEADS];           // merge weight of each subgroup's state
shared float s_factor[HEADS];                       // output factor per head


// Keeps the f16 halves of `w` whose tokens t, t + 1 lie in [lo, hi); zeroes the others.
uint mask_pair(uint w, uint t, uint lo, uint hi) {
  const uint keep_lo = t >= lo && t < hi ? 0x0000ffffu : 0u;
  const uint keep_hi = t + 1u >= lo && t + 1u < hi ? 0xffff0000u : 0u;
  return w & (keep_lo | keep_hi);
}

void main() {
  const uint tid = gl_LocalInvocationID.x;
  const uint sub = gl_SubgroupID;
  const uint lane = gl_SubgroupInvocationID;
  const uint seq = gl_WorkGroupID.y;
  const uint part = gl_WorkGroupID.z;
  const uint heads_per_kv = pc.num_heads / pc.num_kv_heads;
  const uint groups_per_kv = (heads_per_kv + GROUP - 1u) / GROUP;
  const uint kv_head = gl_WorkGroupID.x / groups_per_kv;
  const uint first_in_kv = (gl_WorkGroupID.x % groups_per_kv) * GROUP;
  const uint head0 = kv_head * heads_per_kv + first_in_kv;
  const uint heads = min(GROUP, heads_per_kv - first_in_kv);

  uint len = context_lens[pc.context_lens_offset + seq];
  if (len > pc.context_cap) {
    if (tid == 0u && gl_WorkGroupID.x == 0u && part == 0u) atomicOr(status[pc.status_offset], STATUS_BAD_CONTEXT_LEN);
    len = pc.context_cap;
  }
  uint lo = 0u;
  if (WINDOW && pc.sliding_window > 0u && len > pc.sliding_window) lo = len - pc.sliding_window;
  uint hi = len;
  if (SPLIT) {
    lo = max(lo, part * pc.partition_tokens);
    hi = min(hi, (part + 1u) * pc.partition_tokens);
    if (lo >= hi) return;  // decode_reduce skips partitions outside [window start, len)
  }

  for (uint i = tid; i < HEADS * D; i += WG) {
    const uint g = i / D;
    const uint q = (seq * pc.num_heads + head0 + g) * D + i % D;
    s_query[i] = g < heads ? float16_t(VKP_LOAD_ELEMENT(query_words, pc.query_offset, q, DT_F16)) : float16_t(0.0);
  }
  barrier();
  // Q^T slices [8 dims x 8 heads]: column h of slice c starts at h * D + 8c.
  fcoopmatNV<16, gl_ScopeSubgroup, 8, 8> query[QUERY_REGISTERS ? KEY_CHUNKS : 1u];
  if (QUERY_REGISTERS)
    for (uint c = 0u; c < KEY_CHUNKS; ++c) coopMatLoadNV(query[c], s_query, c * 8u, D, true);

  fcoopmatNV<32, gl_ScopeSubgroup, 16, 8> acc[VALUE_CHUNKS];  // O^T, 16 dims x 8 heads each
  for (uint j = 0u; j < VALUE_CHUNKS; ++j) acc[j] = fcoopmatNV<32, gl_ScopeSubgroup, 16, 8>(0.0);

  const uint h = lane % HEADS;              // softmax phase: this lane's head ...
  const uint t_lane = 4u * (lane / HEADS);  // ... and its first of 4 tokens of the unit
  float running_max = NEG_INF;              // reference max of head h (lazy, see above)
  float running_sum = 0.0;                  // this lane's share of head h's sum
  const float qscale = pc.scale * pc.k_scale;
  const float slope = ALIBI && h < heads ? alibi_slopes[pc.alibi_offset + head0 + h] : 0.0;
  const uint table = pc.block_tables_offset + seq * pc.max_blocks_per_seq;
  const uint scores_base = sub * UNIT * HEADS;
  const uint tile_base = sub * D * 2u;
  const uint chunk_base = sub * 16u * HEADS;
  const uint key_start = pc.key_offset / 4u;  // word offsets to uvec4s
  const uint value_start = pc.value_offset / 4u;

  // Lane loads: key uvec4 q = lane + 32i is (8-dim slice q / 16, token q % 16); value uvec4
  // q is (dim q / 2, tokens 8 (q % 2) ..+7). Both land at tile index q.
  const uint end_unit = (hi + UNIT - 1u) / UNIT;
  uint u = lo / UNIT + sub;
  uint block_now = u < end_unit ? block_tables[table + u * UNIT / B] : NO_BLOCK;
  uint block_next = u + SUBGROUPS < end_unit ? block_tables[table + (u + SUBGROUPS) * UNIT / B] : NO_BLOCK;
  uvec4 key_regs[TILE_LOADS];
  uvec4 value_regs[TILE_LOADS];
  if (PREFETCH && block_now < pc.num_blocks) {
    const uint head_block = (block_now * pc.num_kv_heads + kv_head) * D * B / 8u;
    const uint in_block = (u * UNIT) % B;
    for (uint i = 0u; i < TILE_LOADS; ++i) {
      const uint q = lane + SUBGROUP * i;
      key_regs[i] = key16[key_start + head_block + (q / 16u) * B + in_block + q % 16u];
      value_regs[i] = value16[value_start + head_block + (q / 2u) * (B / 8u) + in_block / 8u + q % 2u];
    }
  }

  for (; u < end_unit; u += SUBGROUPS) {
    const uint block = block_now;
    const uint tok0 = u * UNIT;
    const bool present = block < pc.num_blocks;
    const bool full = tok0 >= lo && tok0 + UNIT <= hi;
    if (!present && lane == 0u) atomicOr(status[pc.status_offset], STATUS_BAD_BLOCK_ID);

    if (!PREFETCH && present) {
      const uint head_block = (block * pc.num_kv_heads + kv_head) * D * B / 8u;
      const uint in_block = tok0 % B;
      for (uint i = 0u; i < TILE_LOADS; ++i) {
        const uint q = lane + SUBGROUP * i;
        key_regs[i] = key16[key_start + head_block + (q / 16u) * B + in_block + q % 16u];
        value_regs[i] = value16[value_start + head_block + (q / 2u) * (B / 8u) + in_block / 8u + q % 2u];
      }
    }
    subgroupBarrier();  // the previous unit's tiles are read
    if (present)
      for (uint i = 0u; i < TILE_LOADS; ++i) {
        const uint q = lane + SUBGROUP * i;
        s_key[tile_base + q] = key_regs[i];
        uvec4 v = value_regs[i];
        if (!full) {
          const uint t = tok0 + 8u * (q % 2u);
          v = uvec4(mask_pair(v.x, t, lo, hi), mask_pair(v.y, t + 2u, lo, hi), mask_pair(v.z, t + 4u, lo, hi),
                    mask_pair(v.w, t + 6u, lo, hi));
        }
        s_value[tile_base + q] = v;
      }
    subgroupBarrier();

    // The next unit's loads fly while this one is computed.
    block_now = block_next;
    const uint u_next = u + SUBGROUPS;
    block_next = u_next + SUBGROUPS < end_unit ? block_tables[table + (u_next + SUBGROUPS) * UNIT / B] : NO_BLOCK;
    if (PREFETCH && block_now < pc.num_blocks) {
      const uint head_block = (block_now * pc.num_kv_heads + kv_head) * D * B / 8u;
      const uint in_block = (u_next * UNIT) % B;
      for (uint i = 0u; i < TILE_LOADS; ++i) {
        const uint q = lane + SUBGROUP * i;
        key_regs[i] = key16[key_start + head_block + (q / 16u) * B + in_block + q % 16u];
        value_regs[i] = value16[value_start + head_block + (q / 2u) * (B / 8u) + in_block / 8u + q % 2u];
      }
    }
    if (!present) continue;

    // Two independent chains of products, so that each waits on half as many.
    fcoopmatNV<32, gl_ScopeSubgroup, 16, 8> scores = fcoopmatNV<32, gl_ScopeSubgroup, 16, 8>(0.0);
    fcoopmatNV<32, gl_ScopeSubgroup, 16, 8> scores_odd = fcoopmatNV<32, gl_ScopeSubgroup, 16, 8>(0.0);
    for (uint c = 0u; c < KEY_CHUNKS; c += 2u) {
      fcoopmatNV<16, gl_ScopeSubgroup, 16, 8> keys;
      fcoopmatNV<16, gl_ScopeSubgroup, 16, 8> keys_odd;
      coopMatLoadNV(keys, s_key, tile_base + c * 16u, 1u, false);
      coopMatLoadNV(keys_odd, s_key, tile_base + (c + 1u) * 16u, 1u, false);
      if (QUERY_REGISTERS) {
        scores = coopMatMulAddNV(keys, query[c], scores);
        scores_odd = coopMatMulAddNV(keys_odd, query[c + 1u], scores_odd);
      } else {
        fcoopmatNV<16, gl_ScopeSubgroup, 8, 8> q_even;
        fcoopmatNV<16, gl_ScopeSubgroup, 8, 8> q_odd;
        coopMatLoadNV(q_even, s_query, c * 8u, D, true);
        coopMatLoadNV(q_odd, s_query, (c + 1u) * 8u, D, true);
        scores = coopMatMulAddNV(keys, q_even, scores);
        scores_odd = coopMatMulAddNV(keys_odd, q_odd, scores_odd);
      }
    }
    // (Their sum is taken in the softmax phase: glslc's optimizer crashes on matrix addition.)
    coopMatStoreNV(scores, s_scores, 2u * scores_base, HEADS, false);
    coopMatStoreNV(scores_odd, s_scores, 2u * scores_base + UNIT * HEADS, HEADS, false);
    subgroupBarrier();

    float logit[4];
    float tile_max = NEG_INF;
    for (uint i = 0u; i < 4u; ++i) {
      const uint t = tok0 + t_lane + i;
      const uint at = 2u * scores_base + (t_lane + i) * HEADS + h;
      float l = (s_scores[at] + s_scores[at + UNIT * HEADS]) * qscale;
      if (SOFTCAP) l = pc.softcap * tanh(l / pc.softcap);
      if (ALIBI) l += slope * (float(t) - float(len) + 1.0);
      logit[i] = t >= lo && t < hi && h < heads ? l : NEG_INF;
      tile_max = max(tile_max, logit[i]);
    }
    tile_max = max(tile_max, subgroupShuffleXor(tile_max, 8u));
    tile_max = max(tile_max, subgroupShuffleXor(tile_max, 16u));
    const bool grow = tile_max > running_max + RESCALE_SLACK;  // also true for the first valid tile
    if (subgroupAny(grow)) {
      const float new_max = max(running_max, tile_max);
      const float alpha = running_max == NEG_INF ? 0.0 : exp(running_max - new_max);
      running_sum *= alpha;
      if (!subgroupAll(running_max == NEG_INF))  // all-zero accumulators need no rescale
        for (uint j = 0u; j < VALUE_CHUNKS; ++j) {
          coopMatStoreNV(acc[j], s_chunk, chunk_base, HEADS, false);
          subgroupBarrier();
          // Element e of [16 dims][head] belongs to head e % 8 = lane % 8 = h.
          for (uint e = lane; e < 16u * HEADS; e += SUBGROUP) s_chunk[chunk_base + e] *= alpha;
          subgroupBarrier();
          coopMatLoadNV(acc[j], s_chunk, chunk_base, HEADS, false);
          subgroupBarrier();
        }
      running_max = new_max;
    }
    for (uint i = 0u; i < 4u; ++i) {
      const float16_t p = float16_t(logit[i] == NEG_INF ? 0.0 : exp(logit[i] - running_max));
      running_sum += float(p);
      s_prob[scores_base + (t_lane + i) * HEADS + h] = p;
    }
    subgroupBarrier();
    fcoopmatNV<16, gl_ScopeSubgroup, 16, 8> probs;
    coopMatLoadNV(probs, s_prob, scores_base, HEADS, false);
    for (uint j = 0u; j < VALUE_CHUNKS; ++j) {
      fcoopmatNV<16, gl_ScopeSubgroup, 16, 16> values;
      coopMatLoadNV(values, s_value, tile_base + j * 32u, 2u, false);
      acc[j] = coopMatMulAddNV(values, probs, acc[j]);
    }
  }

  // ---- merge the subgroups' states ----
  running_sum += subgroupShuffleXor(running_sum, 8u);
  running_sum += subgroupShuffleXor(running_sum, 16u);
  if (lane < HEADS) {
    s_max[sub * HEADS + lane] = running_max;
    s_sum[sub * HEADS + lane] = running_sum;
  }
  barrier();

  const float out_scale = pc.v_scale;
  if (tid < heads) {
    const uint g = tid;
    float m = NEG_INF;
    for (uint s = 0u; s < SUBGROUPS; ++s) m = max(m, s_max[s * HEADS + g]);
    float den = 0.0;
    for (uint s = 0u; s < SUBGROUPS; ++s) {
      const float w = m == NEG_INF || s_max[s * HEADS + g] == NEG_INF ? 0.0 : exp(s_max[s * HEADS + g] - m);
      s_weight[s * HEADS + g] = w;
      den += w * s_sum[s * HEADS + g];
    }
    if (SPLIT) {
      const uint row = (seq * pc.num_heads + head0 + g) * pc.num_partitions + part;
      const uint ml = pc.scratch_offset + pc.num_seqs * pc.num_heads * pc.num_partitions * D + row * 2u;
      scratch[ml] = m;
      scratch[ml + 1u] = den;
      s_factor[g] = out_scale;
    } else {
      // Single pass: normalise (sinks join the denominator).
      float w = 1.0;
      if (SINKS) {
        const float z = sinks[pc.sinks_offset + head0 + g];
        const float mz = max(m, z);
        w = m == NEG_INF ? 0.0 : exp(m - mz);
        den = den * w + exp(z - mz);
        m = mz;
      }
      s_factor[g] = den > 0.0 ? w * out_scale / den : 0.0;
      if (WRITE_LSE) lse[pc.lse_offset + seq * pc.num_heads + head0 + g] = den > 0.0 ? m + log(den) : NEG_INF;
    }
  }

  // 16 dims at a time: the subgroups' accumulators, weighted, to the output (or scratch).
  for (uint j = 0u; j < VALUE_CHUNKS; ++j) {
    coopMatStoreNV(acc[j], s_chunk, chunk_base, HEADS, false);
    barrier();
    for (uint i = tid; i < heads * 8u; i += WG) {
      const uint g = i / 8u;
      const uint dd = 2u * (i % 8u);  // dims dd, dd + 1 of the chunk
      vec2 o = vec2(0.0);
      for (uint s = 0u; s < SUBGROUPS; ++s)
        o += s_weight[s * HEADS + g] *
             vec2(s_chunk[s * 16u * HEADS + dd * HEADS + g], s_chunk[s * 16u * HEADS + (dd + 1u) * HEADS + g]);
      o *= s_factor[g];
      const uint d = 16u * j + dd;
      if (SPLIT) {
        // scratch: partial outputs [S][H][P][D] (unnormalised), as decode_reduce reads them
        const uint row = (seq * pc.num_heads + head0 + g) * pc.num_partitions + part;
        scratch[pc.scratch_offset + row * D + d] = o.x;
        scratch[pc.scratch_offset + row * D + d + 1u] = o.y;
      } else {
        output_words[pc.output_offset + ((seq * pc.num_heads + head0 + g) * D + d) / 2u] = packHalf2x16(o);
      }
    }
    barrier();
  }
}
