// SPDX-License-Identifier: Apache-2.0
#include "vk/dispatch.hpp"

namespace vkpaged::vk {

void Dispatch::load_instance(PFN_vkGetInstanceProcAddr get_instance_proc, VkInstance instance) {
#define VKPAGED_LOAD(name) name = reinterpret_cast<PFN_##name>(get_instance_proc(instance, #name));
  VKPAGED_INSTANCE_FUNCTIONS(VKPAGED_LOAD)
#undef VKPAGED_LOAD
}

void Dispatch::load_device(VkDevice device) {
#define VKPAGED_LOAD(name) name = reinterpret_cast<PFN_##name>(vkGetDeviceProcAddr(device, #name));
  VKPAGED_DEVICE_FUNCTIONS(VKPAGED_LOAD)
#undef VKPAGED_LOAD
}

}  // namespace vkpaged::vk
