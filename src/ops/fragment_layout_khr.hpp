// SPDX-License-Identifier: Apache-2.0
#pragma once
// Where VK_KHR_cooperative_matrix fragments keep their elements on this device, measured once per
// context (shaders/fragment_layout_*_khr.comp). KHR, like NV, leaves the mapping of a lane's
// components to matrix elements to the implementation; a kernel that writes or reads components
// directly (as the NV matrix kernel does from 16-byte cache loads) needs it, and may run only
// where it is what the kernel assumes.
#include <cstdint>
#include <span>
#include <string>
#include <vector>

#include "vkpaged/context.hpp"

namespace vkpaged::detail {

// One operand's fragment: per lane of a subgroup, the element codes (row * columns + column) its
// components hold, in component order.
struct KhrFragment {
  std::string name;  // "A [16 x 16]", "B [16 x 8]", "accumulator [16 x 8]"
  uint32_t rows = 0;
  uint32_t columns = 0;
  uint32_t components = 0;       // per lane (the fragment's length())
  std::vector<uint32_t> codes;   // [lane * components + i]
  uint32_t code(uint32_t lane, uint32_t i) const { return codes[size_t(lane) * components + i]; }
};

// The three fragments of one product shape with f16 A and B and f32 accumulators.
struct KhrFragmentShape {
  uint32_t m = 0, n = 0, k = 0;
  bool probed = false;
  std::string not_probed;  // why not ("" when probed): the device does not list the shape
  KhrFragment a, b, accumulator;
  // "" when every lane holds whole elements and each element of each matrix is held by exactly
  // one component of one lane; else what differs. Kernels that rely on the layout need "".
  std::string irregular;
  // 16x8x16 only: the layout equals the NV matrix kernel's (ops/fragment_layout.hpp), so its
  // direct component writes would carry over to KHR as they are.
  bool matches_nv_kernel = false;
};

struct KhrFragmentLayout {
  std::string unavailable;  // why nothing was probed ("" when the probes ran)
  uint32_t lanes = 0;       // the subgroup width the probes ran with
  KhrFragmentShape shape_16x8x16;
  KhrFragmentShape shape_16x16x16;
};

// Probes on the first call where the context enabled VK_KHR_cooperative_matrix and vkpaged was
// built with its shaders; otherwise says why not in `unavailable`, with no device work.
const KhrFragmentLayout& khr_fragment_layout(Context& context);


// For the matrix decode kernel on VK_KHR_cooperative_matrix: "" where the probed 16x8x16
// fragments have the layout the kernel writes (KhrFragmentShape::matches_nv_kernel), else why
// not (nothing probed, the shape not listed, an irregular layout, or the first component that
// differs). Probes on the first call, as khr_fragment_layout.
std::string khr_matrix_fragment_mismatch(Context& context);
// The same verdict on a layout already probed (or written down from a device's probe).
std::string khr_layout_mismatch(const KhrFragmentLayout& layout);

// D = A B + C with one 16x16x16 KHR product (shaders/matrix_product_16x16x16_khr.comp): A and B
// row-major f16 bit patterns, C row-major f32, 256 elements each; returns D row-major. Throws
// vkpaged::Error(unsupported) naming what is missing where the KHR path cannot run.
std::vector<float> khr_matrix_product_16x16x16(Context& context, std::span<const uint16_t> a,
                                               std::span<const uint16_t> b, std::span<const float> c);

}  // namespace vkpaged::detail
