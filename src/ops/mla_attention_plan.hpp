// SPDX-License-Identifier: Apache-2.0
#pragma once
// What MlaPlan::create decides: the planner's choice and the pipelines it names.
#include <optional>
#include <vector>

#include "ops/attention_planner.hpp"
#include "ops/csr_page_table.hpp"
#include "vk/context_impl.hpp"
#include "vk/pipeline_request.hpp"
#include "vkpaged/mla_attention.hpp"

namespace vkpaged::detail {

struct MlaPlanData {
  MlaShape shape;
  MlaOptions options;
  AttentionChoice choice;
  const ComputePipeline* attention = nullptr;
  const ComputePipeline* merge = nullptr;  // when split: partition_merge.comp, Dv wide
  CsrExpansion csr;                         // when shape.attention.csr_page_table: after the split's scratch
  size_t scratch_bytes() const noexcept { return csr.planned() ? csr.end() : choice.scratch_bytes; }
};

// The specialization constants both MLA kernels share (MLA_ATTN_SC_*, slot 6 left 0: each
// kernel's own), in a vector of `count`.
std::vector<uint32_t> mla_spec_constants(const MlaShape& shape, const AttentionChoice& choice, uint32_t features,
                                         size_t count);

// The pipeline of a choice on the tensor-core kernel (mla_attention_matrix_khr.cpp), with the
// plan's FEATURE_* bits.
vk::PipelineRequest mla_matrix_pipeline_request(const MlaShape& shape, const AttentionChoice& choice, uint32_t features);

// Every pipeline a choice names: its kernel's, the merge's where it splits, the CSR expansion's
// with CSR page tables. MlaPlan::create and create_bucket create them, Context::prepare builds
// them ahead.
struct MlaPipelineRequests {
  vk::PipelineRequest attention;
  std::optional<vk::PipelineRequest> merge;
  std::optional<vk::PipelineRequest> csr;
  std::vector<vk::PipelineRequest> all() const;
};
MlaPipelineRequests mla_pipeline_requests(const MlaShape& shape, const AttentionChoice& choice);

}  // namespace vkpaged::detail
