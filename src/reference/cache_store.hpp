// SPDX-License-Identifier: Apache-2.0
#pragma once
// What a cache stores for an input value, shared by the cache-write references
// (cache_reference.cpp, mla_cache_reference.cpp): fp8 encode(|v| * inv_scale) with v's sign,
// others v rounded to the cache dtype (store_element rounds as the contract says).
#include <cmath>

#include "vkpaged/dtype.hpp"
#include "vkpaged/tensor.hpp"

namespace vkpaged::detail {

inline void store_cache_element(HostTensor& cache, size_t i, float v, float inv_scale) {
  if (is_fp8_dtype(cache.dtype())) v = std::copysign(std::fabs(v) * inv_scale, v);
  store_element(cache.data(), cache.dtype(), i, v);
}

}  // namespace vkpaged::detail
