// SPDX-License-Identifier: Apache-2.0
// C API: multi-query attention plans, recording attention into a caller's command buffer, the
// run-and-wait convenience over host arrays and the CPU reference.
#include <fmt/format.h>

#include <cstring>
#include <memory>

#include "c_api/c_api_convert.hpp"
#include "c_api/c_api_guard.hpp"
#include "c_api/c_api_handles.hpp"
#include "vkpaged/attention.hpp"
#include "vkpaged/reference.hpp"
#include "vkpaged/vkpaged.h"

using namespace vkpaged;
using namespace vkpaged::c_api;

namespace {


// The caller's output arrays against the shape, before any work: a refusal leaves them as they were.
void check_outputs(const AttentionShape& s, const void* output, size_t output_bytes, const float* lse,
                   size_t lse_count) {
  const size_t rows = size_t(s.num_query_tokens) * s.num_heads;
  const size_t want = rows * s.head_size * dtype_size(s.query_dtype);
  if (want > 0) require(output, "output");
  if (output_bytes < want)
    throw Error(ErrorCode::invalid_argument,
                fmt::format("output_bytes: {} is less than T * H * D * {} = {}", output_bytes, dtype_size(s.query_dtype), want));
  if (lse != nullptr && lse_count < rows)
    throw Error(ErrorCode::invalid_argument, fmt::format("lse_count: {} is less than T * H = {}", lse_count, rows));
}

void copy_result(const AttentionResult& r, void* output, float* lse) {
  if (r.output.bytes() > 0) std::memcpy(output, r.output.data(), r.output.bytes());
  if (lse != nullptr && r.lse.bytes() > 0) std::memcpy(lse, r.lse.data(), r.lse.bytes());
}

// The plan behind a handle, which must have been made on `context`.
const AttentionPlan& plan_on(const vkp_context* context, const vkp_attention_plan* plan) {
  const AttentionPlan& p = require(plan, "plan")->plan;
  if (plan->context != context) throw Error(ErrorCode::invalid_argument, "plan: created on another context");
  return p;
}

}  // namespace

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

VKP_API vkp_status VKP_CALL vkp_attention_plan_info_get(const vkp_attention_plan* plan, vkp_attention_plan_info* out) {
  return guarded("vkp_attention_plan_info_get", [&] {
    const auto& p = require(plan, "plan")->plan;
    const StructOut result(out, "out");
    vkp_attention_plan_info info = result.blank();
    info.kernel = to_c(p.kernel());
    info.max_query_tokens = p.max_query_tokens();
    info.split = to_c_bool(p.split());
    info.num_partitions = p.num_partitions();
    info.tree_mask_bytes = p.tree_mask_bytes();
    info.scratch_bytes = p.scratch_bytes();
    info.bucket = to_c_bool(p.bucket());
    result.set(info);
  });
}

VKP_API vkp_status VKP_CALL vkp_attention_plan_shape_get(const vkp_attention_plan* plan, vkp_attention_shape* out) {
  return guarded("vkp_attention_plan_shape_get", [&] {
    const auto& p = require(plan, "plan")->plan;
    StructOut(out, "out").set(to_c(p.shape()));
  });
}

VKP_API vkp_status VKP_CALL vkp_attention_plan_options_get(const vkp_attention_plan* plan, vkp_attention_options* out) {
  return guarded("vkp_attention_plan_options_get", [&] {
    const auto& p = require(plan, "plan")->plan;
    StructOut(out, "out").set(to_c(p.options()));
  });
}

VKP_API const char* VKP_CALL vkp_attention_plan_describe(const vkp_attention_plan* plan) {
  return guarded_value("vkp_attention_plan_describe", "", [&] { return require(plan, "plan")->description.c_str(); });
}

VKP_API vkp_status VKP_CALL vkp_record_attention(vkp_context* context, VkCommandBuffer cmd,
                                                 const vkp_attention_plan* plan, const vkp_attention_views* views,
                                                 const vkp_decode_params* params) {
  return guarded("vkp_record_attention", [&] {
    auto& ctx = require(context, "context")->context;
    require(cmd, "cmd");
    const AttentionPlan& p = plan_on(context, plan);  // checked in the order of the arguments
    const AttentionViews v = to_cpp(views);
    record_attention(ctx, cmd, p, v, to_params(params));
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
  return guarded("vkp_batch_attention", [&] {
    auto& ctx = require(context, "context")->context;
    const AttentionInputs in = to_cpp(inputs);
    const AttentionOptions o = to_cpp(read_optional_struct(options, "options"), "options");
    const AttentionParams p = to_params(params);
    check_outputs(attention_shape_of(in, p, lse != nullptr), output, output_bytes, lse, lse_count);
    copy_result(batch_attention(ctx, in, p, o, lse != nullptr), output, lse);
  });
}

VKP_API vkp_status VKP_CALL vkp_reference_batch_attention(const vkp_attention_inputs* inputs,
                                                          const vkp_decode_params* params, void* output,
                                                          size_t output_bytes, float* lse, size_t lse_count) {
  return guarded("vkp_reference_batch_attention", [&] {
    const AttentionInputs in = to_cpp(inputs);
    const AttentionParams p = to_params(params);
    check_outputs(attention_shape_of(in, p, lse != nullptr), output, output_bytes, lse, lse_count);
    copy_result(reference::batch_attention(in, p, lse != nullptr), output, lse);
  });
}

}  // extern "C"
