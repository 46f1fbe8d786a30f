// SPDX-License-Identifier: Apache-2.0
#pragma once
// The contract's argument checks for decode attention, shared by the GPU path, the CPU
// reference and the C API: each failure throws vkpaged::Error naming the argument and value.
#include "vkpaged/decode.hpp"

namespace vkpaged::detail {

inline bool is_power_of_two(uint32_t v) { return v != 0 && (v & (v - 1)) == 0; }

// Shape-level checks (dtypes, divisibility, supported head and block sizes).
void validate_decode_shape(const DecodeShape& shape);
// What the options ask of the plan (partition size against the split mode): the problem's
// check of its split options (validate_split_options).
void validate_decode_options(const DecodeOptions& options);
// Per-call values (scale, soft cap, fp8 scales), against the plan's shape (shape.softcap).
void validate_decode_params(const DecodeParams& params, const DecodeShape& shape);
// Block tables / context lengths as plain int32 values read from a host tensor of i32, u32 or i64.
std::vector<int64_t> host_index_values(const HostTensor& t, const char* name);

}  // namespace vkpaged::detail
