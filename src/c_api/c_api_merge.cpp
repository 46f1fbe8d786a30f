// SPDX-License-Identifier: Apache-2.0
// C API: the cascade merge of two attention states, recorded, over host arrays, and the CPU
// reference.
#include <string>

#include "c_api/c_api_calls.hpp"
#include "c_api/c_api_convert.hpp"
#include "c_api/c_api_guard.hpp"
#include "c_api/c_api_handles.hpp"
#include "vkpaged/merge.hpp"
#include "vkpaged/vkpaged.h"

using namespace vkpaged;
using namespace vkpaged::c_api;

namespace {

// One state, named as the C++ checks name it ("a.output", "a.lse").
DecodeResult state_of(const vkp_host_tensor* output, const vkp_host_tensor* lse, const std::string& side) {
  const std::string output_name = side + ".output", lse_name = side + ".lse";
  return {to_host(*require(output, output_name.c_str()), output_name.c_str()),
          to_host(*require(lse, lse_name.c_str()), lse_name.c_str())};
}

// Both outputs are checked before either is written.
void hand_back(const DecodeResult& merged, vkp_host_tensor* output, vkp_host_tensor* lse) {
  check_matches(merged.output, *require(output, "output"), "output");
  if (lse != nullptr) check_matches(merged.lse, *lse, "lse");
  copy_back(merged.output, *output, "output");
  if (lse != nullptr) copy_back(merged.lse, *lse, "lse");
}

}  // namespace

extern "C" {

VKP_API vkp_status VKP_CALL vkp_record_merge_attention(vkp_context* context, VkCommandBuffer cmd, const vkp_merge_views* views) {
  return record_with("vkp_record_merge_attention", context, "context", cmd, [&](vkp_context& c) {
    record_merge_attention(c.context, cmd, to_cpp(views));
  });
}

VKP_API vkp_status VKP_CALL vkp_merge_attention(vkp_context* context, const vkp_host_tensor* a_output,
                                       const vkp_host_tensor* a_lse, const vkp_host_tensor* b_output,
                                       const vkp_host_tensor* b_lse, vkp_host_tensor* output, vkp_host_tensor* lse) {
  return guarded("vkp_merge_attention", [&] {
    auto& ctx = require(context, "context")->context;
    const DecodeResult a = state_of(a_output, a_lse, "a");
    const DecodeResult b = state_of(b_output, b_lse, "b");
    require(output, "output");
    hand_back(merge_attention(ctx, a, b), output, lse);
  });
}

VKP_API vkp_status VKP_CALL vkp_reference_merge_attention(const vkp_host_tensor* a_output, const vkp_host_tensor* a_lse,
                                                 const vkp_host_tensor* b_output, const vkp_host_tensor* b_lse,
                                                 vkp_host_tensor* output, vkp_host_tensor* lse) {
  return guarded("vkp_reference_merge_attention", [&] {
    const DecodeResult a = state_of(a_output, a_lse, "a");
    const DecodeResult b = state_of(b_output, b_lse, "b");
    require(output, "output");
    hand_back(reference::merge_attention(a, b), output, lse);
  });
}

}  // extern "C"
