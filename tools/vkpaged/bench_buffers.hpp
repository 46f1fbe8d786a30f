// SPDX-License-Identifier: Apache-2.0
#pragma once
// The device buffers of one bench case (the prefill and cache-write suites), allocated one
// by one as the case is set up and freed with it.
#include <algorithm>
#include <vector>

#include "vkpaged/context.hpp"

namespace vkpaged::cli {

class BenchBuffers {
 public:
  explicit BenchBuffers(Context& ctx) : ctx_(ctx) {}

  // A tensor in a buffer of its own (at least 16 bytes, so that an empty one still binds).
  TensorView make(DType dtype, const Shape& shape) {
    buffers_.push_back(ctx_.create_buffer(std::max<size_t>(size_t(shape.numel()) * dtype_size(dtype), 16)));
    return buffers_.back().tensor(dtype, shape);
  }
  // The same, holding `data` (shape.numel() elements of `dtype`).
  TensorView upload(DType dtype, const Shape& shape, const void* data) {
    TensorView v = make(dtype, shape);
    ctx_.upload(v.memory, data, v.bytes());
    return v;
  }
  BufferView bytes(size_t size) {
    buffers_.push_back(ctx_.create_buffer(size));
    return buffers_.back().view();
  }

 private:
  Context& ctx_;
  std::vector<DeviceBuffer> buffers_;
};

}  // namespace vkpaged::cli
