// SPDX-License-Identifier: Apache-2.0
#include "ops/cache_geometry.hpp"

#include <fmt/format.h>

#include <algorithm>
#include <cmath>
#include <unordered_map>

#include "common/shader_interface.h"
#include "vkpaged/error.hpp"
#include "vkpaged/kv_layout.hpp"

namespace vkpaged::detail {

static_assert(uint32_t(KvLayout::vllm) == KV_LAYOUT_VLLM && uint32_t(KvLayout::nhd) == KV_LAYOUT_NHD &&
                  uint32_t(KvLayout::hnd) == KV_LAYOUT_HND,
              "the layouts of include/vkpaged/kv_layout.hpp and shaders/common/shader_interface.h");

namespace {

std::string dtype_list(std::initializer_list<DType> dtypes) {
  std::vector<std::string_view> names;
  for (DType t : dtypes) names.push_back(dtype_name(t));
  return fmt::format("{}", fmt::join(names, ", "));
}

void check_dtype(const std::string& name, DType t, std::initializer_list<DType> dtypes) {
  if (std::find(dtypes.begin(), dtypes.end(), t) == dtypes.end())
    refuse_cache_argument(fmt::format("{}: dtype {} is not one of {}", name, dtype_name(t), dtype_list(dtypes)));
}

void check_shape(const std::string& name, const Shape& got, const Shape& want, const std::string& layout) {
  if (!(got == want))
    refuse_cache_argument(fmt::format("{}: shape {} does not match {} = {}", name, got.str(), layout, want.str()));
}

}  // namespace

void refuse_cache_argument(const std::string& message) { throw Error(ErrorCode::invalid_argument, message); }

namespace {

// Where Hkv, D and B sit in a layout's value shape (N is dimension 0 in every layout).
struct ValueDims {
  int hkv, d, b;
};
ValueDims value_dims(KvLayout layout) {
  switch (layout) {
    case KvLayout::nhd: return {2, 3, 1};  // [N, B, Hkv, D]
    case KvLayout::hnd: return {1, 3, 2};  // [N, Hkv, B, D]
    case KvLayout::vllm: break;
  }
  return {1, 2, 3};  // [N, Hkv, D, B]
}

}  // namespace

void check_kv_layout(const std::string& name, KvLayout layout) {
  if (!is_kv_layout(layout))
    refuse_cache_argument(fmt::format("{}: {} is not a cache layout (vllm, nhd, hnd)", name, uint32_t(layout)));
}

const char* value_shape_symbols(KvLayout layout) noexcept {
  switch (layout) {
    case KvLayout::nhd: return "[N, B, Hkv, D]";
    case KvLayout::hnd: return "[N, Hkv, B, D]";
    case KvLayout::vllm: break;
  }
  return "[N, Hkv, D, B]";
}

const char* key_shape_symbols(KvLayout layout) noexcept {
  return layout == KvLayout::vllm ? "[N, Hkv, D/x, B, x]" : value_shape_symbols(layout);
}

Shape CacheGeometry::key_shape() const {
  if (layout == KvLayout::vllm) return Shape{num_blocks, num_kv_heads, head_size / pack(), block_size, pack()};
  return value_shape();
}

Shape CacheGeometry::value_shape() const {
  switch (layout) {
    case KvLayout::nhd: return Shape{num_blocks, block_size, num_kv_heads, head_size};
    case KvLayout::hnd: return Shape{num_blocks, num_kv_heads, block_size, head_size};
    case KvLayout::vllm: break;
  }
  return Shape{num_blocks, num_kv_heads, head_size, block_size};
}

CacheGeometry cache_geometry(const std::string& prefix, KvLayout layout, DType key_dtype, const Shape& key_shape,
                             DType value_dtype, const Shape& value_shape, std::initializer_list<DType> dtypes) {
  const std::string key = prefix + "key_cache", value = prefix + "value_cache";
  check_kv_layout(prefix + "layout", layout);
  check_dtype(key, key_dtype, dtypes);
  if (value_dtype != key_dtype)
    refuse_cache_argument(
        fmt::format("{}: dtype {} differs from {}'s {}", value, dtype_name(value_dtype), key, dtype_name(key_dtype)));
  if (value_shape.rank() != 4)
    refuse_cache_argument(fmt::format("{}: shape {} is not {} (the {} layout)", value, value_shape.str(),
                                      value_shape_symbols(layout), kv_layout_name(layout)));
  const ValueDims dims = value_dims(layout);
  CacheGeometry g;
  g.dtype = key_dtype;
  g.layout = layout;
  g.num_blocks = value_shape[0];
  g.num_kv_heads = value_shape[dims.hkv];
  g.head_size = value_shape[dims.d];
  g.block_size = value_shape[dims.b];
  // Where a dimension was read from: a view of another layout shows here first.
  const auto of_layout = [&](int dim) {
    return fmt::format("dimension {} of the {} layout's {}", dim, kv_layout_name(layout), value_shape_symbols(layout));
  };
  if (g.num_kv_heads == 0) refuse_cache_argument(fmt::format("{}: Hkv ({}) is 0", value, of_layout(dims.hkv)));
  if (g.head_size == 0 || g.head_size % g.pack() != 0)
    refuse_cache_argument(fmt::format("{}: head size D = {} is not a positive multiple of x = {} for dtype {} ({})",
                                      value, g.head_size, g.pack(), dtype_name(g.dtype), of_layout(dims.d)));
  if (g.block_size == 0) refuse_cache_argument(fmt::format("{}: block size B ({}) is 0", value, of_layout(dims.b)));
  check_shape(key, key_shape, g.key_shape(),
              fmt::format("{} of the value cache (the {} layout)", key_shape_symbols(layout), kv_layout_name(layout)));
  return g;
}

int64_t check_token_inputs(const CacheGeometry& cache, DType key_dtype, const Shape& key, DType value_dtype,
                           const Shape& value, DType slot_dtype, const Shape& slot_mapping) {
  check_dtype("key", key_dtype, {DType::f32, DType::f16, DType::bf16});
  if (value_dtype != key_dtype)
    refuse_cache_argument(
        fmt::format("value: dtype {} differs from key's {}", dtype_name(value_dtype), dtype_name(key_dtype)));
  if (key.rank() != 3) refuse_cache_argument(fmt::format("key: shape {} is not [T, Hkv, D]", key.str()));
  const int64_t tokens = key[0];
  const Shape want{tokens, cache.num_kv_heads, cache.head_size};
  const std::string caches = fmt::format("the caches (read in the {} layout)", kv_layout_name(cache.layout));
  check_shape("key", key, want, "[T, Hkv, D] of " + caches);
  check_shape("value", value, want, "[T, Hkv, D] of key and " + caches);
  check_dtype("slot_mapping", slot_dtype, {DType::i64, DType::i32});
  check_shape("slot_mapping", slot_mapping, Shape{tokens}, "[T] of key");
  return tokens;
}

GatherGeometry check_gather_inputs(const CacheGeometry& cache, DType tables_dtype, const Shape& block_tables,
                                   DType starts_dtype, const Shape& seq_starts, DType key_out_dtype,
                                   const Shape& key_out, DType value_out_dtype, const Shape& value_out) {
  GatherGeometry g;
  check_dtype("block_tables", tables_dtype, {DType::i32, DType::u32});
  if (block_tables.rank() != 2)
    refuse_cache_argument(fmt::format("block_tables: shape {} is not [S, M]", block_tables.str()));
  g.num_seqs = block_tables[0];
  g.max_blocks_per_seq = block_tables[1];
  check_dtype("seq_starts", starts_dtype, {DType::i32, DType::u32});
  check_shape("seq_starts", seq_starts, Shape{g.num_seqs + 1}, "[S + 1] of block_tables");
  check_dtype("key_out", key_out_dtype, {DType::f32, DType::f16, DType::bf16});
  if (value_out_dtype != key_out_dtype)
    refuse_cache_argument(fmt::format("value_out: dtype {} differs from key_out's {}", dtype_name(value_out_dtype),
                                      dtype_name(key_out_dtype)));
  g.output_dtype = key_out_dtype;
  if (key_out.rank() != 3) refuse_cache_argument(fmt::format("key_out: shape {} is not [T, Hkv, D]", key_out.str()));
  g.num_rows = key_out[0];
  const Shape want{g.num_rows, cache.num_kv_heads, cache.head_size};
  const std::string caches = fmt::format("the caches (read in the {} layout)", kv_layout_name(cache.layout));
  check_shape("key_out", key_out, want, "[T, Hkv, D] of " + caches);
  check_shape("value_out", value_out, want, "[T, Hkv, D] of key_out and " + caches);
  return g;
}

void check_block_pairs(std::span<const BlockCopy> pairs, int64_t src_blocks, int64_t dst_blocks, bool copy) {
  std::unordered_map<int32_t, size_t> dst_of;  // dst block -> its pair
  for (size_t i = 0; i < pairs.size(); ++i) {
    const BlockCopy& p = pairs[i];
    if (p.src < 0 || p.src >= src_blocks)
      refuse_cache_argument(fmt::format("pairs[{}].src: block id {} is outside [0, N = {})", i, p.src, src_blocks));
    if (p.dst < 0 || p.dst >= dst_blocks)
      refuse_cache_argument(fmt::format("pairs[{}].dst: block id {} is outside [0, N = {})", i, p.dst, dst_blocks));
    if (copy && p.src == p.dst) continue;  // a no-op, skipped when recording
    const auto [it, fresh] = dst_of.emplace(p.dst, i);
    if (!fresh)
      refuse_cache_argument(
          fmt::format("pairs[{}].dst: block {} is already the destination of pairs[{}]", i, p.dst, it->second));
  }
  if (!copy) return;
  for (size_t i = 0; i < pairs.size(); ++i) {
    const BlockCopy& p = pairs[i];
    if (p.src == p.dst) continue;
    const auto it = dst_of.find(p.src);
    if (it != dst_of.end())
      refuse_cache_argument(
          fmt::format("pairs[{}].src: block {} is also the destination of pairs[{}]", i, p.src, it->second));
  }
}

void check_slots(std::span<const int64_t> slots, int64_t num_slots) {
  for (size_t i = 0; i < slots.size(); ++i)
    if (slots[i] >= num_slots)
      refuse_cache_argument(fmt::format("slot_mapping[{}]: slot {} is not below N * B = {}", i, slots[i], num_slots));
}

}  // namespace vkpaged::detail
