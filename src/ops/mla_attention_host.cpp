// SPDX-License-Identifier: Apache-2.0
// mla_attention over host tensors: validate, upload, plan, run, download. For the CLI and
// tests; engines record with record_mla_attention on their own buffers instead.
#include <vector>

#include "ops/attention_host_run.hpp"
#include "ops/attention_validation.hpp"
#include "ops/host_staging.hpp"
#include "vkpaged/mla_attention.hpp"

namespace vkpaged {

AttentionResult mla_attention(Context& ctx, const MlaInputs& in, const AttentionParams& params,
                              const MlaOptions& options, bool want_lse) {
  const MlaShape shape = mla_shape_of(in, params, want_lse);
  const AttentionShape& s = shape.attention;
  const std::vector<int32_t> starts = detail::host_query_starts(in.query_starts);
  const MlaPlan plan = MlaPlan::create(ctx, shape, starts, options);

  std::vector<DeviceBuffer> keep;
  const DType cache_elem = is_fp8_dtype(in.cache_dtype) ? DType::u8 : in.cache_dtype;
  MlaViews v;
  v.query = detail::upload_kept(ctx, keep, in.query, in.query.dtype());
  if (shape.cache_form == MlaCacheForm::one_pool) {
    v.mla_cache = detail::upload_kept(ctx, keep, in.mla_cache, cache_elem);
  } else {
    v.ckv_cache = detail::upload_kept(ctx, keep, in.ckv_cache, cache_elem);
    v.kpe_cache = detail::upload_kept(ctx, keep, in.kpe_cache, cache_elem);
  }
  detail::upload_page_tables(ctx, keep, in, v);
  detail::stage_query_starts(ctx, keep, in, s.tree_mask, v);
  detail::stage_per_head(ctx, keep, in, s, v);
  const int64_t T = s.num_query_tokens, H = s.num_heads;
  AttentionResult result;
  detail::stage_outputs(ctx, keep, in.query.dtype(), Shape{T, H, int64_t(shape.value_head_size)}, want_lse, T, H, v,
                        result);
  detail::run_staged_attention(ctx, keep, plan.scratch_bytes(), v, want_lse, "mla_attention", result,
                               [&](VkCommandBuffer cmd) { record_mla_attention(ctx, cmd, plan, v, params); });
  return result;
}

}  // namespace vkpaged
