// SPDX-License-Identifier: Apache-2.0
// C API: MLA attention plans and recording MLA attention into a caller's command buffer
// (mla_attention.hpp).
#include <fmt/format.h>

#include <memory>

#include "c_api/c_api_calls.hpp"
#include "c_api/c_api_convert.hpp"
#include "c_api/c_api_guard.hpp"
#include "c_api/c_api_handles.hpp"
#include "c_api/c_api_mla.hpp"
#include "c_api/c_api_structs.hpp"
#include "vkpaged/mla_attention.hpp"
#include "vkpaged/vkpaged.h"

using namespace vkpaged;
using namespace vkpaged::c_api;

static_assert(int(MlaCacheForm::one_pool) == VKP_MLA_ONE_POOL && int(MlaCacheForm::two_pools) == VKP_MLA_TWO_POOLS);

namespace vkpaged::c_api {

MlaShape to_mla_shape(const vkp_attention_shape* shape, uint32_t value_head_size, vkp_mla_cache_form cache_form) {
  MlaShape m;
  m.attention = to_cpp(read_struct(shape, "shape"), "shape");
  m.value_head_size = value_head_size;
  const auto form = int64_t(cache_form);
  if (form != VKP_MLA_ONE_POOL && form != VKP_MLA_TWO_POOLS)
    throw Error(ErrorCode::invalid_argument, fmt::format("cache_form: {} is not a vkp_mla_cache_form", form));
  m.cache_form = MlaCacheForm(form);
  return m;
}

}  // namespace vkpaged::c_api

namespace {

// A C plan handle of `plan`, its description kept beside it.
vkp_mla_plan* adopt_plan(MlaPlan plan, vkp_context* context) {
  auto handle = std::make_unique<vkp_mla_plan>(vkp_mla_plan{std::move(plan), "", context});
  handle->description = handle->plan.describe();
  return adopt(handle.release(), context);
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
    const MlaShape m = to_mla_shape(shape, value_head_size, cache_form);
    const auto starts = array_of(query_starts, num_query_starts, "query_starts");
    const MlaOptions o = to_cpp(read_optional_struct(options, "options"), "options");
    *out = adopt_plan(MlaPlan::create(ctx, m, starts, o), context);
  });
}

VKP_API vkp_status VKP_CALL vkp_mla_plan_create_bucket(vkp_context* context, const vkp_attention_shape* shape,
                                                       uint32_t value_head_size, vkp_mla_cache_form cache_form,
                                                       uint32_t max_query_tokens, const vkp_mla_options* options,
                                                       vkp_mla_plan** out) {
  return guarded("vkp_mla_plan_create_bucket", [&] {
    require(out, "out");
    *out = nullptr;
    auto& ctx = require(context, "context")->context;
    const MlaShape m = to_mla_shape(shape, value_head_size, cache_form);
    const MlaOptions o = to_cpp(read_optional_struct(options, "options"), "options");
    *out = adopt_plan(MlaPlan::create_bucket(ctx, m, max_query_tokens, o), context);
  });
}

VKP_API vkp_status VKP_CALL vkp_mla_bucket_scratch_bytes(vkp_context* context, const vkp_attention_shape* shape,
                                                         uint32_t value_head_size, vkp_mla_cache_form cache_form,
                                                         uint32_t max_query_tokens, const vkp_mla_options* options,
                                                         uint64_t* bytes) {
  return guarded("vkp_mla_bucket_scratch_bytes", [&] {
    auto& ctx = require(context, "context")->context;
    require(bytes, "bytes");
    const MlaShape m = to_mla_shape(shape, value_head_size, cache_form);
    const MlaOptions o = to_cpp(read_optional_struct(options, "options"), "options");
    *bytes = MlaPlan::max_scratch_bytes(ctx, m, max_query_tokens, o);
  });
}

VKP_API void VKP_CALL vkp_mla_plan_destroy(vkp_mla_plan* plan) { destroy_handle("vkp_mla_plan_destroy", plan, "plan"); }

// vkp_mla_plan_info's fields: each the MlaPlan getter of its name.
#define VKP_MLA_PLAN_INFO_FIELDS(X) \
  X(split) X(num_partitions) X(tree_mask_bytes) X(scratch_bytes) X(kernel) X(bucket) X(max_query_tokens)
VKP_INFO_GETTER(vkp_mla_plan_info_get, vkp_mla_plan, plan, vkp_mla_plan_info, plan, VKP_MLA_PLAN_INFO_FIELDS)

VKP_API const char* VKP_CALL vkp_mla_plan_describe(const vkp_mla_plan* plan) {
  return guarded_value("vkp_mla_plan_describe", "", [&] { return require(plan, "plan")->description.c_str(); });
}

VKP_API vkp_status VKP_CALL vkp_record_mla_attention(vkp_context* context, VkCommandBuffer cmd, const vkp_mla_plan* plan,
                                                     const vkp_mla_views* views, const vkp_decode_params* params) {
  return record_with("vkp_record_mla_attention", context, "context", cmd, [&](vkp_context& c) {
    const MlaPlan& p = plan_on(context, plan);
    const vkp_mla_views v = read_struct(views, "views");
    const AttentionParams cpp_params = to_params(params);
    record_mla_attention(c.context, cmd, p, to_cpp(v), cpp_params);
  });
}

}  // extern "C"
