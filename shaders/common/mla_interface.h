// SPDX-License-Identifier: Apache-2.0
// Shared by C++ and GLSL, as shader_interface.h (which it extends): the MLA cache write.
// mla_reshape_and_cache (shaders/mla_reshape_and_cache*.comp, common/mla_reshape_and_cache.glsl)
// writes token t's kv_c [Dv] and k_pe [R] into the MLA pools, one pool [N, B, Dv + R] or ckv
// [N, B, Dv] and kpe [N, B, R], 16 bytes (x elements) per invocation. The rope variant works in
// rotary tiles of tokens (common/rotary.glsl; RotaryPush after MlaReshapePush, with num_heads 0,
// num_kv_heads 1 and head_size R). The `_address` variants of both (pools past
// maxStorageBufferRange) reach the pools by device address, as AttentionPush does: the
// addresses' low words in the pools' offset fields, their high words in the *_address_high ones.
#ifndef VKPAGED_MLA_INTERFACE_H
#define VKPAGED_MLA_INTERFACE_H

#include "common/shader_interface.h"

#ifdef __cplusplus
namespace vkpaged::shader {
#endif

#define MLA_RESHAPE_SC_INPUT_DTYPE 0   // DT_F32, DT_F16 or DT_BF16 (kv_c and k_pe)
#define MLA_RESHAPE_SC_CACHE_DTYPE 1   // any cache DT_*
#define MLA_RESHAPE_SC_SLOT_I64 2      // 1: slot_mapping holds int64 (two words), 0: int32
#define MLA_RESHAPE_SC_TWO_POOLS 3     // 1: ckv and kpe pools, 0: one pool
#define MLA_RESHAPE_SC_COUNT 4
#define MLA_RESHAPE_SC_ROTARY_STYLE 4  // rope variant: ROTARY_STYLE_*
#define MLA_RESHAPE_SC_COS_SIN_DTYPE 5 // DT_F32 or k_pe's dtype
#define MLA_RESHAPE_SC_POSITION_I64 6  // 1: positions hold int64, 0: int32
#define MLA_RESHAPE_SC_TILE_FLOATS 7   // rows_per_tile * rotary_dim: the shared tile
#define MLA_RESHAPE_ROPE_SC_COUNT 8
#define MLA_RESHAPE_BINDING_KV_C 0
#define MLA_RESHAPE_BINDING_K_PE 1
#define MLA_RESHAPE_BINDING_SLOT_MAPPING 2
#define MLA_RESHAPE_BINDING_CACHE 3      // the one pool, or ckv
#define MLA_RESHAPE_BINDING_KPE_CACHE 4  // kpe (one pool: the one pool again, not written through it)
#define MLA_RESHAPE_BINDING_STATUS 5
#define MLA_RESHAPE_BINDING_COUNT 6
#define MLA_RESHAPE_BINDING_POSITIONS 6  // rope variant
#define MLA_RESHAPE_BINDING_COS_SIN 7
#define MLA_RESHAPE_ROPE_BINDING_COUNT 8
struct MlaReshapePush {
  uint num_tokens;
  uint latent_size;  // Dv
  uint rope_size;    // R
  uint block_size;
  uint num_slots;    // N * B: slots at or past it are skipped and flagged STATUS_BAD_SLOT
  uint groups_x;
  uint kv_c_offset;  // word offsets into each bound range
  uint k_pe_offset;
  uint slot_offset;
  uint cache_offset;      // the pools' (multiples of 4 words); address variant: the low words of
  uint kpe_cache_offset;  // their device addresses (16-byte aligned)
  uint status_offset;
  float inv_scale;   // fp8 caches store encode(x * inv_scale), inv_scale = 1 / scale
  uint cache_address_high;  // address variant: the high words of the pools' device addresses
  uint kpe_cache_address_high;
};


// MLA attention (shaders/mla_attention.comp, common/mla_attention_kernel.glsl): the push
// constants are AttentionPush's (num_kv_heads 1; key_offset the one pool or ckv, value_offset
// kpe), and a split is merged by partition_merge.comp over value sums Dv wide.
#define MLA_ATTN_SC_WORKGROUP 0
#define MLA_ATTN_SC_KEY_HEAD_SIZE 1      // Dk: the row's width
#define MLA_ATTN_SC_VALUE_HEAD_SIZE 2    // Dv: the value is the row's first Dv entries
#define MLA_ATTN_SC_BLOCK_SIZE 3
#define MLA_ATTN_SC_ROWS 4               // (query token, head) rows of a workgroup
#define MLA_ATTN_SC_HEADS_PER_WORKGROUP 5
#define MLA_ATTN_SC_ROW_PARTS 6          // value phase: invocations side by side over the rows
#define MLA_ATTN_SC_KEY_TILE 7           // positions staged in shared memory at a time
#define MLA_ATTN_SC_QUERY_DTYPE 8
#define MLA_ATTN_SC_CACHE_DTYPE 9
#define MLA_ATTN_SC_FEATURES 10          // ATTN_FEATURE_* bits
#define MLA_ATTN_SC_TWO_POOLS 11         // 1: ckv [N, B, Dv] and kpe [N, B, R]; 0: one pool [N, B, Dk]
#define MLA_ATTN_SC_COUNT 12
// Bindings: ATTN_BINDING_*, the one pool or ckv at ATTN_BINDING_KEY_CACHE and kpe at
// ATTN_BINDING_VALUE_CACHE (one pool: the pool again, read through the first binding only).
// The tensor-core kernel (shaders/mla_attention_matrix_khr.comp) takes the same push constants,
// bindings and grid, and the constants above but ROW_PARTS, with these:
#define MLA_MATRIX_SC_VALUE_PARTS 6      // subgroups side by side over Dv per block of M rows
#define MLA_MATRIX_SC_MATRIX_M 12        // the device's f16 product M x N x K
#define MLA_MATRIX_SC_MATRIX_N 13
#define MLA_MATRIX_SC_MATRIX_K 14
#define MLA_MATRIX_SC_COUNT 15

#ifdef __cplusplus
static_assert(sizeof(MlaReshapePush) == 15 * 4, "MlaReshapePush must be plain 32-bit fields");
static_assert(sizeof(MlaReshapePush) + sizeof(RotaryPush) <= 128, "the rope variant pushes both");
}  // namespace vkpaged::shader
#endif

#endif  // VKPAGED_MLA_INTERFACE_H
