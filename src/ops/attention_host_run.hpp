// SPDX-License-Identifier: Apache-2.0
#pragma once
// The run of batch_attention and mla_attention over their staged buffers (host_staging.hpp):
// record, submit and wait, check the status word, download the results.
#include <vulkan/vulkan.h>

#include <functional>
#include <vector>

#include "ops/host_staging.hpp"
#include "vkpaged/attention.hpp"
#include "vkpaged/context.hpp"

namespace vkpaged::detail {

// The buffers of one staged call the run reads or fills first.
struct StagedAttentionBuffers {
  BufferView scratch;  // empty when the plan takes none
  BufferView status;   // zeroed (status_kept)
  TensorView output;
  TensorView lse;      // downloaded when want_lse
};

// Records `record` after filling the scratch with NaN words (a partition the kernel should have
// written but did not, or one the merge should have skipped but read, then shows in the output),
// runs and waits; then refuses a status word the shader set on validated inputs (internal,
// naming `op`) and downloads the output and, with want_lse, the LSE into `result`.
void run_staged_attention(Context& ctx, const StagedAttentionBuffers& buffers, bool want_lse, const char* op,
                          AttentionResult& result, const std::function<void(VkCommandBuffer)>& record);

// The same on views whose inputs and outputs are staged: their scratch of `scratch_bytes` (the
// plan's) and status word are staged here, kept in `keep`.
template <typename Views>
void run_staged_attention(Context& ctx, std::vector<DeviceBuffer>& keep, size_t scratch_bytes, Views& v, bool want_lse,
                          const char* op, AttentionResult& result,
                          const std::function<void(VkCommandBuffer)>& record) {
  v.scratch = buffer_kept(ctx, keep, scratch_bytes);
  v.status = status_kept(ctx, keep);
  run_staged_attention(ctx, {v.scratch, v.status, v.output, v.lse}, want_lse, op, result, record);
}

}  // namespace vkpaged::detail
