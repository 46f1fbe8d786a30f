// SPDX-License-Identifier: Apache-2.0
#pragma once
// bf16 caches and queries far outside f16's range (the matrix kernel converts bf16 to f16 in
// registers and must rescale what does not fit; the scalar kernel computes in f32).
#include "vkpaged/context.hpp"
#include "vkpaged/decode.hpp"

namespace vkpaged::test {

// Runs a bf16 decode with `options` and `params` over sequences whose keys, values and queries
// are scaled by powers of two from 2^-40 to 2^40 (overflowing and underflowing f16, alone and
// mixed within a unit of tokens) and expects every output within the bf16 tolerance of the
// reference, scaled by the sequence's value scale.
// The caches are moved to `layout` before the decode (the reference reads the vllm inputs).
void expect_bf16_far_outside_f16_range_kept(Context& ctx, const DecodeOptions& options, const DecodeParams& params = {},
                                            KvLayout layout = KvLayout::vllm);

}  // namespace vkpaged::test
