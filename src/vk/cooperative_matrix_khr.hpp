// SPDX-License-Identifier: Apache-2.0
#pragma once
// VK_KHR_cooperative_matrix for Vulkan headers that predate it (Debian 12 ships 1.3.239; the
// extension arrived in 1.3.255). Newer headers define VK_KHR_cooperative_matrix and win: nothing
// below is declared then. Values from the registry (vk.xml / vulkan_core.h of
// KhronosGroup/Vulkan-Headers): extension number 507, hence the 1000506xxx structure types.
#include <vulkan/vulkan.h>

#include <cstdint>

#ifndef VK_KHR_cooperative_matrix
#define VK_KHR_cooperative_matrix 1
#define VK_KHR_COOPERATIVE_MATRIX_SPEC_VERSION 2
#define VK_KHR_COOPERATIVE_MATRIX_EXTENSION_NAME "VK_KHR_cooperative_matrix"

// The header's own enumerants, as constants of the existing enum types (an enum cannot grow).
constexpr VkStructureType VK_STRUCTURE_TYPE_PHYSICAL_DEVICE_COOPERATIVE_MATRIX_FEATURES_KHR = VkStructureType(1000506000);
constexpr VkStructureType VK_STRUCTURE_TYPE_COOPERATIVE_MATRIX_PROPERTIES_KHR = VkStructureType(1000506001);
constexpr VkStructureType VK_STRUCTURE_TYPE_PHYSICAL_DEVICE_COOPERATIVE_MATRIX_PROPERTIES_KHR = VkStructureType(1000506002);

// VkComponentTypeKHR and VkScopeKHR keep VK_NV_cooperative_matrix's values (the NV names became
// aliases of the KHR ones), so the NV enums of the old header carry them. Only the values vkpaged
// names are declared (cooperative_matrix_component_name numbers the rest).
typedef VkComponentTypeNV VkComponentTypeKHR;
constexpr VkComponentTypeKHR VK_COMPONENT_TYPE_FLOAT16_KHR = VkComponentTypeKHR(0);
constexpr VkComponentTypeKHR VK_COMPONENT_TYPE_FLOAT32_KHR = VkComponentTypeKHR(1);

typedef VkScopeNV VkScopeKHR;
constexpr VkScopeKHR VK_SCOPE_DEVICE_KHR = VkScopeKHR(1);
constexpr VkScopeKHR VK_SCOPE_WORKGROUP_KHR = VkScopeKHR(2);
constexpr VkScopeKHR VK_SCOPE_SUBGROUP_KHR = VkScopeKHR(3);
constexpr VkScopeKHR VK_SCOPE_QUEUE_FAMILY_KHR = VkScopeKHR(5);

typedef struct VkPhysicalDeviceCooperativeMatrixFeaturesKHR {
  VkStructureType sType;
  void* pNext;
  VkBool32 cooperativeMatrix;
  VkBool32 cooperativeMatrixRobustBufferAccess;
} VkPhysicalDeviceCooperativeMatrixFeaturesKHR;

typedef struct VkCooperativeMatrixPropertiesKHR {
  VkStructureType sType;
  void* pNext;
  uint32_t MSize;
  uint32_t NSize;
  uint32_t KSize;
  VkComponentTypeKHR AType;
  VkComponentTypeKHR BType;
  VkComponentTypeKHR CType;
  VkComponentTypeKHR ResultType;
  VkBool32 saturatingAccumulation;
  VkScopeKHR scope;
} VkCooperativeMatrixPropertiesKHR;

typedef struct VkPhysicalDeviceCooperativeMatrixPropertiesKHR {
  VkStructureType sType;
  void* pNext;
  VkShaderStageFlags cooperativeMatrixSupportedStages;
} VkPhysicalDeviceCooperativeMatrixPropertiesKHR;

typedef VkResult(VKAPI_PTR* PFN_vkGetPhysicalDeviceCooperativeMatrixPropertiesKHR)(
    VkPhysicalDevice physicalDevice, uint32_t* pPropertyCount, VkCooperativeMatrixPropertiesKHR* pProperties);
#endif  // VK_KHR_cooperative_matrix

namespace vkpaged::vk {

// Component types that later extensions add to VkComponentTypeKHR (VK_KHR_shader_bfloat16,
// VK_EXT_shader_float8), which a driver may list among its shapes. Raw values: headers differ
// in whether (and under which name) they define them.
constexpr uint32_t kComponentTypeBFloat16 = 1000141000;     // VK_COMPONENT_TYPE_BFLOAT16_KHR
constexpr uint32_t kComponentTypeFloat8E4M3 = 1000491002;   // VK_COMPONENT_TYPE_FLOAT8_E4M3_EXT
constexpr uint32_t kComponentTypeFloat8E5M2 = 1000491003;   // VK_COMPONENT_TYPE_FLOAT8_E5M2_EXT

// The first Khronos validation layer whose generated checks know the extension's structures
// (header 1.3.255, where it was released). An older layer reports them as unknown in every
// pNext chain that carries them, and cannot parse the CooperativeMatrixKHR capability.
constexpr uint32_t kFirstLayerKnowingCooperativeMatrixKhr = VK_MAKE_API_VERSION(0, 1, 3, 255);

}  // namespace vkpaged::vk
