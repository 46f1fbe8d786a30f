// SPDX-License-Identifier: Apache-2.0
#pragma once
// Helpers shared by the cache-operation tests: random host tensors in the contract's layouts,
// device round trips, byte-exact comparison and "refused, naming X" checks.
#include <gtest/gtest.h>

#include <cmath>
#include <cstring>
#include <functional>
#include <random>
#include <string>
#include <vector>

#include "support/expect_error.hpp"
#include "support/test_context.hpp"
#include "vkpaged/cache_ops.hpp"
#include "vkpaged/error.hpp"
#include "vkpaged/reference.hpp"

// In their own namespace: the tests share one binary, and other files have helpers of these names.
namespace vkpaged::test::cache_helpers {

inline Shape key_cache_shape(DType t, int64_t n, int64_t hkv, int64_t d, int64_t b) {
  const int64_t x = cache_pack_factor(t);
  return Shape{n, hkv, d / x, b, x};
}
inline Shape value_cache_shape(int64_t n, int64_t hkv, int64_t d, int64_t b) { return Shape{n, hkv, d, b}; }
// A layer's key and value cache shapes in any layout (cache_ops.hpp's table).
inline Shape key_cache_shape(KvLayout layout, DType t, int64_t n, int64_t hkv, int64_t d, int64_t b) {
  switch (layout) {
    case KvLayout::nhd: return Shape{n, b, hkv, d};
    case KvLayout::hnd: return Shape{n, hkv, b, d};
    case KvLayout::vllm: break;
  }
  return key_cache_shape(t, n, hkv, d, b);
}
inline Shape value_cache_shape(KvLayout layout, int64_t n, int64_t hkv, int64_t d, int64_t b) {
  return layout == KvLayout::vllm ? value_cache_shape(n, hkv, d, b) : key_cache_shape(layout, DType::f32, n, hkv, d, b);
}
inline constexpr KvLayout kAllLayouts[] = {KvLayout::vllm, KvLayout::nhd, KvLayout::hnd};

// Values in (-1, 1) for float dtypes; for fp8, random codes that are not NaN (or Inf).
inline HostTensor random_tensor(DType t, Shape shape, uint32_t seed) {
  HostTensor h(t, shape);
  std::mt19937 rng(seed);
  if (is_fp8_dtype(t)) {
    auto* bytes = h.as<uint8_t>();
    for (int64_t i = 0; i < h.numel(); ++i) {
      uint8_t c;
      do c = uint8_t(rng());
      while (std::isnan(load_element(&c, t, 0)) || std::isinf(load_element(&c, t, 0)));
      bytes[i] = c;
    }
    return h;
  }
  std::uniform_real_distribution<float> u(-1.0f, 1.0f);
  for (int64_t i = 0; i < h.numel(); ++i) h.set(size_t(i), u(rng));
  return h;
}

// A device buffer holding a host tensor (at least 16 bytes, so empty tensors still bind).
struct DeviceTensor {
  DeviceBuffer buffer;
  TensorView view;
};
inline DeviceTensor upload(Context& ctx, const HostTensor& h, MemoryKind kind = MemoryKind::device) {
  DeviceTensor d;
  d.buffer = ctx.create_buffer(std::max<size_t>(h.bytes(), 16), kind);
  if (h.bytes()) ctx.upload(d.buffer.view(), h.data(), h.bytes());
  d.view = d.buffer.tensor(h.dtype(), h.shape());
  return d;
}
// Places a host tensor at `offset` of an existing buffer (views that do not start at 0).
inline TensorView upload_at(Context& ctx, const DeviceBuffer& buffer, size_t offset, const HostTensor& h) {
  TensorView v = buffer.tensor(h.dtype(), h.shape(), offset);
  if (h.bytes()) ctx.upload(v.memory, h.data(), h.bytes());
  return v;
}
inline HostTensor download(Context& ctx, const TensorView& v) {
  HostTensor h(v.dtype, v.shape);
  if (h.bytes()) ctx.download(v.memory, h.data(), h.bytes());
  return h;
}
inline HostTensor download(Context& ctx, const DeviceTensor& d) {
  HostTensor h(d.view.dtype, d.view.shape);
  if (h.bytes()) ctx.download(d.view.memory, h.data(), h.bytes());
  return h;
}

inline ::testing::AssertionResult bytes_equal(const HostTensor& got, const HostTensor& want) {
  if (got.bytes() != want.bytes() || got.dtype() != want.dtype())
    return ::testing::AssertionFailure() << "sizes or dtypes differ: " << got.bytes() << " vs " << want.bytes();
  const auto* a = static_cast<const uint8_t*>(got.data());
  const auto* b = static_cast<const uint8_t*>(want.data());
  size_t mismatches = 0, first = 0;
  for (size_t i = 0; i < got.bytes(); ++i)
    if (a[i] != b[i] && mismatches++ == 0) first = i;
  if (mismatches == 0) return ::testing::AssertionSuccess();
  return ::testing::AssertionFailure() << mismatches << " bytes differ, first at byte " << first << " (got 0x"
                                       << std::hex << int(a[first]) << ", want 0x" << int(b[first]) << ")";
}

inline int mantissa_bits(DType t) {
  switch (t) {
    case DType::f32: return 23;
    case DType::f16: return 10;
    case DType::bf16: return 7;
    case DType::fp8_e4m3: return 3;
    case DType::fp8_e5m2: return 2;
    default: return 0;
  }
}

// Element by element within one unit in the last place of `precision` (the coarsest format a
// value went through), plus `floor` (subnormal spacing, f32 rounding of the rotation): the GPU
// rotates in f32, the reference in double, so a result on a rounding boundary may land on the
// neighbouring value.
inline ::testing::AssertionResult values_close(const HostTensor& got, const HostTensor& want, DType precision,
                                 double floor = 1e-6) {
  if (got.dtype() != want.dtype() || !(got.shape() == want.shape()))
    return ::testing::AssertionFailure() << "dtypes or shapes differ";
  const double relative = std::ldexp(1.0, -mantissa_bits(precision));
  size_t bad = 0, first = 0;
  double got_first = 0, want_first = 0;
  for (int64_t i = 0; i < got.numel(); ++i) {
    const double a = got.get(size_t(i)), b = want.get(size_t(i));
    if (std::fabs(a - b) <= relative * std::max(std::fabs(a), std::fabs(b)) + floor) continue;
    if (bad++ == 0) {
      first = size_t(i);
      got_first = a;
      want_first = b;
    }
  }
  if (bad == 0) return ::testing::AssertionSuccess();
  return ::testing::AssertionFailure() << bad << " of " << got.numel() << " elements differ, first " << first
                                       << ": got " << got_first << ", want " << want_first;
}

// Runs `call`, expecting vkpaged::Error(invalid_argument) whose message contains `name`.
using vkpaged::test::expect_refused;

// Records `record` inside a real command buffer: a refusal must leave it empty and valid.
inline void expect_refused_recording(Context& ctx, const std::function<void(VkCommandBuffer)>& record,
                                     const std::string& name) {
  ctx.run_and_wait([&](VkCommandBuffer cmd) { expect_refused([&] { record(cmd); }, name); });
}

inline uint32_t read_status(Context& ctx, const DeviceBuffer& status) {
  uint32_t s = 0;
  ctx.download(status.view(0, 4), &s, 4);
  return s;
}

}  // namespace vkpaged::test::cache_helpers
