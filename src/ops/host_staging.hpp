// SPDX-License-Identifier: Apache-2.0
#pragma once
// The host-tensor conveniences' staging (decode_attention, batch_attention): device buffers made
// for one call and kept until it returns.
#include <vector>

#include "vkpaged/context.hpp"
#include "vkpaged/tensor.hpp"

namespace vkpaged::detail {

// An index tensor as the GPU reads it, 32-bit words; i64 values must have been range-checked
// (decode_shape_of, attention_shape_of). `name` names it in errors.
HostTensor index_words(const HostTensor& t, const char* name);

// A buffer holding `t`, read as `dtype` and kept in `keep`. Whole 16-byte multiples: a u8
// tensor's last word is read whole.
TensorView upload_kept(Context& ctx, std::vector<DeviceBuffer>& keep, const HostTensor& t, DType dtype);

// A buffer for an output of `dtype` and `shape`, kept in `keep`.
TensorView output_kept(Context& ctx, std::vector<DeviceBuffer>& keep, DType dtype, const Shape& shape);

}  // namespace vkpaged::detail
