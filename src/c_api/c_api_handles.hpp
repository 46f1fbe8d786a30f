// SPDX-License-Identifier: Apache-2.0
#pragma once
// What the C API's opaque handles hold: the C++ objects, plus the storage for what a call
// hands back by pointer (a plan's description, a manager's last returned array).
#include <string>
#include <vector>

#include "vkpaged/attention.hpp"
#include "vkpaged/block_manager.hpp"
#include "vkpaged/context.hpp"
#include "vkpaged/decode.hpp"
#include "vkpaged/kv_cache.hpp"
#include "vkpaged/mla_attention.hpp"
#include "vkpaged/prepare.hpp"
#include "vkpaged/utilities.hpp"
#include "c_api/c_api_guard.hpp"
#include "vkpaged/vkpaged.h"

struct vkp_context {
  vkpaged::Context context;
};

struct vkp_buffer {
  vkpaged::DeviceBuffer buffer;
};

struct vkp_decode_plan {
  vkpaged::DecodePlan plan;
  std::string description;
  // Its pipelines belong to this context's device: recording with another context is refused.
  const vkp_context* context = nullptr;
};

struct vkp_attention_plan {
  vkpaged::AttentionPlan plan;
  std::string description;
  const vkp_context* context = nullptr;  // as vkp_decode_plan's
};

struct vkp_mla_plan {
  vkpaged::MlaPlan plan;
  std::string description;
  const vkp_context* context = nullptr;  // as vkp_decode_plan's
};

struct vkp_block_manager {
  vkpaged::BlockManager manager;
  std::vector<vkp_block_copy> pairs;  // of the last swap_out / swap_in
  std::vector<int32_t> table;         // of the last block_table / host_block_table
};

struct vkp_kv_cache {
  vkpaged::KvCache cache;
  // Its pools belong to this context's device: a plan made on another context is refused.
  const vkp_context* context = nullptr;
};

struct vkp_pipeline_set {
  vkpaged::PipelineSet set;  // host data only: no context
};

struct vkp_streaming_read {
  vkpaged::StreamingRead read;  // knows its Context: recording with another one is refused
};

namespace vkpaged::c_api {

// The plan behind a decode, attention or MLA plan handle, which must have been made on `context`.
template <typename PlanHandle>
const auto& plan_on(const vkp_context* context, const PlanHandle* plan) {
  const auto& p = require(plan, "plan")->plan;
  if (plan->context != context) throw Error(ErrorCode::invalid_argument, "plan: created on another context");
  return p;
}

}  // namespace vkpaged::c_api
