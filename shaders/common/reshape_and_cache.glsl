// reshape_and_cache (docs/contract.md, "Cache operations"): writes T new tokens' keys and
// values [T, Hkv, D] into the paged caches at their slots, in one dispatch.
//
// One invocation per (token, kv head, key chunk c): the chunk's x elements are 16 contiguous
// bytes of the key cache owned by this token alone, stored as one uvec4. In the value cache
// [N, Hkv, D, B] the same x elements lie B apart, and with 1- or 2-byte elements neighbouring
// tokens of a block share a word: those words are updated with a compare-and-swap that
// replaces only this element's bits, so concurrent tokens never overwrite each other. Duplicate
// slots in one call leave each element holding one of the written values (which one is not
// defined: the contract leaves it open).
// f32 value caches have a word per element and use plain stores.
//
// Included by reshape_and_cache.comp (pools bound as storage buffers) and
// reshape_and_cache_address.comp (pools past maxStorageBufferRange, by device address), which
// define VKP_ADDRESS; common/cache_pools.glsl is where the two differ.
#extension GL_GOOGLE_include_directive : require
#if VKP_ADDRESS
#extension GL_EXT_buffer_reference2 : require
#extension GL_EXT_buffer_reference_uvec2 : require
#endif

#include "common/shader_interface.h"
#include "common/convert.glsl"

layout(local_size_x = CACHE_OP_WORKGROUP) in;
layout(constant_id = RESHAPE_SC_INPUT_DTYPE) const uint INPUT_DTYPE = DT_F16;
layout(constant_id = RESHAPE_SC_CACHE_DTYPE) const uint CACHE_DTYPE = DT_F16;
layout(constant_id = RESHAPE_SC_SLOT_I64) const uint SLOT_I64 = 1u;

#include "common/cache_element.glsl"
const uint INPUT_PER_WORD = INPUT_DTYPE == DT_F32 ? 1u : 2u;

layout(push_constant) uniform PushBlock { ReshapeAndCachePush pc; };

layout(set = 0, binding = RESHAPE_BINDING_KEY) readonly buffer Key { uint key_words[]; };
layout(set = 0, binding = RESHAPE_BINDING_VALUE) readonly buffer Value { uint value_words[]; };
layout(set = 0, binding = RESHAPE_BINDING_SLOT_MAPPING) readonly buffer Slots { uint slot_words[]; };
layout(set = 0, binding = RESHAPE_BINDING_STATUS) buffer Status { uint status[]; };

#define KEY_POOL_BINDING RESHAPE_BINDING_KEY_CACHE
#define VALUE_POOL_BINDING RESHAPE_BINDING_VALUE_CACHE
#define KEY_POOL_ACCESS writeonly
#define VALUE_POOL_ACCESS
#include "common/cache_pools.glsl"

// Input element i (f32, f16 or bf16) as f32 bits.
uint input_bits(uint word, uint i) {
  if (INPUT_DTYPE == DT_F32) return word;
  const uint half_bits = (i % 2u == 0u) ? (word & 0xffffu) : (word >> 16);
  return element_to_f32_bits(half_bits, INPUT_DTYPE);
}
uint key_input(uint i) { return input_bits(key_words[pc.key_offset + i / INPUT_PER_WORD], i); }
uint value_input(uint i) { return input_bits(value_words[pc.value_offset + i / INPUT_PER_WORD], i); }

// f32 bits to the cache's element bits (fp8: scaled first).
uint encode(uint x, float inv_scale) {
  if (FP8) return quantize_fp8(x, inv_scale, CACHE_DTYPE);
  return f32_bits_to_float_element(x, CACHE_DTYPE);
}

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

void main() {
  const uint id = (gl_WorkGroupID.y * pc.groups_x + gl_WorkGroupID.x) * CACHE_OP_WORKGROUP + gl_LocalInvocationID.x;
  const uint chunks = pc.head_size / X;
  const uint per_token = pc.num_kv_heads * chunks;
  if (id >= pc.num_tokens * per_token) return;
  const uint token = id / per_token;
  const uint head = (id % per_token) / chunks;
  const uint chunk = id % chunks;

  // Slot: int64 as (low, high) words, or int32 sign-extended. Negative = padding.
  const uint low = slot_words[pc.slot_offset + token * (SLOT_I64 != 0u ? 2u : 1u)];
  const uint sign_extension = (low >> 31) != 0u ? 0xffffffffu : 0u;
  const uint high = SLOT_I64 != 0u ? slot_words[pc.slot_offset + token * 2u + 1u] : sign_extension;
  if ((high >> 31) != 0u) return;
  if (high != 0u || low >= pc.num_slots) {
    if (head == 0u && chunk == 0u) atomicOr(status[pc.status_offset], STATUS_BAD_SLOT);
    return;
  }
  const uint block = low / pc.block_size;
  const uint offset = low % pc.block_size;
  const uint first = (token * pc.num_kv_heads + head) * pc.head_size + chunk * X;  // input element

  // Key: x elements of one chunk -> 16 bytes K[block][head][chunk][offset][0..x).
  uvec4 packed = uvec4(0u);
  for (uint e = 0u; e < X; ++e)
    packed[e / PER_WORD] |= encode(key_input(first + e), pc.inv_k_scale) << ((e % PER_WORD) * ELEMENT_BITS);
  KEY_CHUNK(key_block(block), (head * chunks + chunk) * pc.block_size + offset) = packed;

  // Value: element V[block][head][d][offset] for each d of the chunk.
  const PoolBlock values = value_block(block);
  for (uint e = 0u; e < X; ++e) {
    const uint d = chunk * X + e;
    store_value(values, (head * pc.head_size + d) * pc.block_size + offset, encode(value_input(first + e), pc.inv_v_scale));
  }
}
