// SPDX-License-Identifier: Apache-2.0
#include "vk/buffer_registry.hpp"

#include <fmt/format.h>

#include <map>
#include <mutex>
#include <shared_mutex>
#include <utility>

#include "vkpaged/error.hpp"

namespace vkpaged::vk {

namespace {

// Non-dispatchable handles are unique per device only, hence the device in the key.
using Key = std::pair<VkDevice, VkBuffer>;

struct Registry {
  std::shared_mutex mutex;  // shared for the lookups of every recorded view
  std::map<Key, VkDeviceSize> sizes;
};

Registry& registry() {
  static Registry* r = new Registry;  // never destroyed: buffers may outlive static destruction
  return *r;
}

}  // namespace

BufferRegistration::BufferRegistration(VkDevice device, VkBuffer buffer, VkDeviceSize size)
    : device_(device), buffer_(buffer) {
  Registry& r = registry();
  std::lock_guard lock(r.mutex);
  r.sizes[{device, buffer}] = size;
}

BufferRegistration::BufferRegistration(BufferRegistration&& other) noexcept
    : device_(std::exchange(other.device_, VK_NULL_HANDLE)), buffer_(std::exchange(other.buffer_, VK_NULL_HANDLE)) {}

BufferRegistration& BufferRegistration::operator=(BufferRegistration&& other) noexcept {
  if (this != &other) {
    release();
    device_ = std::exchange(other.device_, VK_NULL_HANDLE);
    buffer_ = std::exchange(other.buffer_, VK_NULL_HANDLE);
  }
  return *this;
}

BufferRegistration::~BufferRegistration() { release(); }

void BufferRegistration::release() noexcept {
  if (buffer_ == VK_NULL_HANDLE) return;
  Registry& r = registry();
  std::lock_guard lock(r.mutex);
  r.sizes.erase({device_, buffer_});
  buffer_ = VK_NULL_HANDLE;
}

std::optional<VkDeviceSize> registered_buffer_size(VkDevice device, VkBuffer buffer) {
  Registry& r = registry();
  std::shared_lock lock(r.mutex);
  const auto it = r.sizes.find({device, buffer});
  if (it == r.sizes.end()) return std::nullopt;
  return it->second;
}

void check_inside_buffer(VkDevice device, std::string_view name, const BufferView& view) {
  if (view.buffer == VK_NULL_HANDLE) return;
  const auto size = registered_buffer_size(device, view.buffer);
  if (!size) return;
  if (view.offset > *size || view.size > *size - view.offset)
    throw Error(ErrorCode::invalid_argument,
                fmt::format("{}: a view of {} bytes at offset {} lies outside its buffer of {} bytes", name, view.size,
                            view.offset, *size));
}

}  // namespace vkpaged::vk
