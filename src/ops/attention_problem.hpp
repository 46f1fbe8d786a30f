// SPDX-License-Identifier: Apache-2.0
#pragma once
// One attention problem: AttentionShape describes every batch (S requests, T new tokens, the
// cache, the features); decode is its case of one new token per request (T = S). A DecodeShape
// and its options become that problem here, and the problem's decode family (a batch of single
// tokens on the decode kernels) becomes the decode kernels' shape and options here, so that
// every plan, an AttentionPlan's or a DecodePlan's, is validated and planned as the same
// problem (ops/attention_plan.hpp). Host only, pure.
#include <cstdint>

#include "ops/decode_planner.hpp"
#include "vkpaged/attention.hpp"
#include "vkpaged/decode.hpp"

namespace vkpaged::detail {

// What the decode family takes beside AttentionOptions: DecodeOptions' kernel, order, merge and
// timeline (a DecodePlan's; an AttentionPlan's are the defaults). Internal: the public options
// keep their shapes.
struct DecodeFamilyOptions {
  DecodeKernel kernel = DecodeKernel::automatic;
  DecodeOrder order = DecodeOrder::automatic;
  DecodeMerge merge = DecodeMerge::reduce_pass;
  bool timeline = false;
};

// A decode batch as the attention problem: S requests of one new token each, the window the
// options give.
AttentionShape decode_problem(const DecodeShape& shape, uint32_t sliding_window = 0);
// A decode batch's options as the problem's: the split on the decode kernels (the window goes
// into the shape), and the decode family's own.
AttentionOptions decode_attention_options(const DecodeOptions& options);
DecodeFamilyOptions decode_family_options(const DecodeOptions& options);

// A problem of single tokens (T = S, no tree mask) as the decode kernels take it. The per-call
// values travel when recording; the plan only needs to know that a soft cap will come.
DecodeShape attention_decode_shape(const AttentionShape& problem);
DecodeOptions attention_decode_options(const AttentionShape& problem, const AttentionOptions& options,
                                       const DecodeFamilyOptions& family = {});

// The FEATURE_* bits (shader_interface.h) the problem's features and a split set, which every
// kernel family specialises on.
uint32_t problem_feature_bits(const AttentionShape& problem, bool split);

// The decode family's choice for a problem the attention planner gave to the decode kernels
// (AttentionKernel::decode): the decode planner's (plan_decode) for the problem's decode shape
// and options. A DecodePlan and an AttentionPlan of the same batch make the same choice here.
struct DecodeFamilyChoice {
  DecodeShape shape;
  DecodeOptions options;
  DecodeChoice choice;
};
DecodeFamilyChoice plan_decode_family(const DeviceCapabilities& device, const AttentionShape& problem,
                                      const AttentionOptions& options, const DecodeFamilyOptions& family,
                                      const DecodeTuning& tuning);

}  // namespace vkpaged::detail
