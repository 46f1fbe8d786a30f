// SPDX-License-Identifier: Apache-2.0
#pragma once
// Whether the rows of a strided [tokens, heads, D] view share elements (strided_rows.hpp refuses
// such views where an operator writes them). Exact, not a sufficient condition on sorted strides:
// rows interleaved so that they never meet are taken. Host only.
#include <cstdint>
#include <optional>

namespace vkpaged::detail {

// Two distinct rows (t0, h0) and (t1, h1) of tokens x heads rows of `length` elements starting
// at t * token_stride + h * head_stride (strides >= 0) that share an element, if any; one loop
// over the smaller dimension's differences, O(min(tokens, heads)).
struct RowPair {
  int64_t t0 = 0, h0 = 0, t1 = 0, h1 = 0;
};
std::optional<RowPair> overlapping_rows(int64_t tokens, int64_t heads, int64_t length, int64_t token_stride,
                                        int64_t head_stride);

// Some k in [lo, hi] with x + k * step strictly between `below` and `above` (step > 0), if any:
// how far two lattices of rows must move to meet.
std::optional<int64_t> step_into(int64_t x, int64_t step, int64_t lo, int64_t hi, int64_t below, int64_t above);

// A row (t, h) of tokens x heads rows starting at t * token_stride + h * head_stride (>= 0) whose
// start lies strictly between `below` and `above`, if any: O(min(tokens, heads)).
struct Row {
  int64_t token = 0, head = 0;
};
std::optional<Row> row_starting_between(int64_t tokens, int64_t heads, int64_t token_stride, int64_t head_stride,
                                        int64_t below, int64_t above);

}  // namespace vkpaged::detail
