// SPDX-License-Identifier: Apache-2.0
#pragma once
// Cascade attention: merges the (output, log-sum-exp) pairs of attention over two disjoint
// key sets, e.g. a shared prefix attended once for many sequences plus each sequence's own
// suffix. The result equals attention over the union (sinks must be given to one side only:
// an LSE includes the sink when decode was asked for one).
#include <vulkan/vulkan.h>

#include "vkpaged/context.hpp"
#include "vkpaged/decode.hpp"
#include "vkpaged/export.hpp"
#include "vkpaged/tensor.hpp"

namespace vkpaged {

// outputs [S, H, D] (f32, f16 or bf16, all the same), LSEs [S, H] f32; lse is optional. output
// may be the same memory as output_a or output_b (each element is read before it is written).
// Compute shader stage: reads the four inputs, writes output and lse.
struct MergeViews {
  TensorView output_a;
  TensorView lse_a;
  TensorView output_b;
  TensorView lse_b;
  TensorView output;
  TensorView lse;
};

VKPAGED_API void record_merge_attention(Context& context, VkCommandBuffer cmd, const MergeViews& views);

// Convenience over host results (as decode_attention returns them with want_lse = true).
VKPAGED_API DecodeResult merge_attention(Context& context, const DecodeResult& a, const DecodeResult& b);

namespace reference {
// The CPU reference of the merge, in double precision.
VKPAGED_API DecodeResult merge_attention(const DecodeResult& a, const DecodeResult& b);
}  // namespace reference

}  // namespace vkpaged
