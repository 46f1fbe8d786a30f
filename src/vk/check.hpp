// SPDX-License-Identifier: Apache-2.0
#pragma once
// Turns a failed VkResult into vkpaged::Error, naming the call.
#include <vulkan/vulkan.h>

#include <string>

#include "vkpaged/error.hpp"

namespace vkpaged::vk {

const char* result_name(VkResult result) noexcept;

[[noreturn]] void throw_vk_error(VkResult result, const char* what);

inline void check(VkResult result, const char* what) {
  if (result != VK_SUCCESS) throw_vk_error(result, what);
}

}  // namespace vkpaged::vk
