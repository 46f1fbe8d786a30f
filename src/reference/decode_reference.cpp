// SPDX-License-Identifier: Apache-2.0
// CPU reference of decode attention: the one-token case of the multi-query reference
// (attention_reference.cpp), the only place the contract's math is written. Each sequence of
// length L > 0 is a request of one new token at position L - 1; a sequence of length 0 attends
// nothing (outputs 0, LSE the sink's logit or -inf), which a request of the multi-query form
// cannot express, so it stays out of the batch.
#include <cstring>
#include <limits>
#include <vector>

#include "ops/decode_validation.hpp"
#include "ops/host_page_tables.hpp"
#include "vkpaged/reference.hpp"

namespace vkpaged::reference {

DecodeResult decode_attention(const DecodeInputs& in, const DecodeOptions& options, const DecodeParams& params,
                              bool want_lse) {
  DecodeShape s = decode_shape_of(in, want_lse);
  s.softcap = params.softcap != 0.0f;
  detail::validate_decode_options(options);
  detail::validate_decode_params(params, s);
  const int64_t S = s.num_seqs, H = s.num_heads, D = s.head_size, M = s.max_blocks_per_seq;
  // Either form, as the dense values it stands for (the CSR form's, its expansion).
  const auto page_tables = detail::page_table_inputs(in);
  const auto [tables, lens] =
      detail::dense_page_tables(page_tables, detail::page_table_form(page_tables), s.block_size, s.num_blocks);

  std::vector<int64_t> rows;  // the sequences that attend something, in order
  for (int64_t seq = 0; seq < S; ++seq)
    if (lens[size_t(seq)] > 0) rows.push_back(seq);
  const int64_t T = int64_t(rows.size());

  DecodeResult r;
  r.output = HostTensor(in.query.dtype(), in.query.shape());  // zero: the empty sequences' outputs
  if (want_lse) {  // an empty sequence's LSE: its head's sink logit (step 6), else -inf
    r.lse = HostTensor(DType::f32, Shape{S, H});
    for (int64_t i = 0; i < S * H; ++i)
      r.lse.set(size_t(i), s.sinks ? in.sinks.get(size_t(i % H)) : -std::numeric_limits<double>::infinity());
  }
  if (T == 0) return r;

  AttentionInputs a;
  a.query = HostTensor(in.query.dtype(), Shape{T, H, D});
  a.key_cache = in.key_cache;
  a.value_cache = in.value_cache;
  a.block_tables = HostTensor(DType::i32, Shape{T, M});
  a.context_lens = HostTensor(DType::i32, Shape{T});
  a.query_starts = HostTensor(DType::i32, Shape{T + 1});
  a.alibi_slopes = in.alibi_slopes;
  a.sinks = in.sinks;
  a.cache_dtype = in.cache_dtype;
  a.kv_layout = in.kv_layout;
  a.sliding_window = options.sliding_window;
  const size_t row_bytes = size_t(H * D) * dtype_size(in.query.dtype());
  for (int64_t t = 0; t < T; ++t) {
    const int64_t seq = rows[size_t(t)];
    std::memcpy(a.query.as<uint8_t>() + size_t(t) * row_bytes, in.query.as<uint8_t>() + size_t(seq) * row_bytes, row_bytes);
    for (int64_t j = 0; j < M; ++j) a.block_tables.as<int32_t>()[t * M + j] = int32_t(tables[size_t(seq * M + j)]);
    a.context_lens.as<int32_t>()[t] = int32_t(lens[size_t(seq)]);
    a.query_starts.as<int32_t>()[t] = int32_t(t);
  }
  a.query_starts.as<int32_t>()[T] = int32_t(T);

  const AttentionResult batch = batch_attention(a, params, want_lse);
  for (int64_t t = 0; t < T; ++t) {
    const int64_t seq = rows[size_t(t)];
    std::memcpy(r.output.as<uint8_t>() + size_t(seq) * row_bytes, batch.output.as<uint8_t>() + size_t(t) * row_bytes, row_bytes);
    if (want_lse)
      for (int64_t h = 0; h < H; ++h) r.lse.set(size_t(seq * H + h), batch.lse.get(size_t(t * H + h)));
  }
  return r;
}

}  // namespace vkpaged::reference
