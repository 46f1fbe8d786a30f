// SPDX-License-Identifier: Apache-2.0
// batch_attention over host tensors: upload, plan, run, download. For the CLI, the demo and
// tests; engines record with record_attention on their own buffers instead.
#include <algorithm>
#include <vector>

#include "ops/attention_validation.hpp"
#include "ops/decode_validation.hpp"
#include "ops/host_staging.hpp"
#include "vk/context_impl.hpp"
#include "vkpaged/attention.hpp"

namespace vkpaged {

AttentionResult batch_attention(Context& ctx, const AttentionInputs& in, const AttentionParams& params,
                                const AttentionOptions& options, bool want_lse) {
  const AttentionShape shape = attention_shape_of(in, params, want_lse);
  detail::validate_attention_params(params, shape);
  const std::vector<int32_t> starts = detail::host_query_starts(in.query_starts);
  const AttentionPlan plan = AttentionPlan::create(ctx, shape, starts, options);

  std::vector<DeviceBuffer> keep;
  AttentionViews v;
  AttentionResult result;
  detail::stage_shared_inputs(ctx, keep, in, shape, want_lse, int64_t(shape.num_query_tokens), v, result);
  v.query_starts = detail::upload_kept(ctx, keep, detail::index_words(in.query_starts, "query_starts"), DType::i32);
  if (shape.tree_mask) {
    v.tree_mask = detail::upload_kept(ctx, keep, in.tree_mask, DType::u8);
    v.tree_mask.memory.size = (v.tree_mask.memory.size + 3) / 4 * 4;  // whole words (AttentionViews::tree_mask)
  }
  v.scratch = detail::buffer_kept(ctx, keep, plan.scratch_bytes());
  v.status = detail::status_kept(ctx, keep);

  ctx.run_and_wait([&](VkCommandBuffer cmd) {
    // Scratch starts as NaN words: a partition the attention should have written but did not,
    // or one the merge should have skipped but read, then shows in the output.
    if (!v.scratch.empty()) {
      ctx.impl().d.vkCmdFillBuffer(cmd, v.scratch.buffer, v.scratch.offset, v.scratch.size, 0xffffffffu);
      record_compute_barrier(ctx, cmd);
    }
    record_attention(ctx, cmd, plan, v, params);
  });
  detail::check_status_clear(ctx, v.status, "attention");
  detail::download_outputs(ctx, v, result, want_lse);
  return result;
}

}  // namespace vkpaged
