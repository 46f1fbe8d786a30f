// SPDX-License-Identifier: Apache-2.0
#pragma once
// Strided device views for the tests (TensorView::strides): a device buffer with a host image of
// its bytes, in which [T, heads, D] tensors lie as slices, the way an engine's tensors do: q, k
// and v of one fused projection [T, (H + 2 Hkv) * D], an output written into part of each row of
// a larger buffer, or head-major. Rows are copied in and out of the image one by one, and the
// bytes outside a slice's rows can be compared before and after a call (nothing else written).
#include <gtest/gtest.h>

#include <cstddef>
#include <cstdint>
#include <initializer_list>
#include <vector>

#include "vkpaged/context.hpp"
#include "vkpaged/tensor.hpp"

namespace vkpaged::test {

// Where a [T, heads, D] tensor lies in an image: its first element's byte, its strides in
// elements (D contiguous).
struct Slice {
  size_t offset = 0;
  int64_t token_stride = 0;
  int64_t head_stride = 0;
};

// q, k and v of one fused projection [T, (H + 2 Hkv) * D] starting at `offset` bytes.
struct FusedProjection {
  Slice q, k, v;
  size_t bytes = 0;  // the image size the projection needs from 0
};
FusedProjection fused_projection(int64_t tokens, int64_t heads, int64_t kv_heads, int64_t head_size, DType dtype,
                                 size_t offset);

class DeviceImage {
 public:
  // A device buffer of `bytes`, every byte `fill` (0xff: NaN in every float dtype, so a read
  // outside the slices shows), mirrored on the host.
  DeviceImage(Context& ctx, size_t bytes, uint8_t fill = 0xff);

  // Rows of `rows` ([T, heads, D]) into the host image at `slice`; upload() sends the image.
  void put(const Slice& slice, const HostTensor& rows);
  void upload();
  // The device bytes into the host image.
  void download();
  // The [T, heads, D] tensor of `dtype` at `slice` of the host image.
  HostTensor get(const Slice& slice, DType dtype, const Shape& shape) const;
  // The device view of that tensor.
  TensorView view(const Slice& slice, DType dtype, const Shape& shape) const;

  // The host image with the rows of the given tensors zeroed: what a call that writes only them
  // leaves unchanged.
  struct Rows {
    Slice slice;
    DType dtype;
    Shape shape;
  };
  std::vector<uint8_t> outside(std::initializer_list<Rows> written) const;
  const std::vector<uint8_t>& bytes() const { return host_; }

 private:
  Context& ctx_;
  DeviceBuffer buffer_;
  std::vector<uint8_t> host_;
};

// The same rows bit for bit (dtype, shape and bytes).
::testing::AssertionResult same_bits(const HostTensor& got, const HostTensor& want);

}  // namespace vkpaged::test
