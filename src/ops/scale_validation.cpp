// SPDX-License-Identifier: Apache-2.0
#include "ops/scale_validation.hpp"

#include <fmt/format.h>

#include <cfloat>
#include <cmath>

#include "vkpaged/error.hpp"

namespace vkpaged::detail {

std::string scale_problem(float value, DType cache_dtype) {
  if (!std::isfinite(value) || !(value > 0.0f)) return "is not a finite scale > 0";
  if (!is_fp8_dtype(cache_dtype)) return "";
  // In double, both products are exact enough to compare with FLT_MAX without rounding doubt.
  const double largest = double(dtype_max(cache_dtype));
  if (largest * double(value) > double(FLT_MAX))
    return fmt::format("is too large for an {} cache: {} * scale must stay finite in f32 (scale <= FLT_MAX / {} = {})",
                       dtype_name(cache_dtype), largest, largest, double(FLT_MAX) / largest);
  if (1.0 / double(value) > double(FLT_MAX))
    return fmt::format("is too small for an {} cache: 1 / scale must stay finite in f32 (scale >= 1 / FLT_MAX = {})",
                       dtype_name(cache_dtype), 1.0 / double(FLT_MAX));
  return "";
}

void check_scale(std::string_view name, float value, DType cache_dtype) {
  const std::string problem = scale_problem(value, cache_dtype);
  if (!problem.empty()) throw Error(ErrorCode::invalid_argument, fmt::format("{}: {} {}", name, value, problem));
}

}  // namespace vkpaged::detail
