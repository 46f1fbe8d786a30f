// SPDX-License-Identifier: Apache-2.0
#pragma once
// Whether the device's cooperative-matrix fragments keep their elements where
// shaders/common/decode_coopmat_kernel.glsl writes them (shaders/fragment_layout.comp finds out once per
// context).
#include <cstdint>
#include <string>

#include "vkpaged/context.hpp"

namespace vkpaged::detail {

// The (row, column) code each lane's component holds, as the matrix kernel assumes (what NVIDIA's
// driver does), for lane = 4 g + q of a 32-wide subgroup: A holds rows g, g + 8 and columns
// 2q, 2q + 1, 2q + 8, 2q + 9, row by row; B and the accumulator hold rows g, g + 8 and columns
// 2q, 2q + 1 (the same layout, which lets the kernel pass a score accumulator on as the
// probabilities' B operand).
inline uint32_t nv_fragment_code_a(uint32_t lane, uint32_t i) {  // A [16 x 16], code row * 16 + column
  const uint32_t g = lane / 4, q = lane % 4;
  return (g + (i / 4) * 8) * 16 + 2 * q + i % 2 + ((i / 2) % 2) * 8;
}
inline uint32_t nv_fragment_code_b(uint32_t lane, uint32_t i) {  // B and accumulator [16 x 8], code row * 8 + column
  const uint32_t g = lane / 4, q = lane % 4;
  return (g + (i / 2) * 8) * 8 + 2 * q + i % 2;
}

// "" when the layout matches, else what differs. Runs the probe on the first call only.
const std::string& matrix_fragment_mismatch(Context& context);

}  // namespace vkpaged::detail
