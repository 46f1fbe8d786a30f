// SPDX-License-Identifier: Apache-2.0
// C API: multi-query attention plans, recording attention into a caller's command buffer, the
// run-and-wait convenience over host arrays and the CPU reference.
#include <memory>

#include "c_api/c_api_calls.hpp"
#include "c_api/c_api_convert.hpp"
#include "c_api/c_api_guard.hpp"
#include "c_api/c_api_handles.hpp"
#include "c_api/c_api_host_outputs.hpp"
#include "vkpaged/attention.hpp"
#include "vkpaged/reference.hpp"
#include "vkpaged/vkpaged.h"

using namespace vkpaged;
using namespace vkpaged::c_api;

static_assert(VKP_STATUS_BAD_QUERY_STARTS == kStatusBadQueryStarts);

extern "C" {

VKP_API vkp_status VKP_CALL vkp_attention_plan_create(vkp_context* context, const vkp_attention_shape* shape,
                                                      const int32_t* query_starts, size_t num_query_starts,
                                                      const vkp_attention_options* options, vkp_attention_plan** out) {
  return guarded("vkp_attention_plan_create", [&] {
    require(out, "out");
    *out = nullptr;
    auto& ctx = require(context, "context")->context;
    const AttentionShape s = to_cpp(read_struct(shape, "shape"), "shape");
    const auto starts = array_of(query_starts, num_query_starts, "query_starts");
    const AttentionOptions o = to_cpp(read_optional_struct(options, "options"), "options");
    auto plan = std::make_unique<vkp_attention_plan>(vkp_attention_plan{AttentionPlan::create(ctx, s, starts, o), "", context});
    plan->description = plan->plan.describe();
    *out = adopt(plan.release(), context);
  });
}

VKP_API vkp_status VKP_CALL vkp_attention_plan_create_bucket(vkp_context* context, const vkp_attention_shape* shape,
                                                             uint32_t max_query_tokens,
                                                             const vkp_attention_options* options,
                                                             vkp_attention_plan** out) {
  return guarded("vkp_attention_plan_create_bucket", [&] {
    require(out, "out");
    *out = nullptr;
    auto& ctx = require(context, "context")->context;
    const AttentionShape s = to_cpp(read_struct(shape, "shape"), "shape");
    const AttentionOptions o = to_cpp(read_optional_struct(options, "options"), "options");
    auto plan = std::make_unique<vkp_attention_plan>(
        vkp_attention_plan{AttentionPlan::create_bucket(ctx, s, max_query_tokens, o), "", context});
    plan->description = plan->plan.describe();
    *out = adopt(plan.release(), context);
  });
}

VKP_API vkp_status VKP_CALL vkp_attention_bucket_scratch_bytes(vkp_context* context, const vkp_attention_shape* shape,
                                                               uint32_t max_query_tokens,
                                                               const vkp_attention_options* options, uint64_t* bytes) {
  return guarded("vkp_attention_bucket_scratch_bytes", [&] {
    auto& ctx = require(context, "context")->context;
    require(bytes, "bytes");
    const AttentionShape s = to_cpp(read_struct(shape, "shape"), "shape");
    const AttentionOptions o = to_cpp(read_optional_struct(options, "options"), "options");
    *bytes = AttentionPlan::max_scratch_bytes(ctx, s, max_query_tokens, o);
  });
}

VKP_API void VKP_CALL vkp_attention_plan_destroy(vkp_attention_plan* plan) {
  destroy_handle("vkp_attention_plan_destroy", plan, "plan");
}

// vkp_attention_plan_info's fields: each the AttentionPlan getter of its name.
#define VKP_ATTENTION_PLAN_INFO_FIELDS(X) \
  X(kernel) X(max_query_tokens) X(split) X(num_partitions) X(tree_mask_bytes) X(scratch_bytes) X(bucket)
VKP_INFO_GETTER(vkp_attention_plan_info_get, vkp_attention_plan, plan, vkp_attention_plan_info, plan,
                VKP_ATTENTION_PLAN_INFO_FIELDS)

VKP_GETTER(vkp_attention_plan_shape_get, vkp_attention_plan, plan, vkp_attention_shape, to_c(h.plan.shape()))

VKP_GETTER(vkp_attention_plan_options_get, vkp_attention_plan, plan, vkp_attention_options, to_c(h.plan.options()))

VKP_API const char* VKP_CALL vkp_attention_plan_describe(const vkp_attention_plan* plan) {
  return guarded_value("vkp_attention_plan_describe", "", [&] { return require(plan, "plan")->description.c_str(); });
}

VKP_API vkp_status VKP_CALL vkp_record_attention(vkp_context* context, VkCommandBuffer cmd,
                                                 const vkp_attention_plan* plan, const vkp_attention_views* views,
                                                 const vkp_decode_params* params) {
  return record_with("vkp_record_attention", context, "context", cmd, [&](vkp_context& c) {
    const AttentionPlan& p = plan_on(context, plan);  // checked in the order of the arguments
    const AttentionViews v = to_cpp(views);
    record_attention(c.context, cmd, p, v, to_params(params));
  });
}

VKP_API vkp_status VKP_CALL vkp_attention_shape_of(const vkp_attention_inputs* inputs, const vkp_decode_params* params,
                                                   vkp_bool32 want_lse, vkp_attention_shape* out) {
  return guarded("vkp_attention_shape_of", [&] {
    const AttentionInputs in = to_cpp(inputs);
    const AttentionParams p = to_params(params);
    const bool lse = to_bool(want_lse, "want_lse");
    const StructOut result(out, "out");
    result.set(to_c(attention_shape_of(in, p, lse)));
  });
}

VKP_API vkp_status VKP_CALL vkp_batch_attention(vkp_context* context, const vkp_attention_inputs* inputs,
                                                const vkp_attention_options* options, const vkp_decode_params* params,
                                                void* output, size_t output_bytes, float* lse, size_t lse_count) {
  return run_into_host_arrays("vkp_batch_attention", context, inputs, options, params, {output, output_bytes, lse, lse_count});
}

VKP_API vkp_status VKP_CALL vkp_reference_batch_attention(const vkp_attention_inputs* inputs,
                                                          const vkp_decode_params* params, void* output,
                                                          size_t output_bytes, float* lse, size_t lse_count) {
  return guarded("vkp_reference_batch_attention", [&] {
    const AttentionInputs in = to_cpp(inputs);
    const AttentionParams p = to_params(params);
    const HostOutputs out{output, output_bytes, lse, lse_count};
    check_outputs(attention_shape_of(in, p, lse != nullptr), out);
    copy_result(reference::batch_attention(in, p, lse != nullptr), out);
  });
}

}  // extern "C"
