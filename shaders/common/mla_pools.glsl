// SPDX-License-Identifier: Apache-2.0
// The MLA pools as both MLA attention kernels read them: the one pool [N, B, DK], or ckv
// [N, B, DV] (at the key cache's binding) and kpe [N, B, DK - DV] (at the value cache's). Bound as
// storage buffers, or, for pools past maxStorageBufferRange (VKP_ADDRESS 1, the *_address*.comp
// variants), reached through buffer device addresses: each block from its own 64-bit start, so
// that indices inside a block fit 32 bits; the addresses' low words travel in the push block's
// key_offset and value_offset (shader_interface.h, AttentionPush). The host picks the variant
// per plan from the pools' size.
//
// The includer includes address_extensions.glsl first, declares `pc` (AttentionPush) and the
// constants B, TWO_POOLS, ROW_WORDS, VALUE_WORDS, ROPE_WORDS (cache words of a row, of its
// value, of its rotary part) and CW (cache words per chunk read: 1, 2 or 4), then:
//   uvec4 cache_chunk(block, offset, j)   words [j CW, (j + 1) CW) of the row at `offset` in
//                                         block `block` (CW < 4: the first CW components)
#ifndef VKPAGED_MLA_POOLS_GLSL
#define VKPAGED_MLA_POOLS_GLSL

#if VKP_ADDRESS
#include "common/address.glsl"
layout(buffer_reference, std430, buffer_reference_align = 16) readonly buffer PoolChunks16 { uvec4 v[]; };
layout(buffer_reference, std430, buffer_reference_align = 8) readonly buffer PoolChunks8 { uvec2 v[]; };
layout(buffer_reference, std430, buffer_reference_align = 4) readonly buffer PoolChunks4 { uint v[]; };
// CW words from word w (a multiple of CW) of the block at `a`.
#define MLA_CHUNK_AT(a, w)                                                                              \
  (CW == 4u ? PoolChunks16(a).v[(w) / 4u]                                                               \
            : (CW == 2u ? uvec4(PoolChunks8(a).v[(w) / 2u], 0u, 0u) : uvec4(PoolChunks4(a).v[w], 0u, 0u, 0u)))
// Word w of block `block` of the first pool (rows of `row_words`) or of kpe.
#define FIRST_POOL_CHUNK(row_words, block, w) \
  MLA_CHUNK_AT(address_of_block(uvec2(pc.key_offset, pc.key_address_high), block, B * (row_words) * 4u), w)
#define KPE_POOL_CHUNK(block, w) \
  MLA_CHUNK_AT(address_of_block(uvec2(pc.value_offset, pc.value_address_high), block, B * ROPE_WORDS * 4u), w)
#else
layout(set = 0, binding = ATTN_BINDING_KEY_CACHE) readonly buffer Pool16 { uvec4 pool16[]; };
layout(set = 0, binding = ATTN_BINDING_KEY_CACHE) readonly buffer Pool8 { uvec2 pool8[]; };
layout(set = 0, binding = ATTN_BINDING_KEY_CACHE) readonly buffer Pool4 { uint pool4[]; };
layout(set = 0, binding = ATTN_BINDING_VALUE_CACHE) readonly buffer Kpe16 { uvec4 kpe16[]; };
layout(set = 0, binding = ATTN_BINDING_VALUE_CACHE) readonly buffer Kpe8 { uvec2 kpe8[]; };
layout(set = 0, binding = ATTN_BINDING_VALUE_CACHE) readonly buffer Kpe4 { uint kpe4[]; };
// CW words from word w (a multiple of CW) of the bound pool (the whole pool is within 4 GiB here).
#define MLA_CHUNK_OF(c16, c8, c4, w) \
  (CW == 4u ? c16[(w) / 4u] : (CW == 2u ? uvec4(c8[(w) / 2u], 0u, 0u) : uvec4(c4[w], 0u, 0u, 0u)))
#define FIRST_POOL_CHUNK(row_words, block, w) \
  MLA_CHUNK_OF(pool16, pool8, pool4, pc.key_offset + (block) * B * (row_words) + (w))
#define KPE_POOL_CHUNK(block, w) MLA_CHUNK_OF(kpe16, kpe8, kpe4, pc.value_offset + (block) * B * ROPE_WORDS + (w))
#endif

// The one pool's row, or ckv's then kpe's (a chunk never straddles them: VALUE_WORDS is a
// multiple of CW).
uvec4 cache_chunk(uint block, uint offset, uint j) {
  const uint w = j * CW;
  if (TWO_POOLS == 0u) return FIRST_POOL_CHUNK(ROW_WORDS, block, offset * ROW_WORDS + w);
  if (w < VALUE_WORDS) return FIRST_POOL_CHUNK(VALUE_WORDS, block, offset * VALUE_WORDS + w);
  return KPE_POOL_CHUNK(block, offset * ROPE_WORDS + (w - VALUE_WORDS));
}

#endif  // VKPAGED_MLA_POOLS_GLSL
