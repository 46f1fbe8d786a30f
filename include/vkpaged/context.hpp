// SPDX-License-Identifier: Apache-2.0
#pragma once
// A vkpaged Context: one Vulkan device and what vkpaged keeps for it (pipelines, a command
// pool for the convenience paths, a staging path). Create one per device and share it.
#include <vulkan/vulkan.h>

#include <cstddef>
#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "vkpaged/export.hpp"
#include "vkpaged/tensor.hpp"

namespace vkpaged {

namespace detail {
struct ContextImpl;
struct BufferImpl;
}  // namespace detail

struct PipelineSet;    // vkpaged/prepare.hpp
struct PrepareReport;  // vkpaged/prepare.hpp

// One matrix shape VK_KHR_cooperative_matrix offers (a VkCooperativeMatrixPropertiesKHR): A is
// m x k, B k x n, C and the result m x n. Component types and the scope keep Vulkan's values
// (VkComponentTypeKHR: 0 f16, 1 f32, 3 s8, 7 u8, ...; VkScopeKHR: 3 subgroup), which
// cooperative_matrix_component_name and to_string spell out.
struct CooperativeMatrixShape {
  uint32_t m = 0;
  uint32_t n = 0;
  uint32_t k = 0;
  uint32_t a_type = 0;
  uint32_t b_type = 0;
  uint32_t c_type = 0;
  uint32_t result_type = 0;
  bool saturating_accumulation = false;
  uint32_t scope = 0;
};
// "f16", "bf16", "f32", "s8", "e4m3", ...; "type N" for a value vkpaged does not know.
VKPAGED_API std::string cooperative_matrix_component_name(uint32_t vk_component_type);
// "16x8x16 f16 x f16 + f32 -> f32, subgroup" (", saturating" where it is).
VKPAGED_API std::string to_string(const CooperativeMatrixShape& shape);

// What vkpaged reads off a physical device and uses to pick shader variants.
struct DeviceInfo {
  uint32_t index = 0;  // position in vkEnumeratePhysicalDevices
  std::string name;
  std::string type;  // "discrete", "integrated", "virtual", "cpu", "other"
  std::string driver;  // driver name and info, when the device reports them
  uint32_t vendor_id = 0;
  uint32_t api_version = 0;
  uint32_t subgroup_size = 0;
  bool subgroup_arithmetic = false;  // subgroupAdd/Max in compute shaders
  bool subgroup_shuffle = false;     // subgroupShuffleXor in compute shaders
  bool storage_16bit = false;
  bool storage_8bit = false;
  bool shader_float16 = false;
  bool shader_int64 = false;
  bool buffer_device_address = false;
  // VK_NV_cooperative_matrix with the f16 products the matrix decode kernel uses (16x8x16,
  // f32 accumulators, subgroup scope), f16 arithmetic and storage, 32-wide subgroups.
  bool cooperative_matrix = false;
  // VK_KHR_shader_clock (device clock) and VK_NV_shader_sm_builtins beside the above and buffer
  // device addresses: DecodeOptions::timeline can record the matrix kernel's timeline.
  bool decode_timeline = false;
  // The Vulkan memory model (VkPhysicalDeviceVulkan12Features). The matrix kernels' SPIR-V
  // declares it (it comes with the cooperative-matrix GLSL extensions) and their atomics use
  // QueueFamily scope; with it enabled, the other shaders' Device-scope atomics need the
  // device-scope feature. A Context enables both where the device has both.
  bool vulkan_memory_model = false;
  bool vulkan_memory_model_device_scope = false;
  // VK_KHR_cooperative_matrix with its cooperativeMatrix feature in compute shaders, and the
  // shapes it offers, in the driver's order of preference. Not queried (false, empty) for an
  // adopted device whose engine did not enable the extension (ExternalDevice), nor under a
  // Khronos validation layer older than the extension (1.3.255), which reports its structures
  // as errors (`vkpaged info` runs without the layer).
  bool cooperative_matrix_khr = false;
  std::vector<CooperativeMatrixShape> cooperative_matrix_khr_shapes;
  bool push_descriptor = false;
  bool timestamps = false;
  uint64_t max_storage_buffer_range = 0;
  uint32_t max_shared_memory = 0;
  uint32_t max_workgroup_invocations = 0;
  uint32_t max_push_constants = 0;
  uint32_t min_storage_buffer_offset_alignment = 0;
  uint32_t compute_units = 0;  // multiprocessors/CUs where the driver reports them, else an estimate
  bool compute_units_reported = false;
  double timestamp_period_ns = 0;
  uint32_t timestamp_valid_bits = 0;
  uint64_t device_local_bytes = 0;  // the device-local heaps' size
  // VK_EXT_memory_budget, where the device has it: the device-local memory this process could
  // still allocate when the info was queried (heapBudget - heapUsage over the device-local
  // heaps; other processes' use lowers it). 0 without the extension.
  bool memory_budget = false;
  uint64_t device_local_free_bytes = 0;
  // VkPhysicalDeviceMaintenance3Properties: one allocation past this size may fail (drivers
  // differ in whether it does); a KvCache pool is one allocation.
  uint64_t max_memory_allocation_size = 0;
};

// Every Vulkan device the loader sees, in enumeration order, plus which one the default
// choice picks (the `default_index`); throws vkpaged::Error when there is no Vulkan at all.
struct DeviceList {
  std::vector<DeviceInfo> devices;
  uint32_t default_index = 0;
};
VKPAGED_API DeviceList list_devices();

struct ContextOptions {
  // "" = the default choice (discrete GPU, then integrated, then virtual, then CPU; with
  // read_environment, VKPAGED_DEVICE where it is set). Otherwise an index ("1") or a name
  // substring ("H200", "llvmpipe"). "cpu" is not a Vulkan device: the CLI maps it to the reference.
  std::string device;
  // Enable the Khronos validation layer (with read_environment, also VKPAGED_VALIDATION=1), with
  // its synchronization validation where the layer can turn it on (VKPAGED_VALIDATION=sync: must,
  // else the Context is refused with Error(unsupported)). Messages go to the log callback
  // (vkpaged/log.hpp; stderr by default) and are counted: see Context::validation_message_count().
  bool validation = false;
  // Use the shared-memory reductions even where the device has subgroup arithmetic (tests
  // use this to run the fallback path on every device).
  bool disable_subgroup_arithmetic = false;
  // How long the conveniences that wait (run_and_wait, run_and_time, upload, download and the
  // host-tensor calls built on them) wait for the device before they give up with
  // Error(device_error); 0 = no limit. See Context::run_and_wait for what follows a timeout.
  uint32_t fence_timeout_ms = 60000;
  // Whether this Context reads vkpaged's environment variables (docs/environment.md):
  // VKPAGED_DEVICE where `device` is "", VKPAGED_VALIDATION and VKPAGED_PIPELINE_STATS as it is
  // created, VKPAGED_DECODE_TUNE at its first decode plan. Off: a library in an engine's
  // process follows the engine's options, not variables set for some other program. The vkpaged
  // CLI and the tests turn it on. A Context that adopts an ExternalDevice reads none.
  bool read_environment = false;
};

// An engine's own Vulkan objects, for a Context that adopts them instead of creating its own.
// The device must have been created with VK_KHR_push_descriptor enabled and a queue of
// `queue_family` that supports compute. vkpaged never destroys adopted objects. Its
// convenience paths (upload, download, run_and_wait) submit to `queue`; the engine must not
// submit to that queue from another thread at the same time (Vulkan's queue rule).
struct ExternalDevice {
  VkInstance instance = VK_NULL_HANDLE;
  VkPhysicalDevice physical_device = VK_NULL_HANDLE;
  VkDevice device = VK_NULL_HANDLE;
  uint32_t queue_family = 0;
  uint32_t queue_index = 0;
  // The engine's loader entry; null = the vkGetInstanceProcAddr vkpaged links against.
  PFN_vkGetInstanceProcAddr get_instance_proc_addr = nullptr;
  // Whether the engine enabled the bufferDeviceAddress feature. Caches larger than
  // maxStorageBufferRange need it (decode, attention, reshape_and_cache and gather, MLA's too,
  // reach them by address; KvCache refuses such pools without it), and cache buffers created
  // with VK_BUFFER_USAGE_SHADER_DEVICE_ADDRESS_BIT.
  bool buffer_device_address = false;
  // Whether the engine enabled VK_NV_cooperative_matrix with its cooperativeMatrix feature,
  // shaderFloat16 and storageBuffer16BitAccess: the decode then may run on matrix units.
  bool cooperative_matrix = false;
  // Whether the engine enabled VkPhysicalDeviceVulkan12Features::vulkanMemoryModel and
  // vulkanMemoryModelDeviceScope. Every matrix kernel needs the first (its SPIR-V declares the
  // VulkanMemoryModel capability); without it they are refused, naming the feature, and the
  // portable kernels run. The first without the second is refused at adoption: vkpaged's
  // portable shaders use Device-scope atomics, which the memory model then forbids.
  bool vulkan_memory_model = false;
  bool vulkan_memory_model_device_scope = false;
  // Whether the engine enabled VK_KHR_cooperative_matrix with its cooperativeMatrix feature, and
  // VK_EXT_subgroup_size_control with computeFullSubgroups (KHR matrix pipelines are created
  // with VK_PIPELINE_SHADER_STAGE_CREATE_REQUIRE_FULL_SUBGROUPS_BIT), beside the memory model,
  // shaderFloat16 and storageBuffer16BitAccess: the KHR matrix kernels then may run.
  bool cooperative_matrix_khr = false;
  // As ContextOptions::fence_timeout_ms.
  uint32_t fence_timeout_ms = 60000;
};

enum class MemoryKind {
  device,       // device-local, not mapped
  host_visible  // host-visible and coherent, persistently mapped (staging, swap pools)
};

// A buffer vkpaged allocated. Movable, destroyed with its memory.
class VKPAGED_API DeviceBuffer {
 public:
  DeviceBuffer();
  DeviceBuffer(DeviceBuffer&&) noexcept;
  DeviceBuffer& operator=(DeviceBuffer&&) noexcept;
  ~DeviceBuffer();

  VkBuffer handle() const noexcept;
  size_t size() const noexcept;
  void* mapped() const noexcept;  // null unless host_visible
  BufferView view() const noexcept { return {handle(), 0, size()}; }
  // A range of the buffer, which must lie inside it (else Error(invalid_argument)); every call
  // that takes a view of a buffer vkpaged created checks the same.
  BufferView view(size_t offset, size_t bytes) const;
  // A tensor of `dtype` and `shape` at `offset`, sized to hold it; it must fit the buffer.
  TensorView tensor(DType dtype, Shape shape, size_t offset = 0) const;
  // The same with strides (TensorView::strides), sized to its extent (TensorView::bytes(): from
  // the first element to the end of the last), e.g. the keys of a fused projection
  // [T, (H + 2 Hkv) * D] of f16: strided_tensor(DType::f16, {T, Hkv, D}, {(H + 2 * Hkv) * D}, H * D * 2).
  // Refused: a negative stride, an extent past the buffer.
  TensorView strided_tensor(DType dtype, Shape shape, const Strides& strides, size_t offset = 0) const;

 private:
  friend struct detail::ContextImpl;
  friend class Context;
  explicit DeviceBuffer(std::unique_ptr<detail::BufferImpl> impl);
  std::unique_ptr<detail::BufferImpl> impl_;
};

// Threads. One Context may be used from several threads at once:
// - record_* calls and DecodePlan::create: pipelines are created under a lock and never
//   removed, so threads may record into different command buffers at the same time (each
//   command buffer, and its pool, used by one thread at a time: Vulkan's rule);
// - create_buffer, which shares nothing between calls;
// - upload, download, run_and_wait, run_and_time and the host conveniences (decode_attention,
//   merge_attention, measure_read_bandwidth): they submit to queue() under the Context's lock.
// That lock is internal: an engine that submits to queue() itself (see ExternalDevice) must not
// do so while another thread is inside one of those calls, and a run_and_wait callback must not
// call them (it runs under the lock). A DecodePlan is immutable after create and may be shared;
// a BlockManager is not thread-safe. Destroy plans and buffers before their Context, and the
// Context after every thread has stopped using it.
class VKPAGED_API Context {
 public:
  explicit Context(const ContextOptions& options = {});
  // Adopts an engine's instance, physical device, device and queue (see ExternalDevice).
  explicit Context(const ExternalDevice& external);
  ~Context();
  Context(const Context&) = delete;
  Context& operator=(const Context&) = delete;

  const DeviceInfo& device_info() const noexcept;
  VkInstance instance() const noexcept;
  VkPhysicalDevice physical_device() const noexcept;
  VkDevice device() const noexcept;
  VkQueue queue() const noexcept;
  uint32_t queue_family() const noexcept;

  // Allocates a buffer usable as storage, transfer source and destination (and through its
  // device address, where the device supports that).
  DeviceBuffer create_buffer(size_t bytes, MemoryKind kind = MemoryKind::device);
  // Copies host bytes into a device range and back, through a staging buffer; waits.
  void upload(const BufferView& dst, const void* src, size_t bytes);
  void download(const BufferView& src, void* dst, size_t bytes);
  // Records work with `record` into a fresh command buffer, submits it and waits.
  // The waits of these conveniences (this one, run_and_time, upload, download and the host-tensor
  // calls built on them) are bounded by ContextOptions::fence_timeout_ms. Past it they throw
  // Error(device_error) ("did not finish within ... ms") and the work stays in flight: the
  // Context keeps the command buffer, fence and any staging buffer or query pool of it, and
  // the next such call first waits for it (up to the timeout again, failing the same way while
  // it runs). The caller must keep every buffer that work uses alive until a later call
  // returns normally (then it has finished); destroying the Context waits for it without a
  // limit. A lost device (VK_ERROR_DEVICE_LOST) throws Error(device_error) naming it, and every
  // later such call throws at once: destroy the Context and create a new one.
  void run_and_wait(const std::function<void(VkCommandBuffer)>& record);
  // Same, with GPU timestamps before and after; returns the elapsed GPU time in nanoseconds.
  double run_and_time(const std::function<void(VkCommandBuffer)>& record);
  // Same, with `untimed_before` recorded first in the same command buffer and finished (a full
  // barrier) before the first timestamp: `record` is timed as it runs inside a command buffer
  // already under way, as an engine's later operators run, without the submission's own start.
  // On NVIDIA's driver a pipeline's first dispatch in a submission is slower (bench/RESULTS.md):
  // the same work untimed first times it warm.
  double run_and_time(const std::function<void(VkCommandBuffer)>& record,
                      const std::function<void(VkCommandBuffer)>& untimed_before);

  // Number of validation-layer messages seen since creation (0 unless validation is on).
  uint32_t validation_message_count() const noexcept;

  // Start-up (vkpaged/prepare.hpp): builds now, on several threads, every pipeline the plans and
  // cache writes of `set` use, so that no step builds one. Thread-safe, as plan creation.
  PrepareReport prepare(const PipelineSet& set);
  // The context's VkPipelineCache (vkGetPipelineCacheData): every pipeline built so far, for an
  // engine to save and give the next run's context, whose builds then come from it.
  std::vector<uint8_t> pipeline_cache_data() const;
  // Merges a saved cache into the context's. Its VkPipelineCacheHeaderVersionOne is checked
  // first: a blob of another device (vendorID, deviceID), of another driver or driver version
  // (pipelineCacheUUID), or a damaged one (sizes, version) is refused with
  // Error(invalid_argument) saying which ("pipeline_cache: vendorID 0x10de is not device ...'s
  // 0x10005 ..."), and nothing changes.
  void load_pipeline_cache(const std::vector<uint8_t>& data);

  detail::ContextImpl& impl() const noexcept { return *impl_; }

 private:
  std::unique_ptr<detail::ContextImpl> impl_;
};

// A compute-to-compute and compute-to-transfer barrier over all memory: what the convenience
// paths place between the operators they record; engines usually place narrower ones.
VKPAGED_API void record_compute_barrier(const Context& context, VkCommandBuffer cmd);

}  // namespace vkpaged
