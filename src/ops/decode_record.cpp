// SPDX-License-Identifier: Apache-2.0
// Recording a DecodePlan: record_decode (its per-call values and views checked, then the
// decode dispatch and, for a split merged by the merge pass, a barrier and the merge) and
// record_decode_order (longest first's list).
#include <algorithm>
#include <array>
#include <cmath>

#include "common/shader_interface.h"
#include "ops/attention_validation.hpp"  // the caches' shapes per layout
#include "ops/csr_page_table.hpp"
#include "ops/decode_plan.hpp"
#include "ops/decode_validation.hpp"
#include "ops/partition_merge.hpp"
#include "ops/strided_rows.hpp"
#include "ops/view_checks.hpp"
#include "vkpaged/decode.hpp"
#include "vkpaged/error.hpp"

namespace vkpaged {

using detail::DecodeChoice;
using detail::DecodePlanData;
namespace sh = vkpaged::shader;

namespace {

// Lengths above this are clamped (and flagged): M * B, or what the partitions cover when split.
uint32_t context_cap(const DecodePlanData& p) {
  const uint64_t cap = uint64_t(p.shape.max_blocks_per_seq) * p.shape.block_size;
  const DecodeChoice& c = p.choice;
  return uint32_t(c.split ? std::min<uint64_t>(cap, uint64_t(c.num_partitions) * c.partition_tokens) : cap);
}

// The push constants a plan fixes (shape, split, window, length cap), shared by the decode,
// merge and order passes; the caller adds the views' offsets and the per-call values.
sh::DecodePush plan_push(const DecodePlanData& p) {
  sh::DecodePush push{};
  push.num_seqs = p.shape.num_seqs;
  push.num_heads = p.shape.num_heads;
  push.num_kv_heads = p.shape.num_kv_heads;
  push.num_blocks = p.shape.num_blocks;
  push.max_blocks_per_seq = p.shape.max_blocks_per_seq;
  push.partition_tokens = p.choice.partition_tokens;
  push.num_partitions = p.choice.num_partitions;
  push.sliding_window = p.options.sliding_window;
  push.context_cap = context_cap(p);
  return push;
}

}  // namespace

void record_decode(Context& context, VkCommandBuffer cmd, const DecodePlan& plan, const DecodeViews& v,
                   const DecodeParams& params) {
  const auto& p = plan.data();
  const auto& s = p.shape;
  const DecodeChoice& c = p.choice;
  auto& impl = context.impl();
  using detail::check_view;
  detail::validate_decode_params(params, s);
  const int64_t S = s.num_seqs, H = s.num_heads, Hkv = s.num_kv_heads, D = s.head_size, B = s.block_size;
  const int64_t x = cache_pack_factor(s.cache_dtype);
  const DType cache_elem = is_fp8_dtype(s.cache_dtype) ? DType::u8 : s.cache_dtype;
  const detail::RowsView query = detail::check_rows_view(impl, "query", v.query, {s.query_dtype}, Shape{S, H, D}, false);
  check_view(impl, "key_cache", v.key_cache, {cache_elem, s.cache_dtype},
             detail::key_cache_shape(s.kv_layout, s.num_blocks, Hkv, D, B, x), 16, !c.address);
  check_view(impl, "value_cache", v.value_cache, {cache_elem, s.cache_dtype},
             detail::value_cache_shape(s.kv_layout, s.num_blocks, Hkv, D, B), 16, !c.address);
  const detail::PageTableViews page_tables{v.block_tables, v.context_lens, v.kv_indptr, v.kv_indices, v.kv_last_page_len};
  detail::check_page_table_views(impl, page_tables, s.num_seqs, s.max_blocks_per_seq, p.csr);
  const detail::RowsView output = detail::check_rows_view(impl, "output", v.output, {s.query_dtype}, Shape{S, H, D}, true);
  if (s.alibi) check_view(impl, "alibi_slopes", v.alibi_slopes, {DType::f32}, Shape{H}, 4);
  if (s.sinks) check_view(impl, "sinks", v.sinks, {DType::f32}, Shape{H}, 4);
  if (s.lse) check_view(impl, "lse", v.lse, {DType::f32}, Shape{S, H}, 4);
  if (p.scratch_bytes()) detail::check_buffer(impl, "scratch", v.scratch, p.scratch_bytes(), 4);
  if (c.longest_first) detail::check_buffer(impl, "order", v.order, c.order_bytes, 4);
  if (!v.status.empty()) detail::check_buffer(impl, "status", v.status, 4, 4);
  if (c.timeline_bytes) detail::check_buffer(impl, "timeline", v.timeline, c.timeline_bytes, 4);
  if (c.merge_counter_bytes) detail::check_buffer(impl, "merge_counters", v.merge_counters, c.merge_counter_bytes, 4);
  if (s.num_seqs == 0) return;

  const detail::DenseTables tables = detail::record_page_tables(impl, cmd, page_tables, s.num_seqs, s.max_blocks_per_seq,
                                                                s.block_size, p.csr, v.scratch, v.status);
  std::array<detail::BoundView, DECODE_BINDING_COUNT> bound;
  bound[DECODE_BINDING_QUERY] = impl.bind_view(v.query.memory);
  bound[DECODE_BINDING_KEY_CACHE] = impl.bind_view(c.address ? BufferView{} : v.key_cache.memory);
  bound[DECODE_BINDING_VALUE_CACHE] = impl.bind_view(c.address ? BufferView{} : v.value_cache.memory);
  bound[DECODE_BINDING_BLOCK_TABLES] = impl.bind_view(tables.block_tables.memory);
  bound[DECODE_BINDING_CONTEXT_LENS] = impl.bind_view(tables.context_lens.memory);
  bound[DECODE_BINDING_OUTPUT] = impl.bind_view(v.output.memory);
  bound[DECODE_BINDING_ALIBI] = impl.bind_view(s.alibi ? v.alibi_slopes.memory : BufferView{});
  bound[DECODE_BINDING_SINKS] = impl.bind_view(s.sinks ? v.sinks.memory : BufferView{});
  bound[DECODE_BINDING_LSE] = impl.bind_view(s.lse ? v.lse.memory : BufferView{});
  // The split's part only: a CSR expansion after it is bound as the tables.
  bound[DECODE_BINDING_SCRATCH] = impl.bind_view(c.split ? BufferView{v.scratch.buffer, v.scratch.offset, c.scratch_bytes}
                                                         : BufferView{});
  bound[DECODE_BINDING_ORDER] = impl.bind_view(c.longest_first ? v.order : BufferView{});
  bound[DECODE_BINDING_STATUS] = impl.bind_view(v.status);
  bound[DECODE_BINDING_MERGE_COUNTERS] = impl.bind_view(c.merge_counter_bytes ? v.merge_counters : BufferView{});

  sh::DecodePush push = plan_push(p);
  push.query_rows = detail::rows_push(query, bound[DECODE_BINDING_QUERY]);
  push.key_offset = bound[DECODE_BINDING_KEY_CACHE].word_offset;
  push.value_offset = bound[DECODE_BINDING_VALUE_CACHE].word_offset;
  push.block_tables_offset = bound[DECODE_BINDING_BLOCK_TABLES].word_offset;
  push.context_lens_offset = bound[DECODE_BINDING_CONTEXT_LENS].word_offset;
  push.output_rows = detail::rows_push(output, bound[DECODE_BINDING_OUTPUT]);
  push.alibi_offset = bound[DECODE_BINDING_ALIBI].word_offset;
  push.sinks_offset = bound[DECODE_BINDING_SINKS].word_offset;
  push.lse_offset = bound[DECODE_BINDING_LSE].word_offset;
  push.scratch_offset = bound[DECODE_BINDING_SCRATCH].word_offset;
  push.status_offset = bound[DECODE_BINDING_STATUS].word_offset;
  push.merge_counters_offset = bound[DECODE_BINDING_MERGE_COUNTERS].word_offset;
  push.scale = params.scale ? *params.scale : 1.0f / std::sqrt(float(s.head_size));
  push.softcap = params.softcap;
  // k_scale and v_scale scale fp8 caches only (docs/contract.md; the reference ignores them too).
  push.k_scale = is_fp8_dtype(s.cache_dtype) ? params.k_scale : 1.0f;
  push.v_scale = is_fp8_dtype(s.cache_dtype) ? params.v_scale : 1.0f;
  auto address_of = [&](const BufferView& view) {
    VkBufferDeviceAddressInfo info{VK_STRUCTURE_TYPE_BUFFER_DEVICE_ADDRESS_INFO};
    info.buffer = view.buffer;
    const uint64_t a = impl.d.vkGetBufferDeviceAddress(impl.device, &info) + view.offset;
    return sh::uvec2{uint32_t(a), uint32_t(a >> 32)};
  };
  if (c.address) {
    push.key_address = address_of(v.key_cache.memory);
    push.value_address = address_of(v.value_cache.memory);
  }
  if (c.timeline_bytes) push.key_address = address_of(v.timeline);  // the matrix kernel reads no cache by address

  const uint32_t groups_x = s.num_kv_heads * c.groups_per_kv_head;
  if (c.longest_first) {
    push.order_offset = bound[DECODE_BINDING_ORDER].word_offset;
    impl.dispatch(cmd, *p.decode, bound, &push, groups_x, s.num_seqs * c.num_partitions, 1);
  } else {
    impl.dispatch(cmd, *p.decode, bound, &push, groups_x, s.num_seqs, c.num_partitions);
  }
  if (c.reduce_workgroup == 0) return;  // one pass, or merged in the dispatch

  detail::PartitionMergeViews merge_views{bound[DECODE_BINDING_SCRATCH], bound[DECODE_BINDING_CONTEXT_LENS],
                                          impl.bind_view(BufferView{}), bound[DECODE_BINDING_OUTPUT],
                                          bound[DECODE_BINDING_SINKS], bound[DECODE_BINDING_LSE]};
  detail::record_partition_merge(impl, cmd, *p.reduce, merge_views, detail::attention_push_of(push));
}

void record_decode_order(Context& context, VkCommandBuffer cmd, const DecodePlan& plan, const TensorView& context_lens,
                         const BufferView& order) {
  const auto& p = plan.data();
  auto& impl = context.impl();
  if (!p.choice.longest_first)
    throw Error(ErrorCode::invalid_argument,
                "plan: record_decode_order needs a plan made with DecodeOrder::longest_first (plan.longest_first() is false)");
  detail::check_view(impl, "context_lens", context_lens, {DType::i32, DType::u32}, Shape{int64_t(p.shape.num_seqs)}, 4);
  detail::check_buffer(impl, "order", order, p.choice.order_bytes, 4);
  if (p.shape.num_seqs == 0) return;
  std::array<detail::BoundView, ORDER_BINDING_COUNT> bound;
  bound[ORDER_BINDING_CONTEXT_LENS] = impl.bind_view(context_lens.memory);
  bound[ORDER_BINDING_LIST] = impl.bind_view(order);
  sh::DecodePush push = plan_push(p);
  push.context_lens_offset = bound[ORDER_BINDING_CONTEXT_LENS].word_offset;
  push.order_offset = bound[ORDER_BINDING_LIST].word_offset;
  impl.dispatch(cmd, *p.order, bound, &push, 1, 1, 1);
}

}  // namespace vkpaged
