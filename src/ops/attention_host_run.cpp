// SPDX-License-Identifier: Apache-2.0
#include "ops/attention_host_run.hpp"

#include <fmt/format.h>

#include "vk/context_impl.hpp"
#include "vkpaged/error.hpp"

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
  uint32_t status = 0;
  ctx.download(b.status, &status, 4);
  if (status != 0)
    throw Error(ErrorCode::internal, fmt::format("{}: the shader reported status {:#x} on validated inputs", op, status));
  ctx.download(b.output.memory, result.output.data(), result.output.bytes());
  if (want_lse) ctx.download(b.lse.memory, result.lse.data(), result.lse.bytes());
}

}  // namespace vkpaged::detail
