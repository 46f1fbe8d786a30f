// SPDX-License-Identifier: Apache-2.0
#pragma once
// What MlaPlan::create decides: the planner's choice and the pipelines it names.
#include "ops/attention_planner.hpp"
#include "ops/csr_page_table.hpp"
#include "vk/context_impl.hpp"
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

}  // namespace vkpaged::detail
