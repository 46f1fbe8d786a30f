// SPDX-License-Identifier: Apache-2.0
// Shared by C++ and GLSL: push-constant blocks, specialization-constant ids and dtype codes.
// Host and shader include the same definitions, so layout drift is a compile error.
// Every push-constant block is plain 32-bit fields and stays within 128 bytes.
#ifndef VKPAGED_SHADER_INTERFACE_H
#define VKPAGED_SHADER_INTERFACE_H

#ifdef __cplusplus
#include <cstddef>
#include <cstdint>
#include <type_traits>
namespace vkpaged::shader {
using uint = uint32_t;
struct uvec2 {
  uint32_t x, y;
};
#endif

// Element types (values of vkpaged::DType).
#define DT_F32 0u
#define DT_F16 1u
#define DT_BF16 2u
#define DT_FP8_E4M3 3u
#define DT_FP8_E5M2 4u

// Cache layouts (values of vkpaged::KvLayout, include/vkpaged/kv_layout.hpp; common/kv_layout.glsl).
#define KV_LAYOUT_VLLM 0u
#define KV_LAYOUT_NHD 1u
#define KV_LAYOUT_HND 2u

// Bits of the status word the shaders OR into when device-side indices are out of range.
#define STATUS_BAD_BLOCK_ID 1u
#define STATUS_BAD_CONTEXT_LEN 2u
#define STATUS_BAD_SLOT 4u
#define STATUS_BAD_ORDER 8u  // a decode's item list (record_decode_order) names no item of the plan
#define STATUS_BAD_MERGE_COUNTERS 16u  // a merge counter past its partition count (split_merge.glsl)
#define STATUS_BAD_QUERY_STARTS 32u  // multi-query attention: query_starts that fall or pass T (equal ones: a request of no new tokens)
#define STATUS_BAD_POSITION 64u  // rotary embedding: a position outside [0, max_position), the token left as it was
#define STATUS_BAD_PAGE_TABLE 128u  // CSR page tables (csr_page_table.comp) that break the contract, clamped

// ---- strided views (TensorView::strides; common/strided_rows.glsl) ----
// The queries, new keys and values, and outputs are [tokens, heads, D] views whose token and
// head strides are free and whose D elements are contiguous: row (token, head) starts at word
//   offset + token * token_stride + head * head_stride
// of the view's bound range, all in 4-byte words (the host refuses strides that would not keep
// each row on a word: every kernel reads and writes these tensors a word at a time). One word
// holds the head stride and the offset, so that a view costs two words where it had one and the
// push blocks stay within 128 bytes: a view is bound from its offset rounded down to
// minStorageBufferOffsetAlignment (at most 256 bytes), so the offset is below 64 words (the low
// ROWS_OFFSET_BITS), and the host refuses head strides of 2^26 words or more.
#define ROWS_OFFSET_BITS 6u
#define ROWS_OFFSET_MASK 63u
struct StridedRows {
  uint token_stride;     // words
  uint head_and_offset;  // head stride in words << ROWS_OFFSET_BITS | the offset in words
};

// ---- the push-block fields decode and attention share ----
// A decode is the attention problem of one token per request: DecodePush and AttentionPush
// declare these fields here, once, in one order, and a decode's reach the attention block that
// the merge pass takes (partition_merge.comp) through the same list (ops/partition_merge.cpp).
// Offsets are in 4-byte words from the start of each bound range (the host binds each view at an
// aligned offset and passes the rest here); cache offsets are multiples of 4 words; the query
// and the output are strided views (StridedRows).
//   sliding_window: 0 = off. context_cap: lengths above it are clamped (and flagged): M * B, or
//   what the partitions cover when split. partition_tokens, num_partitions: split: key positions
//   per partition (a multiple of the workgroup's), partitions per row in the scratch
//   (split_scratch.h). scale: the softmax scale. softcap: > 0 with FEATURE_SOFTCAP, logit =
//   softcap * tanh(logit / softcap). k_scale, v_scale: fp8 caches only.
#define VKP_SHARED_PUSH_FIELDS(X)                                                                   \
  X(uint, num_heads) X(uint, num_kv_heads) X(uint, num_blocks) X(uint, max_blocks_per_seq)           \
  X(uint, sliding_window) X(uint, context_cap) X(uint, partition_tokens) X(uint, num_partitions)      \
  X(StridedRows, query_rows) X(uint, key_offset) X(uint, value_offset) X(uint, block_tables_offset)   \
  X(uint, context_lens_offset) X(StridedRows, output_rows) X(uint, alibi_offset) X(uint, sinks_offset) \
  X(uint, lse_offset) X(uint, scratch_offset) X(uint, status_offset) X(float, scale) X(float, softcap) \
  X(float, k_scale) X(float, v_scale)
#define VKP_PUSH_FIELD(type, name) type name;

// ---- decode (shaders/decode*.comp) ----
// Specialization constant ids, in the order the host passes them.
#define DECODE_SC_WORKGROUP 0
#define DECODE_SC_HEAD_SIZE 1
#define DECODE_SC_BLOCK_SIZE 2
#define DECODE_SC_HEADS_PER_WORKGROUP 3
#define DECODE_SC_QUERY_DTYPE 4
#define DECODE_SC_CACHE_DTYPE 5
#define DECODE_SC_FEATURES 6
#define DECODE_SC_LANES_PER_ROW 7
#define DECODE_SC_MATRIX_PREFETCH 8         // the matrix modules only
#define DECODE_SC_MATRIX_QUERY_REGISTERS 9  // the matrix modules only
#define DECODE_SC_MATRIX_PIPELINE 10        // the matrix modules only
#define DECODE_SC_MATRIX_SHARE_QUERY 11     // the matrix modules only
#define DECODE_SC_KV_LAYOUT 12              // KV_LAYOUT_*: the scalar kernel, the matrix_token_major* modules
#define DECODE_SC_MATRIX_HEAD_SLICES 13     // the matrix_slices* modules only
#define DECODE_SC_VALUE_DIMS 14             // scalar kernel, nhd and hnd: dims per value load (0 on vllm)
#define DECODE_SC_SCALAR_VARIANT 15         // scalar kernel: DECODE_SCALAR_* bits (VKPAGED_DECODE_TUNE)
#define DECODE_SC_COUNT 16

// DECODE_SC_SCALAR_VARIANT bits (shaders/common/decode_kernel.glsl's header).
#define DECODE_SCALAR_FP8_PAIRS 1u    // fp8 caches: f16 pairs from alternate bytes, E4M3's NaN by a probe
#define DECODE_SCALAR_F16_KEYS 2u     // f16 query and cache: key products in packed f16 (the *_f16 modules)
#define DECODE_SCALAR_F16_VALUES 4u   // f16 cache, vllm layout: value products in packed f16 (the *_f16 modules)
#define DECODE_SCALAR_VALUE_LOADS_SHIFT 8u  // bits 8-15: value loads issued together (0 or 1: one at a time)

// ---- fragment_layout.comp: component slots written per lane and fragment, and the mark of
// a slot past the fragment's component count.
#define FRAGMENT_SLOTS 8u
#define FRAGMENT_UNUSED 0xffffffffu

// FEATURE_* bits: the FEATURES specialization constant of the decode and attention kernels and
// their merges (DECODE_SC_FEATURES, ATTN_SC_FEATURES). One list, so that a bit means one thing
// in every kernel (common/attention_features.glsl reads the shared ones).
#define FEATURE_ALIBI 1u
#define FEATURE_SOFTCAP 2u
#define FEATURE_SINKS 4u
#define FEATURE_WINDOW 8u
#define FEATURE_LSE 16u
#define FEATURE_SPLIT 32u
#define FEATURE_ORDERED 64u  // decode: (sequence, partition) items from decode_order.comp's list
#define FEATURE_MERGE_IN_DISPATCH 128u  // decode, split: merged by the last workgroup (split_merge.glsl)
#define FEATURE_TREE_MASK 256u  // multi-query: the new tokens' tree masks

// Bindings of the decode shader.
#define DECODE_BINDING_QUERY 0
#define DECODE_BINDING_KEY_CACHE 1
#define DECODE_BINDING_VALUE_CACHE 2
#define DECODE_BINDING_BLOCK_TABLES 3
#define DECODE_BINDING_CONTEXT_LENS 4
#define DECODE_BINDING_OUTPUT 5
#define DECODE_BINDING_ALIBI 6
#define DECODE_BINDING_SINKS 7
#define DECODE_BINDING_LSE 8
#define DECODE_BINDING_SCRATCH 9
#define DECODE_BINDING_STATUS 10
#define DECODE_BINDING_ORDER 11  // FEATURE_ORDERED: the item list
#define DECODE_BINDING_MERGE_COUNTERS 12  // FEATURE_MERGE_IN_DISPATCH: a u32 per (sequence, head)
#define DECODE_BINDING_COUNT 13

// The decode's block: its sequences (sequence seq is request seq and its one query token), the
// shared fields, then those only the decode kernels read (key_address at word 26: 8-byte
// aligned, as GLSL lays out a uvec2).
struct DecodePush {
  uint num_seqs;  // S
  VKP_SHARED_PUSH_FIELDS(VKP_PUSH_FIELD)
  uvec2 key_address;    // address variant: device addresses of the caches (else unused;
  uvec2 value_address;  // the matrix_timeline module takes its records' address in key_address)
  uint order_offset;    // FEATURE_ORDERED: the item list's first word
  uint merge_counters_offset;  // FEATURE_MERGE_IN_DISPATCH: the counters' first word
};

// The matrix_timeline module: each subgroup's record (include/vkpaged/decode.hpp, decode_timeline).
#define DECODE_TIMELINE_SM 0
#define DECODE_TIMELINE_WORKGROUP 1
#define DECODE_TIMELINE_SUBGROUP 2
#define DECODE_TIMELINE_UNITS 3
#define DECODE_TIMELINE_STAMPS 4
#define DECODE_TIMELINE_WORDS 14

// ---- decode_order (shaders/decode_order.comp): the items of an ordered decode, longest first ----
// One workgroup lists the (sequence, partition) items, sequence | partition << 16, in order of
// decreasing tokens, ORDER_ITEMS_PER_INVOCATION per invocation at most (reuse DecodePush,
// order_offset; the decode kernels read it in common/decode_order.glsl).
#define ORDER_SC_FEATURES 0
#define ORDER_SC_COUNT 1
#define ORDER_BINDING_CONTEXT_LENS 0
#define ORDER_BINDING_LIST 1
#define ORDER_BINDING_COUNT 2
#define ORDER_WORKGROUP 256u
#define ORDER_ITEMS_PER_INVOCATION 16u
#define ORDER_BUCKETS 256u


// ---- csr_page_table (shaders/csr_page_table.comp): FlashInfer's CSR page tables expanded ----
// One invocation per (request, block-table column) of the dense form, column 0 also writing the
// request's context length, over a linear grid (src/ops/linear_grid.hpp).
#define CSR_WORKGROUP 64u
#define CSR_BINDING_INDPTR 0
#define CSR_BINDING_INDICES 1
#define CSR_BINDING_LAST_PAGE_LEN 2
#define CSR_BINDING_BLOCK_TABLES 3
#define CSR_BINDING_CONTEXT_LENS 4
#define CSR_BINDING_STATUS 5
#define CSR_BINDING_COUNT 6
struct CsrPageTablePush {
  uint num_seqs;            // S
  uint max_blocks_per_seq;  // M: the dense table's columns; more pages are clamped (and flagged)
  uint block_size;          // B
  uint num_indices;         // kv_indices' length: kv_indptr values are clamped into [0, this]
  uint groups_x;            // the linear grid's width
  uint indptr_offset;       // word offsets into each bound range
  uint indices_offset;
  uint last_page_len_offset;
  uint block_tables_offset;
  uint context_lens_offset;
  uint status_offset;
};
#ifdef __cplusplus
static_assert(sizeof(CsrPageTablePush) == 11 * 4);
#endif

// ---- utilities (shaders/fill_random.comp, shaders/read_bandwidth.comp) ----
struct FillRandomPush {
  uint words;        // 32-bit words to write
  uint word_offset;  // first word in the bound range
  uint seed;
  uint dtype;        // DT_*: what the words hold
};
struct ReadBandwidthPush {
  uint vec4_count;  // 16-byte loads in the buffer
  uint impossible;  // a value the XOR of the data never equals in practice
};

// ==== cache operations (shaders/reshape_and_cache.comp, gather.comp, absmax.comp) ====
// Every one runs a 1-D grid of CACHE_OP_WORKGROUP invocations per workgroup, laid out over
// (groups_x, groups_y) because large launches pass the 65535 limit of one grid dimension:
// invocation id = (group.y * groups_x + group.x) * CACHE_OP_WORKGROUP + local id.
#define CACHE_OP_WORKGROUP 64

// reshape_and_cache: one invocation per (token, kv head, 16-byte key chunk of x elements).
#define RESHAPE_SC_INPUT_DTYPE 0   // DT_F32, DT_F16 or DT_BF16 (key and value)
#define RESHAPE_SC_CACHE_DTYPE 1   // any DT_*
#define RESHAPE_SC_SLOT_I64 2      // 1: slot_mapping holds int64 (two words), 0: int32
#define RESHAPE_SC_LAYOUT 3        // KV_LAYOUT_*
#define RESHAPE_SC_COUNT 4
// The rotary variants (reshape_and_cache_rotary*.comp) add the rotary constants, bindings and
// push constants (ReshapeAndCacheRotaryPush) and work in tiles, as rotary_embedding.
#define RESHAPE_SC_ROTARY_STYLE 4      // ROTARY_STYLE_*
#define RESHAPE_SC_COS_SIN_DTYPE 5     // DT_F32 or the key's dtype
#define RESHAPE_SC_POSITION_I64 6      // 1: positions hold int64, 0: int32
#define RESHAPE_SC_TILE_FLOATS 7       // rows_per_tile * rotary_dim: the shared tile
#define RESHAPE_ROTARY_SC_COUNT 8
#define RESHAPE_BINDING_KEY 0
#define RESHAPE_BINDING_VALUE 1
#define RESHAPE_BINDING_SLOT_MAPPING 2
#define RESHAPE_BINDING_KEY_CACHE 3
#define RESHAPE_BINDING_VALUE_CACHE 4
#define RESHAPE_BINDING_STATUS 5
#define RESHAPE_BINDING_COUNT 6
#define RESHAPE_BINDING_QUERY 6      // rotary variants
#define RESHAPE_BINDING_POSITIONS 7
#define RESHAPE_BINDING_COS_SIN 8
#define RESHAPE_ROTARY_BINDING_COUNT 9
// Both cache operations that touch the pools by index (reshape_and_cache, gather) have a
// descriptor variant and an `_address` variant for pools past maxStorageBufferRange
// (common/cache_pools.glsl); the addresses come first so that they are 8-byte aligned.
struct ReshapeAndCachePush {
  uvec2 key_cache_address;    // address variant: device addresses of the cache views (else unused)
  uvec2 value_cache_address;
  uint num_tokens;
  uint num_kv_heads;
  uint head_size;
  uint block_size;
  uint num_slots;  // N * B: slots at or past it are skipped and flagged STATUS_BAD_SLOT
  uint groups_x;
  StridedRows key_rows;          // the new tokens [T, Hkv, D], strided views
  StridedRows value_rows;
  uint slot_offset;         // word offsets into each bound range (caches: multiples of 4)
  uint key_cache_offset;
  uint value_cache_offset;
  uint status_offset;
  float inv_k_scale;  // fp8 caches store encode(key * inv_k_scale), inv_k_scale = 1 / k_scale
  float inv_v_scale;
};

// gather: one invocation per (output row, kv head, 16-byte key chunk of x elements).
#define GATHER_SC_CACHE_DTYPE 0
#define GATHER_SC_OUTPUT_DTYPE 1  // DT_F32, DT_F16 or DT_BF16
#define GATHER_SC_LAYOUT 2        // KV_LAYOUT_*
#define GATHER_SC_COUNT 3
#define GATHER_BINDING_KEY_CACHE 0
#define GATHER_BINDING_VALUE_CACHE 1
#define GATHER_BINDING_BLOCK_TABLES 2
#define GATHER_BINDING_SEQ_STARTS 3
#define GATHER_BINDING_KEY_OUT 4
#define GATHER_BINDING_VALUE_OUT 5
#define GATHER_BINDING_STATUS 6
#define GATHER_BINDING_COUNT 7
struct GatherPush {
  uvec2 key_cache_address;  // address variant: device addresses of the cache views (else unused)
  uvec2 value_cache_address;
  uint num_rows;  // T
  uint num_seqs;  // S
  uint num_kv_heads;
  uint head_size;
  uint block_size;
  uint num_blocks;
  uint max_blocks_per_seq;
  uint groups_x;
  uint key_cache_offset;
  uint value_cache_offset;
  uint block_tables_offset;
  uint seq_starts_offset;
  StridedRows key_out_rows;  // [T, Hkv, D], strided views
  StridedRows value_out_rows;
  uint status_offset;
  float k_scale;  // fp8 caches only
  float v_scale;
};

// absmax: grid-stride over the words of x, one atomicMax per workgroup.
#define ABSMAX_SC_DTYPE 0  // DT_F32, DT_F16 or DT_BF16
#define ABSMAX_SC_COUNT 1
#define ABSMAX_BINDING_X 0
#define ABSMAX_BINDING_AMAX 1
#define ABSMAX_BINDING_COUNT 2
struct AbsmaxPush {
  uint num_elements;
  uint num_words;
  uint x_offset;
  uint amax_offset;
};

// rotary_embedding (shaders/rotary_embedding.comp, common/rotary.glsl) rotates rows, a row being
// one head of one token ([T, H, D] queries, then [T, Hkv, D] keys), in place. A workgroup of
// CACHE_OP_WORKGROUP invocations takes a tile of rows_per_tile rows of one tensor: it stages
// their first rotary_dim elements in shared memory as f32, waits, then writes each word of
// them rotated, so that pairs that straddle invocations never race. Workgroups [0,
// query_tiles) take query rows, the rest key rows. The fused reshape_and_cache_rotary*.comp
// run the same tiles; their key tiles then write the cache from the staged rows.
#define ROTARY_SC_STYLE 0         // ROTARY_STYLE_*
#define ROTARY_SC_DTYPE 1         // query and key: DT_F32, DT_F16 or DT_BF16
#define ROTARY_SC_COS_SIN_DTYPE 2 // DT_F32 or the query's dtype
#define ROTARY_SC_POSITION_I64 3  // 1: positions hold int64 (two words), 0: int32
#define ROTARY_SC_TILE_FLOATS 4   // rows_per_tile * rotary_dim: the shared tile
#define ROTARY_SC_COUNT 5
#define ROTARY_BINDING_QUERY 0
#define ROTARY_BINDING_KEY 1
#define ROTARY_BINDING_POSITIONS 2
#define ROTARY_BINDING_COS_SIN 3
#define ROTARY_BINDING_STATUS 4
#define ROTARY_BINDING_COUNT 5
#define ROTARY_STYLE_NEOX 0u  // pairs (i, i + rotary_dim / 2)
#define ROTARY_STYLE_GPTJ 1u  // pairs (2i, 2i + 1)
#define ROTARY_MAX_TILE_FLOATS 2048u  // the shared tile's bound (8 KiB): rotary_dim at most this
#define ROTARY_MAX_TILE_ROWS 256u     // rows of a tile at most (about 4 words per invocation: rotary_checks.cpp)
struct RotaryPush {
  uint num_tokens;
  uint num_heads;     // query heads; 0 when no query is rotated
  uint num_kv_heads;  // key heads; 0 when no key is rotated (rotary_embedding)
  uint head_size;
  uint rotary_dim;    // even, <= head_size: the first rotary_dim elements of each row rotate
  uint max_position;  // rows of the cos/sin cache
  uint rows_per_tile;
  uint query_tiles;
  uint groups_x;
  StridedRows query_rows;  // [T, H, D] and [T, Hkv, D], strided views
  StridedRows key_rows;
  uint positions_offset;  // word offsets into each bound range
  uint cos_sin_offset;
  uint status_offset;
};
// reshape_and_cache_rotary*.comp: ReshapeAndCachePush's fields, then those of RotaryPush it lacks
// (the rotary code, common/rotary.glsl, reads RotaryPush's names from this block; the fields the
// two share, the key's among them, are here once).
struct ReshapeAndCacheRotaryPush {
  uvec2 key_cache_address;
  uvec2 value_cache_address;
  uint num_tokens;
  uint num_kv_heads;
  uint head_size;
  uint block_size;
  uint num_slots;
  uint groups_x;
  StridedRows key_rows;
  StridedRows value_rows;
  uint slot_offset;
  uint key_cache_offset;
  uint value_cache_offset;
  uint status_offset;
  float inv_k_scale;
  float inv_v_scale;
  uint num_heads;
  uint rotary_dim;
  uint max_position;
  uint rows_per_tile;
  uint query_tiles;
  StridedRows query_rows;
  uint positions_offset;
  uint cos_sin_offset;
};

#ifdef __cplusplus
static_assert(sizeof(StridedRows) == 2 * 4);
static_assert(sizeof(ReshapeAndCachePush) == 20 * 4 && sizeof(ReshapeAndCachePush) <= 128);
static_assert(sizeof(GatherPush) == 23 * 4 && sizeof(GatherPush) <= 128);
static_assert(sizeof(AbsmaxPush) == 4 * 4);
static_assert(sizeof(RotaryPush) == 16 * 4);
static_assert(sizeof(ReshapeAndCacheRotaryPush) == 29 * 4 && sizeof(ReshapeAndCacheRotaryPush) <= 128);
#endif
// ==== end of cache operations ====


// ---- merge_states (shaders/merge_states.comp) ----
#define MERGE_SC_HEAD_SIZE 0
#define MERGE_SC_DTYPE 1
#define MERGE_SC_WRITE_LSE 2
#define MERGE_SC_COUNT 3
struct MergePush {
  uint num_heads;
  uint first_seq;  // the dispatch's first sequence: grids of more than 65535 rows take several
  StridedRows output_a_rows;  // [S, H, D], strided views
  uint lse_a_offset;
  StridedRows output_b_rows;
  uint lse_b_offset;
  StridedRows output_rows;
  uint lse_offset;
};

// ---- multi-query attention (shaders/attention*.comp; split: shaders/partition_merge.comp) ----
// query_starts on the device that fall or pass T set STATUS_BAD_QUERY_STARTS: the request is
// skipped. Two equal ones are a request of no new tokens (a padding request of a bucket's step):
// skipped silently. (A context length below the request's new tokens sets
// STATUS_BAD_CONTEXT_LEN: the rows at positions below 0 attend nothing.)
#define ATTN_SC_WORKGROUP 0             // invocations; also the key positions of a tile (one each)
#define ATTN_SC_HEAD_SIZE 1
#define ATTN_SC_BLOCK_SIZE 2
#define ATTN_SC_ROWS 3                  // (query token, head) rows of a workgroup
#define ATTN_SC_HEADS_PER_WORKGROUP 4   // query heads of one kv head per workgroup; ROWS / this = tokens per tile
#define ATTN_SC_ROW_PARTS 5             // value phase: invocations side by side over the rows
#define ATTN_SC_QUERY_DTYPE 6
#define ATTN_SC_CACHE_DTYPE 7
#define ATTN_SC_KV_LAYOUT 8
#define ATTN_SC_FEATURES 9
#define ATTN_SC_COUNT 10
// The matrix kernel (attention_matrix_khr.comp) takes the ids above (ROW_PARTS unused) and these:
// the product shape M x N x K the device lists (f16 A and B, f32 accumulators), the key
// positions of a tile, and whether each subgroup keeps its rows' query fragments in registers.
#define ATTN_SC_MATRIX_M 10
#define ATTN_SC_MATRIX_N 11
#define ATTN_SC_MATRIX_K 12
#define ATTN_SC_KEY_TILE 13
#define ATTN_SC_QUERY_REGISTERS 14
#define ATTN_SC_WORKGROUP_SYNC 15  // every subgroup computes a row block and syncs with workgroup barriers
#define ATTN_MATRIX_SC_COUNT 16
// ATTN_SC_FEATURES bits: FEATURE_* above (the merge pass takes the same).
#define ATTN_BINDING_QUERY 0
#define ATTN_BINDING_KEY_CACHE 1
#define ATTN_BINDING_VALUE_CACHE 2
#define ATTN_BINDING_BLOCK_TABLES 3
#define ATTN_BINDING_CONTEXT_LENS 4
#define ATTN_BINDING_QUERY_STARTS 5
#define ATTN_BINDING_OUTPUT 6
#define ATTN_BINDING_ALIBI 7
#define ATTN_BINDING_SINKS 8
#define ATTN_BINDING_LSE 9
#define ATTN_BINDING_SCRATCH 10
#define ATTN_BINDING_STATUS 11
#define ATTN_BINDING_TREE_MASK 12
#define ATTN_BINDING_COUNT 13
// The merge pass of every split (shaders/partition_merge.comp; decode, attention and MLA
// dispatch it, with AttentionPush): one workgroup per (head, row token). Its scratch:
// common/split_scratch.h.
#define PARTITION_MERGE_SC_WORKGROUP 0
#define PARTITION_MERGE_SC_VALUE_WIDTH 1  // the value sums' width: D, or MLA's Dv
#define PARTITION_MERGE_SC_QUERY_DTYPE 2
#define PARTITION_MERGE_SC_FEATURES 3
#define PARTITION_MERGE_SC_QUERY_STARTS 4  // 1: rows' requests from query_starts; 0: a token per request (decode)
#define PARTITION_MERGE_SC_COUNT 5
#define PARTITION_MERGE_BINDING_SCRATCH 0
#define PARTITION_MERGE_BINDING_CONTEXT_LENS 1
#define PARTITION_MERGE_BINDING_QUERY_STARTS 2
#define PARTITION_MERGE_BINDING_OUTPUT 3
#define PARTITION_MERGE_BINDING_SINKS 4
#define PARTITION_MERGE_BINDING_LSE 5
#define PARTITION_MERGE_BINDING_COUNT 6
// 32 words: the whole 128 bytes every device offers, so the caches' addresses (the address
// variant only) share the words of their offsets (which that variant does not use): key_offset
// holds the key cache's low 32 bits there, key_address_high its high ones.
struct AttentionPush {
  uint num_requests;  // S
  uint num_tokens;    // T
  VKP_SHARED_PUSH_FIELDS(VKP_PUSH_FIELD)
  uint tree_mask_bytes;  // tree mask: its size (bytes past it are never read)
  uint query_starts_offset;
  uint tree_mask_offset;
  uint key_address_high;  // address variant: the high words of the caches' device addresses
  uint value_address_high;
};

#ifdef __cplusplus
static_assert(sizeof(DecodePush) == 32 * 4, "DecodePush must be plain 32-bit fields");
static_assert(sizeof(DecodePush) <= 128, "push constants must fit the 128-byte minimum");
static_assert(offsetof(DecodePush, key_address) % 8 == 0, "GLSL aligns a uvec2 to 8 bytes");
static_assert(sizeof(AttentionPush) == 32 * 4, "AttentionPush: plain 32-bit fields within the 128-byte minimum");
// The shared fields lie alike in both blocks: same type, same place from the first of them.
#define VKP_SAME_SHARED_FIELD(type, name)                                                                   \
  static_assert(std::is_same_v<decltype(DecodePush::name), type> &&                                        \
                    std::is_same_v<decltype(AttentionPush::name), type> &&                                 \
                    offsetof(DecodePush, name) - offsetof(DecodePush, num_heads) ==                       \
                        offsetof(AttentionPush, name) - offsetof(AttentionPush, num_heads),               \
                "DecodePush and AttentionPush: VKP_SHARED_PUSH_FIELDS");
VKP_SHARED_PUSH_FIELDS(VKP_SAME_SHARED_FIELD)
#undef VKP_SAME_SHARED_FIELD
}  // namespace vkpaged::shader
#endif

#endif  // VKPAGED_SHADER_INTERFACE_H
