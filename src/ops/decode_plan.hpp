#pragma once
// A DecodePlan's data: the shape and options it was made for, the planner's choice
// (ops/decode_planner.hpp) and the pipelines created from it (ops/decode.cpp), which
// ops/decode_record.cpp records.
#include "ops/decode_planner.hpp"
#include "vk/context_impl.hpp"
#include "vkpaged/decode.hpp"

namespace vkpaged::detail {

struct DecodePlanData {
  DecodeShape shape;
  DecodeOptions options;
  DecodeChoice choice;
  const ComputePipeline* decode = nullptr;
  const ComputePipeline* reduce = nullptr;  // when choice.reduce_workgroup != 0
  const ComputePipeline* order = nullptr;   // when choice.longest_first (record_decode_order)
};

}  // namespace vkpaged::detail
