#pragma once
// What DecodePlan::create decides: the shader variant and its specialization, the split.
#include <array>
#include <cstdint>

#include "common/shader_interface.h"
#include "vk/context_impl.hpp"
#include "vkpaged/decode.hpp"

namespace vkpaged::detail {

struct DecodePlanData {
  DecodeShape shape;
  DecodeOptions options;
  uint32_t workgroup = 256;
  uint32_t heads_per_workgroup = 1;
  uint32_t groups_per_kv_head = 1;
  uint32_t lanes_per_row = 1;
  uint32_t features = 0;
  bool matrix = false;   // shaders/common/decode_coopmat_kernel.glsl (else decode_kernel.glsl)
  bool subgroup = false;
  bool address = false;  // caches read through device addresses (larger than a descriptor's range)
  bool split = false;
  bool early_values = false;  // matrix kernel: a unit's value loads issued with its key loads
  bool pipeline = false;      // matrix kernel: the next unit's loads issued before this unit's products
  bool share_query = false;   // matrix kernel: the subgroups' outputs reuse the query's shared words
  uint32_t wide_subgroups = 0;  // matrix kernel: a small batch's one pass on 4 or 8 subgroups (0: no)
  uint32_t num_partitions = 1;
  uint32_t partition_tokens = 0;
  bool ordered = false;  // DecodeOrder::longest_first: workgroups take items from decode_order.comp's list
  size_t scratch_bytes = 0;
  size_t merge_counter_bytes = 0;  // DecodeMerge::in_dispatch on a split matrix plan: a u32 per (sequence, head)
  size_t order_bytes = 0;  // ordered: the list (4 bytes per item)
  size_t timeline_bytes = 0;  // DecodeOptions::timeline: the subgroups' records (decode_coopmat_timeline.comp)
  const ComputePipeline* decode = nullptr;
  const ComputePipeline* reduce = nullptr;  // when split
  const ComputePipeline* order = nullptr;   // when ordered (record_decode_order)
};

}  // namespace vkpaged::detail
