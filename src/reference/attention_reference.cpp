// SPDX-License-Identifier: Apache-2.0
// CPU reference of multi-query attention over every cache layout: the inputs validated as
// attention_shape_of does, the cache read through KvBlockGeometry, the math attention_math's.
#include "ops/attention_validation.hpp"
#include "reference/attention_math.hpp"
#include "vkpaged/reference.hpp"

namespace vkpaged::reference {

namespace {

// Keys and values of one layout's pools.
class LayoutReader final : public math::KvReader {
 public:
  LayoutReader(const AttentionInputs& in, const AttentionShape& s)
      : in_(in), layout_(s.kv_layout),
        geometry_{s.num_kv_heads, s.head_size, s.block_size, cache_pack_factor(s.cache_dtype)} {}
  math::CacheSlot key(uint64_t block, uint32_t o, uint32_t g, uint32_t d) const override {
    return {in_.key_cache, block * geometry_.block_elements() + geometry_.key_offset(layout_, g, d, o)};
  }
  math::CacheSlot value(uint64_t block, uint32_t o, uint32_t g, uint32_t d) const override {
    return {in_.value_cache, block * geometry_.block_elements() + geometry_.value_offset(layout_, g, d, o)};
  }

 private:
  const AttentionInputs& in_;
  KvLayout layout_;
  KvBlockGeometry geometry_;
};

}  // namespace

AttentionResult batch_attention(const AttentionInputs& in, const AttentionParams& params, bool want_lse) {
  const AttentionShape s = attention_shape_of(in, params, want_lse);
  vkpaged::detail::validate_attention_params(params, s);
  return math::attend_inputs(s, s.head_size, s.head_size, in.query, vkpaged::detail::request_inputs(in),
                             LayoutReader(in, s), params, want_lse);
}

}  // namespace vkpaged::reference
