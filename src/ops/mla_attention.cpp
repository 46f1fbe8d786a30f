// SPDX-License-Identifier: Apache-2.0
// Host side of shaders/mla_attention.comp and shaders/mla_attention_matrix_khr.comp (whose
// pipeline mla_attention_matrix_khr.cpp requests): the plan (the planner's choice made into
// pipelines, the split merged by partition_merge.comp over value sums Dv wide), view checks and
// recording, the same for both kernels.
#include "vkpaged/mla_attention.hpp"

#include <fmt/format.h>


#include "common/mla_interface.h"
#include "embedded_shaders.hpp"
#include "ops/attention_problem.hpp"
#include "ops/attention_recording.hpp"
#include "ops/attention_validation.hpp"
#include "ops/mla_attention_plan.hpp"
#include "ops/mla_attention_planner.hpp"
#include "ops/partition_merge.hpp"
#include "ops/plan_handle.hpp"
#include "ops/view_checks.hpp"
#include "vkpaged/error.hpp"

namespace vkpaged {

using detail::MlaPlanData;
namespace sh = vkpaged::shader;

namespace {

// The portable kernel's pipeline (shaders/mla_attention.comp).
vk::PipelineRequest scalar_request(const MlaShape& m, const detail::AttentionChoice& c, uint32_t features) {
  std::vector<uint32_t> spec = detail::mla_spec_constants(m, c, features, MLA_ATTN_SC_COUNT);
  spec[MLA_ATTN_SC_ROW_PARTS] = c.row_parts;
  return {c.address ? &vk::shader_mla_attention_address() : &vk::shader_mla_attention(), std::move(spec),
          ATTN_BINDING_COUNT, sizeof(sh::AttentionPush)};
}

std::unique_ptr<MlaPlanData> plan_data(Context& context, const MlaShape& m, const MlaOptions& options,
                                       const detail::AttentionChoice& c) {
  auto p = std::make_unique<MlaPlanData>();
  p->shape = m;
  p->options = options;
  p->choice = c;
  const AttentionShape& s = m.attention;
  auto& impl = context.impl();
  const detail::MlaPipelineRequests requests = detail::mla_pipeline_requests(m, c);
  p->attention = &impl.pipeline(requests.attention);
  if (requests.merge) p->merge = &impl.pipeline(*requests.merge);
  if (s.csr_page_table) p->csr = detail::plan_csr_expansion(impl, s.num_requests, s.max_blocks_per_seq, c.scratch_bytes);
  return p;
}

}  // namespace

namespace detail {

MlaPipelineRequests mla_pipeline_requests(const MlaShape& m, const AttentionChoice& c) {
  const AttentionShape& s = m.attention;
  const uint32_t features = problem_feature_bits(s, c.split);
  MlaPipelineRequests r{c.kernel == AttentionKernel::matrix ? mla_matrix_pipeline_request(m, c, features)
                                                            : scalar_request(m, c, features),
                        {}, {}};
  if (c.split)  // the multi-query merge, over value sums Dv wide
    r.merge = partition_merge_request(c.merge_workgroup, m.value_head_size, s.query_dtype, features, true);
  if (s.csr_page_table) r.csr = csr_pipeline_request();
  return r;
}

std::vector<vk::PipelineRequest> MlaPipelineRequests::all() const {
  std::vector<vk::PipelineRequest> out{attention};
  if (merge) out.push_back(*merge);
  if (csr) out.push_back(*csr);
  return out;
}

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

MlaPlan MlaPlan::create_bucket(Context& context, const MlaShape& shape, uint32_t max_query_tokens,
                               const MlaOptions& options) {
  const auto choice = detail::plan_mla_attention_rows(context.impl().capabilities, shape,
                                                      detail::QueryRows::bucket(max_query_tokens), options);
  return MlaPlan(plan_data(context, shape, options, choice));
}

size_t MlaPlan::max_scratch_bytes(Context& context, const MlaShape& shape, uint32_t max_query_tokens,
                                  const MlaOptions& options) {
  const size_t split_bytes = detail::plan_mla_attention_rows(context.impl().capabilities, shape,
                                                             detail::QueryRows::bucket(max_query_tokens), options)
                                 .scratch_bytes;
  return detail::scratch_bytes_with_expansion(shape.attention, split_bytes);
}

VKP_PLAN_HANDLE_MEMBERS(MlaPlan, MlaPlanData)
const MlaShape& MlaPlan::shape() const noexcept { return data_->shape; }
const MlaOptions& MlaPlan::options() const noexcept { return data_->options; }
bool MlaPlan::bucket() const noexcept { return data_->choice.bucket; }
uint32_t MlaPlan::max_query_tokens() const noexcept { return data_->choice.max_query_tokens; }
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
  return fmt::format("{}, {} ({}{}), Dk {} Dv {}, {} rows ({} tokens x {} heads)/wg, key tiles of {}, wg {}, "
                     "{} bytes shared",
                     path, kernel, p.shape.cache_form == MlaCacheForm::one_pool ? "one pool" : "two pools",
                     c.address ? ", by device address" : "",
                     p.shape.attention.head_size, p.shape.value_head_size, c.rows, c.tokens_per_tile,
                     c.heads_per_workgroup, c.key_tile, c.workgroup, c.shared_bytes);
}

// ---- recording ----

namespace {

// The call's views: the one pool bound as the key cache and again where kpe goes (never read
// through it), or ckv and kpe.
detail::AttentionCallViews call_views(const MlaPlanData& p, const MlaViews& v) {
  const bool two = p.shape.cache_form == MlaCacheForm::two_pools;
  return detail::attention_call_views(v, two ? v.ckv_cache.memory : v.mla_cache.memory,
                                      two ? v.kpe_cache.memory : v.mla_cache.memory);
}

// The views, the query and output contiguous (as rows of the attention push block).
detail::AttentionRows check_views(const detail::ContextImpl& impl, const MlaPlanData& p, const MlaViews& v) {
  using detail::check_view;
  const MlaShape& m = p.shape;
  const auto& s = m.attention;
  const int64_t Dk = s.head_size, Dv = m.value_head_size, B = s.block_size, N = s.num_blocks;
  const DType cache_elem = is_fp8_dtype(s.cache_dtype) ? DType::u8 : s.cache_dtype;
  const bool range = !p.choice.address;  // pools read by device address need not fit one descriptor
  return detail::check_attention_views(
      impl, s, call_views(p, v), {Dv, false, p.csr, p.choice.tree_mask_bytes, p.scratch_bytes()}, [&] {
        if (m.cache_form == MlaCacheForm::one_pool) {
          if (!v.ckv_cache.empty() || !v.kpe_cache.empty())
            throw Error(ErrorCode::invalid_argument,
                        "ckv_cache: given to a plan of the one-pool form (give mla_cache only)");
          check_view(impl, "mla_cache", v.mla_cache, {cache_elem, s.cache_dtype}, Shape{N, B, Dk}, 16, range);
        } else {
          if (!v.mla_cache.empty())
            throw Error(ErrorCode::invalid_argument,
                        "mla_cache: given to a plan of the two-pool form (give ckv_cache and kpe_cache)");
          check_view(impl, "ckv_cache", v.ckv_cache, {cache_elem, s.cache_dtype}, Shape{N, B, Dv}, 16, range);
          check_view(impl, "kpe_cache", v.kpe_cache, {cache_elem, s.cache_dtype}, Shape{N, B, Dk - Dv}, 16, range);
        }
      });
}

}  // namespace

void record_mla_attention(Context& context, VkCommandBuffer cmd, const MlaPlan& plan, const MlaViews& v,
                          const AttentionParams& params) {
  const auto& p = plan.data();
  const auto& s = p.shape.attention;
  auto& impl = context.impl();
  detail::validate_attention_params(params, s);
  const detail::AttentionRows rows = check_views(impl, p, v);
  if (s.num_requests == 0) return;
  detail::record_attention_kernels(impl, cmd, {*p.attention, p.merge, p.csr}, s, p.choice, call_views(p, v), rows,
                                   params);
}

}  // namespace vkpaged
