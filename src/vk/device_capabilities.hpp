// SPDX-License-Identifier: Apache-2.0
#pragma once
// What the planners read off a device, in one value: built once per Context from what it
// enabled (device_capabilities below), and fabricated by the tests for devices that are not at
// hand (tests/support/fabricated_devices.hpp). The decode and attention planners take it as it
// is; nothing else about a device reaches a plan.
#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "vkpaged/context.hpp"

namespace vkpaged::detail {

struct ContextImpl;

// One product shape with f16 A and B and f32 accumulators and results, at subgroup scope,
// without saturation (A is m x k, B k x n): what the KHR matrix kernels multiply.
struct MatrixProductShape {
  uint32_t m = 0, n = 0, k = 0;
};

struct DeviceCapabilities {
  std::string name;                       // for messages
  uint32_t compute_units = 1;             // SMs / CUs, or an estimate: sizes the splits
  uint32_t subgroup_size = 0;
  bool subgroup_arithmetic = false;       // subgroup reductions in compute shaders
  bool subgroup_shuffle = false;          // subgroupShuffleXor in compute shaders
  uint32_t max_workgroup_invocations = 128;
  uint32_t max_shared_memory = 16384;     // bytes per workgroup
  uint64_t max_storage_buffer_range = 0;  // a pool past it is read by device address
  bool buffer_device_address = false;     // enabled on the context
  bool shader_float16 = false;            // shaderFloat16 enabled: packed-f16 variants can run
  bool decode_timeline = false;           // DeviceInfo::decode_timeline's features are enabled

  // VK_NV_cooperative_matrix enabled with what the matrix decode kernel needs (16x8x16 f16
  // products, f16 storage and arithmetic, subgroup shuffles and votes), and whether its
  // fragments keep their elements where that kernel writes them (shaders/fragment_layout.comp,
  // probed once per context when a plan could use it): std::nullopt until probed, "" where
  // they do, else what differs.
  bool cooperative_matrix = false;
  std::optional<std::string> fragment_layout_mismatch;

  // VK_KHR_cooperative_matrix: why the context cannot run KHR matrix kernels ("" where it can:
  // the extension with computeFullSubgroups, the memory model, f16 arithmetic and 16-bit
  // storage, and the build has the KHR shaders), the subgroup size their full-subgroup
  // workgroups are multiples of, the products the device lists (in its order), and whether its
  // 16x8x16 fragments have the NV kernel's layout (as fragment_layout_mismatch, for KHR).
  std::string khr_matrix_refusal = "VK_KHR_cooperative_matrix is not enabled";
  uint32_t max_subgroup_size = 0;
  std::vector<CooperativeMatrixShape> cooperative_matrix_khr_shapes;
  std::optional<std::string> khr_fragment_layout_mismatch;

  // The device runs a subgroup-scope control barrier as a workgroup barrier (Mesa's llvmpipe):
  // a matrix kernel's workgroups then hold only computing subgroups.
  bool workgroup_sync = false;

  bool khr_matrix() const noexcept { return khr_matrix_refusal.empty(); }
  // The f16 x f16 + f32 products at subgroup scope without saturation the device lists, in its
  // order, and whether it lists one of m x n x k.
  std::vector<MatrixProductShape> f16_products() const;
  bool lists_f16_product(uint32_t m, uint32_t n, uint32_t k) const;
};

// Whether `shapes` lists the m x n x k product with f16 A and B, f32 C and result, at subgroup
// scope, without saturation (what the KHR matrix kernels and the layout probes use).
bool lists_f16_product(const std::vector<CooperativeMatrixShape>& shapes, uint32_t m, uint32_t n, uint32_t k);

// What a context offers (its DeviceInfo and the features it enabled), fragment layouts unprobed.
DeviceCapabilities device_capabilities(const ContextImpl& impl);

}  // namespace vkpaged::detail
