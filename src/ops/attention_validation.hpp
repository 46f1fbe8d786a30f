// SPDX-License-Identifier: Apache-2.0
#pragma once
// The contract's argument checks for multi-query attention, shared by the plan, the recording,
// the CPU reference and the CLI: each failure throws vkpaged::Error naming the argument and the
// value. Host only (no Vulkan calls).
#include <cstdint>
#include <span>
#include <vector>

#include "ops/host_page_tables.hpp"
#include "vkpaged/attention.hpp"

namespace vkpaged::detail {

// The problem's checks (dtypes, divisibility, head and block sizes, layout, T >= S), for every
// batch, decode's included (decode_problem). head_size 512 passes here: only the decode kernels
// take it (the planner refuses it elsewhere).
void validate_attention_shape(const AttentionShape& shape);

// What the host copy of query_starts tells: the longest request and the tree masks' size.
struct QueryStartsSummary {
  uint32_t max_query_tokens = 0;
  uint64_t tree_mask_bytes = 0;  // sum of q_s^2
  bool single_tokens = true;     // every q_s == 1
};
// query_starts [S + 1]: 0 first, T last, each q_s >= 1 and at most the longest context the
// shape allows; the tree masks within 2^32 - 1 bytes.
QueryStartsSummary validate_query_starts(const AttentionShape& shape, std::span<const int32_t> query_starts);

// Per-call values: scale, soft cap (on exactly when shape.softcap), fp8 scales (the contract's
// scale rule, ops/scale_validation.hpp).
void validate_attention_params(const AttentionParams& params, const AttentionShape& shape);

// The key and value cache shapes of `layout` (x = 16 / element bytes).
Shape key_cache_shape(KvLayout layout, int64_t num_blocks, int64_t kv_heads, int64_t head_size, int64_t block_size,
                      int64_t pack);
Shape value_cache_shape(KvLayout layout, int64_t num_blocks, int64_t kv_heads, int64_t head_size, int64_t block_size);

// ---- host inputs (attention_shape_of, decode_shape_of) ----
// The cache arrays hold a `cache` cache: its dtype, or u8 for an fp8 cache.
void check_host_cache_dtypes(const HostTensor& key_cache, const HostTensor& value_cache, DType cache);
// ALiBi slopes and sinks, when given: [H] f32.
void check_host_per_head(const HostTensor& alibi_slopes, const HostTensor& sinks, int64_t num_heads);
// Dense page tables' values: each length in [0, M * B] and the blocks it uses in [0, N).
// Returns the longest length.
int64_t check_host_page_tables(std::span<const int64_t> tables, std::span<const int64_t> lens, const AttentionShape& shape);

// query_starts of host inputs as int32 (i32, u32 or i64 values in [0, 2^31)).
std::vector<int32_t> host_query_starts(const HostTensor& query_starts);

// The request fields of host inputs that attention_shape_of and mla_shape_of read alike.
struct HostRequestInputs {
  const HostTensor& query_starts;
  const HostTensor& tree_mask;
  const HostTensor& alibi_slopes;
  const HostTensor& sinks;
  uint32_t sliding_window;
  HostPageTableInputs page_tables;
};
template <typename Inputs>
HostRequestInputs request_inputs(const Inputs& in) {
  return {in.query_starts, in.tree_mask, in.alibi_slopes, in.sinks, in.sliding_window, page_table_inputs(in)};
}

// The request counts: context_lens (dense form) and query_starts ([S + 1]) against the tables' S.
void check_host_request_counts(const HostRequestInputs& in, const PageTableForm& form);

// The shape's request fields: S and M of the tables' form, the window, and the features the
// inputs give (the soft cap on when params.softcap > 0, LSE when want_lse).
void read_request_fields(AttentionShape& shape, const HostRequestInputs& in, const PageTableForm& form,
                         const AttentionParams& params, bool want_lse);

// The request values against a shape whose cache fields are read: the page tables' (either form,
// as check_host_page_tables checks their dense values; sets max_context_len to the longest), the
// query starts (validate_query_starts), each request's q_s within its context length, and the tree
// mask ([sum of q_s^2] u8 of 0 and 1).
void check_host_requests(AttentionShape& shape, const HostRequestInputs& in, const PageTableForm& form,
                         std::span<const int32_t> query_starts);

}  // namespace vkpaged::detail
