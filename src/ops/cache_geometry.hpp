// SPDX-License-Identifier: Apache-2.0
#pragma once
// Argument checks shared by the cache operations (reshape_and_cache, copy/swap_blocks, gather)
// and their CPU references: the cache layouts read off dtypes and shapes, block pairs, slots
// (scales: ops/scale_validation.hpp). Failures throw vkpaged::Error(invalid_argument) naming the argument.
#include <cstdint>
#include <initializer_list>
#include <span>
#include <string>
#include <vector>

#include "vkpaged/attention.hpp"
#include "vkpaged/block_manager.hpp"
#include "vkpaged/dtype.hpp"
#include "vkpaged/kv_layout.hpp"
#include "vkpaged/tensor.hpp"

namespace vkpaged::detail {

[[noreturn]] void refuse_cache_argument(const std::string& message);

// One layer's pools of one dtype in one layout (kv_layout.hpp): vllm key [N, Hkv, D/x, B, x]
// and value [N, Hkv, D, B]; nhd key and value [N, B, Hkv, D]; hnd key and value [N, Hkv, B, D].
struct CacheGeometry {
  int64_t num_blocks = 0;
  int64_t num_kv_heads = 0;
  int64_t head_size = 0;
  int64_t block_size = 0;
  DType dtype = DType::f16;
  KvLayout layout = KvLayout::vllm;

  int64_t pack() const noexcept { return int64_t(16 / dtype_size(dtype)); }
  int64_t num_slots() const noexcept { return num_blocks * block_size; }
  // Bytes of one block of one pool (keys and values alike, in every layout).
  uint64_t block_bytes() const noexcept { return uint64_t(num_kv_heads * head_size * block_size) * dtype_size(dtype); }
  uint64_t pool_bytes() const noexcept { return block_bytes() * uint64_t(num_blocks); }
  Shape key_shape() const;
  Shape value_shape() const;
  KvBlockGeometry block() const noexcept {
    return {uint32_t(num_kv_heads), uint32_t(head_size), uint32_t(block_size), uint32_t(pack())};
  }
  // Element index in a pool of (block, kv head g, dim d, in-block offset o).
  uint64_t key_index(int64_t b, int64_t g, int64_t d, int64_t o) const noexcept {
    return uint64_t(b) * block().block_elements() + block().key_offset(layout, uint32_t(g), uint32_t(d), uint32_t(o));
  }
  uint64_t value_index(int64_t b, int64_t g, int64_t d, int64_t o) const noexcept {
    return uint64_t(b) * block().block_elements() + block().value_offset(layout, uint32_t(g), uint32_t(d), uint32_t(o));
  }
};

// The key and value pools an attention problem reads.
inline CacheGeometry cache_geometry_of(const AttentionShape& s) noexcept {
  return {s.num_blocks, s.num_kv_heads, s.head_size, s.block_size, s.cache_dtype, s.kv_layout};
}

constexpr bool is_kv_layout(KvLayout layout) noexcept {
  return layout == KvLayout::vllm || layout == KvLayout::nhd || layout == KvLayout::hnd;
}
// Refuses a value that is no KvLayout, naming `name`.
void check_kv_layout(const std::string& name, KvLayout layout);
// "[N, B, Hkv, D]": a layout's value shape (and its key shape, but for vllm's) in symbols.
const char* value_shape_symbols(KvLayout layout) noexcept;
const char* key_shape_symbols(KvLayout layout) noexcept;

// The dtypes reshape_and_cache and gather take; copy and swap also take u8 (raw fp8 bytes).
inline constexpr std::initializer_list<DType> kCacheDtypes = {DType::f32, DType::f16, DType::bf16, DType::fp8_e4m3,
                                                              DType::fp8_e5m2};
inline constexpr std::initializer_list<DType> kRawCacheDtypes = {DType::f32,      DType::f16,      DType::bf16,
                                                                 DType::fp8_e4m3, DType::fp8_e5m2, DType::u8};

// Reads and checks one layer's pools in `layout`. `prefix` starts the names in messages ("",
// "layers[1].").
CacheGeometry cache_geometry(const std::string& prefix, KvLayout layout, DType key_dtype, const Shape& key_shape,
                             DType value_dtype, const Shape& value_shape,
                             std::initializer_list<DType> dtypes = kCacheDtypes);

// reshape_and_cache's inputs: key and value [T, Hkv, D] of one float dtype matching the cache,
// slot_mapping [T] i64 or i32. Returns T.
int64_t check_token_inputs(const CacheGeometry& cache, DType key_dtype, const Shape& key, DType value_dtype,
                           const Shape& value, DType slot_dtype, const Shape& slot_mapping);

// gather's index inputs and outputs: block_tables [S, M], seq_starts [S + 1] (i32 or u32),
// key_out and value_out [T, Hkv, D] of one float dtype.
struct GatherGeometry {
  int64_t num_seqs = 0;
  int64_t max_blocks_per_seq = 0;
  int64_t num_rows = 0;
  DType output_dtype = DType::f16;
};
GatherGeometry check_gather_inputs(const CacheGeometry& cache, DType tables_dtype, const Shape& block_tables,
                                   DType starts_dtype, const Shape& seq_starts, DType key_out_dtype,
                                   const Shape& key_out, DType value_out_dtype, const Shape& value_out);

// Pairs for copy (same pools: `copy` = true) or swap. Ids must lie in [0, N) of their side and
// no dst may appear twice; a copy may not read a block another pair writes.
void check_block_pairs(std::span<const BlockCopy> pairs, int64_t src_blocks, int64_t dst_blocks, bool copy);

// Host-known slots: each negative (padding) or below N * B.
void check_slots(std::span<const int64_t> slots, int64_t num_slots);

}  // namespace vkpaged::detail
