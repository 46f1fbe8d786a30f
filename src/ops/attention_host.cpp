// SPDX-License-Identifier: Apache-2.0
// batch_attention over host tensors: upload, plan, run, download. For the CLI, the demo and
// tests; engines record with record_attention on their own buffers instead.
#include <vector>

#include "ops/attention_host_run.hpp"
#include "ops/attention_validation.hpp"
#include "ops/host_staging.hpp"
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
  detail::stage_query_starts(ctx, keep, in, shape.tree_mask, v);
  detail::run_staged_attention(ctx, keep, plan.scratch_bytes(), v, want_lse, "attention", result,
                               [&](VkCommandBuffer cmd) { record_attention(ctx, cmd, plan, v, params); });
  return result;
}

}  // namespace vkpaged
