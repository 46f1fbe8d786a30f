#pragma once
// Decode on the token-major cache layouts (KvLayout nhd and hnd) from the vllm-layout inputs
// the decode tests make (support/decode_case.hpp): the same caches re-laid element by element,
// so the CPU reference of the vllm inputs is the answer on every layout.
#include "vkpaged/context.hpp"
#include "vkpaged/decode.hpp"
#include "vkpaged/kv_layout.hpp"

namespace vkpaged::test {

inline constexpr KvLayout kTokenMajorLayouts[] = {KvLayout::nhd, KvLayout::hnd};

// `in`'s key and value caches ([N, Hkv, D/x, B, x] and [N, Hkv, D, B]) in `layout`
// ([N, B, Hkv, D] or [N, Hkv, B, D]); vllm returns them as they are.
struct LaidOutCaches {
  HostTensor key_cache;
  HostTensor value_cache;
};
LaidOutCaches relay_caches(const DecodeInputs& in, KvLayout layout);

// decode_shape_of(in, lse) with the caches in `layout` and the soft cap from `params`.
DecodeShape shape_in_layout(const DecodeInputs& in, KvLayout layout, const DecodeParams& params = {}, bool lse = false);

// decode_attention(ctx, in, options, params, lse) with the caches re-laid into `layout`: the
// same uploads, buffers and recording (scratch as NaN words, zeroed counters, longest first's
// list), through DecodePlan::create and record_decode on a shape with kv_layout = layout.
// Fails the test (and throws) where the status word is set or the merge counters are not left
// zero.
DecodeResult decode_in_layout(Context& ctx, const DecodeInputs& in, KvLayout layout, const DecodeOptions& options = {},
                              const DecodeParams& params = {}, bool lse = false);

}  // namespace vkpaged::test
