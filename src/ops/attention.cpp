// SPDX-License-Identifier: Apache-2.0
// Host side of shaders/attention*.comp and, split, shaders/partition_merge.comp: the one plan of
// the attention problem (plan_attention_problem: the pure planner's choice of the kernel family,
// the decode family's choice for single tokens, the pipelines), which AttentionPlan and
// DecodePlan (ops/decode.cpp) both hold; view checks and recording.
#include "vkpaged/attention.hpp"

#include <fmt/format.h>

#include <array>
#include <cmath>

#include "common/shader_interface.h"
#include "embedded_shaders.hpp"
#include "ops/attention_plan.hpp"
#include "ops/attention_validation.hpp"
#include "ops/attention_problem.hpp"
#include "ops/attention_recording.hpp"
#include "ops/shared_fields.hpp"
#include "ops/csr_page_table.hpp"
#include "ops/partition_merge.hpp"
#include "ops/plan_handle.hpp"
#include "ops/strided_rows.hpp"
#include "ops/view_checks.hpp"
#include "vk/cooperative_matrix_khr.hpp"
#include "vkpaged/error.hpp"

namespace vkpaged {

static_assert(kStatusBadQueryStarts == STATUS_BAD_QUERY_STARTS,
              "the status bits of include/vkpaged/attention.hpp and shaders/common/shader_interface.h");
static_assert(uint32_t(KvLayout::vllm) == KV_LAYOUT_VLLM && uint32_t(KvLayout::nhd) == KV_LAYOUT_NHD &&
                  uint32_t(KvLayout::hnd) == KV_LAYOUT_HND,
              "the layouts of include/vkpaged/kv_layout.hpp and shaders/common/shader_interface.h");

using detail::AttentionPlanData;
namespace sh = vkpaged::shader;

namespace detail {

AttentionPipelineRequests attention_pipeline_requests(const AttentionShape& shape, const AttentionChoice& c) {
  std::vector<uint32_t> spec(ATTN_MATRIX_SC_COUNT);
  spec[ATTN_SC_WORKGROUP] = c.workgroup;
  spec[ATTN_SC_HEAD_SIZE] = shape.head_size;
  spec[ATTN_SC_BLOCK_SIZE] = shape.block_size;
  spec[ATTN_SC_ROWS] = c.rows;
  spec[ATTN_SC_HEADS_PER_WORKGROUP] = c.heads_per_workgroup;
  spec[ATTN_SC_ROW_PARTS] = c.row_parts;
  spec[ATTN_SC_QUERY_DTYPE] = uint32_t(shape.query_dtype);
  spec[ATTN_SC_CACHE_DTYPE] = uint32_t(shape.cache_dtype);
  spec[ATTN_SC_KV_LAYOUT] = uint32_t(shape.kv_layout);
  const uint32_t features = problem_feature_bits(shape, c.split);
  spec[ATTN_SC_FEATURES] = features;
  AttentionPipelineRequests r;
  if (c.kernel == AttentionKernel::matrix) {
    spec[ATTN_SC_MATRIX_M] = c.product.m;
    spec[ATTN_SC_MATRIX_N] = c.product.n;
    spec[ATTN_SC_MATRIX_K] = c.product.k;
    spec[ATTN_SC_KEY_TILE] = c.key_tile;
    spec[ATTN_SC_QUERY_REGISTERS] = c.query_registers ? 1 : 0;
    spec[ATTN_SC_WORKGROUP_SYNC] = c.workgroup_sync ? 1 : 0;
    r.attention = {&vk::shader_attention_matrix_khr(), std::move(spec), ATTN_BINDING_COUNT, sizeof(sh::AttentionPush)};
  } else {
    spec.resize(ATTN_SC_COUNT);
    r.attention = {c.address ? &vk::shader_attention_address() : &vk::shader_attention(), std::move(spec),
                   ATTN_BINDING_COUNT, sizeof(sh::AttentionPush)};
  }
  if (c.split)
    r.merge = detail::partition_merge_request(c.merge_workgroup, shape.head_size, shape.query_dtype, features, true);
  return r;
}

AttentionPlanData plan_attention_problem(Context& context, const AttentionShape& shape, const QueryRows& rows,
                                         const AttentionOptions& options, const DecodeFamilyOptions& family) {
  AttentionPlanData p;
  p.shape = shape;
  p.options = options;
  p.choice = plan_attention_rows(context.impl().capabilities, shape, rows, options);
  if (p.choice.kernel == AttentionKernel::decode)
    p.decode = DecodeFamilyPlan{decode_family_choice(context, shape, options, family)};
  return p;
}

std::vector<vk::PipelineRequest> plan_pipeline_requests(const AttentionPlanData& p) {
  std::vector<vk::PipelineRequest> all;
  if (p.decode) {
    all = decode_pipeline_requests(p.decode->shape, p.decode->choice).all();
  } else {
    const AttentionPipelineRequests r = attention_pipeline_requests(p.shape, p.choice);
    all.push_back(r.attention);
    if (r.merge) all.push_back(*r.merge);
  }
  if (p.shape.csr_page_table) all.push_back(csr_pipeline_request());
  return all;
}

void create_plan_pipelines(Context& context, AttentionPlanData& p) {
  auto& impl = context.impl();
  auto created = [&](const std::optional<vk::PipelineRequest>& r) { return r ? &impl.pipeline(*r) : nullptr; };
  if (p.decode) {
    const DecodePipelineRequests r = decode_pipeline_requests(p.decode->shape, p.decode->choice);
    p.decode->decode = &impl.pipeline(r.decode);
    p.decode->reduce = created(r.reduce);
    p.decode->order = created(r.order);
  } else {
    const AttentionPipelineRequests r = attention_pipeline_requests(p.shape, p.choice);
    p.attention = &impl.pipeline(r.attention);
    p.merge = created(r.merge);
  }
  if (p.shape.csr_page_table)
    p.csr = plan_csr_expansion(impl, p.shape.num_requests, p.shape.max_blocks_per_seq, p.split_scratch_bytes());
}

}  // namespace detail

// ---- AttentionPlan ----

namespace {

// A planned problem with its pipelines: the plan's data.
std::unique_ptr<AttentionPlanData> with_pipelines(Context& context, AttentionPlanData planned) {
  auto p = std::make_unique<AttentionPlanData>(std::move(planned));
  detail::create_plan_pipelines(context, *p);
  return p;
}

}  // namespace

AttentionPlan AttentionPlan::create(Context& context, const AttentionShape& shape, Span<const int32_t> query_starts,
                                    const AttentionOptions& options) {
  return AttentionPlan(with_pipelines(
      context, detail::plan_attention_problem(context, shape, detail::QueryRows::step(query_starts), options)));
}

AttentionPlan AttentionPlan::create_bucket(Context& context, const AttentionShape& shape, uint32_t max_query_tokens,
                                           const AttentionOptions& options) {
  return AttentionPlan(with_pipelines(
      context, detail::plan_attention_problem(context, shape, detail::QueryRows::bucket(max_query_tokens), options)));
}

size_t AttentionPlan::max_scratch_bytes(Context& context, const AttentionShape& shape, uint32_t max_query_tokens,
                                        const AttentionOptions& options) {
  const size_t split_bytes =
      detail::plan_attention_problem(context, shape, detail::QueryRows::bucket(max_query_tokens), options)
          .split_scratch_bytes();
  return detail::scratch_bytes_with_expansion(shape, split_bytes);
}

VKP_PLAN_HANDLE_MEMBERS(AttentionPlan, AttentionPlanData)
const AttentionShape& AttentionPlan::shape() const noexcept { return data_->shape; }
const AttentionOptions& AttentionPlan::options() const noexcept { return data_->options; }
AttentionKernel AttentionPlan::kernel() const noexcept { return data_->choice.kernel; }
bool AttentionPlan::bucket() const noexcept { return data_->choice.bucket; }
uint32_t AttentionPlan::max_query_tokens() const noexcept { return data_->choice.max_query_tokens; }
size_t AttentionPlan::tree_mask_bytes() const noexcept { return data_->choice.tree_mask_bytes; }
bool AttentionPlan::split() const noexcept { return data_->split(); }
uint32_t AttentionPlan::num_partitions() const noexcept { return data_->num_partitions(); }
size_t AttentionPlan::scratch_bytes() const noexcept { return data_->scratch_bytes(); }

std::string AttentionPlan::describe() const {
  const auto& p = *data_;
  if (p.decode) return "decode kernels: " + detail::describe_decode_family(p);
  const auto& c = p.choice;
  std::string path = c.split ? fmt::format("split {} x {} positions", c.num_partitions, c.partition_tokens) : "one pass";
  if (p.csr.planned()) path += ", CSR page tables expanded";
  if (c.kernel == AttentionKernel::matrix)
    return fmt::format("{}, matrix kernel ({}x{}x{} f16 products), {} rows ({} tokens x {} heads)/wg in blocks of {}, "
                       "key tiles of {}, wg {}, query {}, {} bytes shared{}",
                       path, c.product.m, c.product.n, c.product.k, c.rows, c.tokens_per_tile, c.heads_per_workgroup,
                       c.product.m, c.key_tile, c.workgroup,
                       c.query_registers ? "in registers" : "in shared memory", c.shared_bytes,
                       c.workgroup_sync ? ", workgroup barriers" : "");
  return fmt::format("{}, attention kernel, {} rows ({} tokens x {} heads)/wg, wg {}, {} row parts{}", path, c.rows,
                     c.tokens_per_tile, c.heads_per_workgroup, c.workgroup, c.row_parts,
                     c.address ? ", caches by device address" : "");
}

// ---- recording ----

namespace {

// The call's views, the key and value caches bound as such.
detail::AttentionCallViews call_views(const AttentionViews& v) {
  return detail::attention_call_views(v, v.key_cache.memory, v.value_cache.memory);
}

detail::AttentionRows check_views(const detail::ContextImpl& impl, const AttentionPlanData& p, const AttentionViews& v) {
  using detail::check_view;
  const auto& s = p.shape;
  const int64_t Hkv = s.num_kv_heads, D = s.head_size, B = s.block_size, N = s.num_blocks;
  const int64_t x = cache_pack_factor(s.cache_dtype);
  const DType cache_elem = is_fp8_dtype(s.cache_dtype) ? DType::u8 : s.cache_dtype;
  // Caches read by device address need not fit one descriptor's range.
  const bool cache_range = !(p.choice.kernel == AttentionKernel::scalar && p.choice.address) &&
                           !(p.decode && p.decode->choice.address);
  return detail::check_attention_views(
      impl, s, call_views(v), {D, true, p.csr, p.choice.tree_mask_bytes, p.scratch_bytes()}, [&] {
        check_view(impl, "key_cache", v.key_cache, {cache_elem, s.cache_dtype},
                   detail::key_cache_shape(s.kv_layout, N, Hkv, D, B, x), 16, cache_range);
        check_view(impl, "value_cache", v.value_cache, {cache_elem, s.cache_dtype},
                   detail::value_cache_shape(s.kv_layout, N, Hkv, D, B), 16, cache_range);
      });
}

// A batch of single tokens on the decode family: its recording, record_decode's, with the views
// both take.
void record_as_decode(Context& context, VkCommandBuffer cmd, const AttentionPlanData& p, const AttentionViews& v,
                      const AttentionParams& params) {
  DecodeViews d;
  VKP_COPY_FIELDS(VKP_SHARED_VIEW_FIELDS, d, v);
  detail::record_decode_family(context, cmd, p, d, params);
}

}  // namespace

void record_attention(Context& context, VkCommandBuffer cmd, const AttentionPlan& plan, const AttentionViews& v,
                      const AttentionParams& params) {
  const auto& p = plan.data();
  const auto& s = p.shape;
  auto& impl = context.impl();
  detail::validate_attention_params(params, s);
  const detail::AttentionRows rows = check_views(impl, p, v);
  if (s.num_requests == 0) return;
  if (p.decode) return record_as_decode(context, cmd, p, v, params);
  detail::record_attention_kernels(impl, cmd, {*p.attention, p.merge, p.csr}, s, p.choice, call_views(v), rows, params);
}

}  // namespace vkpaged
