// SPDX-License-Identifier: Apache-2.0
#pragma once
// What a wait on the fence of a convenience submission (Context::run_and_wait and the calls
// built on it) means: done, still running past the timeout, or the device is lost.
#include <vulkan/vulkan.h>

#include <cstdint>

namespace vkpaged::vk {

enum class FenceWait { signaled, timed_out };

// vkWaitForFences' result: VK_SUCCESS -> signaled, VK_TIMEOUT -> timed_out; VK_ERROR_DEVICE_LOST
// throws Error(device_error) saying the device is lost and what the caller may do; any other
// error throws as vk::check does. `what` names the call in the message.
FenceWait fence_wait_outcome(VkResult result, const char* what);

// ContextOptions::fence_timeout_ms as vkWaitForFences takes it: nanoseconds, 0 = no limit.
inline uint64_t fence_timeout_ns(uint32_t timeout_ms) {
  return timeout_ms == 0 ? UINT64_MAX : uint64_t(timeout_ms) * 1000000u;
}

}  // namespace vkpaged::vk
