// SPDX-License-Identifier: Apache-2.0
#pragma once
// Checks of host results given to merge_attention (GPU convenience and CPU reference).
#include <fmt/format.h>

#include "vkpaged/error.hpp"
#include "vkpaged/tensor.hpp"

namespace vkpaged::detail {

inline void check_merge_input(const HostTensor& out, const HostTensor& lse, const char* name) {
  if (out.shape().rank() != 3 || !is_float_dtype(out.dtype()))
    throw Error(ErrorCode::invalid_argument, fmt::format("{}.output: shape {} dtype {} is not [S, H, D] f32/f16/bf16", name,
                                                         out.shape().str(), dtype_name(out.dtype())));
  const Shape want{out.shape()[0], out.shape()[1]};
  if (lse.dtype() != DType::f32 || !(lse.shape() == want))
    throw Error(ErrorCode::invalid_argument, fmt::format("{}.lse: shape {} dtype {} is not {} f32 (decode with want_lse)", name,
                                                         lse.shape().str(), dtype_name(lse.dtype()), want.str()));
}

}  // namespace vkpaged::detail
