// SPDX-License-Identifier: Apache-2.0
#pragma once
// The contract's rule for scales (docs/contract.md, "Scales"), in one place: decode, the cache
// operations, fp8 scale calibration, the CPU references and the CLI all check through it.
#include <string>
#include <string_view>

#include "vkpaged/dtype.hpp"

namespace vkpaged::detail {

// Why `value` is not a valid scale, or "" when it is. Every scale must be finite and > 0. For an
// fp8 cache (`cache_dtype` fp8_e4m3 or fp8_e5m2) a k_scale or v_scale must also keep the format's
// largest value finite in f32 (dtype_max * value <= FLT_MAX, exactly) and have a finite
// reciprocal (value >= 1 / FLT_MAX: reshape_and_cache stores element * (1 / scale)). Other
// dtypes (the softmax scale, caches that are not fp8) take only the first rule.
std::string scale_problem(float value, DType cache_dtype = DType::f32);

// Throws Error(invalid_argument) "<name>: <value> <problem>" when scale_problem finds one.
void check_scale(std::string_view name, float value, DType cache_dtype = DType::f32);

}  // namespace vkpaged::detail
