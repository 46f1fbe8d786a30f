// SPDX-License-Identifier: Apache-2.0
#include "ops/attention_recording.hpp"

#include <fmt/format.h>

#include <array>
#include <cmath>
#include <utility>

#include "common/shader_interface.h"
#include "ops/partition_merge.hpp"
#include "ops/view_checks.hpp"
#include "vkpaged/error.hpp"

namespace vkpaged::detail {

namespace sh = vkpaged::shader;

namespace {

// A [T, H, width] view of the query's dtype as rows: strided, or contiguous and 4-byte aligned.
RowsView check_token_rows(const ContextImpl& impl, const char* name, const TensorView& view, const Shape& shape,
                          DType dtype, bool strided, bool written) {
  if (strided) return check_rows_view(impl, name, view, {dtype}, shape, written);
  check_view(impl, name, view, {dtype}, shape, 4);
  return check_rows(impl, name, view, written);
}

// The push words that name where each bound view starts, by binding (the rows' are rows_push's).
using OffsetField = uint32_t sh::AttentionPush::*;
constexpr std::pair<uint32_t, OffsetField> kOffsetFields[] = {
    {ATTN_BINDING_KEY_CACHE, &sh::AttentionPush::key_offset},
    {ATTN_BINDING_VALUE_CACHE, &sh::AttentionPush::value_offset},
    {ATTN_BINDING_BLOCK_TABLES, &sh::AttentionPush::block_tables_offset},
    {ATTN_BINDING_CONTEXT_LENS, &sh::AttentionPush::context_lens_offset},
    {ATTN_BINDING_QUERY_STARTS, &sh::AttentionPush::query_starts_offset},
    {ATTN_BINDING_ALIBI, &sh::AttentionPush::alibi_offset},
    {ATTN_BINDING_SINKS, &sh::AttentionPush::sinks_offset},
    {ATTN_BINDING_LSE, &sh::AttentionPush::lse_offset},
    {ATTN_BINDING_SCRATCH, &sh::AttentionPush::scratch_offset},
    {ATTN_BINDING_STATUS, &sh::AttentionPush::status_offset},
    {ATTN_BINDING_TREE_MASK, &sh::AttentionPush::tree_mask_offset},
};

// The problem's and the choice's words of the push block, and the per-call values.
void fill_problem(sh::AttentionPush& push, const AttentionShape& s, const AttentionChoice& c,
                  const AttentionParams& params) {
  push.num_requests = s.num_requests;
  push.num_tokens = s.num_query_tokens;
  push.num_heads = s.num_heads;
  push.num_kv_heads = s.num_kv_heads;
  push.num_blocks = s.num_blocks;
  push.max_blocks_per_seq = s.max_blocks_per_seq;
  push.sliding_window = s.sliding_window;
  push.context_cap = c.context_cap;
  push.partition_tokens = c.partition_tokens;
  push.num_partitions = c.num_partitions;
  push.tree_mask_bytes = uint32_t(c.tree_mask_bytes);
  push.scale = params.scale ? *params.scale : 1.0f / std::sqrt(float(s.head_size));  // 1 / sqrt(Dk) for MLA
  push.softcap = params.softcap;
  push.k_scale = params.k_scale;
  push.v_scale = params.v_scale;
}

// The caches by device address: the addresses' low words in the offsets' (shader_interface.h,
// AttentionPush).
void push_cache_addresses(sh::AttentionPush& push, const ContextImpl& impl, const AttentionCallViews& v) {
  auto address_of = [&](const BufferView& view) {
    VkBufferDeviceAddressInfo info{VK_STRUCTURE_TYPE_BUFFER_DEVICE_ADDRESS_INFO};
    info.buffer = view.buffer;
    return uint64_t(impl.d.vkGetBufferDeviceAddress(impl.device, &info) + view.offset);
  };
  const uint64_t key = address_of(v.key_cache), value = address_of(v.value_cache);
  push.key_offset = uint32_t(key);
  push.key_address_high = uint32_t(key >> 32);
  push.value_offset = uint32_t(value);
  push.value_address_high = uint32_t(value >> 32);
}

}  // namespace

AttentionRows check_attention_views(const ContextImpl& impl, const AttentionShape& s, const AttentionCallViews& v,
                                    const AttentionViewRules& rules, const std::function<void()>& check_caches) {
  const int64_t S = s.num_requests, T = s.num_query_tokens, H = s.num_heads;
  AttentionRows rows;
  rows.query = check_token_rows(impl, "query", v.query, Shape{T, H, int64_t(s.head_size)}, s.query_dtype, rules.strided,
                                false);
  check_caches();
  check_page_table_views(impl, v.page_tables, s.num_requests, s.max_blocks_per_seq, rules.expansion);
  check_view(impl, "query_starts", v.query_starts, {DType::i32, DType::u32}, Shape{S + 1}, 4);
  rows.output = check_token_rows(impl, "output", v.output, Shape{T, H, rules.value_width}, s.query_dtype, rules.strided,
                                 true);
  if (s.lse) check_view(impl, "lse", v.lse, {DType::f32}, Shape{T, H}, 4);
  if (s.tree_mask) {
    const size_t bytes = rules.tree_mask_bytes;
    check_view(impl, "tree_mask", v.tree_mask, {DType::u8}, Shape{int64_t(bytes)}, 4);
    if (v.tree_mask.memory.size < (bytes + 3) / 4 * 4)
      throw Error(ErrorCode::invalid_argument,
                  fmt::format("tree_mask: a view of {} bytes ends inside a 32-bit word; the shader reads whole words, so "
                              "the view must cover {} bytes (the buffer padded to a multiple of 4)",
                              v.tree_mask.memory.size, (bytes + 3) / 4 * 4));
  }
  if (s.alibi) check_view(impl, "alibi_slopes", v.alibi_slopes, {DType::f32}, Shape{H}, 4);
  if (s.sinks) check_view(impl, "sinks", v.sinks, {DType::f32}, Shape{H}, 4);
  if (rules.scratch_bytes) check_buffer(impl, "scratch", v.scratch, rules.scratch_bytes, 4);
  if (!v.status.empty()) check_buffer(impl, "status", v.status, 4, 4);
  return rows;
}

void record_attention_kernels(const ContextImpl& impl, VkCommandBuffer cmd, const AttentionKernels& kernels,
                              const AttentionShape& s, const AttentionChoice& c, const AttentionCallViews& v,
                              const AttentionRows& rows, const AttentionParams& params) {
  const DenseTables tables = record_page_tables(impl, cmd, v.page_tables, s.num_requests, s.max_blocks_per_seq,
                                                s.block_size, kernels.csr, v.scratch, v.status);
  // What each binding holds; an empty view binds the dummy buffer (a feature that is off, the
  // caches read by device address).
  auto when = [](bool on, const BufferView& view) { return on ? view : BufferView{}; };
  std::array<BufferView, ATTN_BINDING_COUNT> memory;
  memory[ATTN_BINDING_QUERY] = v.query.memory;
  memory[ATTN_BINDING_KEY_CACHE] = when(!c.address, v.key_cache);
  memory[ATTN_BINDING_VALUE_CACHE] = when(!c.address, v.value_cache);
  memory[ATTN_BINDING_BLOCK_TABLES] = tables.block_tables.memory;
  memory[ATTN_BINDING_CONTEXT_LENS] = tables.context_lens.memory;
  memory[ATTN_BINDING_QUERY_STARTS] = v.query_starts.memory;
  memory[ATTN_BINDING_OUTPUT] = v.output.memory;
  memory[ATTN_BINDING_ALIBI] = when(s.alibi, v.alibi_slopes.memory);
  memory[ATTN_BINDING_SINKS] = when(s.sinks, v.sinks.memory);
  memory[ATTN_BINDING_LSE] = when(s.lse, v.lse.memory);
  // The split's part only: a CSR expansion after it is bound as the tables.
  memory[ATTN_BINDING_SCRATCH] = when(c.split, BufferView{v.scratch.buffer, v.scratch.offset, c.scratch_bytes});
  memory[ATTN_BINDING_STATUS] = v.status;
  memory[ATTN_BINDING_TREE_MASK] = when(s.tree_mask, v.tree_mask.memory);
  std::array<BoundView, ATTN_BINDING_COUNT> bound;
  for (size_t i = 0; i < bound.size(); ++i) bound[i] = impl.bind_view(memory[i]);

  sh::AttentionPush push{};
  fill_problem(push, s, c, params);
  push.query_rows = rows_push(rows.query, bound[ATTN_BINDING_QUERY]);
  push.output_rows = rows_push(rows.output, bound[ATTN_BINDING_OUTPUT]);
  for (const auto& [binding, field] : kOffsetFields) push.*field = bound[binding].word_offset;
  if (c.address) push_cache_addresses(push, impl, v);
  impl.dispatch(cmd, kernels.attention, bound, &push, s.num_kv_heads * c.groups_per_kv_head, c.tile_slots,
                c.num_partitions);
  if (!c.split) return;
  record_partition_merge(impl, cmd, *kernels.merge,
                         {bound[ATTN_BINDING_SCRATCH], bound[ATTN_BINDING_CONTEXT_LENS], bound[ATTN_BINDING_QUERY_STARTS],
                          bound[ATTN_BINDING_OUTPUT], bound[ATTN_BINDING_SINKS], bound[ATTN_BINDING_LSE]},
                         push);
}

}  // namespace vkpaged::detail
