// SPDX-License-Identifier: Apache-2.0
#pragma once
// A GPU test that keeps the device buffers it makes (uploads, outputs, scratch) until it ends.
#include <algorithm>
#include <vector>

#include "support/test_context.hpp"
#include "vkpaged/dtype.hpp"
#include "vkpaged/tensor.hpp"

namespace vkpaged::test {

class BufferTest : public GpuTest {
 protected:
  // `h` uploaded into a buffer of its own (at least 16 bytes), as a view of its dtype and shape.
  TensorView put(const HostTensor& h) {
    kept_.push_back(ctx().create_buffer(std::max<size_t>(h.bytes(), 16)));
    ctx().upload(kept_.back().view(), h.data(), h.bytes());
    return kept_.back().tensor(h.dtype(), h.shape());
  }
  // An uninitialized device tensor (an output).
  TensorView device(DType dtype, Shape shape) {
    kept_.push_back(ctx().create_buffer(std::max<size_t>(size_t(shape.numel()) * dtype_size(dtype), 16)));
    return kept_.back().tensor(dtype, shape);
  }
  // A scratch buffer of `bytes`, or none for 0.
  BufferView scratch(size_t bytes) {
    if (bytes == 0) return {};
    kept_.push_back(ctx().create_buffer(bytes));
    return kept_.back().view();
  }
  // A device tensor's contents in its dtype.
  HostTensor fetch(const TensorView& v) {
    HostTensor h(v.dtype, v.shape);
    ctx().download(v.memory, h.data(), h.bytes());
    return h;
  }
  // A cache pool as stored: fp8 as its bytes, which the reference reads with the cache dtype.
  HostTensor fetch_pool(const TensorView& v) {
    HostTensor h(is_fp8_dtype(v.dtype) ? DType::u8 : v.dtype, v.shape);
    ctx().download(v.memory, h.data(), h.bytes());
    return h;
  }

 private:
  std::vector<DeviceBuffer> kept_;
};

}  // namespace vkpaged::test
