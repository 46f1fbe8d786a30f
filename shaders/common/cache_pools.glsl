// SPDX-License-Identifier: Apache-2.0
// One layer's key and value pools as the cache operations (reshape_and_cache, gather) reach
// them, block by block: bound as storage buffers, or, for pools past maxStorageBufferRange
// (VKP_ADDRESS 1, the `*_address.comp` variants), through buffer device addresses, as the
// decode kernel reads such caches. The host picks the variant per call from the views.
//
// The includer includes address_extensions.glsl first, and defines before including this:
//   VKP_BINDING(NAME)    the binding of NAME (KEY_CACHE, VALUE_CACHE) in the kernel's interface
//                        (#define VKP_BINDING(name) GATHER_BINDING_##name)
//   CACHE_POOLS_WRITTEN  1: reshape_and_cache's views (keys stored, values updated in place);
//                        0: gather's (read only)
//   CACHE_BYTES          bytes of one cache element
// and declares its push constants `pc` with num_kv_heads, head_size, block_size,
// key_cache_offset and value_cache_offset (4-byte words; caches: multiples of 4 words), and
// key_cache_address and value_cache_address (device addresses of the views, 16-byte aligned).
//
//   PoolBlock k = key_block(b);      KEY_CHUNK(k, i)   16-byte chunk i of block b's keys
//   PoolBlock v = value_block(b);    VALUE_WORD(v, i)  word i of block b's values
//                                    VALUE_CHUNK(v, i) 16-byte chunk i of block b's values
// (the nhd and hnd layouts keep x consecutive elements of a value row in one chunk, as the
// keys; the vllm layout's values are reached by word).
// Indices inside one block fit 32 bits; only the block's start needs 64 (address variant).
#ifndef VKPAGED_CACHE_POOLS_GLSL
#define VKPAGED_CACHE_POOLS_GLSL

#if CACHE_POOLS_WRITTEN
#define KEY_POOL_ACCESS writeonly
#define VALUE_POOL_ACCESS
#else
#define KEY_POOL_ACCESS readonly
#define VALUE_POOL_ACCESS readonly
#endif

// Bytes of one block of one pool: Hkv * D * B elements (a multiple of 16: D is a multiple
// of x = 16 / CACHE_BYTES). The host checks that it fits 32 bits.
uint pool_block_bytes() { return pc.num_kv_heads * pc.head_size * pc.block_size * CACHE_BYTES; }

#if VKP_ADDRESS
layout(buffer_reference, std430, buffer_reference_align = 16) KEY_POOL_ACCESS buffer KeyPoolBlock { uvec4 chunks[]; };
layout(buffer_reference, std430, buffer_reference_align = 4) VALUE_POOL_ACCESS buffer ValuePoolBlock { uint words[]; };
layout(buffer_reference, std430, buffer_reference_align = 16) VALUE_POOL_ACCESS buffer ValuePoolChunks {
  uvec4 chunks[];
};

#include "common/address.glsl"

#define PoolBlock uvec2
PoolBlock key_block(uint block) { return address_of_block(pc.key_cache_address, block, pool_block_bytes()); }
PoolBlock value_block(uint block) { return address_of_block(pc.value_cache_address, block, pool_block_bytes()); }
#define KEY_CHUNK(b, i) KeyPoolBlock(b).chunks[i]
#define VALUE_WORD(b, i) ValuePoolBlock(b).words[i]
#define VALUE_CHUNK(b, i) ValuePoolChunks(b).chunks[i]
#else
layout(set = 0, binding = VKP_BINDING(KEY_CACHE)) KEY_POOL_ACCESS buffer KeyPool { uvec4 key_pool_chunks[]; };
layout(set = 0, binding = VKP_BINDING(VALUE_CACHE)) VALUE_POOL_ACCESS buffer ValuePool { uint value_pool_words[]; };
layout(set = 0, binding = VKP_BINDING(VALUE_CACHE)) VALUE_POOL_ACCESS buffer ValuePoolChunks { uvec4 value_pool_chunks[]; };

// The block's first element in the bound array (the whole pool is within 4 GiB here).
#define PoolBlock uint
PoolBlock key_block(uint block) { return pc.key_cache_offset / 4u + block * (pool_block_bytes() / 16u); }
PoolBlock value_block(uint block) { return pc.value_cache_offset + block * (pool_block_bytes() / 4u); }
#define KEY_CHUNK(b, i) key_pool_chunks[(b) + (i)]
#define VALUE_WORD(b, i) value_pool_words[(b) + (i)]
#define VALUE_CHUNK(b, i) value_pool_chunks[(b) / 4u + (i)]  // (b is a multiple of 4 words)
#endif

#endif  // VKPAGED_CACHE_POOLS_GLSL
