// SPDX-License-Identifier: Apache-2.0
#pragma once
// A 1-D launch laid out over two grid dimensions: one dimension holds at most 65535
// workgroups (the minimum maxComputeWorkGroupCount), large launches need more.
#include <algorithm>
#include <cstdint>

namespace vkpaged::detail {

struct LinearGrid {
  uint32_t x = 0;
  uint32_t y = 0;
};

// Shaders recover the id as (group.y * x + group.x) * workgroup + local (the extra groups of
// the last row exit at once).
inline LinearGrid linear_grid(uint64_t invocations, uint32_t workgroup) {
  const uint64_t groups = (invocations + workgroup - 1) / workgroup;
  LinearGrid g;
  g.x = uint32_t(std::min<uint64_t>(groups, 65535));
  g.y = g.x == 0 ? 0 : uint32_t((groups + g.x - 1) / g.x);
  return g;
}

}  // namespace vkpaged::detail
