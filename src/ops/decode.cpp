// SPDX-License-Identifier: Apache-2.0
// Host side of shaders/decode*.comp and shaders/partition_merge.comp: the decode family of the
// attention problem on a Context (its tuning, its choice with the fragment layouts probed, the
// pipelines a choice names, its description) and DecodePlan, a thin wrapper over the problem's
// one plan of its batch (ops/attention_plan.hpp): DecodePlan::create converts the batch into the
// problem and plans it there. The choices are ops/decode_planner.cpp's, the tuning's parser
// ops/decode_tuning.cpp's, and recording ops/decode_record.cpp's.
#include "vkpaged/decode.hpp"

#include <fmt/format.h>

#include <array>
#include <mutex>
#include <optional>
#include <utility>

#include "common/shader_interface.h"
#include "embedded_shaders.hpp"
#include "ops/attention_plan.hpp"
#include "ops/decode_plan.hpp"
#include "ops/decode_validation.hpp"
#include "ops/decode_planner.hpp"
#include "ops/decode_tuning.hpp"
#include "ops/fragment_layout.hpp"
#include "ops/fragment_layout_khr.hpp"
#include "ops/partition_merge.hpp"
#include "ops/plan_handle.hpp"
#include "vkpaged/error.hpp"

namespace vkpaged {

static_assert(decode_timeline::sm == DECODE_TIMELINE_SM && decode_timeline::workgroup == DECODE_TIMELINE_WORKGROUP &&
                  decode_timeline::subgroup == DECODE_TIMELINE_SUBGROUP && decode_timeline::units == DECODE_TIMELINE_UNITS &&
                  decode_timeline::stamps == DECODE_TIMELINE_STAMPS && decode_timeline::words == DECODE_TIMELINE_WORDS,
              "the timeline record of include/vkpaged/decode.hpp and shaders/common/shader_interface.h");

static_assert(kStatusBadBlockId == STATUS_BAD_BLOCK_ID && kStatusBadContextLen == STATUS_BAD_CONTEXT_LEN &&
                  kStatusBadOrder == STATUS_BAD_ORDER && kStatusBadMergeCounters == STATUS_BAD_MERGE_COUNTERS &&
                  kStatusBadPageTable == STATUS_BAD_PAGE_TABLE,
              "the status bits of include/vkpaged/decode.hpp and shaders/common/shader_interface.h");

using detail::DecodeChoice;
using detail::DecodeModule;
using detail::DecodePlanData;
namespace sh = vkpaged::shader;

namespace {

// The tuning, read from VKPAGED_DECODE_TUNE at the context's first plan on the decode kernels
// (a DecodePlan, or an AttentionPlan of single tokens; only by a context created with
// ContextOptions::read_environment; the others keep the defaults) and kept for the context's
// life: a process that sets the variable between contexts (a test, an experiment comparing
// knobs) gets what it set, and a bad value fails each such plan of the context that reads it
// (it is not kept).
struct DecodeTuningState {
  std::mutex mutex;
  std::optional<detail::DecodeTuning> tuning;
};

const detail::DecodeTuning& context_tuning(Context& context) {
  auto& state = context.impl().operator_states.get<DecodeTuningState>();
  std::lock_guard lock(state.mutex);
  if (!state.tuning)
    state.tuning = context.impl().read_environment ? detail::decode_tuning_from_environment() : detail::DecodeTuning{};
  return *state.tuning;
}

const vk::ShaderRegistration& decode_shader(DecodeModule module) {
  switch (module) {
#define VKP_DECODE_SCALAR_VARIANT(name, ...) \
  case DecodeModule::name: return vk::shader_decode_##name();
#define VKP_DECODE_MATRIX_VARIANT(name, ...) \
  case DecodeModule::name: return vk::shader_decode_##name();
#include "decode_variants.def"
#undef VKP_DECODE_SCALAR_VARIANT
#undef VKP_DECODE_MATRIX_VARIANT
  }
  throw Error(ErrorCode::internal, fmt::format("decode: module {} has no shader", int(module)));
}

}  // namespace

namespace detail {
void set_decode_tuning(Context& context, const DecodeTuning& tuning) {
  auto& state = context.impl().operator_states.get<DecodeTuningState>();
  std::lock_guard lock(state.mutex);
  state.tuning = tuning;
}
DecodeTuning decode_tuning(Context& context) { return context_tuning(context); }

// ---- the decode family ----

DecodeFamilyChoice decode_family_choice(Context& context, const AttentionShape& problem, const AttentionOptions& options,
                                        const DecodeFamilyOptions& family) {
  const DecodeTuning& tuning = context_tuning(context);
  const DecodeShape shape = attention_decode_shape(problem);
  const DecodeOptions decode_options = attention_decode_options(problem, options, family);
  // The context's capabilities, with the fragment layouts probed where a plan needs one.
  DeviceCapabilities device = context.impl().capabilities;
  // A layout probe runs a dispatch: only where the matrix kernel could take this plan through
  // that extension (NV's first; KHR's where NV cannot run it, or matrix_khr is asked for).
  for (;;) {
    const DecodeKernelChoice k = choose_decode_kernel(device, shape, decode_options, tuning);
    if (k.needs_fragment_layout) device.fragment_layout_mismatch = matrix_fragment_mismatch(context);
    else if (k.needs_khr_fragment_layout) device.khr_fragment_layout_mismatch = khr_matrix_fragment_mismatch(context);
    else break;
  }
  return plan_decode_family(device, problem, options, family, tuning);
}

DecodePipelineRequests decode_pipeline_requests(const DecodeShape& shape, const DecodeChoice& c) {
  DecodePipelineRequests r;
  // Each constant at its id (shader_interface.h, DECODE_SC_*).
  const std::pair<uint32_t, uint32_t> constants[] = {
      {DECODE_SC_WORKGROUP, c.workgroup},
      {DECODE_SC_HEAD_SIZE, shape.head_size},
      {DECODE_SC_BLOCK_SIZE, shape.block_size},
      {DECODE_SC_HEADS_PER_WORKGROUP, c.heads_per_workgroup},
      {DECODE_SC_QUERY_DTYPE, uint32_t(shape.query_dtype)},
      {DECODE_SC_CACHE_DTYPE, uint32_t(shape.cache_dtype)},
      {DECODE_SC_FEATURES, c.features},
      {DECODE_SC_LANES_PER_ROW, c.lanes_per_row},
      {DECODE_SC_MATRIX_PREFETCH, c.early_values},
      {DECODE_SC_MATRIX_QUERY_REGISTERS, c.query_registers},
      {DECODE_SC_MATRIX_PIPELINE, c.pipeline},
      {DECODE_SC_MATRIX_SHARE_QUERY, c.share_query},
      {DECODE_SC_KV_LAYOUT, uint32_t(shape.kv_layout)},
      {DECODE_SC_MATRIX_HEAD_SLICES, c.head_slices},
      {DECODE_SC_VALUE_DIMS, c.value_dims},
      {DECODE_SC_SCALAR_VARIANT, (c.fp8_pairs ? DECODE_SCALAR_FP8_PAIRS : 0u) | (c.f16_keys ? DECODE_SCALAR_F16_KEYS : 0u) |
                                     (c.f16_values ? DECODE_SCALAR_F16_VALUES : 0u) |
                                     (c.value_loads > 1 ? c.value_loads << DECODE_SCALAR_VALUE_LOADS_SHIFT : 0u)},
  };
  std::vector<uint32_t> spec(DECODE_SC_COUNT);
  for (const auto& [id, value] : constants) spec[id] = value;
  r.decode = {&decode_shader(c.module), std::move(spec), DECODE_BINDING_COUNT, sizeof(sh::DecodePush)};
  if (c.reduce_workgroup != 0)
    r.reduce = partition_merge_request(c.reduce_workgroup, shape.head_size, shape.query_dtype, c.features, false);
  if (c.longest_first) {
    std::vector<uint32_t> ospec(ORDER_SC_COUNT);
    ospec[ORDER_SC_FEATURES] = c.features;
    r.order = vk::PipelineRequest{&vk::shader_decode_order(), std::move(ospec), ORDER_BINDING_COUNT,
                                  sizeof(sh::DecodePush)};
  }
  return r;
}

std::vector<vk::PipelineRequest> DecodePipelineRequests::all() const {
  std::vector<vk::PipelineRequest> all{decode};
  if (reduce) all.push_back(*reduce);
  if (order) all.push_back(*order);
  return all;
}

AttentionPlanData plan_decode_batch(Context& context, const DecodeShape& shape, const DecodeOptions& options) {
  validate_decode_shape(shape);  // the problem's checks, under decode's names (num_seqs)
  return plan_attention_problem(context, decode_problem(shape, options.sliding_window), QueryRows::single_tokens(),
                                decode_attention_options(options), decode_family_options(options));
}

std::string describe_decode_family(const AttentionPlanData& plan) {
  const DecodeChoice& c = plan.decode->choice;
  std::string path = c.split ? fmt::format("split {} x {} tokens", c.num_partitions, c.partition_tokens) : "one pass";
  if (c.longest_first) path += ", longest first";
  if (plan.csr.planned()) path += ", CSR page tables expanded";
  if (c.merge_in_dispatch) path += ", merged in the dispatch";
  if (c.kernel == DecodeKernel::matrix)
    return fmt::format("{}, matrix units{}, {} heads/wg{}, {} subgroups/wg{}{}{}", path, c.khr ? " (KHR)" : "",
                       c.heads_per_workgroup,
                       c.head_slices > 1 ? fmt::format(" in {} slices", c.head_slices) : std::string(), c.subgroups,
                       c.early_values ? ", values with keys" : "", c.pipeline ? ", next unit ahead" : "",
                       c.share_query ? ", outputs over the query" : "");
  const std::string values = c.value_dims ? fmt::format("{} dims/value load ({})", c.value_dims,
                                                        kv_layout_name(plan.decode->shape.kv_layout))
                                          : fmt::format("{} lanes/row", c.lanes_per_row);
  std::string variant;
  if (c.fp8_pairs) variant += ", fp8 pairs";
  if (c.f16_keys) variant += ", f16 keys";
  if (c.f16_values) variant += ", f16 values";
  if (c.value_loads > 1) variant += fmt::format(", {} value loads at once", c.value_loads);
  return fmt::format("{}, {} heads/wg, wg {}, {}, {} reduce", path, c.heads_per_workgroup, c.workgroup, values,
                     c.subgroup_reduce ? "subgroup" : "shared") +
         (c.address ? ", caches by device address" : "") + variant;
}

}  // namespace detail

// ---- DecodePlan: the problem's plan of a decode batch ----

DecodePlan DecodePlan::create(Context& context, const DecodeShape& shape, const DecodeOptions& options) {
  auto p = std::make_unique<DecodePlanData>();
  p->plan = detail::plan_decode_batch(context, shape, options);
  detail::create_plan_pipelines(context, p->plan);
  return DecodePlan(std::move(p));
}

VKP_PLAN_HANDLE_MEMBERS(DecodePlan, DecodePlanData)
const DecodeShape& DecodePlan::shape() const noexcept { return data_->family().shape; }
const DecodeOptions& DecodePlan::options() const noexcept { return data_->family().options; }
bool DecodePlan::split() const noexcept { return data_->choice().split; }
uint32_t DecodePlan::num_partitions() const noexcept { return data_->choice().num_partitions; }
uint32_t DecodePlan::partition_tokens() const noexcept { return data_->choice().partition_tokens; }
size_t DecodePlan::scratch_bytes() const noexcept { return data_->plan.scratch_bytes(); }
size_t DecodePlan::timeline_bytes() const noexcept { return data_->choice().timeline_bytes; }
size_t DecodePlan::merge_counter_bytes() const noexcept { return data_->choice().merge_counter_bytes; }
bool DecodePlan::longest_first() const noexcept { return data_->choice().longest_first; }
size_t DecodePlan::order_bytes() const noexcept { return data_->choice().order_bytes; }
std::string DecodePlan::describe() const { return detail::describe_decode_family(data_->plan); }

}  // namespace vkpaged
