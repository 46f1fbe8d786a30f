// SPDX-License-Identifier: Apache-2.0
#include "ops/attention_problem.hpp"

namespace vkpaged::detail {

AttentionShape decode_problem(const DecodeShape& d, uint32_t sliding_window) {
  AttentionShape s;
  s.num_requests = d.num_seqs;
  s.num_query_tokens = d.num_seqs;
  s.num_heads = d.num_heads;
  s.num_kv_heads = d.num_kv_heads;
  s.head_size = d.head_size;
  s.block_size = d.block_size;
  s.num_blocks = d.num_blocks;
  s.max_blocks_per_seq = d.max_blocks_per_seq;
  s.max_context_len = d.max_context_len;
  s.query_dtype = d.query_dtype;
  s.cache_dtype = d.cache_dtype;
  s.kv_layout = d.kv_layout;
  s.sliding_window = sliding_window;
  s.softcap = d.softcap;
  s.alibi = d.alibi;
  s.sinks = d.sinks;
  s.lse = d.lse;
  s.csr_page_table = d.csr_page_table;
  return s;
}

DecodeShape attention_decode_shape(const AttentionShape& s) {
  DecodeShape d;
  d.num_seqs = s.num_requests;
  d.num_heads = s.num_heads;
  d.num_kv_heads = s.num_kv_heads;
  d.head_size = s.head_size;
  d.block_size = s.block_size;
  d.num_blocks = s.num_blocks;
  d.max_blocks_per_seq = s.max_blocks_per_seq;
  d.max_context_len = s.max_context_len;
  d.query_dtype = s.query_dtype;
  d.cache_dtype = s.cache_dtype;
  d.kv_layout = s.kv_layout;
  d.alibi = s.alibi;
  d.sinks = s.sinks;
  d.lse = s.lse;
  d.softcap = s.softcap;
  d.csr_page_table = s.csr_page_table;
  return d;
}

DecodeOptions attention_decode_options(const AttentionShape& s, const AttentionOptions& o) {
  DecodeOptions options;
  options.sliding_window = s.sliding_window;
  options.split = o.split;
  options.partition_tokens = o.partition_tokens;
  return options;
}

}  // namespace vkpaged::detail
