// SPDX-License-Identifier: Apache-2.0
#include "ops/mla_attention_planner.hpp"

#include <fmt/format.h>

#include <algorithm>

#include "ops/attention_validation.hpp"
#include "ops/integer_math.hpp"
#include "ops/pool_address_rule.hpp"
#include "vkpaged/error.hpp"

namespace vkpaged::detail {

namespace {

[[noreturn]] void refuse(const std::string& message) { throw Error(ErrorCode::invalid_argument, message); }
[[noreturn]] void unsupported(const std::string& message) { throw Error(ErrorCode::unsupported, message); }

// The most partitions the options let a split take of `longest` positions: one in a single
// pass, else one per partition_tokens (given) or per kMlaPartitionQuantum (automatic).
uint64_t most_partitions(uint32_t longest, const MlaOptions& o) {
  if (o.split == SplitMode::single_pass) return 1;
  return std::max<uint64_t>(1, ceil_div(longest, o.partition_tokens != 0 ? o.partition_tokens : kMlaPartitionQuantum));
}

// Key positions staged per tile at most: more share each barrier, fewer take less shared memory.
constexpr uint32_t kMaxKeyTile = 32;
// Value sums kept per invocation at most (rows x dims it owns): beyond, registers spill.
constexpr uint32_t kMaxAccumulators = 64;
constexpr uint32_t kMaxRows = 32;
constexpr uint32_t kMaxKeyHeadSize = 576;
constexpr uint32_t kMaxValueHeadSize = 512;

// Rows, key tile and row parts: rows for the longest request's tokens times the heads, within
// the register budget, then rows and key tile halved (the larger part of the shared memory
// first) until the device's shared memory holds them.
void choose_tiles(AttentionChoice& c, const DeviceCapabilities& dev, const MlaShape& m) {
  const AttentionShape& s = m.attention;
  const uint32_t Dv = m.value_head_size, Dk = s.head_size;
  c.workgroup = kScalarAttentionWorkgroup;
  const uint32_t dims = uint32_t(ceil_div(Dv, c.workgroup));
  uint32_t max_rows = 1;
  while (max_rows * 2 <= kMaxRows && max_rows * 2 * dims <= kMaxAccumulators) max_rows *= 2;
  const uint64_t wanted = uint64_t(c.max_query_tokens) * s.num_heads;
  c.rows = 1;
  while (c.rows < max_rows && c.rows < wanted) c.rows *= 2;
  c.key_tile = kMaxKeyTile;
  const uint64_t row_bytes = uint64_t(Dk) * dtype_size(s.cache_dtype);
  auto bytes = [&] { return mla_attention_shared_bytes(c.rows, c.key_tile, Dk, s.cache_dtype, c.workgroup); };
  while (bytes() > dev.max_shared_memory) {
    if (c.key_tile > 8 && c.key_tile * row_bytes >= uint64_t(c.rows) * Dk * 4) c.key_tile /= 2;
    else if (c.rows > 1) c.rows /= 2;
    else if (c.key_tile > 1) c.key_tile /= 2;
    else
      unsupported(fmt::format("head_size: Dk = {} needs {} bytes of shared memory per workgroup (one row, one "
                              "position), more than device {} has ({})",
                              Dk, bytes(), dev.name, dev.max_shared_memory));
  }
  c.shared_bytes = bytes();
  slice_heads(c, s.num_heads);
  choose_row_parts(c, Dv);
}

// The pools are read by device address (each kernel's address variant) when the largest is past
// maxStorageBufferRange (pool_address_rule.hpp).
void choose_pool_access(AttentionChoice& c, const DeviceCapabilities& dev, const MlaShape& m) {
  const AttentionShape& s = m.attention;
  const bool one = m.cache_form == MlaCacheForm::one_pool;
  const uint32_t width = one ? s.head_size : std::max(m.value_head_size, m.rope_head_size());
  const char* name = one ? "mla_cache" : (width == m.value_head_size ? "ckv_cache" : "kpe_cache");
  const uint64_t bytes = uint64_t(s.num_blocks) * s.block_size * width * dtype_size(s.cache_dtype);
  c.address = pool_read_by_address(dev, bytes, s.num_blocks, name);
}

}  // namespace

size_t mla_attention_shared_bytes(uint32_t rows, uint32_t key_tile, uint32_t key_head_size, DType cache_dtype,
                                  uint32_t workgroup) {
  // queries (rows x Dk f32), staged rows (key_tile x Dk cache elements), scores (rows x tile),
  // softmax partials and mask partials, tile blocks, 4 per-row arrays, mask base
  return 4ull * (size_t(rows) * key_head_size + size_t(rows) * key_tile + 2ull * workgroup + key_tile + 4ull * rows + 1) +
         size_t(key_tile) * key_head_size * dtype_size(cache_dtype);
}

void validate_mla_shape(const MlaShape& m) {
  const AttentionShape& s = m.attention;
  // The multi-query checks with a head size they take: MLA's widths are checked below.
  AttentionShape generic = s;
  generic.head_size = 256;
  validate_attention_shape(generic);
  if (s.num_kv_heads != 1) refuse(fmt::format("num_kv_heads: {} (MLA has one kv head)", s.num_kv_heads));
  if (s.kv_layout != KvLayout::nhd)
    refuse(fmt::format("kv_layout: {} (an MLA row is nhd's with one kv head: 1)", uint32_t(s.kv_layout)));
  const uint32_t Dk = s.head_size, Dv = m.value_head_size;
  if (Dk % 8 != 0 || Dk < 8 || Dk > kMaxKeyHeadSize)
    refuse(fmt::format("head_size: Dk = {} is not a multiple of 8 from 8 to {}", Dk, kMaxKeyHeadSize));
  if (Dv % 8 != 0 || Dv < 8 || Dv > std::min(Dk, kMaxValueHeadSize))
    refuse(fmt::format("value_head_size: Dv = {} is not a multiple of 8 from 8 to min(Dk, {}) = {}", Dv,
                       kMaxValueHeadSize, std::min(Dk, kMaxValueHeadSize)));
  if (m.cache_form != MlaCacheForm::one_pool && m.cache_form != MlaCacheForm::two_pools)
    refuse(fmt::format("cache_form: {} is not one_pool (0) or two_pools (1)", uint32_t(m.cache_form)));
  if (m.cache_form == MlaCacheForm::two_pools && Dk == Dv)
    refuse(fmt::format("kpe_cache: R = Dk - Dv = 0 with two pools (Dk = Dv = {}); give the rows as one pool", Dk));
}

AttentionChoice plan_mla_attention_rows(const DeviceCapabilities& dev, const MlaShape& m, const QueryRows& rows,
                                        const MlaOptions& o) {
  validate_mla_shape(m);
  const AttentionShape& s = m.attention;
  if (rows.kind == QueryRows::Kind::single_tokens)
    throw Error(ErrorCode::internal, "query rows: an MLA plan takes a step's query starts or a bucket");
  const QueryStartsSummary summary = summarize_query_rows(s, rows);
  AttentionOptions split_options;
  split_options.split = o.split;
  split_options.partition_tokens = o.partition_tokens;
  validate_split_options(split_options, kMlaPartitionQuantum);
  if (o.kernel != AttentionKernel::automatic && o.kernel != AttentionKernel::scalar && o.kernel != AttentionKernel::matrix)
    refuse(fmt::format("kernel: {} (MLA runs on automatic (0), scalar (2) or matrix (3); it has no decode kernels)",
                       uint32_t(o.kernel)));
  AttentionChoice c;
  choose_pool_access(c, dev, m);
  c.bucket = rows.bucket();
  c.max_query_tokens = summary.max_query_tokens;
  c.tree_mask_bytes = size_t(summary.tree_mask_bytes);
  // The matrix kernel where asked, or (automatic) where it can run; else the scalar kernel.
  if (take_matrix_kernel(o.kernel, [&] { return mla_matrix_refusal(dev, m); })) {
    // The most workgroups the step may have: each request's tiles (one, for the one-block layouts
    // this bounds) in as many partitions as the split may take.
    plan_mla_matrix(c, dev, m, uint64_t(s.num_requests) * most_partitions(longest_context(s), o));
  } else {
    c.kernel = AttentionKernel::scalar;
    choose_tiles(c, dev, m);
  }
  choose_tile_slots(c, s);
  if (c.groups_per_kv_head > 65535)
    unsupported(fmt::format("num_heads: {} heads need more than 65535 workgroups along one grid dimension", s.num_heads));
  choose_attention_split(c, dev, s, m.value_head_size, rows.starts, split_options,
                         SplitPolicy{.quantum = kMlaPartitionQuantum, .key_tile = c.key_tile,
                                     .resident_workgroups = c.resident_workgroups});
  return c;
}

AttentionChoice plan_mla_attention(const DeviceCapabilities& dev, const MlaShape& m, std::span<const int32_t> starts,
                                   const MlaOptions& o) {
  return plan_mla_attention_rows(dev, m, QueryRows::step(starts), o);
}

}  // namespace vkpaged::detail
