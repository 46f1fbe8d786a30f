// SPDX-License-Identifier: Apache-2.0
#pragma once
// The VkInstance vkpaged creates (with the validation layer when asked), and its debug
// messenger, which counts validation messages and sends them to the log (vkpaged/log.hpp).
#include <vulkan/vulkan.h>

#include <atomic>

#include "vk/dispatch.hpp"

namespace vkpaged::vk {

class Instance {
 public:
  // `require_sync_validation`: refuse (Error(unsupported)) a validation layer that cannot turn
  // synchronization validation on, instead of running without it.
  Instance(bool validation, bool require_sync_validation);
  // Adopts an engine's instance: loads entry points through its vkGetInstanceProcAddr and
  // never destroys it.
  Instance(VkInstance instance, PFN_vkGetInstanceProcAddr get_instance_proc);
  ~Instance();
  Instance(const Instance&) = delete;
  Instance& operator=(const Instance&) = delete;

  VkInstance get() const noexcept { return instance_; }
  const Dispatch& dispatch() const noexcept { return dispatch_; }
  uint32_t validation_message_count() const noexcept { return messages_.load(); }
  // The specVersion of the Khronos validation layer on this instance (turned on by vkpaged or by
  // the loader's environment), 0 when there is none or the instance was adopted.
  uint32_t validation_layer_version() const noexcept { return validation_layer_version_; }

 private:
  static VKAPI_ATTR VkBool32 VKAPI_CALL on_message(VkDebugUtilsMessageSeverityFlagBitsEXT severity,
                                                   VkDebugUtilsMessageTypeFlagsEXT types,
                                                   const VkDebugUtilsMessengerCallbackDataEXT* data, void* user);
  VkInstance instance_ = VK_NULL_HANDLE;
  VkDebugUtilsMessengerEXT messenger_ = VK_NULL_HANDLE;
  bool owned_ = true;
  uint32_t validation_layer_version_ = 0;
  Dispatch dispatch_;
  std::atomic<uint32_t> messages_{0};
};

}  // namespace vkpaged::vk
