// SPDX-License-Identifier: Apache-2.0
#pragma once
// What MlaPlan::create decides: the planner's choice and the pipelines it names.
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

}  // namespace vkpaged::detail
