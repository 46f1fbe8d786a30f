// SPDX-License-Identifier: Apache-2.0
#pragma once
// What the fuzz targets share: a failed check aborts with a message (libFuzzer then saves the
// input as a crash), bounded tensor construction, and the values a fuzzer likes to pick.
// Every target calls public vkpaged entry points with what the bytes say and accepts exactly
// two outcomes: success (then checks what came out) or vkpaged::Error. Anything else (another
// exception, a sanitizer report, a failed check, a hang) is a bug.
#include <fuzzer/FuzzedDataProvider.h>

#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <limits>
#include <optional>
#include <string>
#include <vector>

#include "vkpaged/dtype.hpp"
#include "vkpaged/tensor.hpp"

namespace vkpaged::fuzz {

[[noreturn]] inline void fail(const char* file, int line, const char* condition, const std::string& detail) {
  std::fprintf(stderr, "%s:%d: fuzz check failed: %s\n  %s\n", file, line, condition, detail.c_str());
  std::abort();
}

#define FUZZ_CHECK(condition, detail) \
  do {                                \
    if (!(condition)) ::vkpaged::fuzz::fail(__FILE__, __LINE__, #condition, (detail)); \
  } while (0)

// Largest tensor a target builds, in elements: keeps each run fast and far from any memory limit.
constexpr int64_t kMaxElements = int64_t(1) << 16;

// The element count of `dims` if it is at most `cap`, else nothing. A dimension of 0 makes the
// count 0 whatever the others are; such shapes are kept, they are the interesting ones.
inline std::optional<int64_t> bounded_numel(const std::vector<int64_t>& dims, int64_t cap = kMaxElements) {
  for (int64_t d : dims)
    if (d == 0) return 0;
  int64_t n = 1;
  for (int64_t d : dims) {
    if (d > cap / n) return std::nullopt;
    n *= d;
  }
  return n;
}

// Known issue (docs/reliability.md): an empty shape (a dimension of 0) may have other
// dimensions whose product overflows int64. Shape accepts it, and then Shape::numel (which
// multiplies left to right), CacheGeometry::block_bytes and decode_shape_of's D/x * x compute
// signed overflows. The targets skip such shapes until Shape refuses them itself.
inline bool nonzero_product_overflows(const std::vector<int64_t>& dims) {
  int64_t n = 1;
  for (int64_t d : dims)
    if (d != 0 && __builtin_mul_overflow(n, d, &n)) return true;
  return false;
}

// A zero-filled host tensor, or nothing when it would be too big (the input is then skipped).
inline std::optional<HostTensor> make_tensor(DType dtype, const std::vector<int64_t>& dims, int64_t cap = kMaxElements) {
  if (dims.size() > size_t(kMaxRank)) return std::nullopt;
  for (int64_t d : dims)
    if (d < 0) return std::nullopt;
  if (!bounded_numel(dims, cap) || nonzero_product_overflows(dims)) return std::nullopt;
  return HostTensor(dtype, Shape(dims));
}

// Any dtype the enum has, mostly `usual`.
inline DType pick_dtype(FuzzedDataProvider& p, DType usual) {
  const uint8_t b = p.ConsumeIntegral<uint8_t>();
  if (b < 192) return usual;
  return DType(b % 9);
}

// A dimension: mostly `usual`, sometimes a small value, an edge or anything non-negative.
inline int64_t pick_dim(FuzzedDataProvider& p, int64_t usual) {
  switch (p.ConsumeIntegralInRange<int>(0, 31)) {
    case 0: return 0;
    case 1: return 1;
    case 2: return usual + 1;
    case 3: return usual > 0 ? usual - 1 : 0;
    case 4: return p.ConsumeIntegralInRange<int64_t>(0, 600);
    case 5: return int64_t(1) << p.ConsumeIntegralInRange<int>(0, 62);
    case 6: return p.ConsumeIntegral<int64_t>() & std::numeric_limits<int64_t>::max();
    case 7: return int64_t(std::numeric_limits<uint32_t>::max()) + p.ConsumeIntegralInRange<int64_t>(-2, 2);
    default: return usual;
  }
}

// A float: mostly ordinary, sometimes an edge of the format or a non-finite value.
inline float pick_float(FuzzedDataProvider& p, float usual) {
  switch (p.ConsumeIntegralInRange<int>(0, 15)) {
    case 0: return 0.0f;
    case 1: return -0.0f;
    case 2: return std::numeric_limits<float>::infinity();
    case 3: return -std::numeric_limits<float>::infinity();
    case 4: return std::numeric_limits<float>::quiet_NaN();
    case 5: return std::numeric_limits<float>::denorm_min();
    case 6: return std::numeric_limits<float>::max();
    case 7: return -1.0f;
    case 8: return p.ConsumeFloatingPoint<float>();
    case 9: return p.ConsumeFloatingPointInRange<float>(-1e4f, 1e4f);
    default: return usual;
  }
}

}  // namespace vkpaged::fuzz
