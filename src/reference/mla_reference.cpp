// SPDX-License-Identifier: Apache-2.0
// CPU reference of multi-head latent attention (docs/contract.md, "Multi-head latent
// attention"): the inputs validated by mla_shape_of, the cache read as Dk-wide keys whose first
// Dv entries are the values (one pool, or ckv then kpe), the math attention_math's.
#include "ops/attention_validation.hpp"
#include "reference/attention_math.hpp"
#include "vkpaged/mla.hpp"
#include "vkpaged/reference.hpp"

namespace vkpaged::reference {

namespace {

// Row (block, o) of the MLA cache: entries [0, Dv) in the one pool or ckv, [Dv, Dk) in the one
// pool or kpe. The value is the same entries as the key's first Dv (the math scales it by v_scale).
class MlaReader final : public math::KvReader {
 public:
  MlaReader(const MlaInputs& in, const MlaShape& m)
      : in_(in), one_pool_(m.cache_form == MlaCacheForm::one_pool), B_(m.attention.block_size),
        Dk_(m.attention.head_size), Dv_(m.value_head_size) {}
  math::CacheSlot key(uint64_t block, uint32_t o, uint32_t, uint32_t d) const override { return entry(block * B_ + o, d); }
  math::CacheSlot value(uint64_t block, uint32_t o, uint32_t, uint32_t d) const override {
    return entry(block * B_ + o, d);
  }

 private:
  math::CacheSlot entry(uint64_t row, uint32_t d) const {
    if (one_pool_) return {in_.mla_cache, row * Dk_ + d};
    if (d < Dv_) return {in_.ckv_cache, row * Dv_ + d};
    return {in_.kpe_cache, row * (Dk_ - Dv_) + (d - Dv_)};
  }

  const MlaInputs& in_;
  bool one_pool_;
  uint64_t B_, Dk_, Dv_;
};

}  // namespace

AttentionResult mla_attention(const MlaInputs& in, const AttentionParams& params, bool want_lse) {
  const MlaShape m = mla_shape_of(in, params, want_lse);
  return math::attend_inputs(m.attention, m.attention.head_size, m.value_head_size, in.query,
                             vkpaged::detail::request_inputs(in), MlaReader(in, m), params, want_lse);
}

}  // namespace vkpaged::reference
