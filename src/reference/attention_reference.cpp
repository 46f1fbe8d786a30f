// SPDX-License-Identifier: Apache-2.0
// CPU reference of multi-query attention over every cache layout: the inputs validated as
// attention_shape_of does, the cache read through KvBlockGeometry, the math attention_math's.
#include "ops/attention_validation.hpp"
#include "ops/host_page_tables.hpp"
#include "reference/attention_math.hpp"
#include "vkpaged/reference.hpp"

namespace vkpaged::reference {

namespace {

// Keys and values of one layout's pools.
class LayoutReader final : public math::KvReader {
 public:
  LayoutReader(const AttentionInputs& in, const AttentionShape& s, const AttentionParams& p)
      : in_(in), s_(s), geometry_{s.num_kv_heads, s.head_size, s.block_size, cache_pack_factor(s.cache_dtype)},
        k_scale_(p.k_scale), v_scale_(p.v_scale) {}
  double key(uint64_t block, uint32_t o, uint32_t g, uint32_t d) const override {
    const uint64_t i = block * geometry_.block_elements() + geometry_.key_offset(s_.kv_layout, g, d, o);
    return math::cache_element(in_.key_cache, s_.cache_dtype, i, k_scale_);
  }
  double value(uint64_t block, uint32_t o, uint32_t g, uint32_t d) const override {
    const uint64_t i = block * geometry_.block_elements() + geometry_.value_offset(s_.kv_layout, g, d, o);
    return math::cache_element(in_.value_cache, s_.cache_dtype, i, v_scale_);
  }

 private:
  const AttentionInputs& in_;
  const AttentionShape& s_;
  KvBlockGeometry geometry_;
  double k_scale_, v_scale_;
};

}  // namespace

AttentionResult batch_attention(const AttentionInputs& in, const AttentionParams& params, bool want_lse) {
  const AttentionShape s = attention_shape_of(in, params, want_lse);
  vkpaged::detail::validate_attention_params(params, s);
  const auto starts = vkpaged::detail::host_query_starts(in.query_starts);
  // Either form, as the dense values it stands for (the CSR form's, its expansion).
  const auto page_tables = vkpaged::detail::page_table_inputs(in);
  const auto tables = vkpaged::detail::dense_page_tables(page_tables, vkpaged::detail::page_table_form(page_tables),
                                                         s.block_size, s.num_blocks);
  const math::AttentionProblem problem{s,           s.head_size,     s.head_size, in.query, in.tree_mask,
                                         in.alibi_slopes, in.sinks, starts,      tables};
  return math::attend(problem, LayoutReader(in, s, params), params, want_lse);
}

}  // namespace vkpaged::reference
