// SPDX-License-Identifier: Apache-2.0
#include "vk/physical_device.hpp"

#include <fmt/format.h>

#include <algorithm>
#include <cctype>
#include <cstdlib>
#include <cstring>
#include <iterator>
#include <thread>

#include "vk/check.hpp"
#include "vk/memory_budget.hpp"
#include "vkpaged/error.hpp"

namespace vkpaged::vk {

std::vector<VkPhysicalDevice> enumerate_physical_devices(const Dispatch& d, VkInstance instance) {
  uint32_t count = 0;
  check(d.vkEnumeratePhysicalDevices(instance, &count, nullptr), "vkEnumeratePhysicalDevices");
  std::vector<VkPhysicalDevice> devices(count);
  check(d.vkEnumeratePhysicalDevices(instance, &count, devices.data()), "vkEnumeratePhysicalDevices");
  devices.resize(count);
  return devices;
}

namespace {

const char* type_name(VkPhysicalDeviceType t) {
  switch (t) {
    case VK_PHYSICAL_DEVICE_TYPE_DISCRETE_GPU: return "discrete";
    case VK_PHYSICAL_DEVICE_TYPE_INTEGRATED_GPU: return "integrated";
    case VK_PHYSICAL_DEVICE_TYPE_VIRTUAL_GPU: return "virtual";
    case VK_PHYSICAL_DEVICE_TYPE_CPU: return "cpu";
    default: return "other";
  }
}

int type_rank(const std::string& type) {
  if (type == "discrete") return 0;
  if (type == "integrated") return 1;
  if (type == "virtual") return 2;
  if (type == "cpu") return 3;
  return 4;
}

std::string lower(std::string s) {
  for (auto& c : s) c = char(std::tolower(static_cast<unsigned char>(c)));
  return s;
}

// An extension's feature struct (sType set; pNext may chain more), filled through the core query.
template <typename Features>
void query_features(const Dispatch& d, VkPhysicalDevice device, Features& extension) {
  VkPhysicalDeviceFeatures2 features{VK_STRUCTURE_TYPE_PHYSICAL_DEVICE_FEATURES_2};
  features.pNext = &extension;
  d.vkGetPhysicalDeviceFeatures2(device, &features);
}

// An extension's property struct (sType set), filled through the core query.
template <typename Properties>
void query_properties(const Dispatch& d, VkPhysicalDevice device, Properties& extension) {
  VkPhysicalDeviceProperties2 props{VK_STRUCTURE_TYPE_PHYSICAL_DEVICE_PROPERTIES_2};
  props.pNext = &extension;
  d.vkGetPhysicalDeviceProperties2(device, &props);
}

// The 16x8x16 f16 products of shaders/common/decode_coopmat_kernel.glsl, with f32 accumulators, at subgroup scope.
bool has_cooperative_matrix_products(const Dispatch& d, VkPhysicalDevice device) {
  if (d.vkGetPhysicalDeviceCooperativeMatrixPropertiesNV == nullptr) return false;
  VkPhysicalDeviceCooperativeMatrixFeaturesNV feature{VK_STRUCTURE_TYPE_PHYSICAL_DEVICE_COOPERATIVE_MATRIX_FEATURES_NV};
  query_features(d, device, feature);
  if (!feature.cooperativeMatrix) return false;
  uint32_t count = 0;
  d.vkGetPhysicalDeviceCooperativeMatrixPropertiesNV(device, &count, nullptr);
  std::vector<VkCooperativeMatrixPropertiesNV> shapes(count, {VK_STRUCTURE_TYPE_COOPERATIVE_MATRIX_PROPERTIES_NV});
  d.vkGetPhysicalDeviceCooperativeMatrixPropertiesNV(device, &count, shapes.data());
  auto has = [&](uint32_t m, uint32_t n, uint32_t k) {
    return std::any_of(shapes.begin(), shapes.begin() + count, [&](const auto& s) {
      return s.MSize == m && s.NSize == n && s.KSize == k && s.AType == VK_COMPONENT_TYPE_FLOAT16_NV &&
             s.BType == VK_COMPONENT_TYPE_FLOAT16_NV && s.CType == VK_COMPONENT_TYPE_FLOAT32_NV &&
             s.DType == VK_COMPONENT_TYPE_FLOAT32_NV && s.scope == VK_SCOPE_SUBGROUP_NV;
    });
  };
  return has(16, 8, 16);
}

// VK_KHR_cooperative_matrix in compute shaders and its shapes (call only where the device has
// the extension and the structures may be passed: see query_device_info).
bool query_cooperative_matrix_khr(const Dispatch& d, VkPhysicalDevice device, std::vector<CooperativeMatrixShape>& out) {
  VkPhysicalDeviceCooperativeMatrixFeaturesKHR feature{VK_STRUCTURE_TYPE_PHYSICAL_DEVICE_COOPERATIVE_MATRIX_FEATURES_KHR};
  query_features(d, device, feature);
  VkPhysicalDeviceCooperativeMatrixPropertiesKHR stages{VK_STRUCTURE_TYPE_PHYSICAL_DEVICE_COOPERATIVE_MATRIX_PROPERTIES_KHR};
  query_properties(d, device, stages);
  if (d.vkGetPhysicalDeviceCooperativeMatrixPropertiesKHR != nullptr) {
    uint32_t count = 0;
    d.vkGetPhysicalDeviceCooperativeMatrixPropertiesKHR(device, &count, nullptr);
    std::vector<VkCooperativeMatrixPropertiesKHR> shapes(count, {VK_STRUCTURE_TYPE_COOPERATIVE_MATRIX_PROPERTIES_KHR});
    if (count > 0) d.vkGetPhysicalDeviceCooperativeMatrixPropertiesKHR(device, &count, shapes.data());
    for (uint32_t i = 0; i < count && i < shapes.size(); ++i) {
      const auto& p = shapes[i];
      out.push_back({p.MSize, p.NSize, p.KSize, uint32_t(p.AType), uint32_t(p.BType), uint32_t(p.CType),
                     uint32_t(p.ResultType), p.saturatingAccumulation == VK_TRUE, uint32_t(p.scope)});
    }
  }
  return feature.cooperativeMatrix && (stages.cooperativeMatrixSupportedStages & VK_SHADER_STAGE_COMPUTE_BIT) &&
         !out.empty();
}

// The device clock and the SM id of the decode module matrix_timeline (shaders/decode_variants.def; call only where the
// device has VK_KHR_shader_clock and VK_NV_shader_sm_builtins).
bool has_timeline_features(const Dispatch& d, VkPhysicalDevice device) {
  VkPhysicalDeviceShaderClockFeaturesKHR clock{VK_STRUCTURE_TYPE_PHYSICAL_DEVICE_SHADER_CLOCK_FEATURES_KHR};
  VkPhysicalDeviceShaderSMBuiltinsFeaturesNV sm{VK_STRUCTURE_TYPE_PHYSICAL_DEVICE_SHADER_SM_BUILTINS_FEATURES_NV};
  clock.pNext = &sm;
  query_features(d, device, clock);
  return clock.shaderDeviceClock && sm.shaderSMBuiltins;
}

}  // namespace

bool layers_accept_cooperative_matrix_khr(const Instance& instance) {
  const uint32_t layer = instance.validation_layer_version();
  return layer == 0 || layer >= kFirstLayerKnowingCooperativeMatrixKhr;
}

std::string layers_refusing_cooperative_matrix_khr(const Instance& instance, const Dispatch& d, VkPhysicalDevice device) {
  if (layers_accept_cooperative_matrix_khr(instance) || !has_device_extension(d, device, VK_KHR_COOPERATIVE_MATRIX_EXTENSION_NAME))
    return "";
  const uint32_t v = instance.validation_layer_version();
  return fmt::format("VK_KHR_cooperative_matrix is left off: the Khronos validation layer in use ({}.{}.{}) predates it "
                     "(1.3.255) and would report its structures and SPIR-V as errors (run without validation, or with "
                     "a newer layer)",
                     VK_API_VERSION_MAJOR(v), VK_API_VERSION_MINOR(v), VK_API_VERSION_PATCH(v));
}

FullSubgroupSupport query_full_subgroups(const Dispatch& d, VkPhysicalDevice device) {
  FullSubgroupSupport support;
  if (!has_device_extension(d, device, VK_EXT_SUBGROUP_SIZE_CONTROL_EXTENSION_NAME)) return support;
  VkPhysicalDeviceSubgroupSizeControlFeaturesEXT feature{VK_STRUCTURE_TYPE_PHYSICAL_DEVICE_SUBGROUP_SIZE_CONTROL_FEATURES_EXT};
  query_features(d, device, feature);
  VkPhysicalDeviceSubgroupSizeControlPropertiesEXT sizes{VK_STRUCTURE_TYPE_PHYSICAL_DEVICE_SUBGROUP_SIZE_CONTROL_PROPERTIES_EXT};
  query_properties(d, device, sizes);
  support.available = feature.computeFullSubgroups == VK_TRUE && sizes.maxSubgroupSize > 0;
  support.max_subgroup_size = sizes.maxSubgroupSize;
  return support;
}

bool has_device_extension(const Dispatch& d, VkPhysicalDevice device, const char* name) {
  uint32_t count = 0;
  d.vkEnumerateDeviceExtensionProperties(device, nullptr, &count, nullptr);
  std::vector<VkExtensionProperties> exts(count);
  d.vkEnumerateDeviceExtensionProperties(device, nullptr, &count, exts.data());
  return std::any_of(exts.begin(), exts.end(), [&](const auto& e) { return std::strcmp(e.extensionName, name) == 0; });
}

DeviceInfo query_device_info(const Dispatch& d, VkPhysicalDevice device, uint32_t index, bool khr_cooperative_matrix) {
  uint32_t ext_count = 0;
  d.vkEnumerateDeviceExtensionProperties(device, nullptr, &ext_count, nullptr);
  std::vector<VkExtensionProperties> exts(ext_count);
  d.vkEnumerateDeviceExtensionProperties(device, nullptr, &ext_count, exts.data());
  auto has_ext = [&](const char* name) {
    return std::any_of(exts.begin(), exts.end(), [&](const auto& e) { return std::strcmp(e.extensionName, name) == 0; });
  };

  VkPhysicalDeviceSubgroupProperties subgroup{VK_STRUCTURE_TYPE_PHYSICAL_DEVICE_SUBGROUP_PROPERTIES};
  VkPhysicalDeviceDriverProperties driver{VK_STRUCTURE_TYPE_PHYSICAL_DEVICE_DRIVER_PROPERTIES};
  VkPhysicalDeviceShaderSMBuiltinsPropertiesNV nv_sm{VK_STRUCTURE_TYPE_PHYSICAL_DEVICE_SHADER_SM_BUILTINS_PROPERTIES_NV};
  VkPhysicalDeviceShaderCorePropertiesAMD amd_core{VK_STRUCTURE_TYPE_PHYSICAL_DEVICE_SHADER_CORE_PROPERTIES_AMD};
  VkPhysicalDeviceMaintenance3Properties maintenance3{VK_STRUCTURE_TYPE_PHYSICAL_DEVICE_MAINTENANCE_3_PROPERTIES};
  VkPhysicalDeviceProperties2 props{VK_STRUCTURE_TYPE_PHYSICAL_DEVICE_PROPERTIES_2};
  props.pNext = &subgroup;
  subgroup.pNext = &maintenance3;
  maintenance3.pNext = &driver;
  void** tail = &driver.pNext;
  const bool has_nv_sm = has_ext(VK_NV_SHADER_SM_BUILTINS_EXTENSION_NAME);
  const bool has_amd_core = has_ext(VK_AMD_SHADER_CORE_PROPERTIES_EXTENSION_NAME);
  if (has_nv_sm) { *tail = &nv_sm; tail = &nv_sm.pNext; }
  if (has_amd_core) { *tail = &amd_core; tail = &amd_core.pNext; }
  d.vkGetPhysicalDeviceProperties2(device, &props);

  VkPhysicalDeviceVulkan12Features f12{VK_STRUCTURE_TYPE_PHYSICAL_DEVICE_VULKAN_1_2_FEATURES};
  VkPhysicalDeviceVulkan11Features f11{VK_STRUCTURE_TYPE_PHYSICAL_DEVICE_VULKAN_1_1_FEATURES};
  VkPhysicalDeviceFeatures2 features{VK_STRUCTURE_TYPE_PHYSICAL_DEVICE_FEATURES_2};
  features.pNext = &f11;
  f11.pNext = &f12;
  d.vkGetPhysicalDeviceFeatures2(device, &features);

  VkPhysicalDeviceMemoryProperties mem{};
  d.vkGetPhysicalDeviceMemoryProperties(device, &mem);

  const auto& p = props.properties;
  DeviceInfo info;
  info.index = index;
  info.name = p.deviceName;
  info.type = type_name(p.deviceType);
  info.driver = driver.driverName[0] ? fmt::format("{} {}", driver.driverName, driver.driverInfo) : "";
  info.vendor_id = p.vendorID;
  info.api_version = p.apiVersion;
  info.max_memory_allocation_size = maintenance3.maxMemoryAllocationSize;
  info.subgroup_size = subgroup.subgroupSize;
  info.subgroup_arithmetic = (subgroup.supportedStages & VK_SHADER_STAGE_COMPUTE_BIT) &&
                             (subgroup.supportedOperations & VK_SUBGROUP_FEATURE_ARITHMETIC_BIT);
  info.subgroup_shuffle = (subgroup.supportedStages & VK_SHADER_STAGE_COMPUTE_BIT) &&
                          (subgroup.supportedOperations & VK_SUBGROUP_FEATURE_SHUFFLE_BIT);
  info.storage_16bit = f11.storageBuffer16BitAccess;
  info.storage_8bit = f12.storageBuffer8BitAccess;
  info.shader_float16 = f12.shaderFloat16;
  info.shader_int64 = features.features.shaderInt64;
  info.buffer_device_address = f12.bufferDeviceAddress;
  info.cooperative_matrix = has_ext(VK_NV_COOPERATIVE_MATRIX_EXTENSION_NAME) && f11.storageBuffer16BitAccess &&
                            f12.shaderFloat16 && subgroup.subgroupSize == 32 &&
                            (subgroup.supportedStages & VK_SHADER_STAGE_COMPUTE_BIT) &&
                            (subgroup.supportedOperations & VK_SUBGROUP_FEATURE_SHUFFLE_BIT) &&
                            (subgroup.supportedOperations & VK_SUBGROUP_FEATURE_VOTE_BIT) &&
                            has_cooperative_matrix_products(d, device);
  info.decode_timeline = info.cooperative_matrix && info.buffer_device_address &&
                         has_ext(VK_KHR_SHADER_CLOCK_EXTENSION_NAME) && has_ext(VK_NV_SHADER_SM_BUILTINS_EXTENSION_NAME) &&
                         has_timeline_features(d, device);
  info.vulkan_memory_model = f12.vulkanMemoryModel;
  info.vulkan_memory_model_device_scope = f12.vulkanMemoryModelDeviceScope;
  if (khr_cooperative_matrix && has_ext(VK_KHR_COOPERATIVE_MATRIX_EXTENSION_NAME))
    info.cooperative_matrix_khr = query_cooperative_matrix_khr(d, device, info.cooperative_matrix_khr_shapes);
  info.push_descriptor = has_ext(VK_KHR_PUSH_DESCRIPTOR_EXTENSION_NAME);
  info.timestamps = p.limits.timestampComputeAndGraphics;
  info.max_storage_buffer_range = p.limits.maxStorageBufferRange;
  info.max_shared_memory = p.limits.maxComputeSharedMemorySize;
  info.max_workgroup_invocations = p.limits.maxComputeWorkGroupInvocations;
  info.max_push_constants = p.limits.maxPushConstantsSize;
  info.min_storage_buffer_offset_alignment = uint32_t(p.limits.minStorageBufferOffsetAlignment);
  info.timestamp_period_ns = double(p.limits.timestampPeriod);
  if (has_nv_sm && nv_sm.shaderSMCount > 0) {
    info.compute_units = nv_sm.shaderSMCount;
    info.compute_units_reported = true;
  } else if (has_amd_core && amd_core.computeUnitsPerShaderArray > 0) {
    info.compute_units = amd_core.shaderEngineCount * amd_core.shaderArraysPerEngineCount * amd_core.computeUnitsPerShaderArray;
    info.compute_units_reported = true;
  } else if (p.deviceType == VK_PHYSICAL_DEVICE_TYPE_CPU) {
    info.compute_units = std::max(1u, std::thread::hardware_concurrency());
  } else {
    info.compute_units = 32;  // a mid-size GPU; only sizes the split
  }
  for (uint32_t i = 0; i < mem.memoryHeapCount; ++i)
    if (mem.memoryHeaps[i].flags & VK_MEMORY_HEAP_DEVICE_LOCAL_BIT) info.device_local_bytes += mem.memoryHeaps[i].size;
  info.memory_budget = has_ext(VK_EXT_MEMORY_BUDGET_EXTENSION_NAME);
  query_memory_budget(d, device, info);

  uint32_t family_count = 0;
  d.vkGetPhysicalDeviceQueueFamilyProperties(device, &family_count, nullptr);
  std::vector<VkQueueFamilyProperties> families(family_count);
  d.vkGetPhysicalDeviceQueueFamilyProperties(device, &family_count, families.data());
  for (const auto& f : families)
    if ((f.queueFlags & VK_QUEUE_COMPUTE_BIT) && f.timestampValidBits > 0) {
      info.timestamp_valid_bits = f.timestampValidBits;
      break;
    }
  return info;
}

uint32_t default_device_index(const std::vector<DeviceInfo>& devices) {
  uint32_t best = 0;
  for (uint32_t i = 1; i < devices.size(); ++i)
    if (type_rank(devices[i].type) < type_rank(devices[best].type)) best = i;
  return best;
}

uint32_t resolve_device_choice(const std::string& choice, const std::vector<DeviceInfo>& devices, const char* name) {
  if (devices.empty()) throw Error(ErrorCode::unsupported, "no Vulkan device found (install mesa-vulkan-drivers for lavapipe)");
  if (choice.empty()) return default_device_index(devices);
  if (std::all_of(choice.begin(), choice.end(), [](char c) { return std::isdigit(static_cast<unsigned char>(c)); })) {
    unsigned long idx = std::strtoul(choice.c_str(), nullptr, 10);
    if (idx >= devices.size())
      throw Error(ErrorCode::invalid_argument,
                  fmt::format("{}: index {} is out of range ({} Vulkan devices)", name, choice, devices.size()));
    return uint32_t(idx);
  }
  const std::string needle = lower(choice);
  for (const auto& dev : devices)
    if (lower(dev.name).find(needle) != std::string::npos) return dev.index;
  throw Error(ErrorCode::invalid_argument, fmt::format("{}: no Vulkan device name contains \"{}\"", name, choice));
}

}  // namespace vkpaged::vk

namespace vkpaged {

std::string cooperative_matrix_component_name(uint32_t type) {
  // VkComponentTypeKHR's first values, 0 to 10 in the registry's order (VK_NV_cooperative_matrix's).
  static constexpr const char* kNumbered[] = {"f16", "f32", "f64", "s8", "s16", "s32", "s64", "u8", "u16", "u32", "u64"};
  if (type < std::size(kNumbered)) return kNumbered[type];
  switch (type) {
    case vk::kComponentTypeBFloat16: return "bf16";
    case vk::kComponentTypeFloat8E4M3: return "e4m3";
    case vk::kComponentTypeFloat8E5M2: return "e5m2";
    default: return fmt::format("type {}", type);
  }
}

std::string to_string(const CooperativeMatrixShape& s) {
  const char* scope = s.scope == VK_SCOPE_SUBGROUP_KHR    ? "subgroup"
                      : s.scope == VK_SCOPE_WORKGROUP_KHR ? "workgroup"
                      : s.scope == VK_SCOPE_DEVICE_KHR    ? "device"
                      : s.scope == VK_SCOPE_QUEUE_FAMILY_KHR ? "queue family"
                                                             : "unknown scope";
  return fmt::format("{}x{}x{} {} x {} + {} -> {}, {}{}", s.m, s.n, s.k, cooperative_matrix_component_name(s.a_type),
                     cooperative_matrix_component_name(s.b_type), cooperative_matrix_component_name(s.c_type),
                     cooperative_matrix_component_name(s.result_type), scope,
                     s.saturating_accumulation ? ", saturating" : "");
}

}  // namespace vkpaged
