// SPDX-License-Identifier: Apache-2.0
#pragma once
// The caller's output arrays of the host conveniences and CPU references of decode and
// attention (output, lse): checked against the shape before any work, so that a refusal leaves
// them as they were, then filled from the result.
#include <cstddef>
#include <cstring>

#include "c_api/c_api_convert.hpp"
#include "c_api/c_api_guard.hpp"
#include "c_api/c_api_handles.hpp"
#include "vkpaged/attention.hpp"
#include "vkpaged/decode.hpp"

namespace vkpaged::c_api {

struct HostOutputs {
  void* output;
  size_t output_bytes;
  float* lse;  // NULL: no lse asked for
  size_t lse_count;
};

// Refuses arrays shorter than the shape's rows (decode: S, attention: T) times heads.
void check_outputs(const DecodeShape& shape, const HostOutputs& out);
void check_outputs(const AttentionShape& shape, const HostOutputs& out);

// Each operator's shape of its inputs and its run-and-wait convenience, under one name.
inline DecodeShape shape_of(const DecodeInputs& in, const DecodeParams&, bool want_lse) {
  return decode_shape_of(in, want_lse);
}
inline AttentionShape shape_of(const AttentionInputs& in, const AttentionParams& params, bool want_lse) {
  return attention_shape_of(in, params, want_lse);
}
inline DecodeResult run_on_device(Context& ctx, const DecodeInputs& in, const DecodeOptions& options,
                                  const DecodeParams& params, bool want_lse) {
  return decode_attention(ctx, in, options, params, want_lse);
}
inline AttentionResult run_on_device(Context& ctx, const AttentionInputs& in, const AttentionOptions& options,
                                     const AttentionParams& params, bool want_lse) {
  return batch_attention(ctx, in, params, options, want_lse);
}

// A DecodeResult or an AttentionResult, into arrays check_outputs passed.
template <typename Result>
void copy_result(const Result& r, const HostOutputs& out) {
  if (r.output.bytes() > 0) std::memcpy(out.output, r.output.data(), r.output.bytes());
  if (out.lse != nullptr && r.lse.bytes() > 0) std::memcpy(out.lse, r.lse.data(), r.lse.bytes());
}

// vkp_decode_attention and vkp_batch_attention: context, inputs, options and params read in the
// order of the arguments, the arrays checked, then the run on the device copied into them.
template <typename CInputs, typename COptions>
vkp_status run_into_host_arrays(const char* function, vkp_context* context, const CInputs* inputs,
                                const COptions* options, const vkp_decode_params* params,
                                const HostOutputs& out) noexcept {
  return guarded(function, [&] {
    Context& ctx = require(context, "context")->context;
    const auto in = to_cpp(inputs);
    const auto o = to_cpp(read_optional_struct(options, "options"), "options");
    const DecodeParams p = to_params(params);
    const bool want_lse = out.lse != nullptr;
    check_outputs(shape_of(in, p, want_lse), out);
    copy_result(run_on_device(ctx, in, o, p, want_lse), out);
  });
}

}  // namespace vkpaged::c_api
