// SPDX-License-Identifier: Apache-2.0
// gather (docs/contract.md, "Cache operations"): paged cache -> contiguous keys and values
// [T, Hkv, D] for the positions of given sequences, dequantized, in one dispatch.
//
// Sequence s owns output rows [seq_starts[s], seq_starts[s+1]); row r holds its position
// r - seq_starts[s]. One invocation per (row, kv head, key chunk c): it finds its sequence by
// binary search over seq_starts, reads the chunk's 16 key bytes and the x value elements
// (16 bytes too in the nhd and hnd layouts; B apart in the vllm layout's [N, Hkv, D, B]) and
// writes x elements of each output. The layout is a specialization constant; element offsets
// come from common/kv_layout.glsl. Rows outside every
// sequence are left as they are; a position past M * B or a block id >= N is flagged in the
// status word and its row is left as it is too.
//
// Included by gather.comp (pools bound as storage buffers) and gather_address.comp (pools past
// maxStorageBufferRange, by device address), which define VKP_ADDRESS; common/cache_pools.glsl
// is where the two differ.
#extension GL_GOOGLE_include_directive : require
#include "common/address_extensions.glsl"

#include "common/shader_interface.h"
#include "common/convert.glsl"
#include "common/kv_layout.glsl"
#include "common/strided_rows.glsl"

layout(local_size_x = CACHE_OP_WORKGROUP) in;
layout(constant_id = GATHER_SC_CACHE_DTYPE) const uint CACHE_DTYPE = DT_F16;
layout(constant_id = GATHER_SC_OUTPUT_DTYPE) const uint OUTPUT_DTYPE = DT_F16;
layout(constant_id = GATHER_SC_LAYOUT) const uint LAYOUT = KV_LAYOUT_VLLM;

#include "common/cache_element.glsl"
const uint OUTPUT_PER_WORD = OUTPUT_DTYPE == DT_F32 ? 1u : 2u;

#define VKP_BINDING(name) GATHER_BINDING_##name
layout(push_constant) uniform PushBlock { GatherPush pc; };

layout(set = 0, binding = GATHER_BINDING_BLOCK_TABLES) readonly buffer BlockTables { uint block_tables[]; };
layout(set = 0, binding = GATHER_BINDING_SEQ_STARTS) readonly buffer SeqStarts { uint seq_starts[]; };
layout(set = 0, binding = GATHER_BINDING_KEY_OUT) writeonly buffer KeyOut { uint key_out[]; };
layout(set = 0, binding = GATHER_BINDING_VALUE_OUT) writeonly buffer ValueOut { uint value_out[]; };
layout(set = 0, binding = GATHER_BINDING_STATUS) buffer Status { uint status[]; };

#define CACHE_POOLS_WRITTEN 0
#include "common/cache_pools.glsl"

// Cache element bits -> output element bits; fp8 is dequantized (decode(byte) * scale).
uint convert(uint element, float scale) {
  uint x = element_to_f32_bits(element, CACHE_DTYPE);
  if (FP8) x = floatBitsToUint(uintBitsToFloat(x) * scale);
  return f32_bits_to_float_element(x, OUTPUT_DTYPE);
}

// The sequence whose rows hold `row`: the last s with seq_starts[s] <= row (S if none).
uint sequence_of(uint row) {
  uint lo = 0u, hi = pc.num_seqs;  // answer in [lo, hi); hi = none found yet
  uint found = pc.num_seqs;
  while (lo < hi) {
    const uint mid = (lo + hi) / 2u;
    if (seq_starts[pc.seq_starts_offset + mid] <= row) {
      found = mid;
      lo = mid + 1u;
    } else {
      hi = mid;
    }
  }
  return found;
}

// Writes x elements from dim d0 of an output row that starts at word `row` (a strided view).
void write_output(bool is_key, uint row, uint d0, uint elements[16]) {
  for (uint e = 0u; e < X; e += OUTPUT_PER_WORD) {
    uint w = elements[e];
    if (OUTPUT_PER_WORD == 2u) w |= elements[e + 1u] << 16;
    const uint i = row + (d0 + e) / OUTPUT_PER_WORD;
    if (is_key) key_out[i] = w;
    else value_out[i] = w;
  }
}

#include "common/cache_op_grid.glsl"

void main() {
  CacheOpItem item;
  if (!cache_op_item(pc.num_rows, item)) return;
  const uint row = item.row;
  const uint head = item.head;
  const uint chunk = item.chunk;
  const bool reporter = head == 0u && chunk == 0u;

  const uint seq = sequence_of(row);
  if (seq >= pc.num_seqs || row >= seq_starts[pc.seq_starts_offset + seq + 1u]) return;
  const uint pos = row - seq_starts[pc.seq_starts_offset + seq];
  if (pos / pc.block_size >= pc.max_blocks_per_seq) {
    if (reporter) atomicOr(status[pc.status_offset], STATUS_BAD_CONTEXT_LEN);
    return;
  }
  const uint block = block_tables[pc.block_tables_offset + seq * pc.max_blocks_per_seq + pos / pc.block_size];
  if (block >= pc.num_blocks) {
    if (reporter) atomicOr(status[pc.status_offset], STATUS_BAD_BLOCK_ID);
    return;
  }
  const uint offset = pos % pc.block_size;
  const uint d0 = chunk * X;
  uint elements[16];
  const uint key_at = kv_key_offset(LAYOUT, pc.num_kv_heads, pc.head_size, pc.block_size, X, head, d0, offset);
  const uvec4 k = KEY_CHUNK(key_block(block), key_at / X);
  for (uint e = 0u; e < X; ++e)
    elements[e] = convert((k[e / PER_WORD] >> ((e % PER_WORD) * ELEMENT_BITS)) & ELEMENT_MASK, pc.k_scale);
  write_output(true, row_word(pc.key_out_rows, row, head), d0, elements);

  const PoolBlock values = value_block(block);
  if (LAYOUT == KV_LAYOUT_VLLM) {
    for (uint e = 0u; e < X; ++e) {
      const uint index = kv_value_offset(LAYOUT, pc.num_kv_heads, pc.head_size, pc.block_size, X, head, d0 + e, offset);
      const uint w = VALUE_WORD(values, index / PER_WORD);
      elements[e] = convert((w >> ((index % PER_WORD) * ELEMENT_BITS)) & ELEMENT_MASK, pc.v_scale);
    }
  } else {
    const uint value_at = kv_value_offset(LAYOUT, pc.num_kv_heads, pc.head_size, pc.block_size, X, head, d0, offset);
    const uvec4 v = VALUE_CHUNK(values, value_at / X);
    for (uint e = 0u; e < X; ++e)
      elements[e] = convert((v[e / PER_WORD] >> ((e % PER_WORD) * ELEMENT_BITS)) & ELEMENT_MASK, pc.v_scale);
  }
  write_output(false, row_word(pc.value_out_rows, row, head), d0, elements);
}
