// SPDX-License-Identifier: Apache-2.0
// mla_attention over host tensors: validate, upload, plan, run, download. For the CLI and
// tests; engines record with record_mla_attention on their own buffers instead.
#include <fmt/format.h>

#include <vector>

#include "ops/attention_validation.hpp"
#include "ops/host_staging.hpp"
#include "vk/context_impl.hpp"
#include "vkpaged/error.hpp"
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
  v.query_starts = detail::upload_kept(ctx, keep, detail::index_words(in.query_starts, "query_starts"), DType::i32);
  if (s.tree_mask) {
    v.tree_mask = detail::upload_kept(ctx, keep, in.tree_mask, DType::u8);
    v.tree_mask.memory.size = (v.tree_mask.memory.size + 3) / 4 * 4;  // whole words (MlaViews::tree_mask)
  }
  if (s.alibi) v.alibi_slopes = detail::upload_kept(ctx, keep, in.alibi_slopes, DType::f32);
  if (s.sinks) v.sinks = detail::upload_kept(ctx, keep, in.sinks, DType::f32);

  const Shape out_shape{int64_t(s.num_query_tokens), int64_t(s.num_heads), int64_t(shape.value_head_size)};
  AttentionResult result;
  result.output = HostTensor(in.query.dtype(), out_shape);
  v.output = detail::output_kept(ctx, keep, in.query.dtype(), out_shape);
  if (want_lse) {
    result.lse = HostTensor(DType::f32, Shape{int64_t(s.num_query_tokens), int64_t(s.num_heads)});
    v.lse = detail::output_kept(ctx, keep, DType::f32, result.lse.shape());
  }
  if (plan.scratch_bytes()) {
    keep.push_back(ctx.create_buffer(plan.scratch_bytes()));
    v.scratch = keep.back().view();
  }
  keep.push_back(ctx.create_buffer(16));
  v.status = keep.back().view(0, 4);
  const uint32_t zero = 0;
  ctx.upload(v.status, &zero, 4);

  ctx.run_and_wait([&](VkCommandBuffer cmd) {
    // Scratch starts as NaN words: a partition the kernel should have written but did not, or
    // one the merge should have skipped but read, then shows in the output.
    if (!v.scratch.empty()) {
      ctx.impl().d.vkCmdFillBuffer(cmd, v.scratch.buffer, v.scratch.offset, v.scratch.size, 0xffffffffu);
      record_compute_barrier(ctx, cmd);
    }
    record_mla_attention(ctx, cmd, plan, v, params);
  });
  uint32_t status = 0;
  ctx.download(v.status, &status, 4);
  if (status != 0)
    throw Error(ErrorCode::internal,
                fmt::format("mla_attention: the shader reported status {:#x} on validated inputs", status));
  ctx.download(v.output.memory, result.output.data(), result.output.bytes());
  if (want_lse) ctx.download(v.lse.memory, result.lse.data(), result.lse.bytes());
  return result;
}

}  // namespace vkpaged
