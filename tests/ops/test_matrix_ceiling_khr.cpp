// SPDX-License-Identifier: Apache-2.0
// The cooperative-matrix ceiling (shaders/matrix_ceiling_khr.comp): where the context has KHR
// matrix units it runs the largest f16 product the device lists, every product's result checked
// on the device and read back (a wrong one throws), and gives a rate; elsewhere, lavapipe of
// Mesa 22.3 included, it says why not, with the context's own refusal, and builds nothing.
#include <gtest/gtest.h>

#include <fmt/format.h>

#include <iostream>

#include "ops/matrix_ceiling_khr.hpp"
#include "support/test_context.hpp"
#include "vk/context_impl.hpp"
#include "vk/matrix_features.hpp"

namespace vkpaged::test {
namespace {

class MatrixCeilingTest : public GpuTest {};

TEST_F(MatrixCeilingTest, MeasuredWithTheLargestListedProductOrRefusedSayingWhy) {
  const std::string missing = detail::missing_khr_matrix_features(ctx().impl());
  const auto products = ctx().impl().capabilities.f16_products();
  const detail::MatrixCeiling c = detail::measure_matrix_ceiling_khr(ctx(), 3);
  if (!missing.empty() || products.empty()) {
    EXPECT_NE(c.unavailable, "");
    if (!missing.empty()) EXPECT_EQ(c.unavailable, missing);
    EXPECT_EQ(c.describe(), c.unavailable);
    EXPECT_EQ(c.flops_per_second(), 0.0);
    for (const auto& [key, pipeline] : ctx().impl().pipelines)
      EXPECT_EQ(key.find("matrix_ceiling_khr"), std::string::npos) << "built where it cannot run: " << key;
    GTEST_SKIP() << "no ceiling on this device: " << c.unavailable;
  }
  ASSERT_EQ(c.unavailable, "");
  uint64_t largest = 0;
  for (const auto& p : products) largest = std::max<uint64_t>(largest, uint64_t(p.m) * p.n * p.k);
  EXPECT_EQ(uint64_t(c.m) * c.n * c.k, largest);
  EXPECT_TRUE(ctx().impl().capabilities.lists_f16_product(c.m, c.n, c.k));
  EXPECT_GE(c.workgroups, 1u);
  EXPECT_EQ(c.subgroup_size, ctx().impl().max_subgroup_size);
  EXPECT_DOUBLE_EQ(c.flops, 2.0 * c.m * c.n * c.k * 4 * c.iterations * c.workgroups * c.subgroups_per_workgroup);
  EXPECT_GT(c.median_ns, 0.0);
  EXPECT_GT(c.flops_per_second(), 0.0);
  std::cout << fmt::format("matrix ceiling on {}: {:.3f} TFLOP/s ({})\n", ctx().device_info().name,
                           c.flops_per_second() / 1e12, c.describe());
}

}  // namespace
}  // namespace vkpaged::test
