// SPDX-License-Identifier: Apache-2.0
#pragma once
// The MLA attention planner: from what a device offers, the MLA shape, the step's query starts
// and the options to the plan's choices (rows, key tile, split, buffer sizes) for
// shaders/mla_attention.comp. Pure, as attention_planner.hpp: no Vulkan calls.
#include <cstddef>
#include <cstdint>
#include <span>

#include "ops/attention_planner.hpp"
#include "vk/device_capabilities.hpp"
#include "vkpaged/mla_attention.hpp"

namespace vkpaged::detail {

// Shared memory of the MLA kernel (mla_attention_kernel.glsl's declarations) for `rows` rows
// and key tiles of `key_tile` positions.
size_t mla_attention_shared_bytes(uint32_t rows, uint32_t key_tile, uint32_t key_head_size, DType cache_dtype,
                                  uint32_t workgroup);

// The shape's checks: the multi-query ones (validate_attention_shape) but the head size, and
// MLA's (Hkv 1, nhd, Dk and Dv). Throws invalid_argument naming the field and the value.
void validate_mla_shape(const MlaShape& shape);

// Checks the shape, the query starts and the options, and makes every choice: the kernel's
// fields of AttentionChoice (kernel scalar, key_tile the staged positions). Throws
// invalid_argument for what the contract refuses, unsupported for what the device cannot run.
AttentionChoice plan_mla_attention(const DeviceCapabilities& device, const MlaShape& shape,
                                   std::span<const int32_t> query_starts, const MlaOptions& options);

}  // namespace vkpaged::detail
