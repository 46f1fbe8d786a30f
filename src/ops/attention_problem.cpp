// SPDX-License-Identifier: Apache-2.0
#include "ops/attention_problem.hpp"

#include "ops/shared_fields.hpp"

namespace vkpaged::detail {

AttentionShape decode_problem(const DecodeShape& d, uint32_t sliding_window) {
  AttentionShape s;
  VKP_COPY_FIELDS(VKP_SHARED_SHAPE_FIELDS, s, d);
  s.num_requests = d.num_seqs;
  s.num_query_tokens = d.num_seqs;
  s.sliding_window = sliding_window;
  return s;
}

DecodeShape attention_decode_shape(const AttentionShape& s) {
  DecodeShape d;
  VKP_COPY_FIELDS(VKP_SHARED_SHAPE_FIELDS, d, s);
  d.num_seqs = s.num_requests;
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
