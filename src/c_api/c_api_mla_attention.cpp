// SPDX-License-Identifier: Apache-2.0
// C API: MLA attention plans and recording MLA attention into a caller's command buffer
// (mla_attention.hpp).
#include <fmt/format.h>

#include <memory>

#include "c_api/c_api_convert.hpp"
#include "c_api/c_api_guard.hpp"
#include "c_api/c_api_handles.hpp"
#include "c_api/c_api_structs.hpp"
#include "vkpaged/mla_attention.hpp"
#include "vkpaged/vkpaged.h"

using namespace vkpaged;
using namespace vkpaged::c_api;

static_assert(int(MlaCacheForm::one_pool) == VKP_MLA_ONE_POOL && int(MlaCacheForm::two_pools) == VKP_MLA_TWO_POOLS);

namespace {

MlaCacheForm to_cache_form(vkp_mla_cache_form form) {
  const auto value = int64_t(form);
  if (value != VKP_MLA_ONE_POOL && value != VKP_MLA_TWO_POOLS)
    throw Error(ErrorCode::invalid_argument, fmt::format("cache_form: {} is not a vkp_mla_cache_form", value));
  return MlaCacheForm(value);
}


MlaViews mla_views_of(const vkp_mla_views& v) {
  MlaViews m;
  m.query = to_cpp(v.query, "query");
  m.mla_cache = to_cpp(v.mla_cache, "mla_cache");
  m.ckv_cache = to_cpp(v.ckv_cache, "ckv_cache");
  m.kpe_cache = to_cpp(v.kpe_cache, "kpe_cache");
  m.block_tables = to_cpp(v.block_tables, "block_tables");
  m.context_lens = to_cpp(v.context_lens, "context_lens");
  m.query_starts = to_cpp(v.query_starts, "query_starts");
  m.output = to_cpp(v.output, "output");
  m.lse = to_cpp(v.lse, "lse");
  m.tree_mask = to_cpp(v.tree_mask, "tree_mask");
  m.alibi_slopes = to_cpp(v.alibi_slopes, "alibi_slopes");
  m.sinks = to_cpp(v.sinks, "sinks");
  m.scratch = to_cpp(v.scratch);
  m.status = to_cpp(v.status);
  m.kv_indptr = to_cpp(v.kv_indptr, "kv_indptr");
  m.kv_indices = to_cpp(v.kv_indices, "kv_indices");
  m.kv_last_page_len = to_cpp(v.kv_last_page_len, "kv_last_page_len");
  return m;
}

}  // namespace

extern "C" {

VKP_API vkp_status VKP_CALL vkp_mla_plan_create(vkp_context* context, const vkp_attention_shape* shape,
                                                uint32_t value_head_size, vkp_mla_cache_form cache_form,
                                                const int32_t* query_starts, size_t num_query_starts,
                                                const vkp_mla_options* options, vkp_mla_plan** out) {
  return guarded("vkp_mla_plan_create", [&] {
    require(out, "out");
    *out = nullptr;
    auto& ctx = require(context, "context")->context;
    MlaShape m;
    m.attention = to_cpp(read_struct(shape, "shape"), "shape");
    m.value_head_size = value_head_size;
    m.cache_form = to_cache_form(cache_form);
    const auto starts = array_of(query_starts, num_query_starts, "query_starts");
    const MlaOptions o = to_cpp(read_optional_struct(options, "options"), "options");
    auto plan = std::make_unique<vkp_mla_plan>(vkp_mla_plan{MlaPlan::create(ctx, m, starts, o), "", context});
    plan->description = plan->plan.describe();
    *out = adopt(plan.release(), context);
  });
}

VKP_API void VKP_CALL vkp_mla_plan_destroy(vkp_mla_plan* plan) { destroy_handle("vkp_mla_plan_destroy", plan, "plan"); }

VKP_API vkp_status VKP_CALL vkp_mla_plan_info_get(const vkp_mla_plan* plan, vkp_mla_plan_info* out) {
  return guarded("vkp_mla_plan_info_get", [&] {
    const auto& p = require(plan, "plan")->plan;
    const StructOut result(out, "out");
    vkp_mla_plan_info info = result.blank();
    info.split = to_c_bool(p.split());
    info.num_partitions = p.num_partitions();
    info.tree_mask_bytes = p.tree_mask_bytes();
    info.scratch_bytes = p.scratch_bytes();
    info.kernel = to_c(p.kernel());
    result.set(info);
  });
}

VKP_API const char* VKP_CALL vkp_mla_plan_describe(const vkp_mla_plan* plan) {
  return guarded_value("vkp_mla_plan_describe", "", [&] { return require(plan, "plan")->description.c_str(); });
}

VKP_API vkp_status VKP_CALL vkp_record_mla_attention(vkp_context* context, VkCommandBuffer cmd, const vkp_mla_plan* plan,
                                                     const vkp_mla_views* views, const vkp_decode_params* params) {
  return guarded("vkp_record_mla_attention", [&] {
    auto& ctx = require(context, "context")->context;
    require(cmd, "cmd");
    const MlaPlan& p = require(plan, "plan")->plan;
    if (plan->context != context) throw Error(ErrorCode::invalid_argument, "plan: created on another context");
    const vkp_mla_views v = read_struct(views, "views");
    const AttentionParams cpp_params = to_params(params);
    record_mla_attention(ctx, cmd, p, mla_views_of(v), cpp_params);
  });
}

}  // extern "C"
