// SPDX-License-Identifier: Apache-2.0
// decode_attention over host tensors: upload, plan, run, download. For the CLI, the demo and
// tests; engines record with record_decode on their own buffers instead.
#include <algorithm>
#include <cstring>
#include <vector>

#include "ops/decode_validation.hpp"
#include "ops/host_page_tables.hpp"
#include "ops/host_staging.hpp"
#include "vk/context_impl.hpp"
#include "vkpaged/decode.hpp"
#include "vkpaged/error.hpp"

namespace vkpaged {

DecodeResult decode_attention(Context& ctx, const DecodeInputs& in, const DecodeOptions& options,
                              const DecodeParams& params, bool want_lse) {
  DecodeShape shape = decode_shape_of(in, want_lse);
  shape.softcap = params.softcap != 0.0f;
  DecodePlan plan = DecodePlan::create(ctx, shape, options);
  detail::validate_decode_params(params, shape);  // before anything is uploaded

  std::vector<DeviceBuffer> keep;
  DecodeViews v;
  DecodeResult result;
  detail::stage_shared_inputs(ctx, keep, in, shape, want_lse, int64_t(shape.num_seqs), v, result);
  // Longest first lists the items by their lengths: the CSR form's, expanded on the host.
  TensorView order_lens = v.context_lens;
  if (plan.longest_first() && shape.csr_page_table) {
    const auto tables = detail::page_table_inputs(in);
    const auto form = detail::page_table_form(tables);
    const auto dense = detail::dense_tensors(detail::dense_page_tables(tables, form, shape.block_size, shape.num_blocks), form);
    order_lens = detail::upload_kept(ctx, keep, dense.context_lens, DType::i32);
  }
  v.scratch = detail::buffer_kept(ctx, keep, plan.scratch_bytes());
  v.order = detail::buffer_kept(ctx, keep, plan.order_bytes());
  v.timeline = detail::buffer_kept(ctx, keep, plan.timeline_bytes());
  v.merge_counters = detail::buffer_kept(ctx, keep, plan.merge_counter_bytes());
  v.status = detail::status_kept(ctx, keep);

  ctx.run_and_wait([&](VkCommandBuffer cmd) {
    // Scratch starts as NaN words: a partition the decode should have written but did not, or
    // one the reduce should have skipped but read, then shows in the output.
    // The timeline starts as zeros: a record the kernel did not write reads as such. The merge
    // counters start as zeros, as DecodeViews asks.
    if (!v.scratch.empty())
      ctx.impl().d.vkCmdFillBuffer(cmd, v.scratch.buffer, v.scratch.offset, v.scratch.size, 0xffffffffu);
    if (!v.timeline.empty()) ctx.impl().d.vkCmdFillBuffer(cmd, v.timeline.buffer, v.timeline.offset, v.timeline.size, 0u);
    if (!v.merge_counters.empty())
      ctx.impl().d.vkCmdFillBuffer(cmd, v.merge_counters.buffer, v.merge_counters.offset, v.merge_counters.size, 0u);
    if (plan.longest_first()) record_decode_order(ctx, cmd, plan, order_lens, v.order);
    if (!v.scratch.empty() || !v.timeline.empty() || !v.merge_counters.empty() || plan.longest_first())
      record_compute_barrier(ctx, cmd);
    record_decode(ctx, cmd, plan, v, params);
  });
  detail::check_status_clear(ctx, v.status, "decode");
  if (!v.merge_counters.empty()) {  // every decode leaves its merge counters zero
    std::vector<uint32_t> counters(v.merge_counters.size / 4);
    ctx.download(v.merge_counters, counters.data(), v.merge_counters.size);
    if (std::any_of(counters.begin(), counters.end(), [](uint32_t c) { return c != 0; }))
      throw Error(ErrorCode::internal, "decode: the merge counters were not left zero");
  }
  detail::download_outputs(ctx, v, result, want_lse);
  if (plan.timeline_bytes()) {
    const int64_t words = decode_timeline::words;
    result.timeline = HostTensor(DType::u32, Shape{int64_t(plan.timeline_bytes() / 4) / words, words});
    ctx.download(v.timeline, result.timeline.data(), result.timeline.bytes());
  }
  return result;
}

}  // namespace vkpaged
