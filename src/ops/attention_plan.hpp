// SPDX-License-Identifier: Apache-2.0
#pragma once
// The one plan of the attention problem (ops/attention_problem.hpp), an AttentionPlan's or a
// DecodePlan's: plan_attention_problem checks the problem and chooses the kernel family (the
// decode kernels for a batch of single tokens they take, else the attention kernels), the
// family makes its choices, and create_plan_pipelines creates what they name. A DecodePlan is
// this plan of its batch (DecodePlanData), with the decode family's own options.
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "ops/attention_planner.hpp"
#include "ops/attention_problem.hpp"
#include "ops/csr_page_table.hpp"
#include "ops/decode_plan.hpp"
#include "vk/context_impl.hpp"
#include "vkpaged/attention.hpp"
#include "vkpaged/decode.hpp"

namespace vkpaged::detail {

// The attention pipelines a choice on the attention kernels names.
struct AttentionPipelineRequests {
  vk::PipelineRequest attention;
  std::optional<vk::PipelineRequest> merge;  // when split
};
AttentionPipelineRequests attention_pipeline_requests(const AttentionShape& shape, const AttentionChoice& choice);

struct AttentionPlanData {
  AttentionShape shape;
  AttentionOptions options;
  AttentionChoice choice;  // the family (choice.kernel) and, on the attention kernels, the rest
  // AttentionKernel::decode: the decode kernels' shape, options, choice and pipelines.
  std::optional<DecodeFamilyPlan> decode;
  // AttentionKernel::scalar and ::matrix
  const ComputePipeline* attention = nullptr;
  const ComputePipeline* merge = nullptr;  // when split
  CsrExpansion csr;                         // when shape.csr_page_table: after the split's scratch
  // The split's part of the scratch, then what the views give (the CSR expansion after it).
  size_t split_scratch_bytes() const noexcept { return decode ? decode->choice.scratch_bytes : choice.scratch_bytes; }
  size_t scratch_bytes() const noexcept { return csr.planned() ? csr.end() : split_scratch_bytes(); }
  bool split() const noexcept { return decode ? decode->choice.split : choice.split; }
  uint32_t num_partitions() const noexcept { return decode ? decode->choice.num_partitions : choice.num_partitions; }
};

// The planner entry of the problem on this context: checks the shape, the rows and the options,
// chooses the kernel family (plan_attention_rows) and, for the decode family, its choice
// (decode_family_choice, with `family`'s options). Creates no pipeline: AttentionPlan::create,
// create_bucket and DecodePlan::create then create them (create_plan_pipelines), Context::prepare
// builds them ahead (plan_pipeline_requests), max_scratch_bytes reads the sizes.
AttentionPlanData plan_attention_problem(Context& context, const AttentionShape& shape, const QueryRows& rows,
                                         const AttentionOptions& options, const DecodeFamilyOptions& family = {});
// A decode batch as the problem, planned (DecodePlan::create, Context::prepare's decode buckets):
// its shape checked under decode's names, then plan_attention_problem of decode_problem(shape)
// with single tokens, the split on the decode kernels and the decode family's options.
AttentionPlanData plan_decode_batch(Context& context, const DecodeShape& shape, const DecodeOptions& options);
// Every pipeline a planned problem names, its CSR expansion's included.
std::vector<vk::PipelineRequest> plan_pipeline_requests(const AttentionPlanData& plan);
// Creates (or finds) them and places the CSR expansion after the split's scratch. Throws
// unsupported where the expanded tables would not fit one descriptor.
void create_plan_pipelines(Context& context, AttentionPlanData& plan);

// The decode family's description (DecodePlan::describe; AttentionPlan::describe after "decode
// kernels: ") and recording, both plans' (ops/decode.cpp, ops/decode_record.cpp).
std::string describe_decode_family(const AttentionPlanData& plan);
void record_decode_family(Context& context, VkCommandBuffer cmd, const AttentionPlanData& plan, const DecodeViews& views,
                          const DecodeParams& params);

// A DecodePlan's data: the problem's plan of its batch, always of the decode family.
struct DecodePlanData {
  AttentionPlanData plan;
  const DecodeFamilyPlan& family() const noexcept { return *plan.decode; }
  const DecodeChoice& choice() const noexcept { return plan.decode->choice; }
};

}  // namespace vkpaged::detail
