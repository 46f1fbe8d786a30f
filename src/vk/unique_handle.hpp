// SPDX-License-Identifier: Apache-2.0
#pragma once
// RAII owner of one device-level Vulkan handle: destroyed through the dispatch table when the
// owner goes away. Every device object vkpaged creates lives in one of these.
#include <vulkan/vulkan.h>

#include <utility>

#include "vk/dispatch.hpp"

namespace vkpaged::vk {

template <typename T>
using DestroyFn = void (*)(const Dispatch&, VkDevice, T);

template <typename T, DestroyFn<T> Destroy>
class UniqueHandle {
 public:
  UniqueHandle() = default;
  UniqueHandle(const Dispatch* dispatch, VkDevice device, T handle) : dispatch_(dispatch), device_(device), handle_(handle) {}
  UniqueHandle(UniqueHandle&& o) noexcept { *this = std::move(o); }
  UniqueHandle& operator=(UniqueHandle&& o) noexcept {
    if (this != &o) {
      reset();
      dispatch_ = o.dispatch_;
      device_ = o.device_;
      handle_ = std::exchange(o.handle_, T(VK_NULL_HANDLE));
    }
    return *this;
  }
  UniqueHandle(const UniqueHandle&) = delete;
  UniqueHandle& operator=(const UniqueHandle&) = delete;
  ~UniqueHandle() { reset(); }

  void reset() noexcept {
    if (handle_ != T(VK_NULL_HANDLE)) Destroy(*dispatch_, device_, handle_);
    handle_ = T(VK_NULL_HANDLE);
  }
  T get() const noexcept { return handle_; }
  explicit operator bool() const noexcept { return handle_ != T(VK_NULL_HANDLE); }

 private:
  const Dispatch* dispatch_ = nullptr;
  VkDevice device_ = VK_NULL_HANDLE;
  T handle_ = T(VK_NULL_HANDLE);
};

#define VKPAGED_DESTROYER(Type, call) \
  inline void destroy_##Type(const Dispatch& d, VkDevice dev, Vk##Type h) { d.call(dev, h, nullptr); }
VKPAGED_DESTROYER(Buffer, vkDestroyBuffer)
VKPAGED_DESTROYER(DeviceMemory, vkFreeMemory)
VKPAGED_DESTROYER(ShaderModule, vkDestroyShaderModule)
VKPAGED_DESTROYER(DescriptorSetLayout, vkDestroyDescriptorSetLayout)
VKPAGED_DESTROYER(PipelineLayout, vkDestroyPipelineLayout)
VKPAGED_DESTROYER(PipelineCache, vkDestroyPipelineCache)
VKPAGED_DESTROYER(Pipeline, vkDestroyPipeline)
VKPAGED_DESTROYER(CommandPool, vkDestroyCommandPool)
VKPAGED_DESTROYER(Fence, vkDestroyFence)
VKPAGED_DESTROYER(QueryPool, vkDestroyQueryPool)
#undef VKPAGED_DESTROYER

using UniqueBuffer = UniqueHandle<VkBuffer, destroy_Buffer>;
using UniqueMemory = UniqueHandle<VkDeviceMemory, destroy_DeviceMemory>;
using UniqueShaderModule = UniqueHandle<VkShaderModule, destroy_ShaderModule>;
using UniqueDescriptorSetLayout = UniqueHandle<VkDescriptorSetLayout, destroy_DescriptorSetLayout>;
using UniquePipelineLayout = UniqueHandle<VkPipelineLayout, destroy_PipelineLayout>;
using UniquePipelineCache = UniqueHandle<VkPipelineCache, destroy_PipelineCache>;
using UniquePipeline = UniqueHandle<VkPipeline, destroy_Pipeline>;
using UniqueCommandPool = UniqueHandle<VkCommandPool, destroy_CommandPool>;
using UniqueFence = UniqueHandle<VkFence, destroy_Fence>;
using UniqueQueryPool = UniqueHandle<VkQueryPool, destroy_QueryPool>;

}  // namespace vkpaged::vk
