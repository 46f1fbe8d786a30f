// SPDX-License-Identifier: Apache-2.0
#pragma once
// The decode family of the attention problem on a Context (ops/decode.cpp): the tuning its
// plans use, its choice for a problem (the decode planner's, the matrix kernel's fragment
// layouts probed first where it could run) and the pipelines a choice names. The plan that holds
// them is the problem's one plan (ops/attention_plan.hpp, AttentionPlanData::decode), an
// AttentionPlan's of single tokens or a DecodePlan's; ops/decode_record.cpp records it.
#include <optional>
#include <vector>

#include "ops/attention_problem.hpp"
#include "ops/decode_planner.hpp"
#include "vk/context_impl.hpp"
#include "vkpaged/attention.hpp"
#include "vkpaged/decode.hpp"

namespace vkpaged::detail {

// The tuning the context's later plans use, in place of what VKPAGED_DECODE_TUNE said (tests
// that run a knob's other side on the shared context set it and put the old one back), and
// the tuning it uses now.
void set_decode_tuning(Context& context, const DecodeTuning& tuning);
DecodeTuning decode_tuning(Context& context);

// The decode family's choice for a problem the attention planner gave to the decode kernels, on
// this context: plan_decode_family with the context's tuning and its fragment layouts probed
// where the matrix kernel could take the plan (a dispatch, once per context).
DecodeFamilyChoice decode_family_choice(Context& context, const AttentionShape& problem, const AttentionOptions& options,
                                        const DecodeFamilyOptions& family);

// The pipelines a decode choice names.
struct DecodePipelineRequests {
  vk::PipelineRequest decode;
  std::optional<vk::PipelineRequest> reduce;  // when choice.reduce_workgroup != 0
  std::optional<vk::PipelineRequest> order;   // when choice.longest_first
  std::vector<vk::PipelineRequest> all() const;
};
DecodePipelineRequests decode_pipeline_requests(const DecodeShape& shape, const DecodeChoice& choice);

// The decode family of a plan: the choice and the pipelines created from it.
struct DecodeFamilyPlan : DecodeFamilyChoice {
  const ComputePipeline* decode = nullptr;
  const ComputePipeline* reduce = nullptr;  // when choice.reduce_workgroup != 0
  const ComputePipeline* order = nullptr;   // when choice.longest_first (record_decode_order)
};

}  // namespace vkpaged::detail
