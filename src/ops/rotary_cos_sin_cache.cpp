// SPDX-License-Identifier: Apache-2.0
// The cos/sin cache of rotary embedding as vLLM's RotaryEmbedding._compute_cos_sin_cache
// builds it (in double here): row p = [cos(p f_0) .. cos(p f_{n-1}), sin(p f_0) .. sin(p f_{n-1})],
// n = rotary_dim / 2, f_i = base^(-2i / rotary_dim).
#include <fmt/format.h>

#include <cmath>

#include "vkpaged/error.hpp"
#include "vkpaged/rotary.hpp"

namespace vkpaged {

HostTensor rotary_cos_sin_cache(uint32_t max_position, uint32_t rotary_dim, double base, DType dtype) {
  if (!is_float_dtype(dtype))
    throw Error(ErrorCode::invalid_argument, fmt::format("dtype: {} is not f32, f16 or bf16", dtype_name(dtype)));
  if (max_position == 0) throw Error(ErrorCode::invalid_argument, "max_position: 0, the cache needs a row");
  if (rotary_dim < 2 || rotary_dim % 2 != 0)
    throw Error(ErrorCode::invalid_argument, fmt::format("rotary_dim: {} is not an even number >= 2", rotary_dim));
  if (!std::isfinite(base) || !(base > 0.0))
    throw Error(ErrorCode::invalid_argument, fmt::format("base: {} is not a finite number > 0", base));
  HostTensor cache(dtype, Shape{int64_t(max_position), int64_t(rotary_dim)});
  const uint32_t half = rotary_dim / 2;
  for (uint32_t i = 0; i < half; ++i) {
    const double frequency = std::pow(base, -2.0 * double(i) / double(rotary_dim));
    for (uint32_t p = 0; p < max_position; ++p) {
      const double angle = double(p) * frequency;
      cache.set(size_t(p) * rotary_dim + i, std::cos(angle));
      cache.set(size_t(p) * rotary_dim + half + i, std::sin(angle));
    }
  }
  return cache;
}

}  // namespace vkpaged
