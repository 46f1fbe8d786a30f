// SPDX-License-Identifier: Apache-2.0
#include "ops/strided_rows.hpp"

#include <fmt/format.h>

#include <algorithm>
#include <limits>

#include "ops/row_overlap.hpp"
#include "ops/view_checks.hpp"
#include "vkpaged/error.hpp"

namespace vkpaged::detail {

namespace {

[[noreturn]] void refuse(const std::string& message) { throw Error(ErrorCode::invalid_argument, message); }

constexpr int64_t kMaxHeadStrideWords = int64_t(1) << (32 - ROWS_OFFSET_BITS);
constexpr const char* kStrideNames[3] = {"token stride", "head stride", "element stride"};

}  // namespace

RowsView check_rows(const ContextImpl& impl, const char* name, const TensorView& view, bool written) {
  RowsView r;
  r.memory = view.memory;
  r.dtype = view.dtype;
  r.tokens = view.shape[0];
  r.heads = view.shape[1];
  r.head_size = view.shape[2];
  const int64_t element = int64_t(dtype_size(view.dtype));
  int64_t strides[3];
  for (int i = 0; i < 3; ++i) {
    strides[i] = view.stride(i);
    if (strides[i] < 0) refuse(fmt::format("{}: {} {} is negative", name, kStrideNames[i], strides[i]));
  }
  if (r.head_size > 1 && strides[2] != 1)
    refuse(fmt::format("{}: element stride {} is not 1: the D = {} elements of a row must be contiguous", name,
                       strides[2], r.head_size));
  r.token_stride = r.tokens > 1 ? strides[0] : 0;
  r.head_stride = r.heads > 1 ? strides[1] : 0;
  for (int i = 0; i < 2; ++i) {
    const int64_t s = i == 0 ? r.token_stride : r.head_stride;
    if (s > std::numeric_limits<int64_t>::max() / element)
      refuse(fmt::format("{}: {} {} elements is past 2^63 bytes", name, kStrideNames[i], s));
    if (s * element % 4 != 0)
      refuse(fmt::format("{}: {} {} elements ({} bytes) does not keep rows 4-byte aligned (the kernels read and write "
                         "whole 32-bit words)",
                         name, kStrideNames[i], s, s * element));
  }
  if (r.head_stride * element / 4 >= kMaxHeadStrideWords)
    refuse(fmt::format("{}: head stride {} elements ({} bytes) is past the {} bytes the shaders' head strides hold",
                       name, r.head_stride, r.head_stride * element, kMaxHeadStrideWords * 4));

  // The last element: (tokens - 1, heads - 1, D - 1).
  if (view.shape.numel() > 0) {
    int64_t last = r.head_size - 1, term = 0;
    for (const auto& [n, s] : {std::pair{r.tokens, r.token_stride}, std::pair{r.heads, r.head_stride}})
      if (__builtin_mul_overflow(n - 1, s, &term) || __builtin_add_overflow(last, term, &last))
        refuse(fmt::format("{}: a view of {} with token stride {} and head stride {} spans more than 2^63 elements",
                           name, view.shape.str(), r.token_stride, r.head_stride));
    if (last >= std::numeric_limits<int64_t>::max() / element)
      refuse(fmt::format("{}: a view of {} with token stride {} and head stride {} spans more than 2^63 bytes", name,
                         view.shape.str(), r.token_stride, r.head_stride));
    r.extent_bytes = uint64_t(last + 1) * uint64_t(element);
  }
  if (!view.memory.empty() && view.memory.size < r.extent_bytes && !view.contiguous())
    refuse(fmt::format("{}: buffer view of {} bytes is too small: its last row (token {}, head {}) ends at byte {} "
                       "(token stride {}, head stride {} elements)",
                       name, view.memory.size, r.tokens - 1, r.heads - 1, r.extent_bytes, r.token_stride,
                       r.head_stride));
  check_buffer(impl, name, view.memory, size_t(r.extent_bytes), 4);

  if (written)
    if (const auto pair = overlapping_rows(r.tokens, r.heads, r.head_size, r.token_stride, r.head_stride))
      refuse(fmt::format("{}: rows (token {}, head {}) and (token {}, head {}) overlap (token stride {}, head stride {} "
                         "elements, rows of D = {}): the operator writes them",
                         name, pair->t0, pair->h0, pair->t1, pair->h1, r.token_stride, r.head_stride, r.head_size));
  return r;
}

RowsView check_rows_view(const ContextImpl& impl, const char* name, const TensorView& view,
                         std::initializer_list<DType> dtypes, const Shape& shape, bool written) {
  check_view_type(name, view, dtypes, shape);
  return check_rows(impl, name, view, written);
}

bool same_rows(const RowsView& a, const RowsView& b) noexcept {
  return a.memory.buffer == b.memory.buffer && a.memory.offset == b.memory.offset && a.dtype == b.dtype &&
         a.tokens == b.tokens && a.heads == b.heads && a.head_size == b.head_size &&
         a.token_stride == b.token_stride && a.head_stride == b.head_stride;
}

void check_disjoint_rows(const char* name_a, const RowsView& a, const char* name_b, const RowsView& b,
                         const std::string& why) {
  if (a.memory.buffer != b.memory.buffer || a.extent_bytes == 0 || b.extent_bytes == 0) return;
  const int64_t oa = int64_t(a.memory.offset), ob = int64_t(b.memory.offset);
  if (oa >= ob + int64_t(b.extent_bytes) || ob >= oa + int64_t(a.extent_bytes)) return;  // apart
  const int64_t ea = int64_t(dtype_size(a.dtype)), eb = int64_t(dtype_size(b.dtype));
  // In bytes: row (ta, ha) starts at oa + ta * ts_a + ha * hs_a and holds row_a bytes, row (tb, hb)
  // likewise; they overlap iff pa < pb + row_b and pb < pa + row_a: pa - pb in (-row_a, row_b).
  const int64_t ts_a = a.token_stride * ea, hs_a = a.head_stride * ea, row_a = a.head_size * ea;
  const int64_t ts_b = b.token_stride * eb, hs_b = b.head_stride * eb, row_b = b.head_size * eb;
  auto meet = [&](int64_t tb, int64_t hb, int64_t ta, int64_t ha) {
    refuse(fmt::format("{}: row (token {}, head {}) overlaps {}'s row (token {}, head {}) in one buffer ({})", name_b, tb,
                       hb, name_a, ta, ha, why));
  };
  if (a.tokens == b.tokens && ts_a == ts_b) {
    // Slices of one tensor (q, k and v of a projection): per pair of heads, ta - tb solved for.
    for (int64_t ha = 0; ha < a.heads; ++ha)
      for (int64_t hb = 0; hb < b.heads; ++hb) {
        const int64_t x = (oa + ha * hs_a) - (ob + hb * hs_b);
        std::optional<int64_t> k;  // ta - tb
        if (a.tokens <= 1 || ts_a == 0) {
          if (x > -row_a && x < row_b) k = 0;
        } else {
          k = step_into(x, ts_a, -(a.tokens - 1), a.tokens - 1, -row_a, row_b);
        }
        if (k) meet(*k < 0 ? -*k : 0, hb, *k < 0 ? 0 : *k, ha);
      }
    return;
  }
  // Otherwise each row of b against a's lattice, within a bound on the work (beyond it, refused:
  // views laid out that differently over the same bytes are no engine's tensors).
  constexpr int64_t kMaxWork = int64_t(1) << 24;
  if (b.tokens * b.heads > kMaxWork / std::max<int64_t>(1, std::min(a.tokens, a.heads)))
    refuse(fmt::format("{}: its rows share bytes of one buffer with {}'s, laid out with another token count or stride; "
                       "too many to check for overlapping rows ({})",
                       name_b, name_a, why));
  for (int64_t tb = 0; tb < b.tokens; ++tb)
    for (int64_t hb = 0; hb < b.heads; ++hb) {
      const int64_t pb = ob + tb * ts_b + hb * hs_b;
      if (const auto r = row_starting_between(a.tokens, a.heads, ts_a, hs_a, pb - row_a - oa, pb + row_b - oa))
        meet(tb, hb, r->token, r->head);
    }
}

shader::StridedRows rows_push(const RowsView& rows, const BoundView& bound) {
  // Whole words: check_rows kept the strides on words and the head stride below 2^26 words; the
  // token stride fits 32 bits, as the rows lie within the bound range.
  const int64_t element = int64_t(dtype_size(rows.dtype));
  if (bound.word_offset > ROWS_OFFSET_MASK)
    throw Error(ErrorCode::internal, fmt::format("a view bound {} words past its range's start (at most {})",
                                                 bound.word_offset, ROWS_OFFSET_MASK));
  shader::StridedRows p;
  p.token_stride = uint32_t(rows.token_stride * element / 4);
  p.head_and_offset = uint32_t(rows.head_stride * element / 4) << ROWS_OFFSET_BITS | bound.word_offset;
  return p;
}

}  // namespace vkpaged::detail
