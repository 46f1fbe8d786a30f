// SPDX-License-Identifier: Apache-2.0
#pragma once
// Strided [tokens, heads, D] views (TensorView::strides; docs/api.md, "Strided views"): the
// queries, new keys and values, and outputs the operators take, so that an engine passes slices
// of one fused projection. D is contiguous; the token and head strides are free within what the
// shaders take (shader_interface.h, StridedRows): rows that start on a 32-bit word (every kernel
// reads and writes these tensors a word at a time, and two rows sharing a word would race where
// they are written) and head strides below 2^26 words. The checks refuse anything else before a
// call records, naming the view, the stride and the requirement; the rows of a view the operator
// writes must not overlap, nor those of two views it writes or reads while writing the other.
#include <cstdint>
#include <initializer_list>
#include <string>

#include "common/shader_interface.h"
#include "vk/context_impl.hpp"
#include "vkpaged/tensor.hpp"

namespace vkpaged::detail {

// A checked strided view: tokens x heads rows of head_size contiguous elements.
struct RowsView {
  BufferView memory;
  DType dtype = DType::f32;
  int64_t tokens = 0, heads = 0, head_size = 0;
  // In elements; 0 along a dimension of at most one element (its index never moves).
  int64_t token_stride = 0, head_stride = 0;
  // Bytes from the first element to the end of the last (0 without elements).
  uint64_t extent_bytes = 0;
};

// `view` (whose dtype and [tokens, heads, D] shape the caller checked) as rows: its strides
// (none negative, D contiguous, rows on words, head strides the shaders hold) and its buffer
// (present, holding the last element, 4-byte aligned, inside a vkpaged buffer it names, within
// maxStorageBufferRange); with `written`, rows that never share an element. Throws
// vkpaged::Error(invalid_argument) naming `name` otherwise.
RowsView check_rows(const ContextImpl& impl, const char* name, const TensorView& view, bool written);

// check_view's dtype and shape checks, then check_rows.
RowsView check_rows_view(const ContextImpl& impl, const char* name, const TensorView& view,
                         std::initializer_list<DType> dtypes, const Shape& shape, bool written);

// Refuses views of one buffer whose rows share an element (`why` says why that matters: "the
// queries are rotated in place"). Views whose byte ranges meet are compared row by row where they
// have the same tokens and token stride; otherwise they are refused, since no cheap check tells.
void check_disjoint_rows(const char* name_a, const RowsView& a, const char* name_b, const RowsView& b,
                         const std::string& why);

// Whether a and b are the same view of the same memory (an output that may alias an input).
bool same_rows(const RowsView& a, const RowsView& b) noexcept;

// The push words of rows bound as `bound` (StridedRows).
shader::StridedRows rows_push(const RowsView& rows, const BoundView& bound);

}  // namespace vkpaged::detail
