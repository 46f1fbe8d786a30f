// SPDX-License-Identifier: Apache-2.0
// CPU reference of multi-head latent attention (docs/contract.md, "Multi-head latent
// attention"): the inputs validated by mla_shape_of, the cache read as Dk-wide keys whose first
// Dv entries are the values (one pool, or ckv then kpe), the math attention_math's.
#include "ops/attention_validation.hpp"
#include "ops/host_page_tables.hpp"
#include "reference/attention_math.hpp"
#include "vkpaged/mla.hpp"
#include "vkpaged/reference.hpp"

namespace vkpaged::reference {

namespace {

// Row (block, o) of the MLA cache: entries [0, Dv) from the one pool or ckv, [Dv, Dk) from the
// one pool or kpe. The value reads the same entries as the key's first Dv, with v_scale.
class MlaReader final : public math::KvReader {
 public:
  MlaReader(const MlaInputs& in, const MlaShape& m, const AttentionParams& p)
      : in_(in), m_(m), B_(m.attention.block_size), k_scale_(p.k_scale), v_scale_(p.v_scale) {}
  double key(uint64_t block, uint32_t o, uint32_t, uint32_t d) const override { return entry(block, o, d, k_scale_); }
  double value(uint64_t block, uint32_t o, uint32_t, uint32_t d) const override {
    return entry(block, o, d, v_scale_);
  }

 private:
  double entry(uint64_t block, uint32_t o, uint32_t d, double fp8_scale) const {
    const uint64_t row = block * B_ + o;
    const uint32_t Dk = m_.attention.head_size, Dv = m_.value_head_size;
    const DType dtype = m_.attention.cache_dtype;
    if (m_.cache_form == MlaCacheForm::one_pool) return math::cache_element(in_.mla_cache, dtype, row * Dk + d, fp8_scale);
    if (d < Dv) return math::cache_element(in_.ckv_cache, dtype, row * Dv + d, fp8_scale);
    return math::cache_element(in_.kpe_cache, dtype, row * (Dk - Dv) + (d - Dv), fp8_scale);
  }

  const MlaInputs& in_;
  const MlaShape& m_;
  uint64_t B_;
  double k_scale_, v_scale_;
};

}  // namespace

AttentionResult mla_attention(const MlaInputs& in, const AttentionParams& params, bool want_lse) {
  const MlaShape m = mla_shape_of(in, params, want_lse);
  const auto starts = vkpaged::detail::host_query_starts(in.query_starts);
  const auto page_tables = vkpaged::detail::page_table_inputs(in);
  const auto tables = vkpaged::detail::dense_page_tables(page_tables, vkpaged::detail::page_table_form(page_tables),
                                                         m.attention.block_size, m.attention.num_blocks);
  const math::AttentionProblem problem{m.attention, m.attention.head_size, m.value_head_size, in.query,
                                         in.tree_mask, in.alibi_slopes,      in.sinks,          starts,
                                         tables};
  return math::attend(problem, MlaReader(in, m, params), params, want_lse);
}

}  // namespace vkpaged::reference
