// SPDX-License-Identifier: Apache-2.0
#include "ops/cache_pool_access.hpp"

#include <fmt/format.h>

#include <algorithm>
#include <limits>
#include <stdexcept>

#include "ops/view_checks.hpp"
#include "vkpaged/error.hpp"

namespace vkpaged::detail {

namespace {

// The range a descriptor of this view would need (check_buffer's rule: the view's offset
// within the device's binding alignment, plus its size).
uint64_t bound_range(const ContextImpl& impl, const BufferView& view) {
  const uint64_t align = std::max<uint64_t>(impl.info.min_storage_buffer_offset_alignment, 16);
  return view.offset % align + view.size;
}

shader::uvec2 address_of(const ContextImpl& impl, const BufferView& view) {
  VkBufferDeviceAddressInfo info{VK_STRUCTURE_TYPE_BUFFER_DEVICE_ADDRESS_INFO};
  info.buffer = view.buffer;
  const uint64_t a = impl.d.vkGetBufferDeviceAddress(impl.device, &info) + view.offset;
  return {uint32_t(a), uint32_t(a >> 32)};
}

}  // namespace

PoolReach pool_reach(const ContextImpl& impl, std::span<const PoolView> pools) {
  if (pools.size() > kMaxPools) throw std::logic_error("pool_reach: more pools than kMaxPools");
  for (const PoolView& p : pools) check_buffer(impl, p.name, *p.view, p.pool_bytes, 16, false);
  const uint64_t range = impl.info.max_storage_buffer_range;
  const auto past = std::find_if(pools.begin(), pools.end(),
                                 [&](const PoolView& p) { return bound_range(impl, *p.view) > range; });
  PoolReach r;
  if (past == pools.end()) {
    for (size_t i = 0; i < pools.size(); ++i) r.bound[i] = impl.bind_view(*pools[i].view);
    return r;
  }
  if (!impl.buffer_device_address)
    throw Error(ErrorCode::unsupported,
                fmt::format("{}: a view of {} bytes exceeds the device's maxStorageBufferRange of {} bytes, and the "
                            "context has no buffer device addresses to reach it with (the device lacks "
                            "bufferDeviceAddress, or an adopted device did not enable it)",
                            past->name, past->view->size, range));
  // The shaders add a block's offset to the view's address in 32 bits (common/address.glsl).
  for (const PoolView& p : pools)
    if (p.block_bytes > std::numeric_limits<uint32_t>::max())
      throw Error(ErrorCode::unsupported,
                  fmt::format("{}: blocks of {} bytes are too large to address (at most {} bytes)", p.name,
                              p.block_bytes, std::numeric_limits<uint32_t>::max()));
  r.address = true;
  for (size_t i = 0; i < pools.size(); ++i) {
    r.bound[i] = impl.bind_view(BufferView{});  // the dummy: the shader reads no binding for the pools
    r.addresses[i] = address_of(impl, *pools[i].view);
  }
  return r;
}

CachePoolAccess cache_pool_access(const ContextImpl& impl, const BufferView& key_cache, const BufferView& value_cache,
                                  uint64_t pool_bytes, uint64_t block_bytes) {
  const std::array<PoolView, 2> pools{PoolView{"key_cache", &key_cache, pool_bytes, block_bytes},
                                      PoolView{"value_cache", &value_cache, pool_bytes, block_bytes}};
  const PoolReach r = pool_reach(impl, pools);
  return {r.address, r.bound[0], r.bound[1], r.addresses[0], r.addresses[1]};
}

}  // namespace vkpaged::detail
