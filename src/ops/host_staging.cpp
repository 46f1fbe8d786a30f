// SPDX-License-Identifier: Apache-2.0
#include "ops/host_staging.hpp"

#include <fmt/format.h>

#include <algorithm>

#include "ops/decode_validation.hpp"
#include "vkpaged/error.hpp"

namespace vkpaged::detail {

HostTensor index_words(const HostTensor& t, const char* name) {
  if (t.dtype() == DType::i32 || t.dtype() == DType::u32) return t;
  HostTensor out(DType::i32, t.shape());
  const auto values = host_index_values(t, name);
  for (size_t i = 0; i < values.size(); ++i) out.as<int32_t>()[i] = int32_t(values[i]);
  return out;
}

TensorView upload_kept(Context& ctx, std::vector<DeviceBuffer>& keep, const HostTensor& t, DType dtype) {
  keep.push_back(ctx.create_buffer(std::max<size_t>((t.bytes() + 15) / 16 * 16, 16)));
  ctx.upload(keep.back().view(), t.data(), t.bytes());
  return keep.back().tensor(dtype, t.shape());
}

TensorView output_kept(Context& ctx, std::vector<DeviceBuffer>& keep, DType dtype, const Shape& shape) {
  keep.push_back(ctx.create_buffer(std::max<size_t>(size_t(shape.numel()) * dtype_size(dtype), 16)));
  return keep.back().tensor(dtype, shape);
}

BufferView buffer_kept(Context& ctx, std::vector<DeviceBuffer>& keep, size_t bytes) {
  if (bytes == 0) return {};
  keep.push_back(ctx.create_buffer(bytes));
  return keep.back().view();
}

BufferView status_kept(Context& ctx, std::vector<DeviceBuffer>& keep) {
  keep.push_back(ctx.create_buffer(16));
  const BufferView status = keep.back().view(0, 4);
  const uint32_t zero = 0;
  ctx.upload(status, &zero, 4);
  return status;
}

void check_status_clear(Context& ctx, const BufferView& status, const char* op) {
  uint32_t word = 0;
  ctx.download(status, &word, 4);
  if (word != 0)
    throw Error(ErrorCode::internal, fmt::format("{}: the shader reported status {:#x} on validated inputs", op, word));
}

}  // namespace vkpaged::detail
