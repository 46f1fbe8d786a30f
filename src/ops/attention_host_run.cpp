// SPDX-License-Identifier: Apache-2.0
#include "ops/attention_host_run.hpp"

#include "vk/context_impl.hpp"

namespace vkpaged::detail {

void run_staged_attention(Context& ctx, const StagedAttentionBuffers& b, bool want_lse, const char* op,
                          AttentionResult& result, const std::function<void(VkCommandBuffer)>& record) {
  ctx.run_and_wait([&](VkCommandBuffer cmd) {
    if (!b.scratch.empty()) {
      ctx.impl().d.vkCmdFillBuffer(cmd, b.scratch.buffer, b.scratch.offset, b.scratch.size, 0xffffffffu);
      record_compute_barrier(ctx, cmd);
    }
    record(cmd);
  });
  check_status_clear(ctx, b.status, op);
  download_outputs(ctx, b, result, want_lse);
}

}  // namespace vkpaged::detail
