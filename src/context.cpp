// SPDX-License-Identifier: Apache-2.0
#include <fmt/format.h>
#include <fmt/ranges.h>

#include <algorithm>
#include <cstring>

#include "environment.hpp"
#include "vk/check.hpp"
#include "vk/pipeline_statistics.hpp"
#include "vk/context_impl.hpp"
#include "vk/physical_device.hpp"
#include "vkpaged/context.hpp"
#include "vkpaged/error.hpp"

namespace vkpaged {
namespace detail {

namespace {

// A device both constructors can use (push descriptors), its memory types and queue families.
std::vector<VkQueueFamilyProperties> queue_families(const vk::Dispatch& d, VkPhysicalDevice physical_device,
                                                    const DeviceInfo& info, VkPhysicalDeviceMemoryProperties& memory) {
  if (!info.push_descriptor)
    throw Error(ErrorCode::unsupported, fmt::format("device {} lacks VK_KHR_push_descriptor, which vkpaged needs", info.name));
  d.vkGetPhysicalDeviceMemoryProperties(physical_device, &memory);
  uint32_t family_count = 0;
  d.vkGetPhysicalDeviceQueueFamilyProperties(physical_device, &family_count, nullptr);
  std::vector<VkQueueFamilyProperties> families(family_count);
  d.vkGetPhysicalDeviceQueueFamilyProperties(physical_device, &family_count, families.data());
  return families;
}

uint32_t find_memory_type(const VkPhysicalDeviceMemoryProperties& mem, uint32_t type_bits, VkMemoryPropertyFlags want,
                          VkMemoryPropertyFlags prefer) {
  int fallback = -1;
  for (uint32_t i = 0; i < mem.memoryTypeCount; ++i) {
    if (!(type_bits & (1u << i))) continue;
    const auto flags = mem.memoryTypes[i].propertyFlags;
    if ((flags & want) != want) continue;
    if ((flags & prefer) == prefer) return i;
    if (fallback < 0) fallback = int(i);
  }
  if (fallback < 0) throw Error(ErrorCode::out_of_memory, "no Vulkan memory type fits the buffer");
  return uint32_t(fallback);
}

// Why VK_KHR_cooperative_matrix cannot be enabled (or used, on an adopted device), "" when it can:
// `layers` names a validation layer that predates it; `memory_model`: the context has the Vulkan
// memory model with device scope.
std::string cooperative_matrix_khr_refusal(const DeviceInfo& info, const std::string& layers, bool memory_model,
                                           const vk::FullSubgroupSupport& full) {
  if (!layers.empty()) return layers;
  if (!info.cooperative_matrix_khr)
    return fmt::format("device {} has no VK_KHR_cooperative_matrix in compute shaders", info.name);
  std::vector<std::string> missing;
  if (!memory_model) missing.push_back("vulkanMemoryModel with vulkanMemoryModelDeviceScope");
  if (!info.shader_float16) missing.push_back("shaderFloat16");
  if (!info.storage_16bit) missing.push_back("storageBuffer16BitAccess");
  if (!full.available) missing.push_back("VK_EXT_subgroup_size_control's computeFullSubgroups");
  if (missing.empty()) return "";
  return fmt::format("device {} has VK_KHR_cooperative_matrix but lacks {}, which vkpaged's KHR matrix kernels need",
                     info.name, fmt::join(missing, ", "));
}

}  // namespace

ContextImpl::ContextImpl(const ContextOptions& options) {
  fence_timeout_ms = options.fence_timeout_ms;
  read_environment = options.read_environment;
  const EnvironmentSettings env = read_environment ? read_environment_settings() : EnvironmentSettings{};
  instance = std::make_unique<vk::Instance>(options.validation || env.validation, env.sync_validation);
  d = instance->dispatch();
  auto physical = vk::enumerate_physical_devices(d, instance->get());
  const bool khr_structures = vk::layers_accept_cooperative_matrix_khr(*instance);
  std::vector<DeviceInfo> infos;
  for (uint32_t i = 0; i < physical.size(); ++i) infos.push_back(vk::query_device_info(d, physical[i], i, khr_structures));
  const bool device_from_environment = options.device.empty() && !env.device.empty();
  const uint32_t chosen = vk::resolve_device_choice(device_from_environment ? env.device : options.device, infos,
                                                    device_from_environment ? kDeviceVariable : "device");
  physical_device = physical[chosen];
  info = infos[chosen];
  if (options.disable_subgroup_arithmetic) info.subgroup_arithmetic = info.subgroup_shuffle = false;
  if (info.api_version < VK_API_VERSION_1_2)
    throw Error(ErrorCode::unsupported, fmt::format("device {} supports only Vulkan {}.{}; vkpaged needs 1.2", info.name,
                                                    VK_API_VERSION_MAJOR(info.api_version), VK_API_VERSION_MINOR(info.api_version)));
  const std::vector<VkQueueFamilyProperties> families = queue_families(d, physical_device, info, memory_properties);
  const uint32_t family_count = uint32_t(families.size());
  // Prefer a queue family with compute and timestamps (the universal queue on most GPUs).
  int family = -1;
  for (uint32_t i = 0; i < family_count && family < 0; ++i)
    if ((families[i].queueFlags & VK_QUEUE_COMPUTE_BIT) && families[i].timestampValidBits > 0) family = int(i);
  for (uint32_t i = 0; i < family_count && family < 0; ++i)
    if (families[i].queueFlags & VK_QUEUE_COMPUTE_BIT) family = int(i);
  if (family < 0) throw Error(ErrorCode::unsupported, fmt::format("device {} has no compute queue", info.name));
  queue_family = uint32_t(family);
  info.timestamp_valid_bits = families[queue_family].timestampValidBits;
  info.timestamps = info.timestamps || info.timestamp_valid_bits > 0;

  const float priority = 1.0f;
  VkDeviceQueueCreateInfo qinfo{VK_STRUCTURE_TYPE_DEVICE_QUEUE_CREATE_INFO};
  qinfo.queueFamilyIndex = queue_family;
  qinfo.queueCount = 1;
  qinfo.pQueuePriorities = &priority;

  // Only what the shaders may use; every shader works on 32-bit words, so none is required.
  VkPhysicalDeviceVulkan12Features f12{VK_STRUCTURE_TYPE_PHYSICAL_DEVICE_VULKAN_1_2_FEATURES};
  f12.shaderFloat16 = info.shader_float16;
  f12.storageBuffer8BitAccess = info.storage_8bit;
  f12.bufferDeviceAddress = info.buffer_device_address;
  buffer_device_address = info.buffer_device_address;
  VkPhysicalDeviceVulkan11Features f11{VK_STRUCTURE_TYPE_PHYSICAL_DEVICE_VULKAN_1_1_FEATURES};
  f11.storageBuffer16BitAccess = info.storage_16bit;
  f11.pNext = &f12;
  VkPhysicalDeviceFeatures2 features{VK_STRUCTURE_TYPE_PHYSICAL_DEVICE_FEATURES_2};
  features.features.shaderInt64 = info.shader_int64;
  features.pNext = &f11;

  std::vector<const char*> extensions{VK_KHR_PUSH_DESCRIPTOR_EXTENSION_NAME};
  // The Vulkan memory model, which every matrix kernel's SPIR-V declares, with device scope,
  // which the other shaders' Device-scope atomics need once the model is on (both or neither).
  if (info.vulkan_memory_model && info.vulkan_memory_model_device_scope) {
    f12.vulkanMemoryModel = f12.vulkanMemoryModelDeviceScope = VK_TRUE;
    vulkan_memory_model = vulkan_memory_model_device_scope = true;
  } else {
    memory_model_absent =
        info.vulkan_memory_model
            ? fmt::format("device {} has vulkanMemoryModel without vulkanMemoryModelDeviceScope, which vkpaged's "
                          "Device-scope atomics would then need: vulkanMemoryModel is not enabled",
                          info.name)
            : fmt::format("device {} lacks vulkanMemoryModel", info.name);
  }
  // Turns an extension on: its name, and its feature struct (the features it needs already set)
  // at the front of the features' pNext chain (the order does not matter).
  auto enable = [&](auto& feature, const char* extension) {
    feature.pNext = features.pNext;
    features.pNext = &feature;
    extensions.push_back(extension);
  };
  // Matrix units for the decode where the device has them (shaders/common/decode_coopmat_kernel.glsl).
  VkPhysicalDeviceCooperativeMatrixFeaturesNV coopmat{VK_STRUCTURE_TYPE_PHYSICAL_DEVICE_COOPERATIVE_MATRIX_FEATURES_NV};
  cooperative_matrix = info.cooperative_matrix;
  shader_float16 = info.shader_float16;
  if (cooperative_matrix) {
    coopmat.cooperativeMatrix = VK_TRUE;
    enable(coopmat, VK_NV_COOPERATIVE_MATRIX_EXTENSION_NAME);
  }
  // The cross-vendor matrix units, and full subgroups for their pipelines (a KHR cooperative
  // matrix module below SPIR-V 1.6 needs VK_PIPELINE_SHADER_STAGE_CREATE_REQUIRE_FULL_SUBGROUPS_BIT).
  VkPhysicalDeviceCooperativeMatrixFeaturesKHR coopmat_khr{VK_STRUCTURE_TYPE_PHYSICAL_DEVICE_COOPERATIVE_MATRIX_FEATURES_KHR};
  VkPhysicalDeviceSubgroupSizeControlFeaturesEXT full_subgroups{
      VK_STRUCTURE_TYPE_PHYSICAL_DEVICE_SUBGROUP_SIZE_CONTROL_FEATURES_EXT};
  const vk::FullSubgroupSupport full = vk::query_full_subgroups(d, physical_device);
  cooperative_matrix_khr_absent = cooperative_matrix_khr_refusal(
      info, khr_structures ? "" : vk::layers_refusing_cooperative_matrix_khr(*instance, d, physical_device),
      vulkan_memory_model_device_scope, full);
  cooperative_matrix_khr = cooperative_matrix_khr_absent.empty();
  if (cooperative_matrix_khr) {
    coopmat_khr.cooperativeMatrix = VK_TRUE;
    full_subgroups.computeFullSubgroups = VK_TRUE;
    enable(coopmat_khr, VK_KHR_COOPERATIVE_MATRIX_EXTENSION_NAME);
    enable(full_subgroups, VK_EXT_SUBGROUP_SIZE_CONTROL_EXTENSION_NAME);
    max_subgroup_size = full.max_subgroup_size;
  }
  // The decode's timeline, for kernel work (DecodeOptions::timeline): a device clock and SM ids.
  VkPhysicalDeviceShaderClockFeaturesKHR clock{VK_STRUCTURE_TYPE_PHYSICAL_DEVICE_SHADER_CLOCK_FEATURES_KHR};
  VkPhysicalDeviceShaderSMBuiltinsFeaturesNV sm_builtins{VK_STRUCTURE_TYPE_PHYSICAL_DEVICE_SHADER_SM_BUILTINS_FEATURES_NV};
  decode_timeline = info.decode_timeline;
  if (decode_timeline) {
    clock.shaderDeviceClock = VK_TRUE;
    sm_builtins.shaderSMBuiltins = VK_TRUE;
    enable(clock, VK_KHR_SHADER_CLOCK_EXTENSION_NAME);
    enable(sm_builtins, VK_NV_SHADER_SM_BUILTINS_EXTENSION_NAME);
  }
  VkPhysicalDevicePipelineExecutablePropertiesFeaturesKHR executable_info{
      VK_STRUCTURE_TYPE_PHYSICAL_DEVICE_PIPELINE_EXECUTABLE_PROPERTIES_FEATURES_KHR};
  pipeline_statistics = env.pipeline_statistics && vk::has_device_extension(d, physical_device,
                                                                                    VK_KHR_PIPELINE_EXECUTABLE_PROPERTIES_EXTENSION_NAME);
  if (pipeline_statistics) {
    executable_info.pipelineExecutableInfo = VK_TRUE;
    enable(executable_info, VK_KHR_PIPELINE_EXECUTABLE_PROPERTIES_EXTENSION_NAME);
  }
  VkDeviceCreateInfo dinfo{VK_STRUCTURE_TYPE_DEVICE_CREATE_INFO};
  dinfo.pNext = &features;
  dinfo.queueCreateInfoCount = 1;
  dinfo.pQueueCreateInfos = &qinfo;
  dinfo.enabledExtensionCount = uint32_t(extensions.size());
  dinfo.ppEnabledExtensionNames = extensions.data();
  vk::check(d.vkCreateDevice(physical_device, &dinfo, nullptr, &device), "vkCreateDevice");
  finish_setup(0);
}

ContextImpl::ContextImpl(const ExternalDevice& external) {
  auto need = [](bool ok, const char* what) {
    if (!ok) throw Error(ErrorCode::invalid_argument, fmt::format("external device: {} is null", what));
  };
  need(external.instance != VK_NULL_HANDLE, "instance");
  need(external.physical_device != VK_NULL_HANDLE, "physical_device");
  need(external.device != VK_NULL_HANDLE, "device");
  fence_timeout_ms = external.fence_timeout_ms;
  instance = std::make_unique<vk::Instance>(external.instance, external.get_instance_proc_addr);
  d = instance->dispatch();
  physical_device = external.physical_device;
  device = external.device;
  owns_device = false;
  // The KHR structures only where the engine enabled the extension: its validation layer, if
  // any, then knows them.
  info = vk::query_device_info(d, physical_device, 0, external.cooperative_matrix_khr);
  buffer_device_address = external.buffer_device_address && info.buffer_device_address;
  cooperative_matrix = external.cooperative_matrix && info.cooperative_matrix;
  shader_float16 = cooperative_matrix;
  if (external.vulkan_memory_model && !external.vulkan_memory_model_device_scope && info.vulkan_memory_model)
    throw Error(ErrorCode::invalid_argument,
                "external device: vulkan_memory_model without vulkan_memory_model_device_scope: vkpaged's shaders use "
                "Device-scope atomics, which the Vulkan memory model then forbids (enable both features, or neither)");
  vulkan_memory_model = external.vulkan_memory_model && info.vulkan_memory_model;
  vulkan_memory_model_device_scope = vulkan_memory_model && external.vulkan_memory_model_device_scope &&
                                     info.vulkan_memory_model_device_scope;
  if (!vulkan_memory_model)
    memory_model_absent = info.vulkan_memory_model
                              ? fmt::format("device {}: the engine did not enable vulkanMemoryModel "
                                            "(ExternalDevice::vulkan_memory_model)",
                                            info.name)
                              : fmt::format("device {} lacks vulkanMemoryModel", info.name);
  const vk::FullSubgroupSupport full = vk::query_full_subgroups(d, physical_device);
  cooperative_matrix_khr_absent =
      !external.cooperative_matrix_khr
          ? fmt::format("device {}: the engine did not enable VK_KHR_cooperative_matrix "
                        "(ExternalDevice::cooperative_matrix_khr)",
                        info.name)
          : cooperative_matrix_khr_refusal(info, "", vulkan_memory_model_device_scope, full);
  cooperative_matrix_khr = cooperative_matrix_khr_absent.empty();
  if (cooperative_matrix_khr) max_subgroup_size = full.max_subgroup_size;
  const std::vector<VkQueueFamilyProperties> families = queue_families(d, physical_device, info, memory_properties);
  const uint32_t family_count = uint32_t(families.size());
  if (external.queue_family >= family_count || !(families[external.queue_family].queueFlags & VK_QUEUE_COMPUTE_BIT))
    throw Error(ErrorCode::invalid_argument,
                fmt::format("external device: queue_family {} is not a compute queue family of {} ({} families)",
                            external.queue_family, info.name, family_count));
  queue_family = external.queue_family;
  info.timestamp_valid_bits = families[queue_family].timestampValidBits;
  info.timestamps = info.timestamps && info.timestamp_valid_bits > 0;
  finish_setup(external.queue_index);
}

void ContextImpl::finish_setup(uint32_t queue_index) {
  d.load_device(device);
  d.vkGetDeviceQueue(device, queue_family, queue_index, &queue);

  VkPipelineCacheCreateInfo cinfo{VK_STRUCTURE_TYPE_PIPELINE_CACHE_CREATE_INFO};
  VkPipelineCache cache = VK_NULL_HANDLE;
  vk::check(d.vkCreatePipelineCache(device, &cinfo, nullptr, &cache), "vkCreatePipelineCache");
  pipeline_cache = vk::UniquePipelineCache(&d, device, cache);

  VkCommandPoolCreateInfo pinfo{VK_STRUCTURE_TYPE_COMMAND_POOL_CREATE_INFO};
  pinfo.flags = VK_COMMAND_POOL_CREATE_TRANSIENT_BIT;
  pinfo.queueFamilyIndex = queue_family;
  VkCommandPool pool = VK_NULL_HANDLE;
  vk::check(d.vkCreateCommandPool(device, &pinfo, nullptr, &pool), "vkCreateCommandPool");
  command_pool = vk::UniqueCommandPool(&d, device, pool);

  dummy = create_buffer(256, MemoryKind::device);
  capabilities = device_capabilities(*this);
}

ContextImpl::~ContextImpl() {
  // An adopted device may be busy with the engine's own work: wait for vkpaged's queue only.
  // A submission that timed out is waited for here too, without a limit: destroying what the
  // device may still use is never safe.
  if (device != VK_NULL_HANDLE && queue != VK_NULL_HANDLE) d.vkQueueWaitIdle(queue);
  has_pending = false;
  if (pending) d.vkFreeCommandBuffers(device, command_pool.get(), 1, &pending->cmd);
  pending.reset();
  retired.clear();
  dummy.reset();
  pipelines.clear();
  command_pool.reset();
  pipeline_cache.reset();
  if (owns_device && device != VK_NULL_HANDLE) d.vkDestroyDevice(device, nullptr);
}

std::unique_ptr<BufferImpl> ContextImpl::create_buffer(size_t bytes, MemoryKind kind) {
  if (bytes == 0) bytes = 4;  // Vulkan refuses empty buffers; a zero-sized tensor still gets a handle
  auto b = std::make_unique<BufferImpl>();
  b->owner = this;
  VkBufferCreateInfo binfo{VK_STRUCTURE_TYPE_BUFFER_CREATE_INFO};
  binfo.size = bytes;
  binfo.usage = VK_BUFFER_USAGE_STORAGE_BUFFER_BIT | VK_BUFFER_USAGE_TRANSFER_SRC_BIT | VK_BUFFER_USAGE_TRANSFER_DST_BIT;
  if (buffer_device_address) binfo.usage |= VK_BUFFER_USAGE_SHADER_DEVICE_ADDRESS_BIT;
  binfo.sharingMode = VK_SHARING_MODE_EXCLUSIVE;
  VkBuffer buffer = VK_NULL_HANDLE;
  if (const VkResult r = d.vkCreateBuffer(device, &binfo, nullptr, &buffer); r != VK_SUCCESS)
    vk::throw_vk_error(r, fmt::format("creating a buffer of {} bytes", bytes).c_str());
  b->buffer = vk::UniqueBuffer(&d, device, buffer);
  VkMemoryRequirements req{};
  d.vkGetBufferMemoryRequirements(device, buffer, &req);
  VkMemoryAllocateFlagsInfo flags{VK_STRUCTURE_TYPE_MEMORY_ALLOCATE_FLAGS_INFO};
  flags.flags = VK_MEMORY_ALLOCATE_DEVICE_ADDRESS_BIT;
  VkMemoryAllocateInfo ainfo{VK_STRUCTURE_TYPE_MEMORY_ALLOCATE_INFO};
  if (buffer_device_address) ainfo.pNext = &flags;
  ainfo.allocationSize = req.size;
  ainfo.memoryTypeIndex =
      kind == MemoryKind::device
          ? find_memory_type(memory_properties, req.memoryTypeBits, VK_MEMORY_PROPERTY_DEVICE_LOCAL_BIT, 0)
          : find_memory_type(memory_properties, req.memoryTypeBits,
                             VK_MEMORY_PROPERTY_HOST_VISIBLE_BIT | VK_MEMORY_PROPERTY_HOST_COHERENT_BIT,
                             VK_MEMORY_PROPERTY_HOST_CACHED_BIT);
  // One allocation past maxMemoryAllocationSize may fail or succeed by driver (NVIDIA's succeed,
  // and the validation layer flags them): refuse it on every device alike.
  if (info.max_memory_allocation_size > 0 && req.size > info.max_memory_allocation_size)
    throw Error(ErrorCode::out_of_memory,
                fmt::format("allocating {} bytes of {} memory: more than the device's maxMemoryAllocationSize of {} "
                            "bytes, the most one allocation is promised",
                            bytes, kind == MemoryKind::device ? "device" : "host-visible",
                            info.max_memory_allocation_size));
  // Drivers may overcommit (lavapipe) and the validation layer flags an allocation past its
  // heap: refuse it here, naming the size.
  const VkDeviceSize heap = memory_properties.memoryHeaps[memory_properties.memoryTypes[ainfo.memoryTypeIndex].heapIndex].size;
  if (req.size > heap)
    throw Error(ErrorCode::out_of_memory, fmt::format("allocating {} bytes of {} memory: more than the {} bytes of its heap",
                                                      bytes, kind == MemoryKind::device ? "device" : "host-visible", heap));
  VkDeviceMemory memory = VK_NULL_HANDLE;
  VkResult r = d.vkAllocateMemory(device, &ainfo, nullptr, &memory);
  if (r != VK_SUCCESS)
    throw Error(ErrorCode::out_of_memory,
                fmt::format("allocating {} bytes of {} memory failed: {}", bytes,
                            kind == MemoryKind::device ? "device" : "host-visible", vk::result_name(r)));
  b->memory = vk::UniqueMemory(&d, device, memory);
  vk::check(d.vkBindBufferMemory(device, buffer, memory, 0), "vkBindBufferMemory");
  if (kind == MemoryKind::host_visible) vk::check(d.vkMapMemory(device, memory, 0, VK_WHOLE_SIZE, 0, &b->mapped), "vkMapMemory");
  b->size = bytes;
  b->registration = vk::BufferRegistration(device, buffer, bytes);
  return b;
}

BoundView ContextImpl::bind_view(const BufferView& view) const {
  BoundView b;
  if (view.empty()) {
    b.info = {dummy->buffer.get(), 0, dummy->size};
    return b;
  }
  const VkDeviceSize align = std::max<VkDeviceSize>(info.min_storage_buffer_offset_alignment, 4);
  const VkDeviceSize base = view.offset / align * align;
  b.info = {view.buffer, base, view.offset - base + std::max<VkDeviceSize>(view.size, 4)};
  b.word_offset = uint32_t((view.offset - base) / 4);
  return b;
}

void ContextImpl::dispatch(VkCommandBuffer cmd, const ComputePipeline& p, std::span<const BoundView> views,
                           const void* push, uint32_t gx, uint32_t gy, uint32_t gz) const {
  std::vector<VkWriteDescriptorSet> writes(views.size());
  for (uint32_t i = 0; i < views.size(); ++i) {
    writes[i] = {VK_STRUCTURE_TYPE_WRITE_DESCRIPTOR_SET};
    writes[i].dstBinding = i;
    writes[i].descriptorCount = 1;
    writes[i].descriptorType = VK_DESCRIPTOR_TYPE_STORAGE_BUFFER;
    writes[i].pBufferInfo = &views[i].info;
  }
  d.vkCmdBindPipeline(cmd, VK_PIPELINE_BIND_POINT_COMPUTE, p.pipeline.get());
  d.vkCmdPushDescriptorSetKHR(cmd, VK_PIPELINE_BIND_POINT_COMPUTE, p.layout.get(), 0, uint32_t(writes.size()),
                              writes.data());
  if (p.push_bytes) d.vkCmdPushConstants(cmd, p.layout.get(), VK_SHADER_STAGE_COMPUTE_BIT, 0, p.push_bytes, push);
  d.vkCmdDispatch(cmd, gx, gy, gz);
}

BufferImpl::~BufferImpl() {
  if (owner != nullptr && owner->has_pending.load()) owner->retire(*this);
}

void ContextImpl::retire(BufferImpl& b) {
  std::lock_guard lock(retired_mutex);
  if (has_pending.load()) retired.emplace_back(std::move(b.buffer), std::move(b.memory));
}

vk::FenceWait ContextImpl::wait_for(VkFence fence, const char* what) {
  const VkResult r = d.vkWaitForFences(device, 1, &fence, VK_TRUE, vk::fence_timeout_ns(fence_timeout_ms));
  if (r == VK_ERROR_DEVICE_LOST) device_lost = true;
  return vk::fence_wait_outcome(r, what);
}

void ContextImpl::finish_pending() {
  if (!pending) return;
  if (wait_for(pending->fence.get(), "waiting for the work of an earlier call that timed out") ==
      vk::FenceWait::timed_out)
    throw Error(ErrorCode::device_error,
                fmt::format("the work of an earlier call that timed out is still running after another {} ms "
                            "(ContextOptions::fence_timeout_ms); the device may be hung: keep that work's buffers "
                            "alive and try again, or destroy the Context (its destructor waits for the work)",
                            fence_timeout_ms));
  has_pending = false;  // before the staging buffer and the retired ones are freed
  d.vkFreeCommandBuffers(device, command_pool.get(), 1, &pending->cmd);
  pending.reset();
  std::lock_guard retired_lock(retired_mutex);
  retired.clear();
}

void ContextImpl::submit_and_wait(const std::function<void(VkCommandBuffer)>& record, VkQueryPool timestamps,
                                  const std::function<void(VkCommandBuffer)>* untimed_before, SubmissionResources* keep) {
  std::lock_guard lock(submit_mutex);
  if (device_lost)
    throw Error(ErrorCode::device_error,
                "the device was lost earlier (VK_ERROR_DEVICE_LOST): this Context runs nothing more; destroy it and "
                "create a new one");
  finish_pending();
  VkCommandBufferAllocateInfo ainfo{VK_STRUCTURE_TYPE_COMMAND_BUFFER_ALLOCATE_INFO};
  ainfo.commandPool = command_pool.get();
  ainfo.level = VK_COMMAND_BUFFER_LEVEL_PRIMARY;
  ainfo.commandBufferCount = 1;
  VkCommandBuffer cmd = VK_NULL_HANDLE;
  vk::check(d.vkAllocateCommandBuffers(device, &ainfo, &cmd), "vkAllocateCommandBuffers");
  struct FreeCmd {
    ContextImpl* self;
    VkCommandBuffer cmd;  // VK_NULL_HANDLE once `pending` owns it
    ~FreeCmd() {
      if (cmd != VK_NULL_HANDLE) self->d.vkFreeCommandBuffers(self->device, self->command_pool.get(), 1, &cmd);
    }
  } free_cmd{this, cmd};

  VkCommandBufferBeginInfo binfo{VK_STRUCTURE_TYPE_COMMAND_BUFFER_BEGIN_INFO};
  binfo.flags = VK_COMMAND_BUFFER_USAGE_ONE_TIME_SUBMIT_BIT;
  vk::check(d.vkBeginCommandBuffer(cmd, &binfo), "vkBeginCommandBuffer");
  if (timestamps) d.vkCmdResetQueryPool(cmd, timestamps, 0, 2);
  if (untimed_before) {
    // The untimed work finishes before the timed work starts (a full barrier), and the first
    // timestamp is written once it has (bottom of pipe): what is timed is `record` alone, as
    // it runs in a command buffer already under way, without the submission's own start.
    (*untimed_before)(cmd);
    VkMemoryBarrier barrier{VK_STRUCTURE_TYPE_MEMORY_BARRIER};
    barrier.srcAccessMask = VK_ACCESS_MEMORY_WRITE_BIT;
    barrier.dstAccessMask = VK_ACCESS_MEMORY_READ_BIT | VK_ACCESS_MEMORY_WRITE_BIT;
    d.vkCmdPipelineBarrier(cmd, VK_PIPELINE_STAGE_ALL_COMMANDS_BIT, VK_PIPELINE_STAGE_ALL_COMMANDS_BIT, 0, 1, &barrier,
                           0, nullptr, 0, nullptr);
    if (timestamps) d.vkCmdWriteTimestamp(cmd, VK_PIPELINE_STAGE_BOTTOM_OF_PIPE_BIT, timestamps, 0);
  } else if (timestamps) {
    d.vkCmdWriteTimestamp(cmd, VK_PIPELINE_STAGE_TOP_OF_PIPE_BIT, timestamps, 0);
  }
  record(cmd);
  if (timestamps) d.vkCmdWriteTimestamp(cmd, VK_PIPELINE_STAGE_BOTTOM_OF_PIPE_BIT, timestamps, 1);
  vk::check(d.vkEndCommandBuffer(cmd), "vkEndCommandBuffer");

  VkFenceCreateInfo finfo{VK_STRUCTURE_TYPE_FENCE_CREATE_INFO};
  VkFence fence = VK_NULL_HANDLE;
  vk::check(d.vkCreateFence(device, &finfo, nullptr, &fence), "vkCreateFence");
  vk::UniqueFence fence_owner(&d, device, fence);
  VkSubmitInfo sinfo{VK_STRUCTURE_TYPE_SUBMIT_INFO};
  sinfo.commandBufferCount = 1;
  sinfo.pCommandBuffers = &cmd;
  vk::check(d.vkQueueSubmit(queue, 1, &sinfo, fence), "vkQueueSubmit");
  if (wait_for(fence, "vkWaitForFences") == vk::FenceWait::signaled) return;
  // Timed out: the work may still run, so what it uses stays alive with the Context.
  pending = PendingSubmission{cmd, std::move(fence_owner), keep ? std::move(*keep) : SubmissionResources{}};
  has_pending = true;
  free_cmd.cmd = VK_NULL_HANDLE;
  throw Error(ErrorCode::device_error,
              fmt::format("the device did not finish the work within {} ms (ContextOptions::fence_timeout_ms) and may "
                          "be hung; the work is still in flight: keep the buffers it uses alive until a later call "
                          "on this Context returns normally (that call waits for it first)",
                          fence_timeout_ms));
}

}  // namespace detail

// ---- DeviceBuffer ----

DeviceBuffer::DeviceBuffer() = default;
DeviceBuffer::DeviceBuffer(std::unique_ptr<detail::BufferImpl> impl) : impl_(std::move(impl)) {}
DeviceBuffer::DeviceBuffer(DeviceBuffer&&) noexcept = default;
DeviceBuffer& DeviceBuffer::operator=(DeviceBuffer&&) noexcept = default;
DeviceBuffer::~DeviceBuffer() = default;
VkBuffer DeviceBuffer::handle() const noexcept { return impl_ ? impl_->buffer.get() : VK_NULL_HANDLE; }
size_t DeviceBuffer::size() const noexcept { return impl_ ? impl_->size : 0; }
void* DeviceBuffer::mapped() const noexcept { return impl_ ? impl_->mapped : nullptr; }
BufferView DeviceBuffer::view(size_t offset, size_t bytes) const {
  if (offset > size() || bytes > size() - offset)
    throw Error(ErrorCode::invalid_argument,
                fmt::format("view: {} bytes at offset {} lie outside the buffer's {} bytes", bytes, offset, size()));
  return {handle(), offset, bytes};
}
TensorView DeviceBuffer::strided_tensor(DType dtype, Shape shape, const Strides& strides, size_t offset) const {
  TensorView t;
  t.dtype = dtype;
  t.shape = shape;
  t.strides = strides;
  for (int i = 0; i < shape.rank(); ++i)
    if (strides[size_t(i)] < 0)
      throw Error(ErrorCode::invalid_argument,
                  fmt::format("strided_tensor: strides[{}] is negative ({})", i, strides[size_t(i)]));
  const size_t bytes = t.bytes();
  if (bytes == SIZE_MAX)
    throw Error(ErrorCode::invalid_argument,
                fmt::format("strided_tensor: shape {} of {} with strides [{}] spans too many bytes", shape.str(), dtype_name(dtype),
                            fmt::join(strides.begin(), strides.begin() + shape.rank(), ", ")));
  if (offset > size() || bytes > size() - offset)
    throw Error(ErrorCode::invalid_argument,
                fmt::format("strided_tensor: {} {} with strides [{}] ({} bytes from its first element to its last) at offset {} "
                            "lies outside the buffer's {} bytes",
                            dtype_name(dtype), shape.str(), fmt::join(strides.begin(), strides.begin() + shape.rank(), ", "),
                            bytes, offset, size()));
  t.memory = {handle(), offset, bytes};
  return t;
}

TensorView DeviceBuffer::tensor(DType dtype, Shape shape, size_t offset) const {
  size_t bytes = dtype_size(dtype);
  for (int i = 0; i < shape.rank(); ++i)
    if (__builtin_mul_overflow(bytes, size_t(shape[i]), &bytes))
      throw Error(ErrorCode::invalid_argument, fmt::format("tensor: shape {} of {} is too large", shape.str(), dtype_name(dtype)));
  if (offset > size() || bytes > size() - offset)
    throw Error(ErrorCode::invalid_argument,
                fmt::format("tensor: {} {} ({} bytes) at offset {} lies outside the buffer's {} bytes", dtype_name(dtype),
                            shape.str(), bytes, offset, size()));
  TensorView t;
  t.dtype = dtype;
  t.shape = shape;
  t.memory = {handle(), offset, bytes};
  return t;
}

// ---- Context ----

Context::Context(const ContextOptions& options) : impl_(std::make_unique<detail::ContextImpl>(options)) {}
Context::Context(const ExternalDevice& external) : impl_(std::make_unique<detail::ContextImpl>(external)) {}
Context::~Context() = default;
const DeviceInfo& Context::device_info() const noexcept { return impl_->info; }
VkInstance Context::instance() const noexcept { return impl_->instance->get(); }
VkPhysicalDevice Context::physical_device() const noexcept { return impl_->physical_device; }
VkDevice Context::device() const noexcept { return impl_->device; }
VkQueue Context::queue() const noexcept { return impl_->queue; }
uint32_t Context::queue_family() const noexcept { return impl_->queue_family; }
uint32_t Context::validation_message_count() const noexcept { return impl_->instance->validation_message_count(); }

DeviceBuffer Context::create_buffer(size_t bytes, MemoryKind kind) {
  return DeviceBuffer(impl_->create_buffer(bytes, kind));
}

namespace {

// The device side of an upload or download (`operation`), checked against `bytes`, and the
// host-visible staging buffer the bytes go through, in resources kept past a timeout.
// `too_large`: how the message says that `bytes` overflow the view.
detail::ContextImpl::SubmissionResources staging_for(detail::ContextImpl& impl, const char* operation, const char* arg,
                                                     const BufferView& view, size_t bytes, const char* too_large) {
  if (view.buffer == VK_NULL_HANDLE)
    throw Error(ErrorCode::invalid_argument, fmt::format("{}: {}: no buffer given", operation, arg));
  vk::check_inside_buffer(impl.device, fmt::format("{}: {}", operation, arg), view);
  if (bytes > view.size)
    throw Error(ErrorCode::invalid_argument,
                fmt::format("{}: {} bytes {} a view of {} bytes", operation, bytes, too_large, view.size));
  detail::ContextImpl::SubmissionResources keep;
  keep.staging = impl.create_buffer(bytes, MemoryKind::host_visible);
  return keep;
}

}  // namespace

void Context::upload(const BufferView& dst, const void* src, size_t bytes) {
  if (bytes == 0) return;
  detail::ContextImpl::SubmissionResources keep = staging_for(*impl_, "upload", "dst", dst, bytes, "do not fit");
  const VkBuffer staging = keep.staging->buffer.get();
  std::memcpy(keep.staging->mapped, src, bytes);
  impl_->submit_and_wait(
      [&](VkCommandBuffer cmd) {
        VkBufferCopy region{0, dst.offset, bytes};
        impl_->d.vkCmdCopyBuffer(cmd, staging, dst.buffer, 1, &region);
      },
      VK_NULL_HANDLE, nullptr, &keep);
}

void Context::download(const BufferView& src, void* dst, size_t bytes) {
  if (bytes == 0) return;
  detail::ContextImpl::SubmissionResources keep = staging_for(*impl_, "download", "src", src, bytes, "exceed");
  const VkBuffer staging = keep.staging->buffer.get();
  impl_->submit_and_wait(
      [&](VkCommandBuffer cmd) {
        VkBufferCopy region{src.offset, 0, bytes};
        impl_->d.vkCmdCopyBuffer(cmd, src.buffer, staging, 1, &region);
        VkMemoryBarrier barrier{VK_STRUCTURE_TYPE_MEMORY_BARRIER};
        barrier.srcAccessMask = VK_ACCESS_TRANSFER_WRITE_BIT;
        barrier.dstAccessMask = VK_ACCESS_HOST_READ_BIT;
        impl_->d.vkCmdPipelineBarrier(cmd, VK_PIPELINE_STAGE_TRANSFER_BIT, VK_PIPELINE_STAGE_HOST_BIT, 0, 1, &barrier, 0,
                                      nullptr, 0, nullptr);
      },
      VK_NULL_HANDLE, nullptr, &keep);
  std::memcpy(dst, keep.staging->mapped, bytes);
}

void Context::run_and_wait(const std::function<void(VkCommandBuffer)>& record) { impl_->submit_and_wait(record); }

double Context::run_and_time(const std::function<void(VkCommandBuffer)>& record) { return run_and_time(record, {}); }

double Context::run_and_time(const std::function<void(VkCommandBuffer)>& record,
                             const std::function<void(VkCommandBuffer)>& untimed_before) {
  if (!impl_->info.timestamps)
    throw Error(ErrorCode::unsupported, fmt::format("device {} has no compute timestamps", impl_->info.name));
  VkQueryPoolCreateInfo qinfo{VK_STRUCTURE_TYPE_QUERY_POOL_CREATE_INFO};
  qinfo.queryType = VK_QUERY_TYPE_TIMESTAMP;
  qinfo.queryCount = 2;
  VkQueryPool pool = VK_NULL_HANDLE;
  vk::check(impl_->d.vkCreateQueryPool(impl_->device, &qinfo, nullptr, &pool), "vkCreateQueryPool");
  detail::ContextImpl::SubmissionResources keep;  // the query pool, kept past a timeout
  keep.timestamps = vk::UniqueQueryPool(&impl_->d, impl_->device, pool);
  impl_->submit_and_wait(record, pool, untimed_before ? &untimed_before : nullptr, &keep);
  uint64_t ticks[2] = {0, 0};
  vk::check(impl_->d.vkGetQueryPoolResults(impl_->device, pool, 0, 2, sizeof(ticks), ticks, sizeof(uint64_t),
                                           VK_QUERY_RESULT_64_BIT | VK_QUERY_RESULT_WAIT_BIT),
            "vkGetQueryPoolResults");
  const uint32_t bits = impl_->info.timestamp_valid_bits;
  const uint64_t mask = bits >= 64 ? ~uint64_t(0) : ((uint64_t(1) << bits) - 1);
  const uint64_t delta = ((ticks[1] & mask) - (ticks[0] & mask)) & mask;
  return double(delta) * impl_->info.timestamp_period_ns;
}

DeviceList list_devices() {
  vk::Instance instance(false, false);
  const auto& d = instance.dispatch();
  auto physical = vk::enumerate_physical_devices(d, instance.get());
  DeviceList list;
  const bool khr_structures = vk::layers_accept_cooperative_matrix_khr(instance);
  for (uint32_t i = 0; i < physical.size(); ++i)
    list.devices.push_back(vk::query_device_info(d, physical[i], i, khr_structures));
  if (!list.devices.empty()) list.default_index = vk::default_device_index(list.devices);
  return list;
}

void record_compute_barrier(const Context& context, VkCommandBuffer cmd) {
  VkMemoryBarrier barrier{VK_STRUCTURE_TYPE_MEMORY_BARRIER};
  barrier.srcAccessMask = VK_ACCESS_SHADER_WRITE_BIT | VK_ACCESS_TRANSFER_WRITE_BIT;
  barrier.dstAccessMask = VK_ACCESS_SHADER_READ_BIT | VK_ACCESS_SHADER_WRITE_BIT | VK_ACCESS_TRANSFER_READ_BIT |
                          VK_ACCESS_TRANSFER_WRITE_BIT;
  context.impl().d.vkCmdPipelineBarrier(cmd, VK_PIPELINE_STAGE_COMPUTE_SHADER_BIT | VK_PIPELINE_STAGE_TRANSFER_BIT,
                                        VK_PIPELINE_STAGE_COMPUTE_SHADER_BIT | VK_PIPELINE_STAGE_TRANSFER_BIT, 0, 1,
                                        &barrier, 0, nullptr, 0, nullptr);
}

}  // namespace vkpaged
