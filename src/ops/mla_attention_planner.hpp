// SPDX-License-Identifier: Apache-2.0
#pragma once
// The MLA attention planner: from what a device offers, the MLA shape, the step's query starts
// and the options to the plan's choices (kernel, rows, key tile, split, buffer sizes) for
// shaders/mla_attention.comp or shaders/mla_attention_matrix_khr.comp. Pure, as
// attention_planner.hpp: no Vulkan calls.
#include <cstddef>
#include <cstdint>
#include <span>
#include <string>

#include "ops/attention_planner.hpp"
#include "vk/device_capabilities.hpp"
#include "vkpaged/mla_attention.hpp"

namespace vkpaged::detail {

// MLA's split partitions hold a multiple of this many key positions (MlaOptions::partition_tokens),
// finer than the multi-query kernels' 256: an MLA workgroup walks its partition a key tile at a
// time (16 or 32 positions), so a decode step of a few requests fills the device only with short
// partitions. The automatic split balances waves against tiles (balanced_partition_tokens), a wave
// being the workgroups the compute units hold at once (two of the tensor-core kernel's one-block
// layout; bench/experiments/mla-two-resident.md), each paying about 5 tiles' time once
// (bench/experiments/mla-tile-chain.md).
inline constexpr uint32_t kMlaPartitionQuantum = 64;

// Shared memory of the MLA kernel (mla_attention_kernel.glsl's declarations) for `rows` rows
// and key tiles of `key_tile` positions.
size_t mla_attention_shared_bytes(uint32_t rows, uint32_t key_tile, uint32_t key_head_size, DType cache_dtype,
                                  uint32_t workgroup);

// The tensor-core kernel (shaders/mla_attention_matrix_khr.comp, mla_matrix_planner.cpp): its
// shared memory for `rows` rows in blocks of the product's m, key tiles of `key_tile` positions
// and `value_parts` subgroups per row block; why it cannot run this shape on this device ("" where
// it can); and its rows, tiles and product for a shape it takes (choice.max_query_tokens set),
// for a step of at most `most_workgroups` workgroups (its requests times the partitions its split
// may take).
size_t mla_matrix_shared_bytes(uint32_t rows, const MatrixProductShape& product, uint32_t key_head_size,
                               uint32_t key_tile, uint32_t value_parts, uint32_t workgroup);
std::string mla_matrix_refusal(const DeviceCapabilities& device, const MlaShape& shape);
void plan_mla_matrix(AttentionChoice& choice, const DeviceCapabilities& device, const MlaShape& shape,
                     uint64_t most_workgroups);

// The shape's checks: the multi-query ones (validate_attention_shape) but the head size, and
// MLA's (Hkv 1, nhd, Dk and Dv). Throws invalid_argument naming the field and the value.
void validate_mla_shape(const MlaShape& shape);

// Checks the shape, the query rows (a step's query starts, or a bucket's: MlaPlan::create_bucket,
// sized for its worst step as plan_attention_bucket's) and the options, and makes every choice:
// the kernel (options.kernel: automatic takes the matrix kernel where it can run, else the scalar
// one) and its fields of AttentionChoice (key_tile the staged positions). Throws
// invalid_argument for what the contract refuses, unsupported for what the device cannot run.
AttentionChoice plan_mla_attention_rows(const DeviceCapabilities& device, const MlaShape& shape, const QueryRows& rows,
                                        const MlaOptions& options);
// plan_mla_attention_rows for a step's query starts.
AttentionChoice plan_mla_attention(const DeviceCapabilities& device, const MlaShape& shape,
                                   std::span<const int32_t> query_starts, const MlaOptions& options);

}  // namespace vkpaged::detail
