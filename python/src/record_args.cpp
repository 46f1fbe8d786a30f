// SPDX-License-Identifier: Apache-2.0
#include "record_args.hpp"

#include "names.hpp"

namespace vkpaged::python {

void check_plan_context(const PyCommandBuffer& cmd, const py::object& plan_context) {
  if (!plan_context.is(cmd.context_object())) refuse("plan: made on another Context than the command buffer's");
}

DecodeViews decode_views(PyCommandBuffer& cmd, View query, View key_cache, View value_cache, View block_tables,
                         View context_lens, View output, View alibi_slopes, View sinks, View lse, Bytes scratch,
                         Bytes order, Bytes status, Bytes merge_counters) {
  DecodeViews v;
  v.query = cmd.use(query, "query");
  v.key_cache = cmd.use(key_cache, "key_cache");
  v.value_cache = cmd.use(value_cache, "value_cache");
  v.block_tables = cmd.use(block_tables, "block_tables");
  v.context_lens = cmd.use(context_lens, "context_lens");
  v.output = cmd.use(output, "output");
  v.alibi_slopes = cmd.use(alibi_slopes, "alibi_slopes");
  v.sinks = cmd.use(sinks, "sinks");
  v.lse = cmd.use(lse, "lse");
  v.scratch = cmd.use(scratch, "scratch");
  v.order = cmd.use(order, "order");
  v.status = cmd.use(status, "status");
  v.merge_counters = cmd.use(merge_counters, "merge_counters");
  return v;
}

namespace {

// The request's views AttentionViews and MlaViews share, after the pools.
template <typename Views>
void use_request_views(PyCommandBuffer& cmd, Views& v, View query, const AttentionRequest& r) {
  v.query = cmd.use(query, "query");
  v.block_tables = cmd.use(r.block_tables, "block_tables");
  v.context_lens = cmd.use(r.context_lens, "context_lens");
  v.query_starts = cmd.use(r.query_starts, "query_starts");
  v.output = cmd.use(r.output, "output");
  v.lse = cmd.use(r.lse, "lse");
  v.tree_mask = cmd.use(r.tree_mask, "tree_mask");
  v.alibi_slopes = cmd.use(r.alibi_slopes, "alibi_slopes");
  v.sinks = cmd.use(r.sinks, "sinks");
  v.scratch = cmd.use(r.scratch, "scratch");
  v.status = cmd.use(r.status, "status");
  use_csr(cmd, v, r.kv_indptr, r.kv_indices, r.kv_last_page_len);
}

}  // namespace

AttentionViews attention_views(PyCommandBuffer& cmd, View query, View key_cache, View value_cache,
                               const AttentionRequest& request) {
  AttentionViews v;
  v.key_cache = cmd.use(key_cache, "key_cache");
  v.value_cache = cmd.use(value_cache, "value_cache");
  use_request_views(cmd, v, query, request);
  return v;
}

MlaViews mla_views(PyCommandBuffer& cmd, View query, View mla_cache, View ckv_cache, View kpe_cache,
                   const AttentionRequest& request) {
  MlaViews v;
  v.mla_cache = cmd.use(mla_cache, "mla_cache");
  v.ckv_cache = cmd.use(ckv_cache, "ckv_cache");
  v.kpe_cache = cmd.use(kpe_cache, "kpe_cache");
  use_request_views(cmd, v, query, request);
  return v;
}

std::optional<MlaRopeViews> mla_rope(PyCommandBuffer& cmd, View positions, View cos_sin_cache,
                                     const std::string& style) {
  const RotaryStyle s = parse_rotary_style_arg("rotary_style", style);
  if (!positions && !cos_sin_cache) return std::nullopt;
  if (!positions) refuse("positions: needed with cos_sin_cache (RoPE on k_pe)");
  if (!cos_sin_cache) refuse("cos_sin_cache: needed with positions (RoPE on k_pe)");
  return MlaRopeViews{cmd.use(positions, "positions"), cmd.use(cos_sin_cache, "cos_sin_cache"), s};
}

DecodeParams decode_params(std::optional<float> scale, float softcap, float k_scale, float v_scale) {
  DecodeParams p;
  p.scale = scale;
  p.softcap = softcap;
  p.k_scale = k_scale;
  p.v_scale = v_scale;
  return p;
}

DecodeOptions decode_options(uint32_t sliding_window, const std::string& split, uint32_t partition_tokens,
                             const std::string& kernel, const std::string& order, const std::string& merge) {
  DecodeOptions o;
  o.sliding_window = sliding_window;
  o.split = parse_split_arg("split", split);
  o.partition_tokens = partition_tokens;
  o.kernel = parse_decode_kernel_arg("kernel", kernel);
  o.order = parse_decode_order_arg("order", order);
  o.merge = parse_decode_merge_arg("merge", merge);
  return o;
}

AttentionOptions attention_options(const std::string& kernel, const std::string& split, uint32_t partition_tokens) {
  AttentionOptions o;
  o.kernel = parse_attention_kernel_arg("kernel", kernel);
  o.split = parse_split_arg("split", split);
  o.partition_tokens = partition_tokens;
  return o;
}

MlaOptions mla_options(const std::string& kernel, const std::string& split, uint32_t partition_tokens) {
  const AttentionOptions a = attention_options(kernel, split, partition_tokens);  // the same keywords
  return {.split = a.split, .partition_tokens = a.partition_tokens, .kernel = a.kernel};
}

}  // namespace vkpaged::python
