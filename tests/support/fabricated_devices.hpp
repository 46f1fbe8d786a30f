// SPDX-License-Identifier: Apache-2.0
#pragma once
// Devices that are not at hand, as their drivers report them, for the planners' tests (which run
// without a GPU): one DeviceCapabilities value each, the same the decode and the attention
// planners read off a real Context (src/vk/device_capabilities.hpp). NVIDIA's H200 (the device
// the plans were measured on), with and without VK_KHR_cooperative_matrix; lavapipe (CI), and the
// lavapipe of Mesa 25.1 and later, which lists 8x8x8 products; an AMD RDNA 3 GPU (16x16x16,
// wave32 and wave64); an Intel Xe GPU (8x8x16 on subgroups of 16); the least Vulkan allows.
#include <initializer_list>
#include <string>
#include <vector>

#include "vk/device_capabilities.hpp"

namespace vkpaged::test {

using detail::DeviceCapabilities;
using detail::MatrixProductShape;

// An NVIDIA H200 (driver 580): 132 SMs, subgroups of 32 with arithmetic, 1024 invocations,
// 48 KiB of shared memory per workgroup, a storage-buffer range of 2^32 - 1 bytes (the most a
// uint32_t limit holds), VK_NV_cooperative_matrix with the matrix kernel's fragment layout, and
// the timeline's features (bench/runs/*.txt, docs/architecture.md's device table).
inline DeviceCapabilities h200() {
  DeviceCapabilities d;
  d.name = "NVIDIA H200";
  d.compute_units = 132;
  d.subgroup_size = 32;
  d.subgroup_arithmetic = true;
  d.subgroup_shuffle = true;
  d.max_workgroup_invocations = 1024;
  d.max_shared_memory = 49152;
  d.max_storage_buffer_range = 4294967295u;
  d.buffer_device_address = true;
  d.cooperative_matrix = true;
  d.fragment_layout_mismatch = "";
  d.decode_timeline = true;
  d.shader_float16 = true;
  return d;
}

// Mesa's lavapipe on CI's two cores (`vkpaged info`: compute units are the CPU count, an
// estimate): subgroups of 8, 32 KiB of shared memory, 128 MiB storage buffers, no matrix units.
inline DeviceCapabilities lavapipe() {
  DeviceCapabilities d;
  d.name = "llvmpipe";
  d.compute_units = 2;
  d.subgroup_size = 8;
  d.subgroup_arithmetic = true;
  d.subgroup_shuffle = true;
  d.max_workgroup_invocations = 1024;
  d.max_shared_memory = 32768;
  d.max_storage_buffer_range = 128u << 20;
  d.buffer_device_address = true;
  d.shader_float16 = true;
  return d;
}

// A VK_KHR_cooperative_matrix product with f16 A and B and f32 C and result at subgroup scope.
inline CooperativeMatrixShape f16_product(uint32_t m, uint32_t n, uint32_t k) {
  return {m, n, k, /*a f16*/ 0, /*b f16*/ 0, /*c f32*/ 1, /*result f32*/ 1, false, /*subgroup*/ 3};
}

// The H200 with VK_KHR_cooperative_matrix enabled as well (a Context without a validation layer
// older than it): its driver lists 16x8x16, 16x8x8 and 16x16x16 f16 products (and others). Here
// its KHR 16x8x16 fragments are taken to have the NV kernel's layout, so that the KHR plans can be
// compared with the NV ones; the real one's B fragment differs (h200_as_measured).
inline DeviceCapabilities h200_with_khr() {
  DeviceCapabilities d = h200();
  d.khr_matrix_refusal = "";
  d.max_subgroup_size = 32;
  d.cooperative_matrix_khr_shapes = {f16_product(16, 16, 16), f16_product(16, 8, 16), f16_product(16, 8, 8)};
  d.khr_fragment_layout_mismatch = "";
  return d;
}

// The H200 as its probe found it (driver 580.159.04, 2026-12-05): KHR's B [16 x 8] fragment is
// not in the NV kernel's order (KhrFragmentLayoutVerdict in tests/ops/test_fragment_layout_khr.cpp).
inline DeviceCapabilities h200_as_measured() {
  DeviceCapabilities d = h200_with_khr();
  d.khr_fragment_layout_mismatch =
      "fragment B [16 x 8]: lane 0 component 1 holds element code 8 (row * columns + column), the matrix kernel "
      "writes 1 there";
  return d;
}

// A GPU of another vendor with VK_KHR_cooperative_matrix only: subgroups of 32, the 16x8x16 f16
// product listed with the NV kernel's fragment layout, no VK_NV_cooperative_matrix, no timeline.
inline DeviceCapabilities khr_only_16x8x16() {
  DeviceCapabilities d = h200_with_khr();
  d.name = "KHR 16x8x16";
  d.cooperative_matrix = false;
  d.fragment_layout_mismatch.reset();
  d.decode_timeline = false;
  return d;
}

// One whose VK_KHR_cooperative_matrix lists the 16x16x16 f16 product only (as AMD's RDNA 3 does).
inline DeviceCapabilities khr_only_16x16x16() {
  DeviceCapabilities d = khr_only_16x8x16();
  d.name = "KHR 16x16x16";
  d.cooperative_matrix_khr_shapes = {f16_product(16, 16, 16)};
  d.khr_fragment_layout_mismatch.reset();
  return d;
}

// A GPU of 60 compute units with subgroups of 64 (wave64), 64 KiB of shared memory, 4 GiB
// storage buffers and no cooperative matrices.
inline DeviceCapabilities subgroups_of_64() {
  DeviceCapabilities d;
  d.name = "wave64";
  d.compute_units = 60;
  d.subgroup_size = 64;
  d.subgroup_arithmetic = true;
  d.subgroup_shuffle = true;
  d.max_workgroup_invocations = 1024;
  d.max_shared_memory = 65536;
  d.max_storage_buffer_range = 4294967295u;
  d.buffer_device_address = true;
  return d;
}

// A GPU with subgroups of 16, 32 compute units (the estimate for a GPU that does not report
// them), 64 KiB of shared memory and 1 GiB storage buffers, no cooperative matrices.
inline DeviceCapabilities subgroups_of_16() {
  DeviceCapabilities d;
  d.name = "simd16";
  d.compute_units = 32;
  d.subgroup_size = 16;
  d.subgroup_arithmetic = true;
  d.subgroup_shuffle = true;
  d.max_workgroup_invocations = 1024;
  d.max_shared_memory = 65536;
  d.max_storage_buffer_range = 1u << 30;
  d.buffer_device_address = true;
  return d;
}

// The product list of a device whose f16 x f16 + f32 products are these (m x n x k).
inline std::vector<CooperativeMatrixShape> f16_products(std::initializer_list<MatrixProductShape> shapes) {
  std::vector<CooperativeMatrixShape> list;
  for (const MatrixProductShape& p : shapes) list.push_back(f16_product(p.m, p.n, p.k));
  return list;
}

// Mesa 25.1's lavapipe and later (26.1.6 seen): VK_KHR_cooperative_matrix with 8x8x8 f16
// products on subgroups of 8, whose control barriers are workgroup barriers.
inline DeviceCapabilities lavapipe_with_cooperative_matrices() {
  DeviceCapabilities d = lavapipe();
  d.khr_matrix_refusal = "";
  d.max_subgroup_size = 8;
  d.cooperative_matrix_khr_shapes = f16_products({{8, 8, 8}});
  d.workgroup_sync = true;
  return d;
}

// An AMD RDNA 3 GPU (RADV): 48 compute units, VK_KHR_cooperative_matrix with 16x16x16 f16
// products, subgroups of 32 or 64 (wave32, the compute default, or wave64), 64 KiB of shared
// memory.
inline DeviceCapabilities amd_rdna3(uint32_t wave = 32) {
  DeviceCapabilities d;
  d.name = wave == 64 ? "AMD RDNA 3 (wave64)" : "AMD RDNA 3";
  d.compute_units = 48;
  d.subgroup_size = wave;
  d.subgroup_arithmetic = true;
  d.subgroup_shuffle = true;
  d.max_workgroup_invocations = 1024;
  d.max_shared_memory = 65536;
  d.max_storage_buffer_range = 4294967295u;
  d.buffer_device_address = true;
  d.shader_float16 = true;
  d.khr_matrix_refusal = "";
  d.max_subgroup_size = wave;
  d.cooperative_matrix_khr_shapes = f16_products({{16, 16, 16}});
  return d;
}

// An Intel Xe GPU (ANV): 32 compute units, VK_KHR_cooperative_matrix with 8x8x16 f16 products
// on subgroups of 16, 64 KiB of shared memory, 1 GiB storage buffers.
inline DeviceCapabilities intel_xe() {
  DeviceCapabilities d = subgroups_of_16();
  d.name = "Intel Xe";
  d.shader_float16 = true;
  d.khr_matrix_refusal = "";
  d.max_subgroup_size = 16;
  d.cooperative_matrix_khr_shapes = f16_products({{8, 8, 16}});
  return d;
}

// The least a Vulkan device may offer: 16 KiB of shared memory, 128 invocations.
inline DeviceCapabilities minimal() {
  DeviceCapabilities d;
  d.name = "minimal";
  d.compute_units = 8;
  d.max_workgroup_invocations = 128;
  d.max_shared_memory = 16384;
  d.max_storage_buffer_range = 128ull << 20;
  d.buffer_device_address = false;
  return d;
}

}  // namespace vkpaged::test
