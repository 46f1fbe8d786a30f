// SPDX-License-Identifier: Apache-2.0
// Staging for the matrix attention kernel (attention_matrix_khr.comp): one key tile's keys and
// values read from the paged cache in 16-byte chunks (any layout) and written to shared memory
// as f16, fp8 converted on the way and bf16 kept raw for a later conversion scaled into f16's
// range. Positions outside the workgroup's key range are zeros, never read.
// The elements' conversions and the bf16 tiles' conversion are common/matrix_f16_elements.glsl's.
// Requires, from the includer: the cache's constants (cache_element.glsl: X, FP8, PER_WORD,
// ELEMENT_BITS, ELEMENT_MASK), CACHE_DTYPE, D, DPAD, DS, TS, TK, B, WG, BF16_CACHE,
// VALUE_COLUMNS, NO_BLOCK, the shared `uvec4 s_mem[]` with K_BASE and V_BASE, KEY16, VALUE16 and
// VALUE4, the push constants `pc`, `block_tables[]`, `status[]`, and the globals g_span, g_table
// and g_kv_head.
#ifndef VKPAGED_ATTENTION_MATRIX_STAGING_GLSL
#define VKPAGED_ATTENTION_MATRIX_STAGING_GLSL

#include "common/matrix_f16_elements.glsl"

// ---- staging ----

// The physical block of position t of the request (NO_BLOCK, flagged, for an id past N).
uint block_at(uint t) {
  const uint block = block_tables[g_table + t / B];
  if (block >= pc.num_blocks) {
    atomicOr(status[pc.status_offset], STATUS_BAD_BLOCK_ID);
    return NO_BLOCK;
  }
  return block;
}

bool in_span(uint t) { return t >= g_span.lo && t < g_span.hi; }

// A tile's chunks pass through registers: loaded (load_rows, load_value_columns), then stored to
// shared memory (store_rows, store_value_columns). The kernel loads the next tile's right after a
// tile's staging barrier, so that its loads are in flight while it computes that tile. Within a
// load, an invocation looks up all its chunks' blocks, then issues all its chunks' loads: loads
// that do not wait on one another can all be in flight at once.
// Chunks per invocation and tile, of keys or of values, as rows or as columns alike (TK and DPAD
// are multiples of X).
const uint CHUNK_LOADS = (TK * (DPAD / X) + WG - 1u) / WG;

// Keys [TK][DS] and, in the nhd and hnd layouts, values [TK][DS]: a chunk holds X dims of one
// position (zeros for positions outside the span and dims past D).
const uint ROW_CHUNKS = DPAD / X;  // per position; the ones past D are zeros
void load_rows(uint tile, bool values, out uvec4 raw[CHUNK_LOADS]) {
  uint block[CHUNK_LOADS];
  [[unroll]] for (uint k = 0u; k < CHUNK_LOADS; ++k) {
    const uint i = gl_LocalInvocationID.x + k * WG;
    const uint t = tile + i / ROW_CHUNKS;
    block[k] = NO_BLOCK;
    if (i < TK * ROW_CHUNKS && (i % ROW_CHUNKS) * X < D && in_span(t)) block[k] = block_at(t);
  }
  [[unroll]] for (uint k = 0u; k < CHUNK_LOADS; ++k) {
    const uint i = gl_LocalInvocationID.x + k * WG;
    const uint c = i % ROW_CHUNKS;
    const uint o = (tile + i / ROW_CHUNKS) % B;
    raw[k] = uvec4(0u);
    if (block[k] != NO_BLOCK)
      raw[k] = values ? VALUE16(block[k], kv_value_offset(KV_LAYOUT, pc.num_kv_heads, D, B, X, g_kv_head, c * X, o) / X)
                      : KEY16(block[k], kv_key_offset(KV_LAYOUT, pc.num_kv_heads, D, B, X, g_kv_head, c * X, o) / X);
  }
}
// Returns the values' non-finite test in `bad` and raises `largest` (bf16) for the pool.
void store_rows(bool values, uvec4 raw[CHUNK_LOADS], inout bool bad, inout uint largest) {
  [[unroll]] for (uint k = 0u; k < CHUNK_LOADS; ++k) {
    const uint i = gl_LocalInvocationID.x + k * WG;
    if (i >= TK * ROW_CHUNKS) continue;
    const uint tl = i / ROW_CHUNKS;
    const uint c = i % ROW_CHUNKS;
    if (BF16_CACHE) largest = max(largest, bf16_chunk_largest(raw[k]));
    const bool not_finite = store_chunk((values ? V_BASE : K_BASE) + (tl * DS + c * X) / 8u, raw[k]);
    if (values && !BF16_CACHE) bad = bad || not_finite;  // bf16: tested once converted
  }
}

// f16 bits (raw bf16 bits for a bf16 cache) of value element (dim d, position t), read alone.
uint value_element_bits(uint block, uint d, uint t) {
  const uint e = kv_value_offset(KV_LAYOUT, pc.num_kv_heads, D, B, X, g_kv_head, d, t % B);
  const uint bits = (VALUE4(block, e / PER_WORD) >> (ELEMENT_BITS * (e % PER_WORD))) & ELEMENT_MASK;
  return FP8 ? fp8_to_f16_bits(bits) : bits;
}

// Element j (< X) of two chunks of f16 (fp8 caches: X = 16 in lo and hi) set to `bits`.
void set_half(inout uvec4 lo, inout uvec4 hi, uint j, uint bits) {
  const uint shift = 16u * (j % 2u);
  const uint keep = ~(0xffffu << shift);
  if (j < 8u) lo[j / 2u] = (lo[j / 2u] & keep) | (bits << shift);
  else hi[(j - 8u) / 2u] = (hi[(j - 8u) / 2u] & keep) | (bits << shift);
}

// Values of the vllm layout, [DPAD][TS]: a chunk holds X positions of one dim, read as one
// 16-byte load where blocks hold whole chunks (B >= X; a chunk without a block loads zeros),
// else element by element at the store.
const uint COLUMN_CHUNKS = TK / X;  // per dim
// Whether chunk i (dim i / COLUMN_CHUNKS, positions from its t0) holds a position of the span.
bool column_chunk_live(uint i, uint tile) {
  const uint t0 = tile + (i % COLUMN_CHUNKS) * X;
  return i < DPAD * COLUMN_CHUNKS && i / COLUMN_CHUNKS < D && t0 < g_span.hi && t0 + X > g_span.lo;
}
void load_value_columns(uint tile, out uvec4 raw[CHUNK_LOADS]) {
  uint block[CHUNK_LOADS];  // B >= X: the chunk's block (t0 and B are multiples of X)
  [[unroll]] for (uint k = 0u; k < CHUNK_LOADS; ++k) {
    const uint i = gl_LocalInvocationID.x + k * WG;
    block[k] = NO_BLOCK;
    if (B >= X && column_chunk_live(i, tile)) block[k] = block_at(tile + (i % COLUMN_CHUNKS) * X);
  }
  [[unroll]] for (uint k = 0u; k < CHUNK_LOADS; ++k) {
    const uint i = gl_LocalInvocationID.x + k * WG;
    const uint t0 = tile + (i % COLUMN_CHUNKS) * X;
    raw[k] = uvec4(0u);
    if (block[k] != NO_BLOCK)
      raw[k] = VALUE16(block[k], kv_value_offset(KV_LAYOUT, pc.num_kv_heads, D, B, X, g_kv_head, i / COLUMN_CHUNKS, t0 % B) / X);
  }
}
// Returns the values' non-finite test in `bad` and raises `largest` (bf16).
void store_value_columns(uint tile, uvec4 raw[CHUNK_LOADS], inout bool bad, inout uint largest) {
  [[unroll]] for (uint k = 0u; k < CHUNK_LOADS; ++k) {
    const uint i = gl_LocalInvocationID.x + k * WG;
    if (i >= DPAD * COLUMN_CHUNKS) continue;
    const uint d = i / COLUMN_CHUNKS;
    const uint tl = (i % COLUMN_CHUNKS) * X;
    const uint t0 = tile + tl;
    uvec4 lo = uvec4(0u), hi = uvec4(0u);  // f16 bits of positions t0 .. t0 + 7 and t0 + 8 .. t0 + 15
    if (column_chunk_live(i, tile)) {
      if (B >= X) {
        if (FP8) {
          lo = uvec4(fp8_word_to_f16(raw[k].x), fp8_word_to_f16(raw[k].y));
          hi = uvec4(fp8_word_to_f16(raw[k].z), fp8_word_to_f16(raw[k].w));
        } else {
          lo = raw[k];
        }
        if (t0 < g_span.lo || t0 + X > g_span.hi)
          for (uint j = 0u; j < X; ++j)
            if (!in_span(t0 + j)) set_half(lo, hi, j, 0u);
      } else {
        for (uint j = 0u; j < X; ++j) {
          const uint t = t0 + j;
          if (!in_span(t)) continue;
          const uint b = block_at(t);
          if (b != NO_BLOCK) set_half(lo, hi, j, value_element_bits(b, d, t));
        }
      }
    }
    const uint word = V_BASE + (d * TS + tl) / 8u;
    s_mem[word] = lo;
    if (X == 16u) s_mem[word + 1u] = hi;
    if (BF16_CACHE) largest = max(largest, bf16_chunk_largest(lo));
    else bad = bad || f16_chunk_not_finite(lo) || (X == 16u && f16_chunk_not_finite(hi));
  }
}

// A whole tile: its keys as rows, its values as rows or (vllm layout) as columns.
void load_tile(uint tile, out uvec4 key_raw[CHUNK_LOADS], out uvec4 value_raw[CHUNK_LOADS]) {
  load_rows(tile, false, key_raw);
  if (VALUE_COLUMNS) load_value_columns(tile, value_raw);
  else load_rows(tile, true, value_raw);
}

#endif  // VKPAGED_ATTENTION_MATRIX_STAGING_GLSL
