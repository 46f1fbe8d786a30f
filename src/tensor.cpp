// SPDX-License-Identifier: Apache-2.0
#include "vkpaged/tensor.hpp"

#include <fmt/format.h>

#include <cstdint>

#include "vkpaged/error.hpp"

namespace vkpaged {

Shape::Shape(std::initializer_list<int64_t> dims) : Shape(std::vector<int64_t>(dims)) {}

Shape::Shape(const std::vector<int64_t>& dims) {
  if (dims.size() > size_t(kMaxRank))
    throw Error(ErrorCode::invalid_argument, fmt::format("shape: rank {} exceeds the maximum of {}", dims.size(), kMaxRank));
  for (size_t i = 0; i < dims.size(); ++i) {
    if (dims[i] < 0) throw Error(ErrorCode::invalid_argument, fmt::format("shape: dimension {} is negative ({})", i, dims[i]));
    dims_[i] = dims[i];
  }
  // The element count must fit int64 even when another dimension is 0 (numel and byte sizes
  // are computed in int64 everywhere).
  int64_t product = 1;
  for (int64_t d : dims) {
    if (d == 0) continue;
    if (product > INT64_MAX / d)
      throw Error(ErrorCode::invalid_argument, fmt::format("shape: [{}] has more than 2^63 elements", fmt::join(dims, ", ")));
    product *= d;
  }
  rank_ = int(dims.size());
}

int64_t Shape::numel() const noexcept {
  int64_t n = 1;
  for (int i = 0; i < rank_; ++i) n *= dims_[size_t(i)];
  return n;
}

bool Shape::operator==(const Shape& other) const noexcept {
  if (rank_ != other.rank_) return false;
  for (int i = 0; i < rank_; ++i)
    if (dims_[size_t(i)] != other.dims_[size_t(i)]) return false;
  return true;
}

std::string Shape::str() const { return fmt::format("[{}]", fmt::join(dims(), ", ")); }

HostTensor::HostTensor(DType dtype, Shape shape)
    : dtype_(dtype), shape_(shape), data_(size_t(shape.numel()) * dtype_size(dtype)) {}

double HostTensor::get(size_t i) const noexcept {
  switch (dtype_) {
    case DType::i32: return as<int32_t>()[i];
    case DType::u32: return as<uint32_t>()[i];
    case DType::i64: return double(as<int64_t>()[i]);
    case DType::u8: return as<uint8_t>()[i];
    default: return load_element(data(), dtype_, i);
  }
}

void HostTensor::set(size_t i, double value) noexcept {
  switch (dtype_) {
    case DType::i32: as<int32_t>()[i] = int32_t(value); break;
    case DType::u32: as<uint32_t>()[i] = uint32_t(value); break;
    case DType::i64: as<int64_t>()[i] = int64_t(value); break;
    case DType::u8: as<uint8_t>()[i] = uint8_t(value); break;
    default: store_element(data(), dtype_, i, float(value)); break;
  }
}

}  // namespace vkpaged
