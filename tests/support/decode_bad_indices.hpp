// SPDX-License-Identifier: Apache-2.0
#pragma once
// Block ids and context lengths that only the device sees (written into its buffers): a
// decode must skip or clamp them, flag them in the status word and read nothing else.
#include "vkpaged/context.hpp"
#include "vkpaged/decode.hpp"

namespace vkpaged::test {

// Runs a 3-sequence f16 decode with `options` and `params` whose sequence 0 has a block id far
// past N and sequence 1 a length far past M * B; expects both status bits and sequence 2 intact.
// The caches are moved to `layout` before the decode (the reference reads the vllm inputs).
void expect_bad_indices_flagged_not_followed(Context& ctx, const DecodeOptions& options, const DecodeParams& params = {},
                                             KvLayout layout = KvLayout::vllm);

}  // namespace vkpaged::test
