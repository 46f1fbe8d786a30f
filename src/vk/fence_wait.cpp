// SPDX-License-Identifier: Apache-2.0
#include "vk/fence_wait.hpp"

#include <fmt/format.h>

#include "vk/check.hpp"
#include "vkpaged/error.hpp"

namespace vkpaged::vk {

FenceWait fence_wait_outcome(VkResult result, const char* what) {
  switch (result) {
    case VK_SUCCESS: return FenceWait::signaled;
    case VK_TIMEOUT: return FenceWait::timed_out;
    case VK_ERROR_DEVICE_LOST:
      throw Error(ErrorCode::device_error,
                  fmt::format("{}: VK_ERROR_DEVICE_LOST: the device was lost (a hang, a reset or a fault); this Context "
                              "runs nothing more: destroy it, and what was made from it, and create a new one",
                              what));
    default: throw_vk_error(result, what);
  }
}

}  // namespace vkpaged::vk
