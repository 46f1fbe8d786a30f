// SPDX-License-Identifier: Apache-2.0
// reshape_and_cache for MLA (docs/contract.md, "Multi-head latent attention"; vLLM's
// concat_and_cache_mla): token t's latent kv_c [T, Dv] and rotary key part k_pe [T, R] into
// its slot's row, one pool [N, B, Dv + R] (kv_c then k_pe) or ckv [N, B, Dv] and kpe [N, B, R].
// Rows are contiguous and Dv and R are multiples of x, so each invocation writes one 16-byte
// chunk (x elements) that no other token shares: plain stores, no atomics.
//
// Included by mla_reshape_and_cache.comp and, with VKP_ROTARY 1, mla_reshape_and_cache_rope.comp,
// which rotates k_pe on its way in with the rotary embedding's own code (common/rotary.glsl):
// a workgroup takes a tile of tokens, stages their k_pe rows, then writes each chunk, the
// rotated elements rounded to k_pe's dtype first (what rotary_embedding would leave), then to
// the cache's. k_pe itself is left as it is. Their `_address` variants (VKP_ADDRESS 1) write
// pools past maxStorageBufferRange through buffer device addresses; the pools' access below
// is where the two differ.
#extension GL_GOOGLE_include_directive : require
#extension GL_EXT_control_flow_attributes : require
#include "common/address_extensions.glsl"

#include "common/mla_interface.h"
#include "common/convert.glsl"

#define VKP_SC(name) MLA_RESHAPE_SC_##name
#include "common/cache_write.glsl"  // INPUT_DTYPE, CACHE_DTYPE, SLOT_I64, rotary's, input_bits, encode
layout(constant_id = MLA_RESHAPE_SC_TWO_POOLS) const uint TWO_POOLS = 0u;

#if VKP_ROTARY
layout(push_constant) uniform PushBlock {
  MlaReshapePush pc;
  RotaryPush rp;
};
#else
layout(push_constant) uniform PushBlock { MlaReshapePush pc; };
#endif

layout(set = 0, binding = MLA_RESHAPE_BINDING_KV_C) readonly buffer KvC { uint kv_c_words[]; };
// Named key_words for common/rotary.glsl, whose in-place rotation (not called here) writes it.
layout(set = 0, binding = MLA_RESHAPE_BINDING_K_PE) buffer KPe { uint key_words[]; };
layout(set = 0, binding = MLA_RESHAPE_BINDING_SLOT_MAPPING) readonly buffer Slots { uint slot_words[]; };
layout(set = 0, binding = MLA_RESHAPE_BINDING_STATUS) buffer Status { uint status[]; };

// The pools, a block at a time: the one pool or ckv (`cache`, `width` elements a row), and kpe.
// Bound as storage buffers, or (VKP_ADDRESS 1) by device address, only a block's start in 64
// bits: a block is B * width * CACHE_BYTES < 2^32 bytes (the host checks), a multiple of 16.
#if VKP_ADDRESS
layout(buffer_reference, std430, buffer_reference_align = 16) writeonly buffer PoolChunks { uvec4 chunks[]; };
#include "common/address.glsl"
#define PoolBlock uvec2
PoolBlock cache_block(uint block, uint width) {
  return address_of_block(uvec2(pc.cache_offset, pc.cache_address_high), block, pc.block_size * width * CACHE_BYTES);
}
PoolBlock kpe_block(uint block) {
  return address_of_block(uvec2(pc.kpe_cache_offset, pc.kpe_cache_address_high), block,
                          pc.block_size * pc.rope_size * CACHE_BYTES);
}
#define CACHE_CHUNK(b, i) PoolChunks(b).chunks[i]
#define KPE_CHUNK(b, i) PoolChunks(b).chunks[i]
#else
layout(set = 0, binding = MLA_RESHAPE_BINDING_CACHE) writeonly buffer Cache { uvec4 cache_chunks[]; };
layout(set = 0, binding = MLA_RESHAPE_BINDING_KPE_CACHE) writeonly buffer KpeCache { uvec4 kpe_cache_chunks[]; };
// The block's first chunk in the bound array (the pools are within 4 GiB here; their offsets
// are multiples of 4 words).
#define PoolBlock uint
PoolBlock cache_block(uint block, uint width) { return pc.cache_offset / 4u + block * (pc.block_size * width / X); }
PoolBlock kpe_block(uint block) { return pc.kpe_cache_offset / 4u + block * (pc.block_size * pc.rope_size / X); }
#define CACHE_CHUNK(b, i) cache_chunks[(b) + (i)]
#define KPE_CHUNK(b, i) kpe_cache_chunks[(b) + (i)]
#endif

#if VKP_ROTARY
layout(set = 0, binding = MLA_RESHAPE_BINDING_POSITIONS) readonly buffer Positions { uint position_words[]; };
layout(set = 0, binding = MLA_RESHAPE_BINDING_COS_SIN) readonly buffer CosSin { uint cos_sin_words[]; };
#define query_words key_words  // rotary.glsl's query rows: none here (rp.query_tiles is 0)
#include "common/strided_rows.glsl"  // rotary.glsl's rows: k_pe's, one per token
#include "common/rotary.glsl"
#endif

#include "common/slot_mapping.glsl"

uint kv_c_input(uint i) { return input_bits(kv_c_words[pc.kv_c_offset + i / INPUT_PER_WORD], i); }
uint k_pe_input(uint i) { return input_bits(key_words[pc.k_pe_offset + i / INPUT_PER_WORD], i); }

// Chunk `chunk` of the row (chunks [0, Dv / x) the latent's, then the rotary part's) into
// `slot`, its x elements given as f32 bits.
void store_chunk(uint slot, uint chunk, uint bits[16]) {
  uvec4 packed = uvec4(0u);
  for (uint e = 0u; e < X; ++e) packed[e / PER_WORD] |= encode(bits[e], pc.inv_scale) << ((e % PER_WORD) * ELEMENT_BITS);
  const uint d0 = chunk * X;  // first element of the chunk in the row [Dv + R]
  const uint block = slot / pc.block_size, row = slot % pc.block_size;
  if (TWO_POOLS != 0u && d0 >= pc.latent_size) {
    KPE_CHUNK(kpe_block(block), (row * pc.rope_size + d0 - pc.latent_size) / X) = packed;
    return;
  }
  const uint width = TWO_POOLS == 0u ? pc.latent_size + pc.rope_size : pc.latent_size;
  CACHE_CHUNK(cache_block(block, width), (row * width + d0) / X) = packed;
}

// The chunk's x input elements as f32 bits: kv_c's, or k_pe's (rope variant: rotated below
// rotary_dim, r being the token's row in the staged tile).
void chunk_inputs(uint token, uint chunk, uint r, uint pos, out uint bits[16]) {
  const uint d0 = chunk * X;
  if (d0 < pc.latent_size) {
    for (uint e = 0u; e < X; ++e) bits[e] = kv_c_input(token * pc.latent_size + d0 + e);
    return;
  }
  const uint p0 = d0 - pc.latent_size;  // first element in the rotary part
  for (uint e = 0u; e < X; e += INPUT_PER_WORD) {
#if VKP_ROTARY
    if (p0 + e < rp.rotary_dim) {
      const uint word = rotated_word(r, (p0 + e) / INPUT_PER_WORD, pos);
      for (uint k = 0u; k < INPUT_PER_WORD; ++k) bits[e + k] = rotary_element_bits(word, k);
      continue;
    }
#endif
    for (uint k = 0u; k < INPUT_PER_WORD; ++k) bits[e + k] = k_pe_input(token * pc.rope_size + p0 + e + k);
  }
}

#if VKP_ROTARY
// One tile of tokens per workgroup (rotary_tile_of: no query tiles, one "head" per token).
void main() {
  bool is_key;
  uint first_row, count;
  if (!rotary_tile_of(is_key, first_row, count)) return;
  stage_rows(true, first_row, count);
  const uint chunks = (pc.latent_size + pc.rope_size) / X;
  for (uint u = gl_LocalInvocationID.x; u < count * chunks; u += CACHE_OP_WORKGROUP) {
    const uint r = u / chunks, chunk = u % chunks, token = first_row + r;
    const uint pos = rotary_position(token);
    if (pos == NO_POSITION) {
      report_bad_position(token, 1u, chunk);
      continue;
    }
    const uint slot = token_slot(token, chunk == 0u);
    if (slot == NO_SLOT) continue;
    uint bits[16];
    chunk_inputs(token, chunk, r, pos, bits);
    store_chunk(slot, chunk, bits);
  }
}
#else
// One invocation per (token, chunk).
void main() {
  const uint id = (gl_WorkGroupID.y * pc.groups_x + gl_WorkGroupID.x) * CACHE_OP_WORKGROUP + gl_LocalInvocationID.x;
  const uint chunks = (pc.latent_size + pc.rope_size) / X;
  if (id >= pc.num_tokens * chunks) return;
  const uint token = id / chunks, chunk = id % chunks;
  const uint slot = token_slot(token, chunk == 0u);
  if (slot == NO_SLOT) return;
  uint bits[16];
  chunk_inputs(token, chunk, 0u, 0u, bits);
  store_chunk(slot, chunk, bits);
}
#endif
