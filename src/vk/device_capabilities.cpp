// SPDX-License-Identifier: Apache-2.0
#include "vk/device_capabilities.hpp"

#include "vk/cooperative_matrix_khr.hpp"

#include <algorithm>

namespace vkpaged::detail {

namespace {

bool is_f16_product(const CooperativeMatrixShape& s) {
  return s.a_type == uint32_t(VK_COMPONENT_TYPE_FLOAT16_KHR) && s.b_type == uint32_t(VK_COMPONENT_TYPE_FLOAT16_KHR) &&
         s.c_type == uint32_t(VK_COMPONENT_TYPE_FLOAT32_KHR) && s.result_type == uint32_t(VK_COMPONENT_TYPE_FLOAT32_KHR) &&
         !s.saturating_accumulation && s.scope == uint32_t(VK_SCOPE_SUBGROUP_KHR);
}

}  // namespace

std::vector<MatrixProductShape> DeviceCapabilities::f16_products() const {
  std::vector<MatrixProductShape> products;
  for (const CooperativeMatrixShape& s : cooperative_matrix_khr_shapes)
    if (is_f16_product(s)) products.push_back({s.m, s.n, s.k});
  return products;
}

bool lists_f16_product(const std::vector<CooperativeMatrixShape>& shapes, uint32_t m, uint32_t n, uint32_t k) {
  return std::any_of(shapes.begin(), shapes.end(),
                     [&](const CooperativeMatrixShape& s) { return s.m == m && s.n == n && s.k == k && is_f16_product(s); });
}

bool DeviceCapabilities::lists_f16_product(uint32_t m, uint32_t n, uint32_t k) const {
  return detail::lists_f16_product(cooperative_matrix_khr_shapes, m, n, k);
}

}  // namespace vkpaged::detail
