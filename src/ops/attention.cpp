// SPDX-License-Identifier: Apache-2.0
// Host side of shaders/attention*.comp and, split, shaders/partition_merge.comp: the plan (the pure
// planner's choice, made into a decode plan or the attention pipelines), view checks and
// recording.
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
#include "ops/decode_plan.hpp"
#include "ops/partition_merge.hpp"
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

}  // namespace

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
  const uint32_t features = feature_bits(shape, c.split);
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

std::vector<vk::PipelineRequest> attention_bucket_requests(Context& context, const AttentionShape& shape,
                                                           uint32_t max_query_tokens, const AttentionOptions& options) {
  const AttentionChoice c =
      plan_attention_bucket(context.impl().capabilities, shape, max_query_tokens, options);
  if (c.kernel == AttentionKernel::decode) {
    const DecodeShape d = attention_decode_shape(shape);
    return decode_pipeline_requests(d, decode_choice(context, d, attention_decode_options(shape, options))).all();
  }
  const AttentionPipelineRequests r = attention_pipeline_requests(shape, c);
  std::vector<vk::PipelineRequest> all{r.attention};
  if (r.merge) all.push_back(*r.merge);
  if (shape.csr_page_table) all.push_back(csr_pipeline_request());
  return all;
}

}  // namespace detail

// ---- AttentionPlan ----

namespace {

// The plan of a choice: a decode plan, or the attention pipelines it names.
std::unique_ptr<AttentionPlanData> plan_data(Context& context, const AttentionShape& shape,
                                             const AttentionOptions& options, const detail::AttentionChoice& choice) {
  auto p = std::make_unique<AttentionPlanData>();
  p->shape = shape;
  p->options = options;
  p->choice = choice;
  if (choice.kernel == AttentionKernel::decode) {
    p->decode = DecodePlan::create(context, detail::attention_decode_shape(shape),
                                   detail::attention_decode_options(shape, options));
    return p;
  }
  const detail::AttentionPipelineRequests r = detail::attention_pipeline_requests(shape, choice);
  auto& impl = context.impl();
  p->attention = &impl.pipeline(r.attention);
  if (r.merge) p->merge = &impl.pipeline(*r.merge);
  if (shape.csr_page_table)
    p->csr = detail::plan_csr_expansion(impl, shape.num_requests, shape.max_blocks_per_seq, choice.scratch_bytes);
  return p;
}

}  // namespace

AttentionPlan AttentionPlan::create(Context& context, const AttentionShape& shape, Span<const int32_t> query_starts,
                                    const AttentionOptions& options) {
  const auto choice =
      detail::plan_attention(context.impl().capabilities, shape, query_starts, options);
  return AttentionPlan(plan_data(context, shape, options, choice));
}

AttentionPlan AttentionPlan::create_bucket(Context& context, const AttentionShape& shape, uint32_t max_query_tokens,
                                           const AttentionOptions& options) {
  const auto choice =
      detail::plan_attention_bucket(context.impl().capabilities, shape, max_query_tokens, options);
  return AttentionPlan(plan_data(context, shape, options, choice));
}

size_t AttentionPlan::max_scratch_bytes(Context& context, const AttentionShape& shape, uint32_t max_query_tokens,
                                        const AttentionOptions& options) {
  const auto c =
      detail::plan_attention_bucket(context.impl().capabilities, shape, max_query_tokens, options);
  const size_t split_bytes =
      c.kernel != AttentionKernel::decode
          ? c.scratch_bytes
          : detail::decode_choice(context, detail::attention_decode_shape(shape), detail::attention_decode_options(shape, options))
                .scratch_bytes;
  // CSR page tables are expanded after the split's part, as the plan will place them.
  if (!shape.csr_page_table) return split_bytes;
  return detail::csr_expansion_layout(shape.num_requests, shape.max_blocks_per_seq, split_bytes).end();
}

AttentionPlan::AttentionPlan(std::unique_ptr<AttentionPlanData> data) : data_(std::move(data)) {}
AttentionPlan::AttentionPlan(const AttentionPlan& o) : data_(std::make_unique<AttentionPlanData>(*o.data_)) {}
AttentionPlan& AttentionPlan::operator=(const AttentionPlan& o) {
  data_ = std::make_unique<AttentionPlanData>(*o.data_);
  return *this;
}
AttentionPlan::AttentionPlan(AttentionPlan&&) noexcept = default;
AttentionPlan& AttentionPlan::operator=(AttentionPlan&&) noexcept = default;
AttentionPlan::~AttentionPlan() = default;
const AttentionShape& AttentionPlan::shape() const noexcept { return data_->shape; }
const AttentionOptions& AttentionPlan::options() const noexcept { return data_->options; }
AttentionKernel AttentionPlan::kernel() const noexcept { return data_->choice.kernel; }
bool AttentionPlan::bucket() const noexcept { return data_->choice.bucket; }
uint32_t AttentionPlan::max_query_tokens() const noexcept { return data_->choice.max_query_tokens; }
size_t AttentionPlan::tree_mask_bytes() const noexcept { return data_->choice.tree_mask_bytes; }
bool AttentionPlan::split() const noexcept { return data_->decode ? data_->decode->split() : data_->choice.split; }
uint32_t AttentionPlan::num_partitions() const noexcept {
  return data_->decode ? data_->decode->num_partitions() : data_->choice.num_partitions;
}
size_t AttentionPlan::scratch_bytes() const noexcept { return data_->scratch_bytes(); }

std::string AttentionPlan::describe() const {
  const auto& p = *data_;
  if (p.decode) return "decode kernels: " + p.decode->describe();
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
                           !(p.decode && p.decode->data().choice.address);
  // A decode plan's expansion is its own (record_decode checks the CSR views against it).
  const detail::CsrExpansion& expansion = p.decode ? p.decode->data().csr : p.csr;
  return detail::check_attention_views(
      impl, s, call_views(v), {D, true, expansion, p.choice.tree_mask_bytes, p.scratch_bytes()}, [&] {
        check_view(impl, "key_cache", v.key_cache, {cache_elem, s.cache_dtype},
                   detail::key_cache_shape(s.kv_layout, N, Hkv, D, B, x), 16, cache_range);
        check_view(impl, "value_cache", v.value_cache, {cache_elem, s.cache_dtype},
                   detail::value_cache_shape(s.kv_layout, N, Hkv, D, B), 16, cache_range);
      });
}

// A batch of single tokens on its decode plan. Until record_decode takes its per-call values
// when recording (the decode planner's DecodeParams), they travel in a copy of the plan.
void record_as_decode(Context& context, VkCommandBuffer cmd, const AttentionPlanData& p, const AttentionViews& v,
                      const AttentionParams& params) {
  DecodeViews d;
  VKP_COPY_FIELDS(VKP_SHARED_VIEW_FIELDS, d, v);
  record_decode(context, cmd, *p.decode, d, params);
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
