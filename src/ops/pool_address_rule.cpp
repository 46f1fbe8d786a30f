// SPDX-License-Identifier: Apache-2.0
#include "ops/pool_address_rule.hpp"

#include <fmt/format.h>

#include "vkpaged/error.hpp"

namespace vkpaged::detail {

namespace {
constexpr uint64_t kBindingSlack = 256;  // the most a view's offset may add to its binding's range
}  // namespace

bool pool_past_range(const DeviceCapabilities& dev, uint64_t pool_bytes) {
  return pool_bytes + kBindingSlack > dev.max_storage_buffer_range;
}

bool pool_read_by_address(const DeviceCapabilities& dev, uint64_t pool_bytes, uint32_t num_blocks,
                          std::string_view pool) {
  if (!pool_past_range(dev, pool_bytes)) return false;
  if (!dev.buffer_device_address)
    throw Error(ErrorCode::unsupported,
                fmt::format("num_blocks: {} of {} blocks is {} bytes, past the device's maxStorageBufferRange of {} "
                            "bytes, and the context has no buffer device address to read it with",
                            pool, num_blocks, pool_bytes, dev.max_storage_buffer_range));
  return true;
}

}  // namespace vkpaged::detail
