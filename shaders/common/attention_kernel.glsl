// SPDX-License-Identifier: Apache-2.0
// Multi-query attention over the paged cache (docs/contract.md, "Multi-query attention"): the
// portable kernel, flash-attention style, with no subgroup operations and no assumption about
// the subgroup size.
//
// A workgroup takes one request, a tile of TQ of its new query tokens and GROUP query heads of
// one kv head: ROWS = TQ * GROUP (token, head) rows, so each key and value read serves every
// head of the GQA group and every token of the tile. It walks the tile's key range
// (attention_range.glsl: whole key tiles above the causal diagonal and below the window are
// never visited) in key tiles of WG positions:
//   score phase:   invocation i takes position tile + i, reads its key once in 16-byte chunks
//                  and scores it against every row's query (held in shared memory, scaled);
//   softmax phase: LANES invocations per row find the tile's max, rescale the row's running
//                  state and turn the logits into probabilities (-1: not attended);
//   value phase:   invocation (row part, dim lane) owns ROWS / ROW_PARTS rows of some dims and
//                  adds p * v for every position, each value read once per row part.
// Split (FEATURE_SPLIT): workgroup z takes partition z of the key positions and writes its
// rows' unnormalised value sums with their max and sum to the scratch for partition_merge.comp;
// otherwise the rows are finished here (attention_epilogue.glsl).
#extension GL_GOOGLE_include_directive : require
#extension GL_EXT_control_flow_attributes : require
#include "common/address_extensions.glsl"

#include "common/shader_interface.h"
#include "common/dtype.glsl"
#include "common/convert.glsl"
#include "common/kv_layout.glsl"
#include "common/strided_rows.glsl"

#define VKP_SC(name) ATTN_SC_##name
#include "common/multi_query_constants.glsl"  // WG, B, GROUP, ROWS, ROW_PARTS, dtypes, FEATURES
layout(constant_id = ATTN_SC_HEAD_SIZE) const uint D = 128u;
layout(constant_id = ATTN_SC_KV_LAYOUT) const uint KV_LAYOUT = KV_LAYOUT_VLLM;

#include "common/cache_element.glsl"
const uint TK = WG;             // key positions per tile: one per invocation in the score phase
const uint DK = D;              // key and value widths (attention_phases.glsl; MLA's differ)
const uint DV = D;
const uint KEY_CHUNKS = D / X;  // 16-byte key chunks per position

layout(push_constant) uniform PushBlock { AttentionPush pc; };

// Bytes of one block of one pool: Hkv * D * B elements, a multiple of 16; the host keeps it
// within 32 bits.
uint block_bytes() { return pc.num_kv_heads * D * B * CACHE_BYTES; }
#if VKP_ADDRESS
#include "common/address.glsl"
layout(buffer_reference, std430, buffer_reference_align = 16) readonly buffer Words16 { uvec4 v[]; };
layout(buffer_reference, std430, buffer_reference_align = 4) readonly buffer Words4 { uint v[]; };
// Each block from its own 64-bit start: indices inside one block fit 32 bits. The addresses'
// low words travel in the offsets' words (shader_interface.h, AttentionPush).
#define KEY16(block, i) Words16(address_of_block(uvec2(pc.key_offset, pc.key_address_high), block, block_bytes())).v[i]
#define VALUE4(block, i) Words4(address_of_block(uvec2(pc.value_offset, pc.value_address_high), block, block_bytes())).v[i]
#else
layout(set = 0, binding = ATTN_BINDING_KEY_CACHE) readonly buffer KeyCache { uvec4 key16[]; };
layout(set = 0, binding = ATTN_BINDING_VALUE_CACHE) readonly buffer ValueCache { uint value4[]; };
#define KEY16(block, i) key16[pc.key_offset / 4u + (block) * (block_bytes() / 16u) + (i)]
#define VALUE4(block, i) value4[pc.value_offset + (block) * (block_bytes() / 4u) + (i)]
#endif
#define VKP_BINDING(name) ATTN_BINDING_##name
#include "common/attention_bindings.glsl"
layout(set = 0, binding = ATTN_BINDING_QUERY_STARTS) readonly buffer QueryStarts { uint query_starts[]; };
layout(set = 0, binding = ATTN_BINDING_SCRATCH) writeonly buffer Scratch { float scratch[]; };
layout(set = 0, binding = ATTN_BINDING_TREE_MASK) readonly buffer TreeMask { uint tree_mask_words[]; };

uint query_start_at(uint s) { return query_starts[pc.query_starts_offset + s]; }

#include "common/softmax_state.glsl"
#include "common/attention_range.glsl"

// vec4s, so that one shared load feeds four products (a scalar load per product would bound
// the phases by shared-memory issue rather than arithmetic on NVIDIA).
shared vec4 s_query[ROWS * D / 4];   // the rows' scaled queries, 4 dims a vec4; at the end their outputs
shared vec4 s_score[ROWS * TK / 4];  // the tile's logits, then probabilities (-1: not attended), 4 positions a vec4
float score(uint r, uint c) { return s_score[(r * TK + c) / 4u][c % 4u]; }
void set_score(uint r, uint c, float x) { s_score[(r * TK + c) / 4u][c % 4u] = x; }

#define VKP_MASK_PARTIALS s_key_block
#include "common/attention_phases.glsl"

// Value element (kv head g, dim d, in-block offset o) of `block`, any layout.
float value_element(uint block, uint g, uint d, uint o) {
  const uint e = kv_value_offset(KV_LAYOUT, pc.num_kv_heads, D, B, X, g, d, o);
  return unpack_word(VALUE4(block, e / PER_WORD), CACHE_DTYPE)[e % PER_WORD];
}

// Dims 4i .. 4i + 3 of a 16-byte key chunk (X = 4, 8 or 16 elements).
vec4 key_quad(uvec4 w, uint i) {
  if (PER_WORD == 1u) return uintBitsToFloat(w);
  if (PER_WORD == 2u) return vec4(unpack_word(w[2u * i], CACHE_DTYPE).xy, unpack_word(w[2u * i + 1u], CACHE_DTYPE).xy);
  return unpack_word(w[i], CACHE_DTYPE);
}

void main() {
  const uint tid = gl_LocalInvocationID.x;
  HeadGroup hg;
  AttentionTile tile;
  if (!attention_workgroup(pc.num_kv_heads, hg, tile)) return;
  const KeyRange span = tile.span;
  load_queries();

  // Softmax phase: this invocation's row's running max and its share of the row's sum.
  float row_max = VKP_NEG_INF;
  float row_sum = 0.0;
  bool row_poisoned = false;
  // Value phase: rows part + ROW_PARTS * k and dims dim_lane + DIM_LANES * i.
  const uint row_part = tid / DIM_LANES;
  const uint dim_lane = tid % DIM_LANES;

  const uint table = pc.block_tables_offset + tile.request * pc.max_blocks_per_seq;
  for (uint key_tile = span.lo; key_tile < span.hi; key_tile += TK) {
    // ---- score phase: position key_tile + tid against every row ----
    const uint t = key_tile + tid;
    const uint block = key_block(table, t, span.hi);
    s_key_block[tid] = block;
    barrier();  // the queries (first tile), the slopes and the mask base are in place
    float dots[ROWS];
    for (uint r = 0u; r < ROWS; ++r) dots[r] = 0.0;
    if (block != NO_BLOCK) {
      const uint o = t % B;
      for (uint c = 0u; c < KEY_CHUNKS; ++c) {
        const uvec4 w = KEY16(block, kv_key_offset(KV_LAYOUT, pc.num_kv_heads, D, B, X, hg.kv_head, c * X, o) / X);
        for (uint i = 0u; i < X / 4u; ++i) {
          const vec4 k = key_quad(w, i);
          const uint quad = (c * X) / 4u + i;
          for (uint r = 0u; r < ROWS; ++r) dots[r] += dot(s_query[r * (D / 4u) + quad], k);
        }
      }
    }
    for (uint r = 0u; r < ROWS; ++r)
      set_score(r, tid, block != NO_BLOCK && row_valid(r) ? row_logit(tile, r, t, dots[r]) : VKP_NEG_INF);
    barrier();

    softmax_phase(row_max, row_sum, row_poisoned);

    // ---- value phase: p * v over the tile's positions, four at a time (positions past the
    // tile's end have no block and p = -1) ----
    const uint quads = (min(TK, span.hi - key_tile) + 3u) / 4u;
    for (uint c4 = 0u; c4 < quads; ++c4) {
      const uvec4 vblock = uvec4(s_key_block[4u * c4], s_key_block[4u * c4 + 1u], s_key_block[4u * c4 + 2u],
                                 s_key_block[4u * c4 + 3u]);
      if (all(equal(vblock, uvec4(NO_BLOCK)))) continue;
      vec4 p[ROWS_PER_INVOCATION];
      for (uint k = 0u; k < ROWS_PER_INVOCATION; ++k) p[k] = s_score[((row_part + ROW_PARTS * k) * TK) / 4u + c4];
      for (uint i = 0u; i < DIMS_PER_INVOCATION; ++i) {
        const uint d = dim_lane + DIM_LANES * i;
        if (d >= D) break;
        vec4 v = vec4(0.0);
        for (uint j = 0u; j < 4u; ++j)
          if (vblock[j] != NO_BLOCK) v[j] = value_element(vblock[j], hg.kv_head, d, (key_tile + 4u * c4 + j) % B);
        for (uint k = 0u; k < ROWS_PER_INVOCATION; ++k) {
          // Only attended positions: a hidden one may hold anything (a garbage slot, or a value
          // another row sees), and 0 * Inf would make NaN.
          const vec4 pv = mix(vec4(0.0), p[k] * v, greaterThanEqual(p[k], vec4(0.0)));
          acc[i * ROWS_PER_INVOCATION + k] += (pv.x + pv.y) + (pv.z + pv.w);
        }
      }
    }
    barrier();
  }
  finish_rows(gl_WorkGroupID.z, row_max, row_sum, row_poisoned);
}
