// SPDX-License-Identifier: Apache-2.0
#include "ops/attention_planner.hpp"

#include <fmt/format.h>

#include <algorithm>
#include <utility>

#include "common/shader_interface.h"
#include "common/split_scratch.h"
#include "ops/attention_validation.hpp"
#include "ops/cache_geometry.hpp"
#include "ops/integer_math.hpp"
#include "ops/pool_address_rule.hpp"
#include "vkpaged/error.hpp"

namespace vkpaged::detail {

namespace {

[[noreturn]] void unsupported(const std::string& message) { throw Error(ErrorCode::unsupported, message); }

// Rows per workgroup it chooses from: more rows share each key and value read, fewer leave
// fewer rows idle for short requests (and take less shared memory).
constexpr uint32_t kMinRows = 8;
constexpr uint32_t kMaxRows = 32;
// Split: workgroups wanted per compute unit, as the decode planner's default.
constexpr uint32_t kWorkgroupsPerComputeUnit = 4;
// The merge pass: invocations over the output pairs of one row.
constexpr uint32_t kMergeWorkgroup = 64;

// The workgroup rows: enough for the longest request's tokens times the group's heads (up to
// kMaxRows), halved while the device's shared memory is short.
void choose_rows(AttentionChoice& c, const DeviceCapabilities& dev, const AttentionShape& s) {
  const uint32_t group = s.num_heads / s.num_kv_heads;
  const uint64_t wanted = uint64_t(c.max_query_tokens) * group;
  c.workgroup = kScalarAttentionWorkgroup;
  c.rows = kMinRows;
  while (c.rows < kMaxRows && c.rows < wanted) c.rows *= 2;
  while (c.rows > kMinRows && attention_shared_bytes(c.rows, s.head_size, c.workgroup) > dev.max_shared_memory)
    c.rows /= 2;
  c.shared_bytes = attention_shared_bytes(c.rows, s.head_size, c.workgroup);
  if (c.shared_bytes > dev.max_shared_memory)
    unsupported(fmt::format("head_size: {} needs {} bytes of shared memory per workgroup, more than device {} has ({})",
                            s.head_size, c.shared_bytes, dev.name, dev.max_shared_memory));
  slice_heads(c, group);
  choose_row_parts(c, s.head_size);
}

}  // namespace

uint32_t longest_context(const AttentionShape& s) {
  return s.max_context_len ? s.max_context_len : s.max_blocks_per_seq * s.block_size;
}

void slice_heads(AttentionChoice& c, uint32_t group) {
  c.groups_per_kv_head = uint32_t(ceil_div(group, c.rows));
  c.heads_per_workgroup = uint32_t(ceil_div(group, c.groups_per_kv_head));
  c.tokens_per_tile = c.rows / c.heads_per_workgroup;
}

void choose_row_parts(AttentionChoice& c, uint32_t value_width) {
  c.row_parts = 1;
  while (c.row_parts * 2 <= c.rows && c.row_parts * 2 * value_width <= c.workgroup) c.row_parts *= 2;
}

bool take_matrix_kernel(AttentionKernel requested, const std::function<std::string()>& refusal) {
  if (requested != AttentionKernel::matrix && requested != AttentionKernel::automatic) return false;
  const std::string why = refusal();
  if (requested == AttentionKernel::matrix && !why.empty()) unsupported("kernel: matrix: " + why);
  return why.empty();
}

void choose_tile_slots(AttentionChoice& c, const AttentionShape& s) {
  c.tile_slots = uint32_t(std::min<uint64_t>(uint64_t(s.num_query_tokens) / c.tokens_per_tile + s.num_requests, UINT32_MAX));
  if (c.tile_slots > 65535)
    unsupported(fmt::format("num_query_tokens: T = {} in tiles of {} tokens with S = {} requests need {} workgroups along "
                            "one grid dimension, past the 65535 every device launches",
                            s.num_query_tokens, c.tokens_per_tile, s.num_requests, c.tile_slots));
}

void validate_split_options(const AttentionOptions& o, uint32_t quantum) {
  if (o.partition_tokens % quantum != 0)
    throw Error(ErrorCode::invalid_argument,
                fmt::format("partition_tokens: {} is not a multiple of {}", o.partition_tokens, quantum));
  if (o.partition_tokens != 0 && o.split == SplitMode::single_pass)
    throw Error(ErrorCode::invalid_argument, "partition_tokens: given with split = single_pass");
}

uint32_t balanced_partition_tokens(uint64_t workgroups, uint32_t max_len, uint32_t compute_units,
                                   const SplitPolicy& policy) {
  const uint64_t units = uint64_t(std::max(1u, compute_units)) * std::max(1u, policy.resident_workgroups),
                 tile = std::max(1u, policy.key_tile), quantum = policy.quantum;
  auto cost = [&](uint64_t parts, uint64_t tokens) {
    return ceil_div(workgroups * parts, units) * (ceil_div(tokens, tile) + kSplitFixedTiles);
  };
  uint64_t best = cost(1, max_len);
  uint32_t best_tokens = 0;
  const uint64_t most = std::min<uint64_t>(ceil_div(max_len, quantum), 65535);
  for (uint64_t parts = 2; parts <= most; ++parts) {
    const uint64_t tokens = ceil_div(ceil_div(max_len, parts), quantum) * quantum;
    const uint64_t c = cost(ceil_div(max_len, tokens), tokens);
    if (c < best) {
      best = c;
      best_tokens = uint32_t(tokens);
    }
  }
  return best_tokens;
}

void choose_attention_split(AttentionChoice& c, const DeviceCapabilities& dev, const AttentionShape& s,
                            uint32_t value_head_size, std::span<const int32_t> starts, const AttentionOptions& o,
                            const SplitPolicy& policy) {
  const uint32_t quantum = policy.quantum;
  const uint32_t max_len = longest_context(s);
  uint64_t tiles = 0;  // workgroups of one pass: the requests' tiles times the kv-head groups
  for (size_t i = 0; i < starts.size() && i < s.num_requests; ++i)
    tiles += ceil_div(uint32_t(starts[i + 1] - starts[i]), c.tokens_per_tile);
  if (starts.empty()) tiles = std::max<uint64_t>(s.num_requests, ceil_div(s.num_query_tokens, c.tokens_per_tile));
  const uint64_t workgroups = tiles * s.num_kv_heads * c.groups_per_kv_head;
  uint32_t tokens = o.partition_tokens;
  bool split = false;
  if (o.split == SplitMode::single_pass || max_len == 0 || s.num_requests == 0) {
    split = false;
  } else if (o.split == SplitMode::split) {
    split = true;
    if (tokens == 0) tokens = uint32_t(std::max<uint64_t>(quantum, ceil_div(ceil_div(max_len, 4), quantum) * quantum));
  } else if (tokens != 0) {
    split = tokens < max_len;
  } else if (policy.key_tile != 0) {
    tokens = balanced_partition_tokens(workgroups, max_len, dev.compute_units, policy);
    split = tokens != 0 && tokens < max_len;
  } else {
    // Few query tokens facing long contexts (speculative verification, a chunk's last tile):
    // the one-pass grid would leave most of the device idle while a few workgroups walk
    // thousands of positions each. Split when it fills less than half of the wanted
    // workgroups, into partitions that bring the count up to about that many.
    const uint64_t wanted = uint64_t(kWorkgroupsPerComputeUnit) * std::max(1u, dev.compute_units);
    if (workgroups * 2 < wanted) {
      const uint64_t parts = ceil_div(wanted, std::max<uint64_t>(workgroups, 1));
      tokens = uint32_t(std::max<uint64_t>(quantum, ceil_div(ceil_div(max_len, parts), quantum) * quantum));
      split = tokens < max_len;
    }
  }
  const uint64_t partitions = split ? ceil_div(max_len, tokens) : 1;
  const uint64_t scratch =
      split ? shader::split_scratch_bytes(uint64_t(s.num_query_tokens) * s.num_heads, partitions, value_head_size) : 0;
  const bool fits = partitions <= 65535 && scratch <= dev.max_storage_buffer_range && s.num_query_tokens <= 65535 &&
                    s.num_heads <= 65535;
  if (split && !fits) {
    if (o.split == SplitMode::split || o.partition_tokens != 0)
      unsupported(fmt::format("partition_tokens: {} partitions of {} positions for T = {} query tokens need {} bytes of "
                              "scratch (at most 65535 partitions and 65535 query tokens, within the device's "
                              "maxStorageBufferRange of {} bytes)",
                              partitions, tokens, s.num_query_tokens, scratch, dev.max_storage_buffer_range));
    split = false;  // automatic: one pass
  }
  c.split = split;
  c.num_partitions = split ? uint32_t(partitions) : 1;
  c.partition_tokens = split ? tokens : 0;
  c.scratch_bytes = split ? size_t(scratch) : 0;
  c.merge_workgroup = split ? std::min(kMergeWorkgroup, dev.max_workgroup_invocations) : 0;
  const uint64_t cap = uint64_t(s.max_blocks_per_seq) * s.block_size;
  c.context_cap = uint32_t(split ? std::min<uint64_t>(cap, uint64_t(c.num_partitions) * c.partition_tokens) : cap);
}

bool decode_kernels_take(const AttentionShape& s, bool single_tokens) {
  // Every layout: the scalar decode kernel reads each, and the decode planner leaves the matrix
  // kernel to the layouts it reads (decode_planner.cpp, matrix_kernel_refusal).
  return single_tokens && !s.tree_mask;
}

size_t attention_shared_bytes(uint32_t rows, uint32_t head_size, uint32_t workgroup) {
  // queries (rows x D), scores (rows x tile), lane partials, tile blocks, 6 per-row arrays (factor,
  // max, sum, slope, query and output row words), mask base
  return 4ull * (size_t(rows) * head_size + size_t(rows) * workgroup + 2ull * workgroup + 6ull * rows + 1);
}

namespace {

// What a bucket's steps may bring (AttentionPlan::create_bucket): requests of up to
// max_query_tokens new tokens (0 = T), T in all; the decode kernels where every step's requests
// have one token row each (max 1, T = S).
QueryStartsSummary bucket_summary(const AttentionShape& s, uint32_t max_query_tokens) {
  if (s.num_requests == 0) throw Error(ErrorCode::invalid_argument, "num_requests: a bucket holds at least one request, got 0");
  const uint32_t q = max_query_tokens ? max_query_tokens : s.num_query_tokens;
  if (q > s.num_query_tokens)
    throw Error(ErrorCode::invalid_argument,
                fmt::format("max_query_tokens: {} exceeds T = num_query_tokens = {}", q, s.num_query_tokens));
  const uint64_t longest = longest_context(s);
  if (q > longest)
    throw Error(ErrorCode::invalid_argument,
                fmt::format("max_query_tokens: {} new tokens exceed the {} positions a context may hold ({})", q, longest,
                            s.max_context_len ? "max_context_len" : "M * B"));
  QueryStartsSummary summary;
  summary.max_query_tokens = q;
  summary.single_tokens = q == 1 && s.num_query_tokens == s.num_requests;
  // The largest sum of q_s^2 over at most S requests of at most q of the T tokens: as many whole
  // requests of q as there are, then one of what is left.
  const uint64_t whole = std::min<uint64_t>(s.num_requests, s.num_query_tokens / q);
  const uint64_t rest = whole < s.num_requests ? s.num_query_tokens - whole * q : 0;
  summary.tree_mask_bytes = s.tree_mask ? whole * q * q + rest * rest : 0;
  if (summary.tree_mask_bytes > 0xffffffffull)
    throw Error(ErrorCode::invalid_argument,
                fmt::format("tree_mask: a step of {} requests of {} new tokens takes {} bytes of masks, past 2^32 - 1",
                            whole, q, summary.tree_mask_bytes));
  return summary;
}

AttentionChoice plan_from_summary(const DeviceCapabilities& dev, const AttentionShape& s,
                                  const QueryStartsSummary& summary, std::span<const int32_t> starts, bool bucket,
                                  const AttentionOptions& o) {
  validate_split_options(o, kPartitionQuantum);
  AttentionChoice c;
  c.bucket = bucket;
  c.max_query_tokens = summary.max_query_tokens;
  c.tree_mask_bytes = size_t(summary.tree_mask_bytes);
  const bool decode_ok = decode_kernels_take(s, summary.single_tokens);
  if (o.kernel == AttentionKernel::decode && !decode_ok && bucket && !s.tree_mask)
    throw Error(ErrorCode::invalid_argument,
                fmt::format("kernel: decode takes a bucket whose steps give every request one token row "
                            "(max_query_tokens = 1 and T = S); this one has max_query_tokens {}, T = {}, S = {}",
                            summary.max_query_tokens, s.num_query_tokens, s.num_requests));
  if (o.kernel == AttentionKernel::decode && !decode_ok)
    throw Error(ErrorCode::invalid_argument,
                fmt::format("kernel: decode takes batches of single tokens (every q_s = 1; the longest here is {}) "
                            "without a tree mask{}",
                            summary.max_query_tokens, s.tree_mask ? " (one is given)" : ""));
  if (o.kernel == AttentionKernel::decode || (o.kernel == AttentionKernel::automatic && decode_ok)) {
    c.kernel = AttentionKernel::decode;  // the decode planner makes the rest (plan_decode_family)
    return c;
  }
  if (s.head_size > 256)
    throw Error(ErrorCode::invalid_argument,
                fmt::format("head_size: {} runs on the decode kernels only (a batch of single tokens without a tree "
                            "mask); the attention kernel takes multiples of 8 from 32 to 256",
                            s.head_size));
  const uint64_t block_bytes = cache_geometry_of(s).block_bytes();
  if (block_bytes > 0xffffffffull)
    unsupported(fmt::format("num_kv_heads: a block of {} kv heads x {} dims x {} positions is {} bytes, past 2^32 - 1",
                            s.num_kv_heads, s.head_size, s.block_size, block_bytes));
  // The matrix kernel where asked, or (automatic) where it can run; else the scalar kernel.
  if (take_matrix_kernel(o.kernel, [&] { return matrix_attention_refusal(dev, s); })) {
    plan_matrix_attention(c, dev, s);
  } else {
    c.kernel = AttentionKernel::scalar;
    c.address = pool_read_by_address(dev, cache_geometry_of(s).pool_bytes(), s.num_blocks, "a pool");
    choose_rows(c, dev, s);
  }
  choose_tile_slots(c, s);
  if (uint64_t(s.num_kv_heads) * c.groups_per_kv_head > 65535)
    unsupported(fmt::format("num_kv_heads: {} kv heads need more than 65535 workgroups along one grid dimension",
                            s.num_kv_heads));
  choose_attention_split(c, dev, s, s.head_size, starts, o, SplitPolicy{});
  return c;
}

// A batch of single tokens by construction (QueryRows::single_tokens): what its query starts would tell.
QueryStartsSummary single_token_summary(const AttentionShape& s) {
  if (s.num_query_tokens != s.num_requests || s.tree_mask)
    throw Error(ErrorCode::internal,
                fmt::format("query rows: single tokens planned for T = {} tokens of S = {} requests{}",
                            s.num_query_tokens, s.num_requests, s.tree_mask ? " with a tree mask" : ""));
  QueryStartsSummary summary;
  summary.max_query_tokens = s.num_requests > 0 ? 1 : 0;
  return summary;
}

}  // namespace

QueryStartsSummary summarize_query_rows(const AttentionShape& s, const QueryRows& rows) {
  switch (rows.kind) {
    case QueryRows::Kind::step: return validate_query_starts(s, rows.starts);
    case QueryRows::Kind::bucket: return bucket_summary(s, rows.max_query_tokens);
    case QueryRows::Kind::single_tokens: break;
  }
  return single_token_summary(s);
}

AttentionChoice plan_attention_rows(const DeviceCapabilities& dev, const AttentionShape& s, const QueryRows& rows,
                                    const AttentionOptions& o) {
  validate_attention_shape(s);
  return plan_from_summary(dev, s, summarize_query_rows(s, rows), rows.starts, rows.bucket(), o);
}

AttentionChoice plan_attention(const DeviceCapabilities& dev, const AttentionShape& s,
                               std::span<const int32_t> starts, const AttentionOptions& o) {
  return plan_attention_rows(dev, s, QueryRows::step(starts), o);
}

AttentionChoice plan_attention_bucket(const DeviceCapabilities& dev, const AttentionShape& s,
                                      uint32_t max_query_tokens, const AttentionOptions& o) {
  return plan_attention_rows(dev, s, QueryRows::bucket(max_query_tokens), o);
}

}  // namespace vkpaged::detail
