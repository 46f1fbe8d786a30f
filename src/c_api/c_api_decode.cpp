// SPDX-License-Identifier: Apache-2.0
// C API: decode plans, recording decode into a caller's command buffer, the run-and-wait
// convenience over host arrays and the CPU reference.
#include <memory>

#include "c_api/c_api_calls.hpp"
#include "c_api/c_api_convert.hpp"
#include "c_api/c_api_guard.hpp"
#include "c_api/c_api_handles.hpp"
#include "c_api/c_api_host_outputs.hpp"
#include "vkpaged/reference.hpp"
#include "vkpaged/vkpaged.h"

using namespace vkpaged;
using namespace vkpaged::c_api;

static_assert(VKP_STATUS_BAD_BLOCK_ID == kStatusBadBlockId && VKP_STATUS_BAD_CONTEXT_LEN == kStatusBadContextLen &&
              VKP_STATUS_BAD_ORDER == kStatusBadOrder && VKP_STATUS_BAD_MERGE_COUNTERS == kStatusBadMergeCounters &&
              VKP_STATUS_BAD_PAGE_TABLE == kStatusBadPageTable);

extern "C" {

VKP_API vkp_status VKP_CALL vkp_decode_plan_create(vkp_context* context, const vkp_decode_shape* shape,
                                                   const vkp_decode_options* options, vkp_decode_plan** out) {
  return guarded("vkp_decode_plan_create", [&] {
    require(out, "out");
    *out = nullptr;
    auto& ctx = require(context, "context")->context;
    const DecodeShape s = to_cpp(read_struct(shape, "shape"), "shape");
    const DecodeOptions o = to_cpp(read_optional_struct(options, "options"), "options");
    auto plan = std::make_unique<vkp_decode_plan>(vkp_decode_plan{DecodePlan::create(ctx, s, o), "", context});
    plan->description = plan->plan.describe();
    *out = adopt(plan.release(), context);
  });
}

VKP_API void VKP_CALL vkp_decode_plan_destroy(vkp_decode_plan* plan) {
  destroy_handle("vkp_decode_plan_destroy", plan, "plan");
}

// vkp_decode_plan_info's fields: each the DecodePlan getter of its name.
#define VKP_DECODE_PLAN_INFO_FIELDS(X) \
  X(split) X(num_partitions) X(partition_tokens) X(scratch_bytes) X(longest_first) X(order_bytes) X(merge_counter_bytes)
VKP_INFO_GETTER(vkp_decode_plan_info_get, vkp_decode_plan, plan, vkp_decode_plan_info, plan, VKP_DECODE_PLAN_INFO_FIELDS)

VKP_GETTER(vkp_decode_plan_shape_get, vkp_decode_plan, plan, vkp_decode_shape, to_c(h.plan.shape()))

VKP_GETTER(vkp_decode_plan_options_get, vkp_decode_plan, plan, vkp_decode_options, to_c(h.plan.options()))

VKP_API size_t VKP_CALL vkp_decode_plan_scratch_bytes(const vkp_decode_plan* plan) {
  return guarded_value("vkp_decode_plan_scratch_bytes", size_t(0),
                       [&] { return require(plan, "plan")->plan.scratch_bytes(); });
}

VKP_API size_t VKP_CALL vkp_decode_plan_merge_counter_bytes(const vkp_decode_plan* plan) {
  return guarded_value("vkp_decode_plan_merge_counter_bytes", size_t(0),
                       [&] { return require(plan, "plan")->plan.merge_counter_bytes(); });
}

VKP_API const char* VKP_CALL vkp_decode_plan_describe(const vkp_decode_plan* plan) {
  return guarded_value("vkp_decode_plan_describe", "", [&] { return require(plan, "plan")->description.c_str(); });
}

VKP_API vkp_status VKP_CALL vkp_record_decode(vkp_context* context, VkCommandBuffer cmd, const vkp_decode_plan* plan,
                                              const vkp_decode_views* views, const vkp_decode_params* params) {
  return record_with("vkp_record_decode", context, "context", cmd, [&](vkp_context& c) {
    const DecodePlan& p = plan_on(context, plan);  // checked in the order of the arguments
    const DecodeViews v = to_cpp(views);
    record_decode(c.context, cmd, p, v, to_params(params));
  });
}

VKP_API vkp_status VKP_CALL vkp_record_decode_order(vkp_context* context, VkCommandBuffer cmd,
                                                    const vkp_decode_plan* plan, const vkp_tensor_view* context_lens,
                                                    const vkp_buffer_view* order) {
  return record_with("vkp_record_decode_order", context, "context", cmd, [&](vkp_context& c) {
    const DecodePlan& p = plan_on(context, plan);
    record_decode_order(c.context, cmd, p, to_cpp(*require(context_lens, "context_lens"), "context_lens"),
                        to_cpp(*require(order, "order")));
  });
}

VKP_API vkp_status VKP_CALL vkp_decode_shape_of(const vkp_decode_inputs* inputs, vkp_bool32 want_lse,
                                                vkp_decode_shape* out) {
  return guarded("vkp_decode_shape_of", [&] {
    const DecodeInputs in = to_cpp(inputs);
    const bool lse = to_bool(want_lse, "want_lse");
    const StructOut result(out, "out");
    result.set(to_c(decode_shape_of(in, lse)));
  });
}

VKP_API vkp_status VKP_CALL vkp_decode_attention(vkp_context* context, const vkp_decode_inputs* inputs,
                                                 const vkp_decode_options* options, const vkp_decode_params* params,
                                                 void* output, size_t output_bytes, float* lse, size_t lse_count) {
  return run_into_host_arrays("vkp_decode_attention", context, inputs, options, params, {output, output_bytes, lse, lse_count});
}

VKP_API vkp_status VKP_CALL vkp_reference_decode_attention(const vkp_decode_inputs* inputs,
                                                           const vkp_decode_options* options,
                                                           const vkp_decode_params* params, void* output,
                                                           size_t output_bytes, float* lse, size_t lse_count) {
  return guarded("vkp_reference_decode_attention", [&] {
    const DecodeInputs in = to_cpp(inputs);
    const DecodeOptions opt = to_cpp(read_optional_struct(options, "options"), "options");
    const DecodeParams cpp_params = to_params(params);
    const HostOutputs out{output, output_bytes, lse, lse_count};
    check_outputs(decode_shape_of(in, lse != nullptr), out);
    copy_result(reference::decode_attention(in, opt, cpp_params, lse != nullptr), out);
  });
}

}  // extern "C"
