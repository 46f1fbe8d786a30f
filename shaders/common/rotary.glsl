// SPDX-License-Identifier: Apache-2.0
// Rotary position embedding (vLLM's rotary_embedding) over tiles of rows, shared by
// rotary_embedding.comp and the fused reshape_and_cache_rotary*.comp (shader_interface.h,
// "rotary_embedding"). A row is one head of one token, [head_size] elements; its first
// rotary_dim elements rotate in pairs by the token's position p, with c = cos_sin[p][i] and
// s = cos_sin[p][rotary_dim / 2 + i]:
//   NeoX style: pair i is (i, i + rotary_dim / 2);  GPT-J style: pair i is (2i, 2i + 1);
//   x' = x c - y s,  y' = y c + x s  (in f32, rounded to the tensor's dtype).
// The elements past rotary_dim stay as they are.
//
// Pairs straddle invocations (and, for 16-bit elements, words), so a tile is rotated in two
// steps: every invocation stages the tile's rotated part in shared memory as f32, the
// workgroup waits, then each invocation writes whole words computed from the staged values.
//
// The includer declares before including: the constants ROTARY_STYLE (ROTARY_STYLE_*),
// ROTARY_DTYPE (the rows' dtype: DT_F32, DT_F16 or DT_BF16), COS_SIN_DTYPE (DT_F32 or
// ROTARY_DTYPE), POSITION_I64 and TILE_FLOATS (the shared tile: rows_per_tile * rotary_dim);
// push constants `rp` with RotaryPush's fields; and the buffers query_words[] and key_words[]
// (written), position_words[], cos_sin_words[] and status[]; and common/strided_rows.glsl. The
// queries and keys are strided views: a tile finds its rows' first words once (rotary_rows).
#ifndef VKPAGED_ROTARY_GLSL
#define VKPAGED_ROTARY_GLSL

const uint ROTARY_PER_WORD = ROTARY_DTYPE == DT_F32 ? 1u : 2u;
const uint NO_POSITION = 0xffffffffu;

shared float rotary_tile[TILE_FLOATS];
shared uint rotary_rows[ROTARY_MAX_TILE_ROWS];  // the first word of each row of the tile

// Element e of a word of ROTARY_DTYPE as f32 bits.
uint rotary_element_bits(uint word, uint e) {
  if (ROTARY_DTYPE == DT_F32) return word;
  return element_to_f32_bits(e == 0u ? (word & 0xffffu) : (word >> 16), ROTARY_DTYPE);
}

// The position of `token` (int64 as (low, high) words, or int32 sign-extended), or
// NO_POSITION when it lies outside [0, max_position).
uint rotary_position(uint token) {
  const uint low = position_words[rp.positions_offset + token * (POSITION_I64 != 0u ? 2u : 1u)];
  const uint sign_extension = (low >> 31) != 0u ? 0xffffffffu : 0u;
  const uint high = POSITION_I64 != 0u ? position_words[rp.positions_offset + token * 2u + 1u] : sign_extension;
  return high == 0u && low < rp.max_position ? low : NO_POSITION;
}

// Element i of row `pos` of the cos/sin cache [max_position, rotary_dim], as f32.
float cos_sin_at(uint pos, uint i) {
  const uint index = pos * rp.rotary_dim + i;
  if (COS_SIN_DTYPE == DT_F32) return uintBitsToFloat(cos_sin_words[rp.cos_sin_offset + index]);
  const uint w = cos_sin_words[rp.cos_sin_offset + index / 2u];
  return uintBitsToFloat(element_to_f32_bits(index % 2u == 0u ? (w & 0xffffu) : (w >> 16), COS_SIN_DTYPE));
}

// Each invocation handles ROTARY_UNROLL words of a tile at once (the host sizes tiles to about
// that many words per invocation), so that their loads are in flight together.
const uint ROTARY_UNROLL = 4u;

// Stages the first rotary_dim elements of rows [first, first + count) of the keys (is_key) or
// the queries in rotary_tile, as f32, with each row's first word in rotary_rows, and waits for
// the workgroup: every invocation calls it.
void stage_rows(bool is_key, uint first, uint count) {
  const uint heads = is_key ? rp.num_kv_heads : rp.num_heads;
  for (uint r = gl_LocalInvocationID.x; r < count; r += CACHE_OP_WORKGROUP)
    rotary_rows[r] = is_key ? row_word(rp.key_rows, (first + r) / heads, (first + r) % heads)
                            : row_word(rp.query_rows, (first + r) / heads, (first + r) % heads);
  barrier();
  const uint words = rp.rotary_dim / ROTARY_PER_WORD, total = count * words;
  for (uint base = gl_LocalInvocationID.x; base < total; base += CACHE_OP_WORKGROUP * ROTARY_UNROLL) {
    uint bits[ROTARY_UNROLL];
    [[unroll]] for (uint k = 0u; k < ROTARY_UNROLL; ++k) {
      const uint u = base + k * CACHE_OP_WORKGROUP;
      bits[k] = u >= total ? 0u : is_key ? key_words[rotary_rows[u / words] + u % words]
                                         : query_words[rotary_rows[u / words] + u % words];
    }
    [[unroll]] for (uint k = 0u; k < ROTARY_UNROLL; ++k) {
      const uint u = base + k * CACHE_OP_WORKGROUP;
      if (u >= total) break;
      const uint r = u / words, w = u % words;
      for (uint e = 0u; e < ROTARY_PER_WORD; ++e)
        rotary_tile[r * rp.rotary_dim + w * ROTARY_PER_WORD + e] = uintBitsToFloat(rotary_element_bits(bits[k], e));
    }
  }
  memoryBarrierShared();
  barrier();
}

// Element d (< rotary_dim) of staged row r rotated by position pos, in f32. `precise` keeps
// the compiler from fusing it differently in different shaders, so that the fused write and
// the two-kernel path agree bit for bit.
float rotated_element(uint r, uint d, uint pos) {
  const uint half_dim = rp.rotary_dim / 2u;
  bool first;
  uint i, partner;
  if (ROTARY_STYLE == ROTARY_STYLE_NEOX) {
    first = d < half_dim;
    i = first ? d : d - half_dim;
    partner = first ? d + half_dim : i;
  } else {
    first = (d & 1u) == 0u;
    i = d / 2u;
    partner = d ^ 1u;
  }
  const float c = cos_sin_at(pos, i), s = cos_sin_at(pos, half_dim + i);
  const float self_value = rotary_tile[r * rp.rotary_dim + d];
  const float other = rotary_tile[r * rp.rotary_dim + partner];
  precise float a = self_value * c;
  precise float b = other * s;
  precise float rotated = first ? a - b : a + b;
  return rotated;
}

// Word w of staged row r rotated, its elements rounded to ROTARY_DTYPE (nearest even).
uint rotated_word(uint r, uint w, uint pos) {
  uint bits = 0u;
  for (uint e = 0u; e < ROTARY_PER_WORD; ++e) {
    const uint x = floatBitsToUint(rotated_element(r, w * ROTARY_PER_WORD + e, pos));
    bits |= f32_bits_to_float_element(x, ROTARY_DTYPE) << (16u * e);
  }
  return bits;
}

// This workgroup's tile: query tiles first, then key tiles. False past the last tile (the
// whole workgroup returns, before any barrier).
bool rotary_tile_of(out bool is_key, out uint first, out uint count) {
  const uint tile = gl_WorkGroupID.y * rp.groups_x + gl_WorkGroupID.x;
  is_key = tile >= rp.query_tiles;
  first = (is_key ? tile - rp.query_tiles : tile) * rp.rows_per_tile;
  const uint rows = rp.num_tokens * (is_key ? rp.num_kv_heads : rp.num_heads);
  count = first < rows ? min(rp.rows_per_tile, rows - first) : 0u;
  return count > 0u;
}

// A token whose position is out of range is left as it is; the invocation that meets its
// first row's first word reports it.
void report_bad_position(uint row, uint heads, uint w) {
  if (w == 0u && row % heads == 0u) atomicOr(status[rp.status_offset], STATUS_BAD_POSITION);
}

// Rotates rows [first, first + count) of the keys or the queries in place.
void rotate_rows_in_place(bool is_key, uint first, uint count) {
  stage_rows(is_key, first, count);
  const uint heads = is_key ? rp.num_kv_heads : rp.num_heads;
  const uint words = rp.rotary_dim / ROTARY_PER_WORD;
  for (uint u = gl_LocalInvocationID.x; u < count * words; u += CACHE_OP_WORKGROUP) {
    const uint r = u / words, w = u % words, row = first + r;
    const uint pos = rotary_position(row / heads);
    if (pos == NO_POSITION) {
      report_bad_position(row, heads, w);
      continue;
    }
    const uint at = rotary_rows[r] + w;
    const uint bits = rotated_word(r, w, pos);
    if (is_key)
      key_words[at] = bits;
    else
      query_words[at] = bits;
  }
}

#endif  // VKPAGED_ROTARY_GLSL
