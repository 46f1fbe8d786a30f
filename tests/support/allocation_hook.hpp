// SPDX-License-Identifier: Apache-2.0
#pragma once
// Test-only: a ledger of the Vulkan objects a Context creates and destroys, with failure
// injection, for tests that check that errors part-way through an operation leak nothing.
// It interposes on the Context's dispatch table (every Vulkan call vkpaged makes goes through
// it, and the RAII owners read it when they destroy), so the library itself carries no hook
// and behaves exactly as without it. Only tests (tests/vk/test_resources.cpp) include it.
//
//   AllocationHook hook(ctx.impl());      // counts from here on
//   hook.fail_allocation(3);                  // the 3rd vkAllocateMemory from now fails
//   EXPECT_THROW(decode_attention(ctx, in), Error);
//   EXPECT_EQ(hook.live(HookedObject::buffer), 0);
//
// Objects that existed before the hook was installed are not counted, even when they are
// destroyed while it is. One hook per process at a time; it restores the table when it goes
// away, which must happen before the Context does.
#include <vulkan/vulkan.h>

#include <array>
#include <cstdint>
#include <mutex>
#include <set>
#include <stdexcept>

#include "vk/context_impl.hpp"

namespace vkpaged::test {

enum class HookedObject { buffer, memory, fence, command_buffer, pipeline, pipeline_layout, set_layout, shader_module, count };

// The calls a test can make fail, each with VK_ERROR_OUT_OF_DEVICE_MEMORY.
enum class HookedCall { allocate_memory, create_buffer, create_pipeline, queue_submit, count };

class AllocationHook {
 public:
  explicit AllocationHook(detail::ContextImpl& impl) : impl_(impl), saved_(impl.d) {
    std::lock_guard lock(mutex());
    if (active() != nullptr) throw std::logic_error("AllocationHook: one at a time");
    active() = this;
    vk::Dispatch& d = impl.d;
    d.vkCreateBuffer = &create_buffer;
    d.vkDestroyBuffer = &destroy_buffer;
    d.vkAllocateMemory = &allocate_memory;
    d.vkFreeMemory = &free_memory;
    d.vkCreateFence = &create_fence;
    d.vkDestroyFence = &destroy_fence;
    d.vkAllocateCommandBuffers = &allocate_command_buffers;
    d.vkFreeCommandBuffers = &free_command_buffers;
    d.vkCreateComputePipelines = &create_compute_pipelines;
    d.vkDestroyPipeline = &destroy_pipeline;
    d.vkCreatePipelineLayout = &create_pipeline_layout;
    d.vkDestroyPipelineLayout = &destroy_pipeline_layout;
    d.vkCreateDescriptorSetLayout = &create_set_layout;
    d.vkDestroyDescriptorSetLayout = &destroy_set_layout;
    d.vkCreateShaderModule = &create_shader_module;
    d.vkDestroyShaderModule = &destroy_shader_module;
    d.vkQueueSubmit = &queue_submit;
  }
  ~AllocationHook() {
    std::lock_guard lock(mutex());
    impl_.d = saved_;
    active() = nullptr;
  }
  AllocationHook(const AllocationHook&) = delete;
  AllocationHook& operator=(const AllocationHook&) = delete;

  // Objects of a kind created since the hook was installed and not yet destroyed.
  size_t live(HookedObject kind) const {
    std::lock_guard lock(mutex());
    return live_[size_t(kind)].size();
  }
  // Calls of a kind since the hook was installed (failed ones included).
  uint64_t calls(HookedCall call) const {
    std::lock_guard lock(mutex());
    return calls_[size_t(call)];
  }
  // Bytes of the successful vkAllocateMemory calls since the hook was installed.
  uint64_t allocated_bytes() const {
    std::lock_guard lock(mutex());
    return allocated_bytes_;
  }
  // Makes the n-th call of a kind from now (1 = the next one) fail; 0 cancels.
  void fail(HookedCall call, uint64_t n) {
    std::lock_guard lock(mutex());
    fail_at_[size_t(call)] = n == 0 ? 0 : calls_[size_t(call)] + n;
  }
  void fail_allocation(uint64_t n) { fail(HookedCall::allocate_memory, n); }

 private:
  static std::mutex& mutex() {
    static std::mutex m;
    return m;
  }
  static AllocationHook*& active() {
    static AllocationHook* hook = nullptr;
    return hook;
  }
  template <typename T>
  static uint64_t key(T handle) {
    return uint64_t(reinterpret_cast<uintptr_t>(handle));
  }
  // Counts a call and says whether it is the one to fail. Called with the mutex held.
  static bool should_fail(HookedCall call) {
    AllocationHook& h = *active();
    const uint64_t n = ++h.calls_[size_t(call)];
    return h.fail_at_[size_t(call)] != 0 && n == h.fail_at_[size_t(call)];
  }
  template <typename T>
  static void created(HookedObject kind, T handle) {
    if (handle != T(VK_NULL_HANDLE)) active()->live_[size_t(kind)].insert(key(handle));
  }
  template <typename T>
  static void destroyed(HookedObject kind, T handle) {
    if (handle != T(VK_NULL_HANDLE)) active()->live_[size_t(kind)].erase(key(handle));
  }
  static const vk::Dispatch& real() { return active()->saved_; }

  static VKAPI_ATTR VkResult VKAPI_CALL create_buffer(VkDevice device, const VkBufferCreateInfo* info,
                                                      const VkAllocationCallbacks* a, VkBuffer* out) {
    std::lock_guard lock(mutex());
    if (should_fail(HookedCall::create_buffer)) return VK_ERROR_OUT_OF_DEVICE_MEMORY;
    const VkResult r = real().vkCreateBuffer(device, info, a, out);
    if (r == VK_SUCCESS) created(HookedObject::buffer, *out);
    return r;
  }
  static VKAPI_ATTR void VKAPI_CALL destroy_buffer(VkDevice device, VkBuffer buffer, const VkAllocationCallbacks* a) {
    std::lock_guard lock(mutex());
    destroyed(HookedObject::buffer, buffer);
    real().vkDestroyBuffer(device, buffer, a);
  }
  static VKAPI_ATTR VkResult VKAPI_CALL allocate_memory(VkDevice device, const VkMemoryAllocateInfo* info,
                                                        const VkAllocationCallbacks* a, VkDeviceMemory* out) {
    std::lock_guard lock(mutex());
    if (should_fail(HookedCall::allocate_memory)) return VK_ERROR_OUT_OF_DEVICE_MEMORY;
    const VkResult r = real().vkAllocateMemory(device, info, a, out);
    if (r == VK_SUCCESS) {
      created(HookedObject::memory, *out);
      active()->allocated_bytes_ += info->allocationSize;
    }
    return r;
  }
  static VKAPI_ATTR void VKAPI_CALL free_memory(VkDevice device, VkDeviceMemory memory, const VkAllocationCallbacks* a) {
    std::lock_guard lock(mutex());
    destroyed(HookedObject::memory, memory);
    real().vkFreeMemory(device, memory, a);
  }
  static VKAPI_ATTR VkResult VKAPI_CALL create_fence(VkDevice device, const VkFenceCreateInfo* info,
                                                     const VkAllocationCallbacks* a, VkFence* out) {
    std::lock_guard lock(mutex());
    const VkResult r = real().vkCreateFence(device, info, a, out);
    if (r == VK_SUCCESS) created(HookedObject::fence, *out);
    return r;
  }
  static VKAPI_ATTR void VKAPI_CALL destroy_fence(VkDevice device, VkFence fence, const VkAllocationCallbacks* a) {
    std::lock_guard lock(mutex());
    destroyed(HookedObject::fence, fence);
    real().vkDestroyFence(device, fence, a);
  }
  static VKAPI_ATTR VkResult VKAPI_CALL allocate_command_buffers(VkDevice device, const VkCommandBufferAllocateInfo* info,
                                                                 VkCommandBuffer* out) {
    std::lock_guard lock(mutex());
    const VkResult r = real().vkAllocateCommandBuffers(device, info, out);
    if (r == VK_SUCCESS)
      for (uint32_t i = 0; i < info->commandBufferCount; ++i) created(HookedObject::command_buffer, out[i]);
    return r;
  }
  static VKAPI_ATTR void VKAPI_CALL free_command_buffers(VkDevice device, VkCommandPool pool, uint32_t count,
                                                         const VkCommandBuffer* buffers) {
    std::lock_guard lock(mutex());
    for (uint32_t i = 0; i < count; ++i) destroyed(HookedObject::command_buffer, buffers[i]);
    real().vkFreeCommandBuffers(device, pool, count, buffers);
  }
  static VKAPI_ATTR VkResult VKAPI_CALL create_compute_pipelines(VkDevice device, VkPipelineCache cache, uint32_t count,
                                                                 const VkComputePipelineCreateInfo* infos,
                                                                 const VkAllocationCallbacks* a, VkPipeline* out) {
    std::lock_guard lock(mutex());
    if (should_fail(HookedCall::create_pipeline)) {
      for (uint32_t i = 0; i < count; ++i) out[i] = VK_NULL_HANDLE;
      return VK_ERROR_OUT_OF_DEVICE_MEMORY;
    }
    const VkResult r = real().vkCreateComputePipelines(device, cache, count, infos, a, out);
    if (r == VK_SUCCESS)
      for (uint32_t i = 0; i < count; ++i) created(HookedObject::pipeline, out[i]);
    return r;
  }
  static VKAPI_ATTR void VKAPI_CALL destroy_pipeline(VkDevice device, VkPipeline pipeline, const VkAllocationCallbacks* a) {
    std::lock_guard lock(mutex());
    destroyed(HookedObject::pipeline, pipeline);
    real().vkDestroyPipeline(device, pipeline, a);
  }
  static VKAPI_ATTR VkResult VKAPI_CALL create_pipeline_layout(VkDevice device, const VkPipelineLayoutCreateInfo* info,
                                                               const VkAllocationCallbacks* a, VkPipelineLayout* out) {
    std::lock_guard lock(mutex());
    const VkResult r = real().vkCreatePipelineLayout(device, info, a, out);
    if (r == VK_SUCCESS) created(HookedObject::pipeline_layout, *out);
    return r;
  }
  static VKAPI_ATTR void VKAPI_CALL destroy_pipeline_layout(VkDevice device, VkPipelineLayout layout,
                                                            const VkAllocationCallbacks* a) {
    std::lock_guard lock(mutex());
    destroyed(HookedObject::pipeline_layout, layout);
    real().vkDestroyPipelineLayout(device, layout, a);
  }
  static VKAPI_ATTR VkResult VKAPI_CALL create_set_layout(VkDevice device, const VkDescriptorSetLayoutCreateInfo* info,
                                                          const VkAllocationCallbacks* a, VkDescriptorSetLayout* out) {
    std::lock_guard lock(mutex());
    const VkResult r = real().vkCreateDescriptorSetLayout(device, info, a, out);
    if (r == VK_SUCCESS) created(HookedObject::set_layout, *out);
    return r;
  }
  static VKAPI_ATTR void VKAPI_CALL destroy_set_layout(VkDevice device, VkDescriptorSetLayout layout,
                                                       const VkAllocationCallbacks* a) {
    std::lock_guard lock(mutex());
    destroyed(HookedObject::set_layout, layout);
    real().vkDestroyDescriptorSetLayout(device, layout, a);
  }
  static VKAPI_ATTR VkResult VKAPI_CALL create_shader_module(VkDevice device, const VkShaderModuleCreateInfo* info,
                                                             const VkAllocationCallbacks* a, VkShaderModule* out) {
    std::lock_guard lock(mutex());
    const VkResult r = real().vkCreateShaderModule(device, info, a, out);
    if (r == VK_SUCCESS) created(HookedObject::shader_module, *out);
    return r;
  }
  static VKAPI_ATTR void VKAPI_CALL destroy_shader_module(VkDevice device, VkShaderModule module,
                                                          const VkAllocationCallbacks* a) {
    std::lock_guard lock(mutex());
    destroyed(HookedObject::shader_module, module);
    real().vkDestroyShaderModule(device, module, a);
  }
  static VKAPI_ATTR VkResult VKAPI_CALL queue_submit(VkQueue queue, uint32_t count, const VkSubmitInfo* submits,
                                                     VkFence fence) {
    {
      std::lock_guard lock(mutex());
      if (should_fail(HookedCall::queue_submit)) return VK_ERROR_OUT_OF_DEVICE_MEMORY;
    }
    return real().vkQueueSubmit(queue, count, submits, fence);
  }

  detail::ContextImpl& impl_;
  const vk::Dispatch saved_;
  std::array<std::set<uint64_t>, size_t(HookedObject::count)> live_{};
  std::array<uint64_t, size_t(HookedCall::count)> calls_{};
  std::array<uint64_t, size_t(HookedCall::count)> fail_at_{};
  uint64_t allocated_bytes_ = 0;
};

}  // namespace vkpaged::test
