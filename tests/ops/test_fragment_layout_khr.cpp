// SPDX-License-Identifier: Apache-2.0
// The KHR fragment-layout probe and a single KHR product against the CPU. Both need
// VK_KHR_cooperative_matrix enabled (an NVIDIA, AMD RDNA 3 or Intel Arc GPU, and no validation
// layer older than the extension); elsewhere, lavapipe included, they check the clean refusal.
#include <gtest/gtest.h>

#include <fmt/format.h>

#include <cmath>
#include <iostream>
#include <random>

#include "ops/fragment_layout.hpp"
#include "ops/fragment_layout_khr.hpp"
#include "support/test_context.hpp"
#include "vk/context_impl.hpp"
#include "vk/matrix_features.hpp"
#include "vkpaged/dtype.hpp"
#include "vkpaged/error.hpp"

namespace vkpaged::test {
namespace {

class KhrFragmentLayoutTest : public GpuTest {};

// Where the context has no KHR matrix units the probe does no device work and says why, in the
// words of the context's refusal; where it has them, it runs.
TEST_F(KhrFragmentLayoutTest, ProbeRunsOnlyWhereTheExtensionIsEnabled) {
  const auto& layout = detail::khr_fragment_layout(ctx());
  EXPECT_EQ(&layout, &detail::khr_fragment_layout(ctx())) << "probed once per context";
  const std::string missing = detail::missing_khr_matrix_features(ctx().impl());
  if (!missing.empty()) {
    EXPECT_EQ(layout.unavailable, missing);
    EXPECT_FALSE(layout.shape_16x8x16.probed);
    EXPECT_FALSE(layout.shape_16x16x16.probed);
    EXPECT_EQ(ctx().impl().pipelines.count("fragment_layout_16x8x16_khr:" + std::to_string(ctx().impl().max_subgroup_size)),
              0u);
  } else {
    EXPECT_EQ(layout.unavailable, "");
    EXPECT_TRUE(layout.shape_16x8x16.probed || !layout.shape_16x8x16.not_probed.empty());
    EXPECT_TRUE(layout.shape_16x16x16.probed || !layout.shape_16x16x16.not_probed.empty());
  }
}

std::string describe(const detail::KhrFragment& f, uint32_t lanes) {
  std::string text = fmt::format("  {}: {} components per lane\n", f.name, f.components);
  for (uint32_t lane = 0; lane < std::min(lanes, 8u); ++lane) {
    text += fmt::format("    lane {}:", lane);
    for (uint32_t i = 0; i < f.components; ++i) {
      const uint32_t code = f.code(lane, i);
      text += fmt::format(" ({},{})", code / f.columns, code % f.columns);
    }
    text += "\n";
  }
  return text;
}

// On a device with KHR matrix units every probed fragment holds each element of its matrix
// exactly once; the layout (and whether it is the NV kernel's) is printed for the record.
TEST_F(KhrFragmentLayoutTest, LayoutHoldsEachElementOnce) {
  const auto& layout = detail::khr_fragment_layout(ctx());
  if (!layout.unavailable.empty()) GTEST_SKIP() << layout.unavailable;
  // A device may list neither shape (Mesa 26's lavapipe lists other ones): nothing to probe.
  if (!layout.shape_16x8x16.not_probed.empty() && !layout.shape_16x16x16.not_probed.empty())
    GTEST_SKIP() << layout.shape_16x8x16.not_probed << "; " << layout.shape_16x16x16.not_probed;
  ASSERT_GT(layout.lanes, 0u);
  bool any = false;
  for (const auto* shape : {&layout.shape_16x8x16, &layout.shape_16x16x16}) {
    if (!shape->probed) {
      EXPECT_NE(shape->not_probed, "") << shape->irregular;
      continue;
    }
    any = true;
    EXPECT_EQ(shape->irregular, "") << shape->m << "x" << shape->n << "x" << shape->k;
    std::cout << fmt::format("KHR fragments of the {}x{}x{} product on {} ({} lanes){}:\n", shape->m, shape->n, shape->k,
                             ctx().device_info().name, layout.lanes,
                             shape->m == 16 && shape->n == 8
                                 ? (shape->matches_nv_kernel ? ", the NV matrix kernel's layout"
                                                             : ", NOT the NV matrix kernel's layout")
                                 : "")
              << describe(shape->a, layout.lanes) << describe(shape->b, layout.lanes)
              << describe(shape->accumulator, layout.lanes);
    RecordProperty(fmt::format("matches_nv_{}x{}x{}", shape->m, shape->n, shape->k), shape->matches_nv_kernel ? 1 : 0);
  }
  EXPECT_TRUE(any) << "the device lists neither 16x8x16 nor 16x16x16 with f16 inputs and f32 accumulators";
}

// One 16x16x16 product D = A B + C through VK_KHR_cooperative_matrix against the same product on
// the CPU in double precision (f16 inputs are exact; the device accumulates in f32).
TEST_F(KhrFragmentLayoutTest, ProductMatchesTheCpu) {
  std::mt19937 rng(507);
  std::uniform_real_distribution<float> dist(-2.0f, 2.0f);
  std::vector<uint16_t> a(256), b(256);
  std::vector<float> c(256);
  for (auto& v : a) v = f32_to_f16(dist(rng));
  for (auto& v : b) v = f32_to_f16(dist(rng));
  for (auto& v : c) v = dist(rng);
  const std::string missing = detail::missing_khr_matrix_features(ctx().impl());
  if (!missing.empty() || !detail::lists_f16_product(ctx().device_info().cooperative_matrix_khr_shapes, 16, 16, 16)) {
    try {
      detail::khr_matrix_product_16x16x16(ctx(), a, b, c);
      ADD_FAILURE() << "not refused";
    } catch (const Error& e) {
      EXPECT_EQ(e.code(), ErrorCode::unsupported);
      if (!missing.empty()) EXPECT_EQ(std::string(e.what()), missing);
    }
    GTEST_SKIP() << (missing.empty() ? "no 16x16x16 f16 product with f32 accumulators" : missing);
  }
  const std::vector<float> d = detail::khr_matrix_product_16x16x16(ctx(), a, b, c);
  ASSERT_EQ(d.size(), 256u);
  for (int i = 0; i < 16; ++i)
    for (int j = 0; j < 16; ++j) {
      double want = c[i * 16 + j], magnitude = std::abs(want);
      for (int k = 0; k < 16; ++k) {
        const double term = double(f16_to_f32(a[i * 16 + k])) * double(f16_to_f32(b[k * 16 + j]));
        want += term;
        magnitude += std::abs(term);
      }
      EXPECT_NEAR(d[i * 16 + j], want, 1e-4 * magnitude + 1e-6) << "D[" << i << "][" << j << "]";
    }
  EXPECT_THROW(detail::khr_matrix_product_16x16x16(ctx(), std::span(a).first(255), b, c), Error);
}

// The H200's KHR 16x8x16 fragments as its probe found them (driver 580.159.04, 2026-12-05): A and
// the accumulator in the NV kernel's order, B [16 x 8] in the order of the mma instruction's B
// operand (lane 4 g + q holds rows 2q, 2q + 1, 2q + 8, 2q + 9 of column g), which is not the
// accumulator's. The matrix decode kernel passes an accumulator as a B operand as it stands, so
// it is refused there, with the words the device run printed.
detail::KhrFragment fragment(const char* name, uint32_t rows, uint32_t columns, uint32_t components,
                             uint32_t (*code)(uint32_t lane, uint32_t i)) {
  detail::KhrFragment f{name, rows, columns, components, {}};
  for (uint32_t lane = 0; lane < 32; ++lane)
    for (uint32_t i = 0; i < components; ++i) f.codes.push_back(code(lane, i));
  return f;
}

TEST(KhrFragmentLayoutVerdict, TheH200sBFragmentIsRefusedAsItsProbeFoundIt) {
  detail::KhrFragmentLayout layout;
  layout.lanes = 32;
  detail::KhrFragmentShape& s = layout.shape_16x8x16;
  s.m = 16, s.n = 8, s.k = 16;
  s.probed = true;
  s.a = fragment("A [16 x 16]", 16, 16, 8, detail::nv_fragment_code_a);
  s.accumulator = fragment("accumulator [16 x 8]", 16, 8, 4, detail::nv_fragment_code_b);
  s.b = fragment("B [16 x 8]", 16, 8, 4, [](uint32_t lane, uint32_t i) {
    const uint32_t g = lane / 4, q = lane % 4;
    return (2 * q + i % 2 + (i / 2) * 8) * 8 + g;  // row (k) * 8 + column (n)
  });
  EXPECT_EQ(detail::khr_layout_mismatch(layout),
            "fragment B [16 x 8]: lane 0 component 1 holds element code 8 (row * columns + column), the matrix "
            "kernel writes 1 there");
  // With B in the NV kernel's order the kernel runs.
  s.b = fragment("B [16 x 8]", 16, 8, 4, detail::nv_fragment_code_b);
  s.matches_nv_kernel = true;
  EXPECT_EQ(detail::khr_layout_mismatch(layout), "");
  layout.unavailable = "no VK_KHR_cooperative_matrix";
  EXPECT_EQ(detail::khr_layout_mismatch(layout), "no VK_KHR_cooperative_matrix");
}

}  // namespace
}  // namespace vkpaged::test
