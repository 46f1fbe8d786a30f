// SPDX-License-Identifier: Apache-2.0
#pragma once
// One attention problem: AttentionShape describes every batch (S requests, T new tokens, the
// cache, the features); decode is its case of one new token per request (T = S). A DecodeShape
// and its options become that problem here, and a problem of single tokens becomes the decode
// kernels' shape and options here, so that each side is validated and planned as the same
// problem. Host only.
#include "vkpaged/attention.hpp"
#include "vkpaged/decode.hpp"

namespace vkpaged::detail {

// A decode batch as the attention problem: S requests of one new token each, the window the
// options give.
AttentionShape decode_problem(const DecodeShape& shape, uint32_t sliding_window = 0);

// A problem of single tokens (T = S, no tree mask) as the decode kernels take it. The per-call
// values travel when recording; the plan only needs to know that a soft cap will come.
DecodeShape attention_decode_shape(const AttentionShape& problem);
DecodeOptions attention_decode_options(const AttentionShape& problem, const AttentionOptions& options);

}  // namespace vkpaged::detail
