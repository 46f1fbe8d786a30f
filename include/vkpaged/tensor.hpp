// SPDX-License-Identifier: Apache-2.0
#pragma once
// Views of memory the operators read and write. The library never needs to own an engine's
// buffers: a BufferView names a range of a VkBuffer, a TensorView adds dtype, shape and strides.
// HostTensor is plain host memory with the same description (reference, tests, CLI).
#include <vulkan/vulkan.h>

#include <array>
#include <climits>
#include <cstddef>
#include <cstdint>
#include <initializer_list>
#include <string>
#include <vector>

#include "vkpaged/dtype.hpp"
#include "vkpaged/export.hpp"

namespace vkpaged {

constexpr int kMaxRank = 5;

// Row-major (C order) shape of up to kMaxRank dimensions.
class VKPAGED_API Shape {
 public:
  Shape() = default;
  Shape(std::initializer_list<int64_t> dims);
  explicit Shape(const std::vector<int64_t>& dims);

  int rank() const noexcept { return rank_; }
  int64_t operator[](int i) const noexcept { return dims_[size_t(i)]; }
  int64_t numel() const noexcept;
  std::vector<int64_t> dims() const { return {dims_.begin(), dims_.begin() + rank_}; }
  bool operator==(const Shape& other) const noexcept;
  std::string str() const;  // "[2, 8, 128]"

 private:
  std::array<int64_t, kMaxRank> dims_{};
  int rank_ = 0;
};

// A byte range of a VkBuffer. size == VK_WHOLE_SIZE is not accepted: views carry real sizes so
// that every operator can check that its inputs fit before recording.
struct BufferView {
  VkBuffer buffer = VK_NULL_HANDLE;
  VkDeviceSize offset = 0;
  VkDeviceSize size = 0;
  bool empty() const noexcept { return buffer == VK_NULL_HANDLE; }
};

// Per dimension, the elements from one index to the next. 0 stands for the row-major stride
// (the product of the later dimensions), so the default, all zeros, is a contiguous view.
using Strides = std::array<int64_t, kMaxRank>;

// A typed view of device memory. Most views are contiguous; the operators' queries, new keys and
// values, and outputs ([T, heads, D]) also take a token and a head stride, D staying contiguous
// (docs/api.md, "Strided views"), so that an engine passes slices of one fused projection:
//   TensorView key{slice, DType::f16, Shape{T, Hkv, D}, Strides{(H + 2 * Hkv) * D}};
struct TensorView {
  BufferView memory;
  DType dtype = DType::f32;
  Shape shape;
  Strides strides{};
  bool empty() const noexcept { return memory.empty(); }
  // Dimension i's stride in elements, a 0 in `strides` resolved to the row-major one.
  int64_t stride(int i) const noexcept {
    if (strides[size_t(i)] != 0) return strides[size_t(i)];
    int64_t s = 1;
    for (int j = i + 1; j < shape.rank(); ++j) s *= shape[j];
    return s;
  }
  // Whether the elements lie as a row-major view's: every dimension of more than one element at
  // its row-major stride (a dimension of one element never moves, whatever its stride says).
  bool contiguous() const noexcept {
    int64_t s = 1;
    for (int i = shape.rank() - 1; i >= 0; --i) {
      if (shape[i] > 1 && strides[size_t(i)] != 0 && strides[size_t(i)] != s) return false;
      s *= shape[i];
    }
    return true;
  }
  // The bytes from the first element to the end of the last, which memory.size must hold:
  // numel * element size for a contiguous view, 0 without elements. (Strides that do not fit
  // int64 are refused by every operator; this saturates at SIZE_MAX.)
  size_t bytes() const noexcept {
    if (shape.numel() == 0) return 0;
    if (contiguous()) return size_t(shape.numel()) * dtype_size(dtype);
    unsigned long long last = 0;  // the last element's index
    for (int i = 0; i < shape.rank(); ++i) {
      const int64_t s = stride(i);
      const unsigned long long n = (unsigned long long)(shape[i] - 1);
      if (s < 0) return SIZE_MAX;
      if (n != 0 && (unsigned long long)s > (ULLONG_MAX - last) / n) return SIZE_MAX;
      last += n * (unsigned long long)s;
    }
    if (last >= SIZE_MAX / dtype_size(dtype)) return SIZE_MAX;
    return size_t(last + 1) * dtype_size(dtype);
  }
};

// Host memory with dtype and shape; the CPU reference and the CLI work on these.
class VKPAGED_API HostTensor {
 public:
  HostTensor() = default;
  HostTensor(DType dtype, Shape shape);  // zero-filled

  DType dtype() const noexcept { return dtype_; }
  const Shape& shape() const noexcept { return shape_; }
  int64_t numel() const noexcept { return empty() ? 0 : shape_.numel(); }  // an absent tensor holds nothing
  size_t bytes() const noexcept { return data_.size(); }
  void* data() noexcept { return data_.data(); }
  const void* data() const noexcept { return data_.data(); }
  bool empty() const noexcept { return data_.empty() && shape_.rank() == 0; }

  template <typename T>
  T* as() noexcept { return reinterpret_cast<T*>(data_.data()); }
  template <typename T>
  const T* as() const noexcept { return reinterpret_cast<const T*>(data_.data()); }

  // Element i as a float (float dtypes) or as an integer converted to double (int dtypes).
  double get(size_t i) const noexcept;
  // Sets element i, rounding to the dtype as the contract says.
  void set(size_t i, double value) noexcept;

 private:
  DType dtype_ = DType::f32;
  Shape shape_;
  std::vector<std::byte> data_;
};

}  // namespace vkpaged
