// `vkpaged attend`: one decode-attention call on .npy inputs, on a Vulkan device or the CPU
// reference. Everything is read and checked before a device is opened, and the output is
// written atomically, so a refused call leaves no output file behind.
#include "attend_inputs.hpp"
#include "commands.hpp"
#include "npy.hpp"
#include "vkpaged/context.hpp"
#include "vkpaged/error.hpp"
#include "vkpaged/reference.hpp"

namespace vkpaged::cli {

namespace {

DecodeResult compute(const AttendArgs& args, const AttendCall& call) {
  if (args.device == "cpu") return reference::decode_attention(call.inputs, call.options, call.params);
  ContextOptions context_options;
  context_options.device = args.device;
  Context context(context_options);
  return decode_attention(context, call.inputs, call.options, call.params);
}

}  // namespace

int run_attend(const AttendArgs& args) {
  if (args.out.empty()) throw Error(ErrorCode::invalid_argument, "--out: no output path given");
  const AttendCall call = load_attend_call(args);
  DecodeResult result;
  try {
    decode_shape_of(call.inputs);  // refuses bad shapes before a device is opened
    result = compute(args, call);
  } catch (const Error& e) {
    throw Error(e.code(), blame_option(e.what()));
  }
  try {
    write_npy(args.out, result.output);
  } catch (const Error& e) {
    throw Error(e.code(), std::string("--out: ") + e.what());
  }
  return 0;
}

}  // namespace vkpaged::cli
