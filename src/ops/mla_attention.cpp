// SPDX-License-Identifier: Apache-2.0
// Host side of shaders/mla_attention.comp and shaders/mla_attention_matrix_khr.comp (whose
// pipeline mla_attention_matrix_khr.cpp requests): the plan (the planner's choice made into
// pipelines, the split merged by partition_merge.comp over value sums Dv wide), view checks and
// recording, the same for both kernels.
#include "vkpaged/mla_attention.hpp"

#include <fmt/format.h>

#include <array>
#include <cmath>

#include "common/mla_interface.h"
#include "embedded_shaders.hpp"
#include "ops/attention_validation.hpp"
#include "ops/mla_attention_plan.hpp"
#include "ops/mla_attention_planner.hpp"
#include "ops/partition_merge.hpp"
#include "ops/strided_rows.hpp"
#include "ops/view_checks.hpp"
#include "vkpaged/error.hpp"

namespace vkpaged {

using detail::MlaPlanData;
namespace sh = vkpaged::shader;

namespace {

uint32_t feature_bits(const AttentionShape& s, bool split) {
  uint32_t f = 0;
  if (s.alibi) f |= FEATURE_ALIBI;
  if (s.softcap) f |= FEATURE_SOFTCAP;
  if (s.sinks) f |= FEATURE_SINKS;
  if (s.sliding_window > 0) f |= FEATURE_WINDOW;
  if (s.lse) f |= FEATURE_LSE;
  if (split) f |= FEATURE_SPLIT;
  if (s.tree_mask) f |= FEATURE_TREE_MASK;
  return f;
}

// The portable kernel's pipeline (shaders/mla_attention.comp).
vk::PipelineRequest scalar_request(const MlaShape& m, const detail::AttentionChoice& c, uint32_t features) {
  std::vector<uint32_t> spec = detail::mla_spec_constants(m, c, features, MLA_ATTN_SC_COUNT);
  spec[MLA_ATTN_SC_ROW_PARTS] = c.row_parts;
  return {&vk::shader_mla_attention(), std::move(spec), ATTN_BINDING_COUNT, sizeof(sh::AttentionPush)};
}

std::unique_ptr<MlaPlanData> plan_data(Context& context, const MlaShape& m, const MlaOptions& options,
                                       const detail::AttentionChoice& c) {
  auto p = std::make_unique<MlaPlanData>();
  p->shape = m;
  p->options = options;
  p->choice = c;
  const AttentionShape& s = m.attention;
  const uint32_t features = feature_bits(s, c.split);
  auto& impl = context.impl();
  p->attention = &impl.pipeline(c.kernel == AttentionKernel::matrix ? detail::mla_matrix_pipeline_request(m, c, features)
                                                                    : scalar_request(m, c, features));
  if (c.split)  // the multi-query merge, over value sums Dv wide
    p->merge = &impl.pipeline(
        detail::partition_merge_request(c.merge_workgroup, m.value_head_size, s.query_dtype, features, true));
  if (s.csr_page_table) p->csr = detail::plan_csr_expansion(impl, s.num_requests, s.max_blocks_per_seq, c.scratch_bytes);
  return p;
}

}  // namespace

namespace detail {

std::vector<uint32_t> mla_spec_constants(const MlaShape& m, const AttentionChoice& c, uint32_t features, size_t count) {
  const AttentionShape& s = m.attention;
  std::vector<uint32_t> spec(count);
  spec[MLA_ATTN_SC_WORKGROUP] = c.workgroup;
  spec[MLA_ATTN_SC_KEY_HEAD_SIZE] = s.head_size;
  spec[MLA_ATTN_SC_VALUE_HEAD_SIZE] = m.value_head_size;
  spec[MLA_ATTN_SC_BLOCK_SIZE] = s.block_size;
  spec[MLA_ATTN_SC_ROWS] = c.rows;
  spec[MLA_ATTN_SC_HEADS_PER_WORKGROUP] = c.heads_per_workgroup;
  spec[MLA_ATTN_SC_KEY_TILE] = c.key_tile;
  spec[MLA_ATTN_SC_QUERY_DTYPE] = uint32_t(s.query_dtype);
  spec[MLA_ATTN_SC_CACHE_DTYPE] = uint32_t(s.cache_dtype);
  spec[MLA_ATTN_SC_FEATURES] = features;
  spec[MLA_ATTN_SC_TWO_POOLS] = m.cache_form == MlaCacheForm::two_pools ? 1 : 0;
  return spec;
}

}  // namespace detail

MlaPlan MlaPlan::create(Context& context, const MlaShape& shape, Span<const int32_t> query_starts,
                        const MlaOptions& options) {
  const auto choice = detail::plan_mla_attention(context.impl().capabilities, shape,
                                                 std::span<const int32_t>(query_starts.data(), query_starts.size()), options);
  return MlaPlan(plan_data(context, shape, options, choice));
}

MlaPlan::MlaPlan(std::unique_ptr<MlaPlanData> data) : data_(std::move(data)) {}
MlaPlan::MlaPlan(const MlaPlan& o) : data_(std::make_unique<MlaPlanData>(*o.data_)) {}
MlaPlan& MlaPlan::operator=(const MlaPlan& o) {
  data_ = std::make_unique<MlaPlanData>(*o.data_);
  return *this;
}
MlaPlan::MlaPlan(MlaPlan&&) noexcept = default;
MlaPlan& MlaPlan::operator=(MlaPlan&&) noexcept = default;
MlaPlan::~MlaPlan() = default;
const MlaShape& MlaPlan::shape() const noexcept { return data_->shape; }
const MlaOptions& MlaPlan::options() const noexcept { return data_->options; }
size_t MlaPlan::tree_mask_bytes() const noexcept { return data_->choice.tree_mask_bytes; }
bool MlaPlan::split() const noexcept { return data_->choice.split; }
AttentionKernel MlaPlan::kernel() const noexcept { return data_->choice.kernel; }
uint32_t MlaPlan::num_partitions() const noexcept { return data_->choice.num_partitions; }
size_t MlaPlan::scratch_bytes() const noexcept { return data_->scratch_bytes(); }

std::string MlaPlan::describe() const {
  const auto& p = *data_;
  const auto& c = p.choice;
  std::string path = c.split ? fmt::format("split {} x {} positions", c.num_partitions, c.partition_tokens) : "one pass";
  if (p.csr.planned()) path += ", CSR page tables expanded";
  const bool matrix = c.kernel == AttentionKernel::matrix;
  const std::string kernel =
      matrix ? fmt::format("MLA matrix kernel, {}x{}x{} f16 products, {} value parts", c.product.m, c.product.n,
                           c.product.k, c.value_parts)
             : fmt::format("MLA scalar kernel, {} row parts", c.row_parts);
  return fmt::format("{}, {} ({}), Dk {} Dv {}, {} rows ({} tokens x {} heads)/wg, key tiles of {}, wg {}, "
                     "{} bytes shared",
                     path, kernel, p.shape.cache_form == MlaCacheForm::one_pool ? "one pool" : "two pools",
                     p.shape.attention.head_size, p.shape.value_head_size, c.rows, c.tokens_per_tile,
                     c.heads_per_workgroup, c.key_tile, c.workgroup, c.shared_bytes);
}

// ---- recording ----

namespace {

detail::PageTableViews page_table_views(const MlaViews& v) {
  return {v.block_tables, v.context_lens, v.kv_indptr, v.kv_indices, v.kv_last_page_len};
}

void check_views(const detail::ContextImpl& impl, const MlaPlanData& p, const MlaViews& v) {
  using detail::check_view;
  const MlaShape& m = p.shape;
  const auto& s = m.attention;
  const int64_t S = s.num_requests, T = s.num_query_tokens, H = s.num_heads, Dk = s.head_size, Dv = m.value_head_size,
                B = s.block_size, N = s.num_blocks;
  const DType cache_elem = is_fp8_dtype(s.cache_dtype) ? DType::u8 : s.cache_dtype;
  check_view(impl, "query", v.query, {s.query_dtype}, Shape{T, H, Dk}, 4);
  if (m.cache_form == MlaCacheForm::one_pool) {
    if (!v.ckv_cache.empty() || !v.kpe_cache.empty())
      throw Error(ErrorCode::invalid_argument, "ckv_cache: given to a plan of the one-pool form (give mla_cache only)");
    check_view(impl, "mla_cache", v.mla_cache, {cache_elem, s.cache_dtype}, Shape{N, B, Dk}, 16);
  } else {
    if (!v.mla_cache.empty())
      throw Error(ErrorCode::invalid_argument, "mla_cache: given to a plan of the two-pool form (give ckv_cache and kpe_cache)");
    check_view(impl, "ckv_cache", v.ckv_cache, {cache_elem, s.cache_dtype}, Shape{N, B, Dv}, 16);
    check_view(impl, "kpe_cache", v.kpe_cache, {cache_elem, s.cache_dtype}, Shape{N, B, Dk - Dv}, 16);
  }
  detail::check_page_table_views(impl, page_table_views(v), s.num_requests, s.max_blocks_per_seq, p.csr);
  check_view(impl, "query_starts", v.query_starts, {DType::i32, DType::u32}, Shape{S + 1}, 4);
  check_view(impl, "output", v.output, {s.query_dtype}, Shape{T, H, Dv}, 4);
  if (s.lse) check_view(impl, "lse", v.lse, {DType::f32}, Shape{T, H}, 4);
  if (s.tree_mask) {
    const size_t bytes = p.choice.tree_mask_bytes;
    check_view(impl, "tree_mask", v.tree_mask, {DType::u8}, Shape{int64_t(bytes)}, 4);
    if (v.tree_mask.memory.size < (bytes + 3) / 4 * 4)
      throw Error(ErrorCode::invalid_argument,
                  fmt::format("tree_mask: a view of {} bytes ends inside a 32-bit word; the shader reads whole words, so "
                              "the view must cover {} bytes (the buffer padded to a multiple of 4)",
                              v.tree_mask.memory.size, (bytes + 3) / 4 * 4));
  }
  if (s.alibi) check_view(impl, "alibi_slopes", v.alibi_slopes, {DType::f32}, Shape{H}, 4);
  if (s.sinks) check_view(impl, "sinks", v.sinks, {DType::f32}, Shape{H}, 4);
  if (p.scratch_bytes()) detail::check_buffer(impl, "scratch", v.scratch, p.scratch_bytes(), 4);
  if (!v.status.empty()) detail::check_buffer(impl, "status", v.status, 4, 4);
}

}  // namespace

void record_mla_attention(Context& context, VkCommandBuffer cmd, const MlaPlan& plan, const MlaViews& v,
                          const AttentionParams& params) {
  const auto& p = plan.data();
  const MlaShape& m = p.shape;
  const auto& s = m.attention;
  auto& impl = context.impl();
  detail::validate_attention_params(params, s);
  check_views(impl, p, v);
  if (s.num_requests == 0) return;

  const auto& c = p.choice;
  const detail::DenseTables tables = detail::record_page_tables(impl, cmd, page_table_views(v), s.num_requests,
                                                                s.max_blocks_per_seq, s.block_size, p.csr, v.scratch,
                                                                v.status);
  const bool two = m.cache_form == MlaCacheForm::two_pools;
  std::array<detail::BoundView, ATTN_BINDING_COUNT> bound;
  bound[ATTN_BINDING_QUERY] = impl.bind_view(v.query.memory);
  bound[ATTN_BINDING_KEY_CACHE] = impl.bind_view(two ? v.ckv_cache.memory : v.mla_cache.memory);
  // One pool: bound again where kpe goes, never read through it.
  bound[ATTN_BINDING_VALUE_CACHE] = impl.bind_view(two ? v.kpe_cache.memory : v.mla_cache.memory);
  bound[ATTN_BINDING_BLOCK_TABLES] = impl.bind_view(tables.block_tables.memory);
  bound[ATTN_BINDING_CONTEXT_LENS] = impl.bind_view(tables.context_lens.memory);
  bound[ATTN_BINDING_QUERY_STARTS] = impl.bind_view(v.query_starts.memory);
  bound[ATTN_BINDING_OUTPUT] = impl.bind_view(v.output.memory);
  bound[ATTN_BINDING_ALIBI] = impl.bind_view(s.alibi ? v.alibi_slopes.memory : BufferView{});
  bound[ATTN_BINDING_SINKS] = impl.bind_view(s.sinks ? v.sinks.memory : BufferView{});
  bound[ATTN_BINDING_LSE] = impl.bind_view(s.lse ? v.lse.memory : BufferView{});
  // The split's part only: a CSR expansion after it is bound as the tables.
  bound[ATTN_BINDING_SCRATCH] = impl.bind_view(c.split ? BufferView{v.scratch.buffer, v.scratch.offset, c.scratch_bytes}
                                                       : BufferView{});
  bound[ATTN_BINDING_STATUS] = impl.bind_view(v.status);
  bound[ATTN_BINDING_TREE_MASK] = impl.bind_view(s.tree_mask ? v.tree_mask.memory : BufferView{});

  sh::AttentionPush push{};
  push.num_requests = s.num_requests;
  push.num_tokens = s.num_query_tokens;
  push.num_heads = s.num_heads;
  push.num_kv_heads = 1;
  push.num_blocks = s.num_blocks;
  push.max_blocks_per_seq = s.max_blocks_per_seq;
  push.sliding_window = s.sliding_window;
  push.context_cap = c.context_cap;
  push.partition_tokens = c.partition_tokens;
  push.num_partitions = c.num_partitions;
  push.tree_mask_bytes = uint32_t(c.tree_mask_bytes);
  // The views are contiguous (check_views), as rows of the attention push block.
  push.query_rows = detail::rows_push(detail::check_rows(impl, "query", v.query, false), bound[ATTN_BINDING_QUERY]);
  push.key_offset = bound[ATTN_BINDING_KEY_CACHE].word_offset;
  push.value_offset = bound[ATTN_BINDING_VALUE_CACHE].word_offset;
  push.block_tables_offset = bound[ATTN_BINDING_BLOCK_TABLES].word_offset;
  push.context_lens_offset = bound[ATTN_BINDING_CONTEXT_LENS].word_offset;
  push.query_starts_offset = bound[ATTN_BINDING_QUERY_STARTS].word_offset;
  push.output_rows = detail::rows_push(detail::check_rows(impl, "output", v.output, true), bound[ATTN_BINDING_OUTPUT]);
  push.alibi_offset = bound[ATTN_BINDING_ALIBI].word_offset;
  push.sinks_offset = bound[ATTN_BINDING_SINKS].word_offset;
  push.lse_offset = bound[ATTN_BINDING_LSE].word_offset;
  push.scratch_offset = bound[ATTN_BINDING_SCRATCH].word_offset;
  push.status_offset = bound[ATTN_BINDING_STATUS].word_offset;
  push.tree_mask_offset = bound[ATTN_BINDING_TREE_MASK].word_offset;
  push.scale = params.scale ? *params.scale : 1.0f / std::sqrt(float(s.head_size));  // 1 / sqrt(Dk)
  push.softcap = params.softcap;
  push.k_scale = params.k_scale;
  push.v_scale = params.v_scale;
  impl.dispatch(cmd, *p.attention, bound, &push, c.groups_per_kv_head, c.tile_slots, c.num_partitions);
  if (!c.split) return;
  detail::record_partition_merge(impl, cmd, *p.merge,
                                 {bound[ATTN_BINDING_SCRATCH], bound[ATTN_BINDING_CONTEXT_LENS],
                                  bound[ATTN_BINDING_QUERY_STARTS], bound[ATTN_BINDING_OUTPUT], bound[ATTN_BINDING_SINKS],
                                  bound[ATTN_BINDING_LSE]},
                                 push);
}

}  // namespace vkpaged
