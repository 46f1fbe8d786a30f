// SPDX-License-Identifier: Apache-2.0
// reshape_and_cache (docs/contract.md, "Cache operations"): writes T new tokens' keys and
// values [T, Hkv, D] into the paged caches at their slots, in one dispatch, in the cache's
// layout (LAYOUT, a specialization constant; element offsets from common/kv_layout.glsl).
//
// One invocation per (token, kv head, key chunk c): the chunk's x elements are 16 contiguous
// bytes of the key cache owned by this token alone, stored as one uvec4; neighbouring
// invocations write neighbouring chunks (vllm: B * 16 bytes apart; nhd: a token's Hkv * D
// elements are contiguous; hnd: each head's D elements are). In the nhd and hnd value caches
// the same x elements are one 16-byte chunk too. In the vllm value cache [N, Hkv, D, B] they
// lie B apart, and with 1- or 2-byte elements neighbouring tokens of a block share a word:
// those words are updated with a compare-and-swap that replaces only this element's bits, so
// concurrent tokens never overwrite each other (f32 value caches have a word per element and
// use plain stores). Duplicate slots in one call leave each element holding one of the
// written values (which one is not defined: the contract leaves it open).
//
// Included by reshape_and_cache.comp (pools bound as storage buffers) and
// reshape_and_cache_address.comp (pools past maxStorageBufferRange, by device address), which
// define VKP_ADDRESS (common/cache_pools.glsl is where the two differ), and by their rotary
// variants (VKP_ROTARY 1), which rotate the keys on their way in and the queries in place
// (common/rotary.glsl), tile by tile: there a workgroup stages a tile of key rows, then each
// invocation writes the chunks of the tile as above, from the rotated keys, which it also
// writes back to the key buffer (rounded to its dtype, as rotary_embedding would leave them, so
// the cache holds what rotary_embedding then reshape_and_cache would store).
//
// The keys and values (and the queries) are strided views (common/strided_rows.glsl): each
// invocation finds its rows' first words once and reads its chunk from there.
#extension GL_GOOGLE_include_directive : require
#extension GL_EXT_control_flow_attributes : require
#include "common/address_extensions.glsl"

#include "common/shader_interface.h"
#include "common/convert.glsl"
#include "common/kv_layout.glsl"
#include "common/strided_rows.glsl"

#define VKP_SC(name) RESHAPE_SC_##name
#define VKP_BINDING(name) RESHAPE_BINDING_##name
#include "common/cache_write.glsl"  // INPUT_DTYPE, CACHE_DTYPE, SLOT_I64, rotary's, input_bits, encode
layout(constant_id = RESHAPE_SC_LAYOUT) const uint LAYOUT = KV_LAYOUT_VLLM;

#if VKP_ROTARY
layout(push_constant) uniform PushBlock { ReshapeAndCacheRotaryPush pc; };
#define rp pc  // common/rotary.glsl reads RotaryPush's names, which this block has too
#define KEY_INPUT_ACCESS
#else
layout(push_constant) uniform PushBlock { ReshapeAndCachePush pc; };
#define KEY_INPUT_ACCESS readonly
#endif

layout(set = 0, binding = RESHAPE_BINDING_KEY) KEY_INPUT_ACCESS buffer Key { uint key_words[]; };
layout(set = 0, binding = RESHAPE_BINDING_VALUE) readonly buffer Value { uint value_words[]; };
layout(set = 0, binding = RESHAPE_BINDING_SLOT_MAPPING) readonly buffer Slots { uint slot_words[]; };
layout(set = 0, binding = RESHAPE_BINDING_STATUS) buffer Status { uint status[]; };

#define CACHE_POOLS_WRITTEN 1
#include "common/cache_pools.glsl"

#if VKP_ROTARY
layout(set = 0, binding = RESHAPE_BINDING_QUERY) buffer Query { uint query_words[]; };
layout(set = 0, binding = RESHAPE_BINDING_POSITIONS) readonly buffer Positions { uint position_words[]; };
layout(set = 0, binding = RESHAPE_BINDING_COS_SIN) readonly buffer CosSin { uint cos_sin_words[]; };
#include "common/rotary.glsl"
shared uint s_value_rows[ROTARY_MAX_TILE_ROWS];  // key tiles: the first word of each row's value
#endif

// Element d of the key or value row whose first word is `row` (rows start on a word, so d's
// parity picks its half of a 16-bit pair).
uint key_input(uint row, uint d) { return input_bits(key_words[row + d / INPUT_PER_WORD], d); }
uint value_input(uint row, uint d) { return input_bits(value_words[row + d / INPUT_PER_WORD], d); }

// Replaces element `index` of a block's values, leaving the other elements of its word alone.
void store_value(PoolBlock block, uint index, uint bits) {
  const uint word = index / PER_WORD;
  if (PER_WORD == 1u) {
    VALUE_WORD(block, word) = bits;
    return;
  }
  const uint shift = (index % PER_WORD) * ELEMENT_BITS;
  const uint keep = ~(ELEMENT_MASK << shift);
  uint expected = VALUE_WORD(block, word);
  for (;;) {
    const uint seen = atomicCompSwap(VALUE_WORD(block, word), expected, (expected & keep) | (bits << shift));
    if (seen == expected) break;
    expected = seen;
  }
}

#include "common/slot_mapping.glsl"

// Writes chunk `chunk` of kv head `head` of one token into `slot`: the key's x elements given
// as f32 bits, the value's read from the value row that starts at word `value_row`.
void store_chunk(uint slot, uint head, uint chunk, uint key_bits[16], uint value_row) {
  const uint block = slot / pc.block_size;
  const uint offset = slot % pc.block_size;
  const uint d0 = chunk * X;

  // Key: 16 bytes at the chunk's first element.
  uvec4 packed = uvec4(0u);
  for (uint e = 0u; e < X; ++e)
    packed[e / PER_WORD] |= encode(key_bits[e], pc.inv_k_scale) << ((e % PER_WORD) * ELEMENT_BITS);
  const uint key_at = kv_key_offset(LAYOUT, pc.num_kv_heads, pc.head_size, pc.block_size, X, head, d0, offset);
  KEY_CHUNK(key_block(block), key_at / X) = packed;

  const PoolBlock values = value_block(block);
  if (LAYOUT == KV_LAYOUT_VLLM) {
    // Value: x elements B apart, each into its word.
    for (uint e = 0u; e < X; ++e) {
      const uint at = kv_value_offset(LAYOUT, pc.num_kv_heads, pc.head_size, pc.block_size, X, head, d0 + e, offset);
      store_value(values, at, encode(value_input(value_row, d0 + e), pc.inv_v_scale));
    }
    return;
  }
  // Value (nhd, hnd): 16 contiguous bytes, as the key.
  packed = uvec4(0u);
  for (uint e = 0u; e < X; ++e)
    packed[e / PER_WORD] |= encode(value_input(value_row, d0 + e), pc.inv_v_scale) << ((e % PER_WORD) * ELEMENT_BITS);
  const uint value_at = kv_value_offset(LAYOUT, pc.num_kv_heads, pc.head_size, pc.block_size, X, head, d0, offset);
  VALUE_CHUNK(values, value_at / X) = packed;
}

#if VKP_ROTARY
// Query tiles rotate their rows in place; key tiles rotate theirs (in place too) and write
// them with their values into the cache. A token whose position is out of range is left as
// it is, its slot included.
void main() {
  bool is_key;
  uint first_row, count;
  if (!rotary_tile_of(is_key, first_row, count)) return;
  if (!is_key) {
    rotate_rows_in_place(false, first_row, count);
    return;
  }
  // The tile's value rows, found once per row (stage_rows' barriers publish them with the keys').
  for (uint r = gl_LocalInvocationID.x; r < count; r += CACHE_OP_WORKGROUP)
    s_value_rows[r] = row_word(pc.value_rows, (first_row + r) / pc.num_kv_heads, (first_row + r) % pc.num_kv_heads);
  stage_rows(true, first_row, count);
  const uint chunks = pc.head_size / X;
  for (uint u = gl_LocalInvocationID.x; u < count * chunks; u += CACHE_OP_WORKGROUP) {
    const uint r = u / chunks, chunk = u % chunks, row = first_row + r;
    const uint token = row / pc.num_kv_heads, head = row % pc.num_kv_heads;
    const uint pos = rotary_position(token);
    if (pos == NO_POSITION) {
      report_bad_position(row, pc.num_kv_heads, chunk);
      continue;
    }
    // The chunk's key: rotated below rotary_dim (and written back), as read past it.
    const uint key_row = rotary_rows[r];
    uint key_bits[16];
    for (uint e = 0u; e < X; e += INPUT_PER_WORD) {
      const uint d = chunk * X + e;
      if (d < rp.rotary_dim) {
        const uint word = rotated_word(r, d / INPUT_PER_WORD, pos);
        key_words[key_row + d / INPUT_PER_WORD] = word;
        for (uint k = 0u; k < INPUT_PER_WORD; ++k) key_bits[e + k] = rotary_element_bits(word, k);
      } else {
        for (uint k = 0u; k < INPUT_PER_WORD; ++k) key_bits[e + k] = key_input(key_row, d + k);
      }
    }
    const uint slot = token_slot(token, head == 0u && chunk == 0u);
    if (slot != NO_SLOT) store_chunk(slot, head, chunk, key_bits, s_value_rows[r]);
  }
}
#else
#include "common/cache_op_grid.glsl"

void main() {
  CacheOpItem item;  // row: the token
  if (!cache_op_item(pc.num_tokens, item)) return;
  const uint slot = token_slot(item.row, item.head == 0u && item.chunk == 0u);
  if (slot == NO_SLOT) return;
  const uint key_row = row_word(pc.key_rows, item.row, item.head);
  uint key_bits[16];
  for (uint e = 0u; e < X; ++e) key_bits[e] = key_input(key_row, item.chunk * X + e);
  store_chunk(slot, item.head, item.chunk, key_bits, row_word(pc.value_rows, item.row, item.head));
}
#endif
