#pragma once
// The attention planner: from what a device offers, the shape, the step's query starts and the
// options to every choice an AttentionPlan makes (kernel family, workgroup rows, split, buffer
// sizes). Pure: no Vulkan calls and no environment, so that its choices are tested on fabricated
// devices without a GPU (tests/ops/test_attention_planner.cpp). AttentionPlan::create
// (ops/attention.cpp) fills the device's properties from its Context, calls plan_attention and
// creates what the choice names. A later kernel family (matrix units) adds its own plan_* here.
#include <cstddef>
#include <cstdint>
#include <span>
#include <string>

#include "vkpaged/attention.hpp"

namespace vkpaged::detail {

// What planning reads off a device, and nothing else.
struct AttentionDeviceProperties {
  std::string name;                       // for messages
  uint32_t compute_units = 1;             // SMs / CUs, or an estimate: sizes the split
  uint32_t max_workgroup_invocations = 128;
  uint32_t max_shared_memory = 16384;     // bytes per workgroup
  uint64_t max_storage_buffer_range = 0;  // a pool past it is read by device address
  bool buffer_device_address = false;     // enabled on the context
};

// Every choice of a plan on the attention kernel (shaders/attention*.comp).
struct AttentionChoice {
  AttentionKernel kernel = AttentionKernel::scalar;  // decode or scalar, never automatic
  uint32_t max_query_tokens = 0;
  size_t tree_mask_bytes = 0;
  // The rest describes the scalar kernel (a decode plan makes its own choices).
  bool address = false;             // caches read by device address (a pool past the storage-buffer range)
  uint32_t workgroup = 128;         // invocations, and key positions per tile
  uint32_t rows = 16;               // (query token, head) rows per workgroup
  uint32_t heads_per_workgroup = 1; // query heads of one kv head per workgroup
  uint32_t groups_per_kv_head = 1;  // workgroups per kv head along the heads
  uint32_t tokens_per_tile = 1;     // rows / heads_per_workgroup
  uint32_t row_parts = 1;           // value phase: invocations side by side over the rows
  uint32_t tile_slots = 0;          // grid y: T / tokens_per_tile + S
  size_t shared_bytes = 0;
  bool split = false;
  uint32_t num_partitions = 1;
  uint32_t partition_tokens = 0;
  size_t scratch_bytes = 0;
  uint32_t context_cap = 0;         // device lengths above it are clamped and flagged
  uint32_t merge_workgroup = 0;     // the merge pass's invocations; 0 without one
};

// Whether the decode kernels take this batch (every q_s = 1, no tree mask; any layout).
bool decode_kernels_take(const AttentionShape& shape, bool single_tokens);

// Shared memory of the scalar kernel for `rows` rows (attention_kernel.glsl's declarations).
size_t attention_shared_bytes(uint32_t rows, uint32_t head_size, uint32_t workgroup);

// Checks the shape and the query starts (vkpaged::Error naming the field) and makes every
// choice. Throws invalid_argument for what the contract refuses, unsupported for what this
// device cannot run (the error names the argument and the limit).
AttentionChoice plan_attention(const AttentionDeviceProperties& device, const AttentionShape& shape,
                               std::span<const int32_t> query_starts, const AttentionOptions& options);

}  // namespace vkpaged::detail
