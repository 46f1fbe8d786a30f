// SPDX-License-Identifier: Apache-2.0
// Recording the decode family of the attention problem's plan (ops/attention_plan.hpp), an
// AttentionPlan's of single tokens or a DecodePlan's, in one place: record_decode_family (its
// per-call values and views checked, then the decode dispatch and, for a split merged by the
// merge pass, a barrier and the merge), which record_decode and record_attention both call, and
// record_decode_order (longest first's list).
#include <algorithm>
#include <array>
#include <cmath>

#include "common/shader_interface.h"
#include "ops/attention_plan.hpp"
#include "ops/attention_validation.hpp"  // the caches' shapes per layout
#include "ops/csr_page_table.hpp"
#include "ops/decode_validation.hpp"
#include "ops/partition_merge.hpp"
#include "ops/strided_rows.hpp"
#include "ops/view_checks.hpp"
#include "vkpaged/decode.hpp"
#include "vkpaged/error.hpp"

namespace vkpaged {

using detail::DecodeChoice;
using detail::DecodeFamilyPlan;
namespace sh = vkpaged::shader;

namespace {

// The push constants a plan fixes (shape, split, window, length cap), shared by the decode,
// merge and order passes; the caller adds the views' offsets and the per-call values. Lengths
// above the cap are clamped (and flagged): M * B, or what the partitions cover when split.
sh::DecodePush plan_push(const DecodeFamilyPlan& f) {
  const DecodeShape& s = f.shape;
  const DecodeChoice& c = f.choice;
  const uint64_t cap = uint64_t(s.max_blocks_per_seq) * s.block_size;
  return sh::DecodePush{
      .num_seqs = s.num_seqs,
      .num_heads = s.num_heads,
      .num_kv_heads = s.num_kv_heads,
      .num_blocks = s.num_blocks,
      .max_blocks_per_seq = s.max_blocks_per_seq,
      .sliding_window = f.options.sliding_window,
      .context_cap = uint32_t(c.split ? std::min<uint64_t>(cap, uint64_t(c.num_partitions) * c.partition_tokens) : cap),
      .partition_tokens = c.partition_tokens,
      .num_partitions = c.num_partitions,
  };
}

}  // namespace

namespace detail {

void record_decode_family(Context& context, VkCommandBuffer cmd, const AttentionPlanData& p, const DecodeViews& v,
                          const DecodeParams& params) {
  const DecodeFamilyPlan& f = *p.decode;
  const DecodeShape& s = f.shape;
  const DecodeChoice& c = f.choice;
  auto& impl = context.impl();
  validate_decode_params(params, s);
  const int64_t S = s.num_seqs, H = s.num_heads, Hkv = s.num_kv_heads, D = s.head_size, B = s.block_size;
  const int64_t x = cache_pack_factor(s.cache_dtype);
  const DType cache_elem = is_fp8_dtype(s.cache_dtype) ? DType::u8 : s.cache_dtype;
  const RowsView query = check_rows_view(impl, "query", v.query, {s.query_dtype}, Shape{S, H, D}, false);
  check_view(impl, "key_cache", v.key_cache, {cache_elem, s.cache_dtype},
             key_cache_shape(s.kv_layout, s.num_blocks, Hkv, D, B, x), 16, !c.address);
  check_view(impl, "value_cache", v.value_cache, {cache_elem, s.cache_dtype},
             value_cache_shape(s.kv_layout, s.num_blocks, Hkv, D, B), 16, !c.address);
  const PageTableViews page_tables{v.block_tables, v.context_lens, v.kv_indptr, v.kv_indices, v.kv_last_page_len};
  check_page_table_views(impl, page_tables, s.num_seqs, s.max_blocks_per_seq, p.csr);
  const RowsView output = check_rows_view(impl, "output", v.output, {s.query_dtype}, Shape{S, H, D}, true);
  if (s.alibi) check_view(impl, "alibi_slopes", v.alibi_slopes, {DType::f32}, Shape{H}, 4);
  if (s.sinks) check_view(impl, "sinks", v.sinks, {DType::f32}, Shape{H}, 4);
  if (s.lse) check_view(impl, "lse", v.lse, {DType::f32}, Shape{S, H}, 4);
  if (p.scratch_bytes()) check_buffer(impl, "scratch", v.scratch, p.scratch_bytes(), 4);
  if (c.longest_first) check_buffer(impl, "order", v.order, c.order_bytes, 4);
  if (!v.status.empty()) check_buffer(impl, "status", v.status, 4, 4);
  if (c.timeline_bytes) check_buffer(impl, "timeline", v.timeline, c.timeline_bytes, 4);
  if (c.merge_counter_bytes) check_buffer(impl, "merge_counters", v.merge_counters, c.merge_counter_bytes, 4);
  if (s.num_seqs == 0) return;

  const DenseTables tables = record_page_tables(impl, cmd, page_tables, s.num_seqs, s.max_blocks_per_seq, s.block_size,
                                                p.csr, v.scratch, v.status);
  // Each view bound at its binding (an unused one to the context's dummy, word offset 0), its
  // word offset into the push constants.
  std::array<BoundView, DECODE_BINDING_COUNT> bound;
  auto bind = [&](uint32_t binding, const BufferView& view) {
    bound[binding] = impl.bind_view(view);
    return bound[binding].word_offset;
  };
  sh::DecodePush push = plan_push(f);
  bind(DECODE_BINDING_QUERY, v.query.memory);
  push.query_rows = rows_push(query, bound[DECODE_BINDING_QUERY]);
  push.key_offset = bind(DECODE_BINDING_KEY_CACHE, c.address ? BufferView{} : v.key_cache.memory);
  push.value_offset = bind(DECODE_BINDING_VALUE_CACHE, c.address ? BufferView{} : v.value_cache.memory);
  push.block_tables_offset = bind(DECODE_BINDING_BLOCK_TABLES, tables.block_tables.memory);
  push.context_lens_offset = bind(DECODE_BINDING_CONTEXT_LENS, tables.context_lens.memory);
  bind(DECODE_BINDING_OUTPUT, v.output.memory);
  push.output_rows = rows_push(output, bound[DECODE_BINDING_OUTPUT]);
  push.alibi_offset = bind(DECODE_BINDING_ALIBI, s.alibi ? v.alibi_slopes.memory : BufferView{});
  push.sinks_offset = bind(DECODE_BINDING_SINKS, s.sinks ? v.sinks.memory : BufferView{});
  push.lse_offset = bind(DECODE_BINDING_LSE, s.lse ? v.lse.memory : BufferView{});
  // The split's part only: a CSR expansion after it is bound as the tables.
  push.scratch_offset =
      bind(DECODE_BINDING_SCRATCH, c.split ? BufferView{v.scratch.buffer, v.scratch.offset, c.scratch_bytes} : BufferView{});
  push.order_offset = bind(DECODE_BINDING_ORDER, c.longest_first ? v.order : BufferView{});
  push.status_offset = bind(DECODE_BINDING_STATUS, v.status);
  push.merge_counters_offset = bind(DECODE_BINDING_MERGE_COUNTERS, c.merge_counter_bytes ? v.merge_counters : BufferView{});
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
  if (c.longest_first) impl.dispatch(cmd, *f.decode, bound, &push, groups_x, s.num_seqs * c.num_partitions, 1);
  else impl.dispatch(cmd, *f.decode, bound, &push, groups_x, s.num_seqs, c.num_partitions);
  if (c.reduce_workgroup == 0) return;  // one pass, or merged in the dispatch

  PartitionMergeViews merge_views{bound[DECODE_BINDING_SCRATCH], bound[DECODE_BINDING_CONTEXT_LENS],
                                  impl.bind_view(BufferView{}), bound[DECODE_BINDING_OUTPUT],
                                  bound[DECODE_BINDING_SINKS], bound[DECODE_BINDING_LSE]};
  record_partition_merge(impl, cmd, *f.reduce, merge_views, attention_push_of(push));
}

}  // namespace detail

// The problem's one recording of the decode family, for the plan a DecodePlan holds.
void record_decode(Context& context, VkCommandBuffer cmd, const DecodePlan& plan, const DecodeViews& v,
                   const DecodeParams& params) {
  detail::record_decode_family(context, cmd, plan.data().plan, v, params);
}

void record_decode_order(Context& context, VkCommandBuffer cmd, const DecodePlan& plan, const TensorView& context_lens,
                         const BufferView& order) {
  const DecodeFamilyPlan& f = plan.data().family();
  auto& impl = context.impl();
  if (!f.choice.longest_first)
    throw Error(ErrorCode::invalid_argument,
                "plan: record_decode_order needs a plan made with DecodeOrder::longest_first (plan.longest_first() is false)");
  detail::check_view(impl, "context_lens", context_lens, {DType::i32, DType::u32}, Shape{int64_t(f.shape.num_seqs)}, 4);
  detail::check_buffer(impl, "order", order, f.choice.order_bytes, 4);
  if (f.shape.num_seqs == 0) return;
  std::array<detail::BoundView, ORDER_BINDING_COUNT> bound;
  bound[ORDER_BINDING_CONTEXT_LENS] = impl.bind_view(context_lens.memory);
  bound[ORDER_BINDING_LIST] = impl.bind_view(order);
  sh::DecodePush push = plan_push(f);
  push.context_lens_offset = bound[ORDER_BINDING_CONTEXT_LENS].word_offset;
  push.order_offset = bound[ORDER_BINDING_LIST].word_offset;
  impl.dispatch(cmd, *f.order, bound, &push, 1, 1, 1);
}

}  // namespace vkpaged
