// SPDX-License-Identifier: Apache-2.0
#pragma once
// The comparison every device-against-reference decode test makes.
#include <gtest/gtest.h>

#include <cmath>
#include <string>

#include "support/decode_case.hpp"

namespace vkpaged::test {

// Output within `tol` of the reference; with LSE, -Inf where the reference has it (an empty
// range) and within 1e-3 + tol elsewhere.
inline void expect_decode_near(const DecodeResult& got, const DecodeResult& want, double tol, bool lse,
                               const std::string& label) {
  EXPECT_LE(max_abs_diff(got.output, want.output), tol) << label;
  if (!lse) return;
  for (int64_t i = 0; i < want.lse.numel(); ++i) {
    const double w = want.lse.get(size_t(i)), g = got.lse.get(size_t(i));
    if (std::isinf(w)) EXPECT_TRUE(std::isinf(g) && g < 0) << label << " lse " << i;
    else EXPECT_NEAR(g, w, 1e-3 + tol) << label << " lse " << i;
  }
}

}  // namespace vkpaged::test
