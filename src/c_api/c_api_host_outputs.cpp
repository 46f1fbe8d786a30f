// SPDX-License-Identifier: Apache-2.0
#include "c_api/c_api_host_outputs.hpp"

#include <fmt/format.h>

namespace vkpaged::c_api {

namespace {

// `rows` ("S" or "T"): the rows of output and lse, each of heads * head_size values.
void check_rows(size_t rows, const char* rows_name, uint32_t heads, uint32_t head_size, DType dtype,
                const HostOutputs& out) {
  const size_t lse_rows = rows * heads;
  const size_t want = lse_rows * head_size * dtype_size(dtype);
  if (want > 0) require(out.output, "output");
  if (out.output_bytes < want)
    throw Error(ErrorCode::invalid_argument, fmt::format("output_bytes: {} is less than {} * H * D * {} = {}",
                                                         out.output_bytes, rows_name, dtype_size(dtype), want));
  if (out.lse != nullptr && out.lse_count < lse_rows)
    throw Error(ErrorCode::invalid_argument,
                fmt::format("lse_count: {} is less than {} * H = {}", out.lse_count, rows_name, lse_rows));
}

}  // namespace

void check_outputs(const DecodeShape& s, const HostOutputs& out) {
  check_rows(s.num_seqs, "S", s.num_heads, s.head_size, s.query_dtype, out);
}

void check_outputs(const AttentionShape& s, const HostOutputs& out) {
  check_rows(s.num_query_tokens, "T", s.num_heads, s.head_size, s.query_dtype, out);
}

}  // namespace vkpaged::c_api
