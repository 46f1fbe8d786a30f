// SPDX-License-Identifier: Apache-2.0
#include "ops/view_checks.hpp"

#include <fmt/format.h>

#include <algorithm>
#include <vector>

#include "vkpaged/error.hpp"

namespace vkpaged::detail {

void check_buffer(const ContextImpl& impl, const char* name, const BufferView& view, size_t min_bytes, size_t alignment,
                  bool check_range) {
  if (view.buffer == VK_NULL_HANDLE) throw Error(ErrorCode::invalid_argument, fmt::format("{}: no buffer given", name));
  if (view.size < min_bytes)
    throw Error(ErrorCode::invalid_argument,
                fmt::format("{}: buffer view of {} bytes is too small, {} bytes needed", name, view.size, min_bytes));
  if (view.offset % alignment != 0)
    throw Error(ErrorCode::invalid_argument,
                fmt::format("{}: offset {} is not a multiple of {} bytes", name, view.offset, alignment));
  vk::check_inside_buffer(impl.device, name, view);
  const VkDeviceSize align = std::max<VkDeviceSize>(impl.info.min_storage_buffer_offset_alignment, 16);
  const VkDeviceSize range = view.offset % align + view.size;
  if (check_range && range > impl.info.max_storage_buffer_range)
    throw Error(ErrorCode::unsupported,
                fmt::format("{}: a view of {} bytes exceeds the device's maxStorageBufferRange of {} bytes", name,
                            view.size, impl.info.max_storage_buffer_range));
}

void check_view_type(const char* name, const TensorView& view, std::initializer_list<DType> dtypes, const Shape& shape) {
  if (std::find(dtypes.begin(), dtypes.end(), view.dtype) == dtypes.end()) {
    std::vector<std::string_view> names;
    for (DType t : dtypes) names.push_back(dtype_name(t));
    throw Error(ErrorCode::invalid_argument, fmt::format("{}: dtype {} is not {}", name, dtype_name(view.dtype),
                                                         fmt::join(names, " or ")));
  }
  if (!(view.shape == shape))
    throw Error(ErrorCode::invalid_argument,
                fmt::format("{}: shape {} does not match the plan's {}", name, view.shape.str(), shape.str()));
}

void check_contiguous(const char* name, const TensorView& view) {
  if (view.contiguous()) return;
  std::vector<int64_t> strides(view.strides.begin(), view.strides.begin() + view.shape.rank());
  throw Error(ErrorCode::invalid_argument,
              fmt::format("{}: strides [{}] are not a contiguous {} view's; only the queries, new keys and values, "
                          "and outputs take strides (docs/api.md, \"Strided views\")",
                          name, fmt::join(strides, ", "), view.shape.str()));
}

void check_view(const ContextImpl& impl, const char* name, const TensorView& view, std::initializer_list<DType> dtypes,
                const Shape& shape, size_t alignment, bool check_range) {
  check_view_type(name, view, dtypes, shape);
  check_contiguous(name, view);
  check_buffer(impl, name, view.memory, size_t(shape.numel()) * dtype_size(view.dtype), alignment, check_range);
}

}  // namespace vkpaged::detail
