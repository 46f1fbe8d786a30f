// SPDX-License-Identifier: Apache-2.0
#pragma once
// Checks of caller views before anything is recorded: dtype, shape, size, alignment, the
// bounds of a buffer vkpaged created, and the device's storage-buffer range. Failures throw vkpaged::Error naming the argument.
#include <initializer_list>

#include "vk/context_impl.hpp"
#include "vkpaged/tensor.hpp"

namespace vkpaged::detail {

// check_range: the view is bound as a descriptor, so it must fit maxStorageBufferRange
// (views read through device addresses need not).
void check_buffer(const ContextImpl& impl, const char* name, const BufferView& view, size_t min_bytes, size_t alignment,
                  bool check_range = true);
// A contiguous view of one of `dtypes` and exactly `shape`, in a buffer as check_buffer checks it.
// (The views that take strides are checked by strided_rows.hpp's check_rows_view.)
void check_view(const ContextImpl& impl, const char* name, const TensorView& view, std::initializer_list<DType> dtypes,
                const Shape& shape, size_t alignment, bool check_range = true);
// check_view's dtype and shape checks alone.
void check_view_type(const char* name, const TensorView& view, std::initializer_list<DType> dtypes, const Shape& shape);
// Refuses a view whose strides are not a contiguous view's, naming it and its strides.
void check_contiguous(const char* name, const TensorView& view);

}  // namespace vkpaged::detail
