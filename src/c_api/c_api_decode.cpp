// SPDX-License-Identifier: Apache-2.0
// C API: decode plans, recording decode into a caller's command buffer, the run-and-wait
// convenience over host arrays and the CPU reference.
#include <fmt/format.h>

#include <cstring>
#include <memory>

#include "c_api/c_api_convert.hpp"
#include "c_api/c_api_guard.hpp"
#include "c_api/c_api_handles.hpp"
#include "vkpaged/reference.hpp"
#include "vkpaged/vkpaged.h"

using namespace vkpaged;
using namespace vkpaged::c_api;

namespace {



// Checks the caller's output arrays against the shape before any work, so that a refusal
// leaves them untouched.
void check_outputs(const DecodeShape& s, const void* output, size_t output_bytes, const float* lse, size_t lse_count) {
  const size_t want = size_t(s.num_seqs) * s.num_heads * s.head_size * dtype_size(s.query_dtype);
  if (want > 0) require(output, "output");
  if (output_bytes < want)
    throw Error(ErrorCode::invalid_argument,
                fmt::format("output_bytes: {} is less than S * H * D * {} = {}", output_bytes, dtype_size(s.query_dtype), want));
  if (lse != nullptr && lse_count < size_t(s.num_seqs) * s.num_heads)
    throw Error(ErrorCode::invalid_argument,
                fmt::format("lse_count: {} is less than S * H = {}", lse_count, size_t(s.num_seqs) * s.num_heads));
}

void copy_result(const DecodeResult& r, void* output, float* lse) {
  if (r.output.bytes() > 0) std::memcpy(output, r.output.data(), r.output.bytes());
  if (lse != nullptr && r.lse.bytes() > 0) std::memcpy(lse, r.lse.data(), r.lse.bytes());
}

// The plan behind a handle, which must have been made on `context`.
const DecodePlan& plan_on(const vkp_context* context, const vkp_decode_plan* plan) {
  const DecodePlan& p = require(plan, "plan")->plan;
  if (plan->context != context) throw Error(ErrorCode::invalid_argument, "plan: created on another context");
  return p;
}

}  // namespace

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

VKP_API vkp_status VKP_CALL vkp_decode_plan_info_get(const vkp_decode_plan* plan, vkp_decode_plan_info* out) {
  return guarded("vkp_decode_plan_info_get", [&] {
    const auto& p = require(plan, "plan")->plan;
    const StructOut result(out, "out");
    vkp_decode_plan_info info = result.blank();
    info.split = to_c_bool(p.split());
    info.num_partitions = p.num_partitions();
    info.partition_tokens = p.partition_tokens();
    info.scratch_bytes = p.scratch_bytes();
    info.longest_first = to_c_bool(p.longest_first());
    info.order_bytes = p.order_bytes();
    info.merge_counter_bytes = p.merge_counter_bytes();
    result.set(info);
  });
}

VKP_API vkp_status VKP_CALL vkp_decode_plan_shape_get(const vkp_decode_plan* plan, vkp_decode_shape* out) {
  return guarded("vkp_decode_plan_shape_get", [&] {
    const auto& p = require(plan, "plan")->plan;
    StructOut(out, "out").set(to_c(p.shape()));
  });
}

VKP_API vkp_status VKP_CALL vkp_decode_plan_options_get(const vkp_decode_plan* plan, vkp_decode_options* out) {
  return guarded("vkp_decode_plan_options_get", [&] {
    const auto& p = require(plan, "plan")->plan;
    StructOut(out, "out").set(to_c(p.options()));
  });
}

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
  return guarded("vkp_record_decode", [&] {
    auto& ctx = require(context, "context")->context;
    require(cmd, "cmd");
    const DecodePlan& p = plan_on(context, plan);  // checked in the order of the arguments
    const DecodeViews v = to_cpp(views);
    record_decode(ctx, cmd, p, v, to_params(params));
  });
}

VKP_API vkp_status VKP_CALL vkp_record_decode_order(vkp_context* context, VkCommandBuffer cmd,
                                                    const vkp_decode_plan* plan, const vkp_tensor_view* context_lens,
                                                    const vkp_buffer_view* order) {
  return guarded("vkp_record_decode_order", [&] {
    auto& ctx = require(context, "context")->context;
    require(cmd, "cmd");
    const DecodePlan& p = plan_on(context, plan);
    record_decode_order(ctx, cmd, p, to_cpp(*require(context_lens, "context_lens"), "context_lens"),
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
  return guarded("vkp_decode_attention", [&] {
    auto& ctx = require(context, "context")->context;
    const DecodeInputs in = to_cpp(inputs);
    const DecodeOptions opt = to_cpp(read_optional_struct(options, "options"), "options");
    const DecodeParams cpp_params = to_params(params);
    check_outputs(decode_shape_of(in, lse != nullptr), output, output_bytes, lse, lse_count);
    copy_result(decode_attention(ctx, in, opt, cpp_params, lse != nullptr), output, lse);
  });
}

VKP_API vkp_status VKP_CALL vkp_reference_decode_attention(const vkp_decode_inputs* inputs,
                                                           const vkp_decode_options* options,
                                                           const vkp_decode_params* params, void* output,
                                                           size_t output_bytes, float* lse, size_t lse_count) {
  return guarded("vkp_reference_decode_attention", [&] {
    const DecodeInputs in = to_cpp(inputs);
    const DecodeOptions opt = to_cpp(read_optional_struct(options, "options"), "options");
    const DecodeParams cpp_params = to_params(params);
    check_outputs(decode_shape_of(in, lse != nullptr), output, output_bytes, lse, lse_count);
    copy_result(reference::decode_attention(in, opt, cpp_params, lse != nullptr), output, lse);
  });
}

}  // extern "C"
