// SPDX-License-Identifier: Apache-2.0
#pragma once
// MLA attention inputs drawn as the multi-query tests draw theirs (attention_case.hpp: shuffled
// block tables, NaN past each length), in either cache form, and the multi-query inputs that
// stand for the same problem.
#include <random>

#include "support/attention_case.hpp"
#include "vkpaged/mla.hpp"

namespace vkpaged::test {

// `c` with kv_heads 1, layout nhd and head_size Dk = Dv + R (c.head_size is ignored).
struct MlaCase {
  AttentionCase attention;
  uint32_t value_head_size = 48;  // Dv
  uint32_t rope_head_size = 16;   // R
  MlaCacheForm form = MlaCacheForm::one_pool;
};

// The MLA inputs, and beside them the multi-query inputs of the same draw (nhd, Hkv = 1, D = Dk)
// whose key cache is the MLA rows and whose value cache is the rows with the rotary entries
// zeroed: its output's first Dv dims are MLA's, the rest 0.
struct MlaDraw {
  MlaInputs mla;
  AttentionInputs attention;
};
MlaDraw make_mla_inputs(const MlaCase& c, std::mt19937& rng);

// The same inputs in the other cache form (the same bytes: rows split, or joined).
MlaInputs with_cache_form(const MlaInputs& in, MlaCacheForm form);

// The first `width` entries of the last dim of a [T, H, D] tensor.
HostTensor leading_dims(const HostTensor& t, int64_t width);

}  // namespace vkpaged::test
