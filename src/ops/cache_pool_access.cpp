// SPDX-License-Identifier: Apache-2.0
#include "ops/cache_pool_access.hpp"

#include <fmt/format.h>

#include <algorithm>
#include <limits>

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

CachePoolAccess cache_pool_access(const ContextImpl& impl, const BufferView& key_cache, const BufferView& value_cache,
                                  uint64_t pool_bytes, uint64_t block_bytes) {
  check_buffer(impl, "key_cache", key_cache, pool_bytes, 16, false);
  check_buffer(impl, "value_cache", value_cache, pool_bytes, 16, false);
  const uint64_t range = impl.info.max_storage_buffer_range;
  const char* past = bound_range(impl, key_cache) > range     ? "key_cache"
                     : bound_range(impl, value_cache) > range ? "value_cache"
                                                              : nullptr;
  CachePoolAccess a;
  if (past == nullptr) {
    a.key = impl.bind_view(key_cache);
    a.value = impl.bind_view(value_cache);
    return a;
  }
  const BufferView& view = past == std::string_view("key_cache") ? key_cache : value_cache;
  if (!impl.buffer_device_address)
    throw Error(ErrorCode::unsupported,
                fmt::format("{}: a view of {} bytes exceeds the device's maxStorageBufferRange of {} bytes, and the "
                            "context has no buffer device addresses to reach it with (the device lacks "
                            "bufferDeviceAddress, or an adopted device did not enable it)",
                            past, view.size, range));
  if (block_bytes > std::numeric_limits<uint32_t>::max())
    throw Error(ErrorCode::unsupported,
                fmt::format("{}: blocks of {} bytes are too large to address (at most {} bytes)", past, block_bytes,
                            std::numeric_limits<uint32_t>::max()));
  a.address = true;
  a.key = impl.bind_view(BufferView{});  // the dummy: the shader reads no binding for the pools
  a.value = impl.bind_view(BufferView{});
  a.key_address = address_of(impl, key_cache);
  a.value_address = address_of(impl, value_cache);
  return a;
}

}  // namespace vkpaged::detail
