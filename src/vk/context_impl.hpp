// SPDX-License-Identifier: Apache-2.0
#pragma once
// What a Context holds: the Vulkan objects of one device and the caches vkpaged keeps for it.
// Operators reach the device through this (dispatch table, pipelines, binding helpers).
#include <vulkan/vulkan.h>

#include <atomic>
#include <cstdint>
#include <map>
#include <memory>
#include <mutex>
#include <optional>
#include <shared_mutex>
#include <span>
#include <string>
#include <vector>

#include "vk/buffer_registry.hpp"
#include "vk/device_capabilities.hpp"
#include "vk/dispatch.hpp"
#include "vk/fence_wait.hpp"
#include "vk/instance.hpp"
#include "vk/operator_state.hpp"
#include "vk/pipeline_request.hpp"
#include "vk/shader_registry.hpp"
#include "vk/unique_handle.hpp"
#include "vkpaged/context.hpp"

namespace vkpaged::detail {

struct ContextImpl;

struct BufferImpl {
  vk::UniqueBuffer buffer;
  vk::UniqueMemory memory;
  size_t size = 0;
  void* mapped = nullptr;
  // The Context that made it (create_buffer): destroyed while a timed-out submission may still
  // use it, its buffer and memory go to owner->retired instead.
  ContextImpl* owner = nullptr;

  BufferImpl() = default;
  BufferImpl(const BufferImpl&) = delete;
  BufferImpl& operator=(const BufferImpl&) = delete;
  ~BufferImpl();

  vk::BufferRegistration registration;  // last: unregistered before the buffer is destroyed
};

// A compute pipeline with its layouts: N storage-buffer bindings pushed as descriptors, one
// push-constant range, specialization constants 0..k-1.
struct ComputePipeline {
  vk::UniqueDescriptorSetLayout set_layout;
  vk::UniquePipelineLayout layout;
  vk::UniquePipeline pipeline;
  uint32_t num_bindings = 0;
  uint32_t push_bytes = 0;
};

// A BufferView bound as a storage buffer: the descriptor range starts at the view's offset
// rounded down to the device's alignment; the shader adds `word_offset` (4-byte words).
struct BoundView {
  VkDescriptorBufferInfo info{};
  uint32_t word_offset = 0;
};

struct ContextImpl {
  explicit ContextImpl(const ContextOptions& options);
  explicit ContextImpl(const ExternalDevice& external);
  ~ContextImpl();

  std::unique_ptr<vk::Instance> instance;
  vk::Dispatch d;  // instance + device entries
  VkPhysicalDevice physical_device = VK_NULL_HANDLE;
  VkDevice device = VK_NULL_HANDLE;
  bool owns_device = true;
  bool buffer_device_address = false;  // the feature is enabled: buffers get device addresses
  bool cooperative_matrix = false;     // VK_NV_cooperative_matrix is enabled (DeviceInfo says what it needs)
  // shaderFloat16 is enabled: on a device of its own where the device has it; on an adopted
  // one where the engine enabled what the matrix kernel needs (which includes it).
  bool shader_float16 = false;
  bool decode_timeline = false;        // DeviceInfo::decode_timeline's features are enabled
  // Device features the matrix kernels' SPIR-V needs (vk/matrix_features.hpp says what is
  // missing). The memory model's two features are enabled together or not at all.
  bool vulkan_memory_model = false;
  bool vulkan_memory_model_device_scope = false;
  std::string memory_model_absent;  // why vulkanMemoryModel is not enabled ("" when it is)
  // VK_KHR_cooperative_matrix with computeFullSubgroups, the memory model, f16 arithmetic and
  // 16-bit storage; KHR matrix pipelines are full-subgroup dispatches whose workgroup width is a
  // multiple of max_subgroup_size.
  bool cooperative_matrix_khr = false;
  std::string cooperative_matrix_khr_absent;  // why it is not enabled ("" when it is)
  uint32_t max_subgroup_size = 0;
  bool pipeline_statistics = false;    // VKPAGED_PIPELINE_STATS: log compiler statistics of each pipeline
  // ContextOptions::read_environment: VKPAGED_DECODE_TUNE is read at the first decode plan
  // (false for an adopted device: the engine chose everything).
  bool read_environment = false;
  VkQueue queue = VK_NULL_HANDLE;
  uint32_t queue_family = 0;
  DeviceInfo info;
  // What the planners read off this context (info and what it enabled), made once at setup.
  DeviceCapabilities capabilities;
  VkPhysicalDeviceMemoryProperties memory_properties{};

  vk::UniquePipelineCache pipeline_cache;
  vk::UniqueCommandPool command_pool;
  std::unique_ptr<BufferImpl> dummy;  // bound where a shader's optional input is absent

  std::mutex submit_mutex;  // the queue, the command pool and what follows (pending, lost)
  uint32_t fence_timeout_ms = 60000;  // ContextOptions::fence_timeout_ms (0 = no limit)
  // What the GPU may still use when a convenience's wait times out: it passes to `pending`.
  struct SubmissionResources {
    std::unique_ptr<BufferImpl> staging;
    vk::UniqueQueryPool timestamps;
  };
  // A convenience submission that timed out and may still run, with everything it uses: the
  // next submit_and_wait waits for it first; the destructor waits for the queue.
  struct PendingSubmission {
    VkCommandBuffer cmd = VK_NULL_HANDLE;
    vk::UniqueFence fence;
    SubmissionResources resources;
  };
  std::optional<PendingSubmission> pending;
  bool device_lost = false;  // a wait returned VK_ERROR_DEVICE_LOST: no more submissions
  // Buffers destroyed while `pending` exists (the work may use any of them: the host
  // conveniences' temporaries, the caller's): freed once it has finished. Own lock, so that a
  // buffer may be destroyed anywhere, a run_and_wait callback included.
  std::atomic<bool> has_pending{false};
  std::mutex retired_mutex;
  std::vector<std::pair<vk::UniqueBuffer, vk::UniqueMemory>> retired;
  // BufferImpl's destructor: keeps its buffer and memory alive while `pending` exists.
  void retire(BufferImpl& buffer);
  std::mutex pipeline_mutex;  // the registry below
  // Builds share pipeline_cache (Vulkan synchronises them); a merge into it excludes them.
  std::shared_mutex pipeline_cache_mutex;
  OperatorStates operator_states;  // what operators keep per context, defined by each (vk/operator_state.hpp)
  // The pipeline registry (vk/pipeline_registry.cpp), by PipelineRequest::key(): pipelines are
  // never removed, so what a plan points to stays valid.
  std::map<std::string, std::unique_ptr<ComputePipeline>> pipelines;

  // What both constructors do once the device exists: entry points, queue, caches.
  void finish_setup(uint32_t queue_index);

  // Creates a buffer with its own memory. Throws vkpaged::Error(out_of_memory) on failure.
  std::unique_ptr<BufferImpl> create_buffer(size_t bytes, MemoryKind kind);

  // Finds or creates a pipeline for a shader and its specialization values.
  const ComputePipeline& pipeline(const vk::ShaderRegistration& shader, std::span<const uint32_t> spec,
                                  uint32_t num_bindings, uint32_t push_bytes);
  const ComputePipeline& pipeline(const vk::PipelineRequest& request);
  // Builds every requested pipeline the registry lacks, on several threads (Context::prepare).
  struct PreparedPipelines {
    size_t pipelines = 0;  // distinct pipelines requested
    size_t created = 0;    // of them, built by this call
  };
  PreparedPipelines prepare_pipelines(std::span<const vk::PipelineRequest> requests);
  // The pipeline and its layouts, built outside the registry's lock.
  std::unique_ptr<ComputePipeline> build_pipeline(const vk::PipelineRequest& request);

  // Binds views (an empty view binds the dummy buffer) and the push constants, then dispatches.
  BoundView bind_view(const BufferView& view) const;
  void dispatch(VkCommandBuffer cmd, const ComputePipeline& p, std::span<const BoundView> views, const void* push,
                uint32_t gx, uint32_t gy, uint32_t gz) const;

  // Records, submits and waits, up to fence_timeout_ms (Context::run_and_wait says what follows
  // a timeout or a lost device). On a timeout, `keep` (what the work uses besides the command
  // buffer) passes to `pending`.
  void submit_and_wait(const std::function<void(VkCommandBuffer)>& record, VkQueryPool timestamps = VK_NULL_HANDLE,
                       const std::function<void(VkCommandBuffer)>* untimed_before = nullptr,
                       SubmissionResources* keep = nullptr);
  // Waits for `pending` (caller holds submit_mutex): returns once it finished and is freed;
  // throws Error(device_error) while it still runs after the timeout or when the device is lost.
  void finish_pending();
  // vkWaitForFences on `fence` with the timeout; records a lost device before throwing.
  vk::FenceWait wait_for(VkFence fence, const char* what);
};

}  // namespace vkpaged::detail
