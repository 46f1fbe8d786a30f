// SPDX-License-Identifier: Apache-2.0
#pragma once
// The planners' rule for cache pools past maxStorageBufferRange (decode, multi-query and MLA
// attention): such a pool cannot be one descriptor, so a plan reads it by device address (its
// kernel's address variant) or, without buffer device addresses, is refused. Plans are made
// before any view is seen, so the rule keeps the slack a view's offset may add to its binding
// (minStorageBufferOffsetAlignment is at most 256 bytes). Pure: no Vulkan calls.
#include <cstdint>
#include <string_view>

#include "vk/device_capabilities.hpp"

namespace vkpaged::detail {

// Whether pools of `pool_bytes` (a layer's largest) are past what one descriptor may bind.
bool pool_past_range(const DeviceCapabilities& dev, uint64_t pool_bytes);

// pool_past_range, refusing such a pool on a device without buffer device addresses
// (unsupported: "num_blocks: <pool> of <num_blocks> blocks is <pool_bytes> bytes, past ...";
// `pool` names it: "a pool", "mla_cache", ...).
bool pool_read_by_address(const DeviceCapabilities& dev, uint64_t pool_bytes, uint32_t num_blocks,
                          std::string_view pool);

}  // namespace vkpaged::detail
