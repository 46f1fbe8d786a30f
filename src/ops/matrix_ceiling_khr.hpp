// SPDX-License-Identifier: Apache-2.0
#pragma once
// The cooperative-matrix ceiling of a device (shaders/matrix_ceiling_khr.comp): the f16 x f16 +
// f32 product rate a compute shader reaches through VK_KHR_cooperative_matrix with nothing but
// products in flight, the reference `vkpaged bench --suite mla` gives its compute-bound cases'
// FLOPs. The throughput kernel of ../shared/tools/coopmat-probe, in the device's own product
// shape and grid, with its result checked.
#include <cstdint>
#include <string>

#include "vkpaged/context.hpp"

namespace vkpaged::detail {

struct MatrixCeiling {
  std::string unavailable;  // why nothing was measured ("" when measured)
  uint32_t m = 0, n = 0, k = 0;  // the product shape: the largest f16 x f16 + f32 one the device lists
  uint32_t workgroups = 0;
  uint32_t subgroups_per_workgroup = 0;
  uint32_t subgroup_size = 0;
  uint32_t iterations = 0;  // per subgroup, four products each
  double flops = 0;         // per dispatch: 2 m n k per product
  double median_ns = 0;     // GPU time (timestamps) of one dispatch, median of the repetitions
  double flops_per_second() const { return median_ns > 0 ? flops / (median_ns * 1e-9) : 0.0; }
  std::string describe() const;  // "16x16x16 f16 products, 4 x 32 lanes per workgroup, ..."
};

// Where the context runs KHR matrix kernels and the device lists an f16 x f16 + f32 product at
// subgroup scope: grows the grid until one dispatch takes at least 10 ms and covers every
// compute unit twice, then times `repetitions` dispatches (after three untimed ones). Elsewhere
// returns `unavailable` set, with no device work. Throws vkpaged::Error(internal) when a
// product's result is wrong (the figure would not be one of products).
MatrixCeiling measure_matrix_ceiling_khr(Context& context, int repetitions = 10);

}  // namespace vkpaged::detail
