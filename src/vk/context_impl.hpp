#pragma once
// What a Context holds: the Vulkan objects of one device and the caches vkpaged keeps for it.
// Operators reach the device through this (dispatch table, pipelines, binding helpers).
#include <vulkan/vulkan.h>

#include <cstdint>
#include <map>
#include <memory>
#include <mutex>
#include <optional>
#include <span>
#include <string>
#include <vector>

#include "vk/dispatch.hpp"
#include "vk/instance.hpp"
#include "vk/operator_state.hpp"
#include "vk/shader_registry.hpp"
#include "vk/unique_handle.hpp"
#include "vkpaged/context.hpp"

namespace vkpaged::detail {

struct BufferImpl {
  vk::UniqueBuffer buffer;
  vk::UniqueMemory memory;
  size_t size = 0;
  void* mapped = nullptr;
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
  bool decode_timeline = false;        // DeviceInfo::decode_timeline's features are enabled
  bool pipeline_statistics = false;    // VKPAGED_PIPELINE_STATS: print compiler statistics of each pipeline
  VkQueue queue = VK_NULL_HANDLE;
  uint32_t queue_family = 0;
  DeviceInfo info;
  VkPhysicalDeviceMemoryProperties memory_properties{};

  vk::UniquePipelineCache pipeline_cache;
  vk::UniqueCommandPool command_pool;
  std::unique_ptr<BufferImpl> dummy;  // bound where a shader's optional input is absent

  std::mutex submit_mutex;  // the queue and the command pool
  std::mutex pipeline_mutex;
  OperatorStates operator_states;  // what operators keep per context, defined by each (vk/operator_state.hpp)
  std::map<std::string, std::unique_ptr<ComputePipeline>> pipelines;

  // What both constructors do once the device exists: entry points, queue, caches.
  void finish_setup(uint32_t queue_index);

  // Creates a buffer with its own memory. Throws vkpaged::Error(out_of_memory) on failure.
  std::unique_ptr<BufferImpl> create_buffer(size_t bytes, MemoryKind kind);

  // Finds or creates a pipeline for a shader and its specialization values.
  const ComputePipeline& pipeline(const vk::ShaderRegistration& shader, std::span<const uint32_t> spec,
                                  uint32_t num_bindings, uint32_t push_bytes);

  // Binds views (an empty view binds the dummy buffer) and the push constants, then dispatches.
  BoundView bind_view(const BufferView& view) const;
  void dispatch(VkCommandBuffer cmd, const ComputePipeline& p, std::span<const BoundView> views, const void* push,
                uint32_t gx, uint32_t gy, uint32_t gz) const;

  void submit_and_wait(const std::function<void(VkCommandBuffer)>& record, VkQueryPool timestamps = VK_NULL_HANDLE,
                       const std::function<void(VkCommandBuffer)>* untimed_before = nullptr);
};

}  // namespace vkpaged::detail
