// SPDX-License-Identifier: Apache-2.0
#pragma once
// The integer arithmetic the planners and the tools size things with.
#include <cstdint>

namespace vkpaged::detail {

// a / b rounded up (b > 0).
constexpr uint64_t ceil_div(uint64_t a, uint64_t b) { return (a + b - 1) / b; }
// a rounded up to a multiple of b (b > 0).
constexpr uint64_t round_up(uint64_t a, uint64_t b) { return ceil_div(a, b) * b; }

}  // namespace vkpaged::detail
