// SPDX-License-Identifier: Apache-2.0
#include "ops/attention_problem.hpp"

#include "common/shader_interface.h"
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

AttentionOptions decode_attention_options(const DecodeOptions& o) {
  return {.kernel = AttentionKernel::decode, .split = o.split, .partition_tokens = o.partition_tokens};
}

DecodeFamilyOptions decode_family_options(const DecodeOptions& o) { return {o.kernel, o.order, o.merge, o.timeline}; }

DecodeShape attention_decode_shape(const AttentionShape& s) {
  DecodeShape d;
  VKP_COPY_FIELDS(VKP_SHARED_SHAPE_FIELDS, d, s);
  d.num_seqs = s.num_requests;
  return d;
}

DecodeOptions attention_decode_options(const AttentionShape& s, const AttentionOptions& o, const DecodeFamilyOptions& f) {
  return {.sliding_window = s.sliding_window,
          .split = o.split,
          .partition_tokens = o.partition_tokens,
          .kernel = f.kernel,
          .order = f.order,
          .merge = f.merge,
          .timeline = f.timeline};
}

uint32_t problem_feature_bits(const AttentionShape& s, bool split) {
  uint32_t f = 0;
  if (s.alibi) f |= FEATURE_ALIBI;
  if (s.softcap) f |= FEATURE_SOFTCAP;
  if (s.sinks) f |= FEATURE_SINKS;
  if (s.sliding_window > 0) f |= FEATURE_WINDOW;
  if (s.lse) f |= FEATURE_LSE;
  if (split) f |= FEATURE_SPLIT;
  if (s.tree_mask) f |= FEATURE_TREE_MASK;
  return f;
}

DecodeFamilyChoice plan_decode_family(const DeviceCapabilities& device, const AttentionShape& problem,
                                      const AttentionOptions& options, const DecodeFamilyOptions& family,
                                      const DecodeTuning& tuning) {
  DecodeFamilyChoice d;
  d.shape = attention_decode_shape(problem);
  d.options = attention_decode_options(problem, options, family);
  d.choice = plan_decode(device, d.shape, d.options, tuning);
  return d;
}

}  // namespace vkpaged::detail
