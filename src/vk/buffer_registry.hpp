// SPDX-License-Identifier: Apache-2.0
#pragma once
// The size of every buffer vkpaged created, by device and handle, so that a view of one is
// checked against the buffer it names before anything is recorded or copied. Views of buffers
// an engine created itself cannot be checked this way (vkpaged never learns their size).
#include <vulkan/vulkan.h>

#include <optional>
#include <string_view>

#include "vkpaged/tensor.hpp"

namespace vkpaged::vk {

// Registered while it lives; held by the buffer it describes and destroyed before it.
class BufferRegistration {
 public:
  BufferRegistration() = default;
  BufferRegistration(VkDevice device, VkBuffer buffer, VkDeviceSize size);
  BufferRegistration(BufferRegistration&& other) noexcept;
  BufferRegistration& operator=(BufferRegistration&& other) noexcept;
  ~BufferRegistration();

 private:
  void release() noexcept;
  VkDevice device_ = VK_NULL_HANDLE;
  VkBuffer buffer_ = VK_NULL_HANDLE;
};

// The size of a buffer vkpaged created on `device`; nullopt for any other buffer.
std::optional<VkDeviceSize> registered_buffer_size(VkDevice device, VkBuffer buffer);

// Throws Error(invalid_argument) naming `name` when `view` names a buffer vkpaged created on
// `device` and does not lie inside it.
void check_inside_buffer(VkDevice device, std::string_view name, const BufferView& view);

}  // namespace vkpaged::vk
