// SPDX-License-Identifier: Apache-2.0
#pragma once
// What AttentionPlan::create decides: the planner's choice, and what it made of it (a decode
// plan, or the attention pipelines).
#include <memory>
#include <vector>

#include "ops/attention_planner.hpp"
#include "ops/csr_page_table.hpp"
#include "vk/context_impl.hpp"
#include "vkpaged/attention.hpp"
#include "vkpaged/decode.hpp"

namespace vkpaged::detail {

struct AttentionPlanData {
  AttentionShape shape;
  AttentionOptions options;
  AttentionChoice choice;
  // AttentionKernel::decode: the batch of single tokens runs as this decode plan.
  std::optional<DecodePlan> decode;
  // AttentionKernel::scalar and ::matrix
  const ComputePipeline* attention = nullptr;
  const ComputePipeline* merge = nullptr;  // when split
  CsrExpansion csr;                         // when shape.csr_page_table: after the split's scratch
  // The scratch the views give (a decode plan's counts its own expansion).
  size_t scratch_bytes() const noexcept {
    return decode ? decode->scratch_bytes() : csr.planned() ? csr.end() : choice.scratch_bytes;
  }
};

}  // namespace vkpaged::detail
