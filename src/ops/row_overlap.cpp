// SPDX-License-Identifier: Apache-2.0
#include "ops/row_overlap.hpp"

#include <algorithm>

namespace vkpaged::detail {

namespace {

int64_t floor_div(int64_t a, int64_t b) {  // b > 0
  const int64_t q = a / b;
  return q * b > a ? q - 1 : q;
}

}  // namespace

std::optional<int64_t> step_into(int64_t x, int64_t step, int64_t lo, int64_t hi, int64_t below, int64_t above) {
  const int64_t k = std::max(floor_div(below - x, step) + 1, lo);  // the first k above `below`
  if (k > hi || x + k * step >= above) return std::nullopt;
  return k;
}

std::optional<Row> row_starting_between(int64_t tokens, int64_t heads, int64_t token_stride, int64_t head_stride,
                                        int64_t below, int64_t above) {
  const bool by_heads = heads <= tokens;
  const int64_t outer = by_heads ? heads : tokens, inner = by_heads ? tokens : heads;
  const int64_t outer_stride = by_heads ? head_stride : token_stride, inner_stride = by_heads ? token_stride : head_stride;
  for (int64_t d = 0; d < outer; ++d) {
    const int64_t x = d * outer_stride;
    std::optional<int64_t> k;
    if (inner <= 1 || inner_stride == 0) {
      if (x > below && x < above) k = 0;
    } else {
      k = step_into(x, inner_stride, 0, inner - 1, below, above);
    }
    if (k) return by_heads ? Row{*k, d} : Row{d, *k};
  }
  return std::nullopt;
}

std::optional<RowPair> overlapping_rows(int64_t tokens, int64_t heads, int64_t length, int64_t token_stride,
                                        int64_t head_stride) {
  // Rows (t, h) and (t + dt, h + dh) overlap iff |dt * token_stride + dh * head_stride| < length;
  // by symmetry the outer difference d >= 0, and the inner one is solved for.
  const bool by_heads = heads <= tokens;
  const int64_t outer = by_heads ? heads : tokens, inner = by_heads ? tokens : heads;
  const int64_t outer_stride = by_heads ? head_stride : token_stride, inner_stride = by_heads ? token_stride : head_stride;
  for (int64_t d = 0; d < outer; ++d) {
    std::optional<int64_t> k;
    if (d == 0) {
      if (inner > 1 && inner_stride < length) k = 1;  // neighbours along the inner dimension
    } else if (inner <= 1 || inner_stride == 0) {
      if (d * outer_stride < length) k = 0;
    } else {
      k = step_into(d * outer_stride, inner_stride, -(inner - 1), inner - 1, -length, length);
    }
    if (!k) continue;
    // Differences (d along the outer dimension, k along the inner one) as two rows.
    const int64_t k0 = *k < 0 ? -*k : 0, k1 = *k < 0 ? 0 : *k;
    return by_heads ? RowPair{k0, 0, k1, d} : RowPair{0, k0, d, k1};
  }
  return std::nullopt;
}

}  // namespace vkpaged::detail
