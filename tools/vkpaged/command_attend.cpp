// SPDX-License-Identifier: Apache-2.0
// `vkpaged attend`: one decode, multi-query or MLA attention call on .npy inputs, on a Vulkan
// device or the CPU reference. Everything is read and checked before a device is opened, and
// the outputs are written atomically, so a refused call leaves no output file behind.
#include "attend_inputs.hpp"
#include "cli_context.hpp"
#include "commands.hpp"
#include "npy.hpp"
#include "vkpaged/context.hpp"
#include "vkpaged/error.hpp"
#include "vkpaged/mla_attention.hpp"
#include "vkpaged/reference.hpp"

namespace vkpaged::cli {

namespace {

struct AttendOutputs {
  HostTensor output;
  HostTensor lse;
};

AttendOutputs compute(const AttendArgs& args, const AttendCall& call) {
  if (call.mla) {
    if (args.device == "cpu") {
      auto r = reference::mla_attention(call.mla_inputs, call.params, call.want_lse);
      return {std::move(r.output), std::move(r.lse)};
    }
    Context context(cli_context_options(args.device));
    auto r = mla_attention(context, call.mla_inputs, call.params, call.mla_options, call.want_lse);
    return {std::move(r.output), std::move(r.lse)};
  }
  if (call.multi_query) {
    if (args.device == "cpu") {
      auto r = reference::batch_attention(call.attention, call.params, call.want_lse);
      return {std::move(r.output), std::move(r.lse)};
    }
    Context context(cli_context_options(args.device));
    auto r = batch_attention(context, call.attention, call.params, call.attention_options, call.want_lse);
    return {std::move(r.output), std::move(r.lse)};
  }
  if (args.device == "cpu") {
    auto r = reference::decode_attention(call.inputs, call.options, call.params, call.want_lse);
    return {std::move(r.output), std::move(r.lse)};
  }
  Context context(cli_context_options(args.device));
  auto r = decode_attention(context, call.inputs, call.options, call.params, call.want_lse);
  return {std::move(r.output), std::move(r.lse)};
}

void write_output(const char* option, const std::string& path, const HostTensor& tensor) {
  try {
    write_npy(path, tensor);
  } catch (const Error& e) {
    throw Error(e.code(), std::string(option) + ": " + e.what());
  }
}

}  // namespace

int run_attend(const AttendArgs& args) {
  if (args.out.empty()) throw Error(ErrorCode::invalid_argument, "--out: no output path given");
  const AttendCall call = load_attend_call(args);
  AttendOutputs result;
  try {
    // Refuses bad shapes before a device is opened.
    if (call.mla) mla_shape_of(call.mla_inputs, call.params, call.want_lse);
    else if (call.multi_query) attention_shape_of(call.attention, call.params, call.want_lse);
    else decode_shape_of(call.inputs, call.want_lse);
    result = compute(args, call);
  } catch (const Error& e) {
    throw Error(e.code(), blame_option(e.what(), !args.kv_indptr.empty()));
  }
  write_output("--out", args.out, result.output);
  if (call.want_lse) write_output("--lse", args.lse, result.lse);
  return 0;
}

}  // namespace vkpaged::cli
