// SPDX-License-Identifier: Apache-2.0
#include "support/strided_views.hpp"

#include <cstring>

namespace vkpaged::test {

namespace {

// Calls fn(byte offset of the row in the image, byte offset of the row in a contiguous tensor,
// row bytes) for every row of the slice.
template <typename Fn>
void for_each_row(const Slice& s, DType dtype, const Shape& shape, Fn fn) {
  const size_t e = dtype_size(dtype), row = size_t(shape[2]) * e;
  for (int64_t t = 0; t < shape[0]; ++t)
    for (int64_t h = 0; h < shape[1]; ++h)
      fn(s.offset + size_t(t * s.token_stride + h * s.head_stride) * e, size_t(t * shape[1] + h) * row, row);
}

}  // namespace

FusedProjection fused_projection(int64_t tokens, int64_t heads, int64_t kv_heads, int64_t head_size, DType dtype,
                                 size_t offset) {
  const int64_t width = (heads + 2 * kv_heads) * head_size;
  const size_t e = dtype_size(dtype);
  FusedProjection f;
  f.q = {offset, width, head_size};
  f.k = {offset + size_t(heads * head_size) * e, width, head_size};
  f.v = {offset + size_t((heads + kv_heads) * head_size) * e, width, head_size};
  f.bytes = offset + size_t(tokens * width) * e;
  return f;
}

DeviceImage::DeviceImage(Context& ctx, size_t bytes, uint8_t fill)
    : ctx_(ctx), buffer_(ctx.create_buffer(bytes)), host_(bytes, fill) {
  upload();
}

void DeviceImage::put(const Slice& slice, const HostTensor& rows) {
  const auto* src = static_cast<const uint8_t*>(rows.data());
  for_each_row(slice, rows.dtype(), rows.shape(),
               [&](size_t at, size_t from, size_t n) { std::memcpy(host_.data() + at, src + from, n); });
}

void DeviceImage::upload() { ctx_.upload(buffer_.view(), host_.data(), host_.size()); }
void DeviceImage::download() { ctx_.download(buffer_.view(), host_.data(), host_.size()); }

HostTensor DeviceImage::get(const Slice& slice, DType dtype, const Shape& shape) const {
  HostTensor t(dtype, shape);
  auto* dst = static_cast<uint8_t*>(t.data());
  for_each_row(slice, dtype, shape, [&](size_t at, size_t to, size_t n) { std::memcpy(dst + to, host_.data() + at, n); });
  return t;
}

TensorView DeviceImage::view(const Slice& slice, DType dtype, const Shape& shape) const {
  return buffer_.strided_tensor(dtype, shape, Strides{slice.token_stride, slice.head_stride}, slice.offset);
}

std::vector<uint8_t> DeviceImage::outside(std::initializer_list<Rows> written) const {
  std::vector<uint8_t> image = host_;
  for (const Rows& r : written)
    for_each_row(r.slice, r.dtype, r.shape, [&](size_t at, size_t, size_t n) { std::memset(image.data() + at, 0, n); });
  return image;
}

::testing::AssertionResult same_bits(const HostTensor& got, const HostTensor& want) {
  if (got.dtype() != want.dtype() || !(got.shape() == want.shape()))
    return ::testing::AssertionFailure() << "dtype or shape differ: " << got.shape().str() << " vs " << want.shape().str();
  const auto* a = static_cast<const uint8_t*>(got.data());
  const auto* b = static_cast<const uint8_t*>(want.data());
  for (size_t i = 0; i < got.bytes(); ++i)
    if (a[i] != b[i])
      return ::testing::AssertionFailure() << "byte " << i << " (element " << i / dtype_size(got.dtype()) << ") differs";
  return ::testing::AssertionSuccess();
}

}  // namespace vkpaged::test
