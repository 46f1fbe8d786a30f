// SPDX-License-Identifier: Apache-2.0
#pragma once
// A DecodePlan's data: the shape and options it was made for, the planner's choice
// (ops/decode_planner.hpp) and the pipelines created from it (ops/decode.cpp), which
// ops/decode_record.cpp records.
#include <optional>
#include <vector>

#include "ops/csr_page_table.hpp"
#include "ops/decode_planner.hpp"
#include "vk/context_impl.hpp"
#include "vkpaged/decode.hpp"

namespace vkpaged::detail {

// The tuning the context's later plans use, in place of what VKPAGED_DECODE_TUNE said (tests
// that run a knob's other side on the shared context set it and put the old one back), and
// the tuning it uses now.
void set_decode_tuning(Context& context, const DecodeTuning& tuning);
DecodeTuning decode_tuning(Context& context);

// The choice DecodePlan::create makes for a shape and options on this context (the matrix
// kernel's fragment layout probed first where it could run), and the pipelines it names.
DecodeChoice decode_choice(Context& context, const DecodeShape& shape, const DecodeOptions& options);
struct DecodePipelineRequests {
  vk::PipelineRequest decode;
  std::optional<vk::PipelineRequest> reduce;  // when choice.reduce_workgroup != 0
  std::optional<vk::PipelineRequest> order;   // when choice.longest_first
  std::optional<vk::PipelineRequest> csr;     // when shape.csr_page_table (the tables' expansion)
  std::vector<vk::PipelineRequest> all() const;
};
DecodePipelineRequests decode_pipeline_requests(const DecodeShape& shape, const DecodeChoice& choice);

struct DecodePlanData {
  DecodeShape shape;
  DecodeOptions options;
  DecodeChoice choice;
  const ComputePipeline* decode = nullptr;
  const ComputePipeline* reduce = nullptr;  // when choice.reduce_workgroup != 0
  const ComputePipeline* order = nullptr;   // when choice.longest_first (record_decode_order)
  CsrExpansion csr;                         // when shape.csr_page_table: after the split's scratch
  // The scratch the views give: the split's, then the CSR expansion's.
  size_t scratch_bytes() const noexcept { return csr.planned() ? csr.end() : choice.scratch_bytes; }
};

}  // namespace vkpaged::detail
