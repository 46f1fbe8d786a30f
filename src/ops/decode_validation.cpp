// SPDX-License-Identifier: Apache-2.0
#include "ops/decode_validation.hpp"

#include <fmt/format.h>

#include <cmath>

#include "ops/attention_planner.hpp"
#include "ops/attention_problem.hpp"
#include "ops/attention_validation.hpp"
#include "ops/host_page_tables.hpp"
#include "vkpaged/error.hpp"

namespace vkpaged::detail {

namespace {

[[noreturn]] void refuse(const std::string& message) { throw Error(ErrorCode::invalid_argument, message); }

void check_index_dtype(const HostTensor& t, const char* name) {
  if (t.dtype() != DType::i32 && t.dtype() != DType::u32 && t.dtype() != DType::i64)
    refuse(fmt::format("{}: dtype {} is not i32, u32 or i64", name, dtype_name(t.dtype())));
}

}  // namespace

// Decode names its requests num_seqs; the problem's own checks would name them num_requests.
void validate_decode_shape(const DecodeShape& s) {
  if (s.num_seqs > 0x7fffffffu) refuse(fmt::format("num_seqs: S = {} exceeds 2^31 - 1", s.num_seqs));
  validate_attention_shape(decode_problem(s));
}

void validate_decode_options(const DecodeOptions& o) { validate_split_options(decode_attention_options(o), kPartitionQuantum); }

void validate_decode_params(const DecodeParams& p, const DecodeShape& s) {
  validate_attention_params(p, decode_problem(s));
}

std::vector<int64_t> host_index_values(const HostTensor& t, const char* name) {
  check_index_dtype(t, name);
  std::vector<int64_t> values(size_t(t.numel()));
  for (size_t i = 0; i < values.size(); ++i) {
    switch (t.dtype()) {
      case DType::i32: values[i] = t.as<int32_t>()[i]; break;
      case DType::u32: values[i] = t.as<uint32_t>()[i]; break;
      default: values[i] = t.as<int64_t>()[i]; break;
    }
  }
  return values;
}

}  // namespace vkpaged::detail

namespace vkpaged {

DecodeShape decode_shape_of(const DecodeInputs& in, bool want_lse) {
  using detail::refuse;
  const auto& q = in.query.shape();
  const auto& k = in.key_cache.shape();
  const auto& v = in.value_cache.shape();
  if (q.rank() != 3) refuse(fmt::format("query: shape {} is not [S, H, D]", q.str()));
  for (const auto* t : {&in.query, &in.key_cache, &in.value_cache, &in.block_tables, &in.context_lens})
    for (int i = 0; i < t->shape().rank(); ++i)
      if (t->shape()[i] > int64_t(INT32_MAX))
        refuse(fmt::format("{}: dimension {} of shape {} exceeds 2^31 - 1", t == &in.query ? "query"
                           : t == &in.key_cache ? "key_cache" : t == &in.value_cache ? "value_cache"
                           : t == &in.block_tables ? "block_tables" : "context_lens", i, t->shape().str()));
  const KvLayout layout = in.kv_layout;
  if (layout != KvLayout::vllm && layout != KvLayout::nhd && layout != KvLayout::hnd)
    refuse(fmt::format("kv_layout: {} is not a cache layout (vllm, nhd, hnd)", uint32_t(layout)));
  const bool vllm = layout == KvLayout::vllm;
  const char* key_symbols = vllm ? "[N, Hkv, D/x, B, x]" : layout == KvLayout::nhd ? "[N, B, Hkv, D]" : "[N, Hkv, B, D]";
  if (k.rank() != (vllm ? 5 : 4))
    refuse(fmt::format("key_cache: shape {} is not {} (kv_layout {})", k.str(), key_symbols, kv_layout_name(layout)));
  if (v.rank() != 4)
    refuse(fmt::format("value_cache: shape {} is not {} (kv_layout {})", v.str(), vllm ? "[N, Hkv, D, B]" : key_symbols,
                       kv_layout_name(layout)));
  const detail::HostPageTableInputs page_tables = detail::page_table_inputs(in);
  const detail::PageTableForm form = detail::page_table_form(page_tables);

  const DType cache = in.cache_dtype;
  const size_t cache_bytes = dtype_size(cache);
  detail::check_host_cache_dtypes(in.key_cache, in.value_cache, cache);

  DecodeShape s;
  s.query_dtype = in.query.dtype();
  s.cache_dtype = cache;
  s.num_seqs = uint32_t(q[0]);
  s.num_heads = uint32_t(q[1]);
  s.head_size = uint32_t(q[2]);
  s.num_blocks = uint32_t(k[0]);
  s.num_kv_heads = uint32_t(layout == KvLayout::nhd ? k[2] : k[1]);
  s.block_size = uint32_t(vllm ? k[3] : layout == KvLayout::nhd ? k[1] : k[2]);
  s.kv_layout = layout;
  s.max_blocks_per_seq = form.max_blocks_per_seq;
  s.csr_page_table = form.csr;
  s.alibi = !in.alibi_slopes.empty();
  s.sinks = !in.sinks.empty();
  s.lse = want_lse;
  detail::validate_decode_shape(s);

  const int64_t x = int64_t(16 / cache_bytes);
  if (vllm) {
    if (k[4] != x)
      refuse(fmt::format("key_cache: last dimension is {}, expected x = {} for the {} cache", k[4], x, dtype_name(cache)));
    if (k[2] * k[4] != q[2])
      refuse(fmt::format("key_cache: D/x * x = {} does not match the query's head size D = {}", k[2] * k[4], q[2]));
  } else if (k[3] != q[2]) {
    refuse(fmt::format("key_cache: D = {} (the last dimension of {}) does not match the query's head size D = {}", k[3],
                       key_symbols, q[2]));
  }
  const Shape want_v = detail::value_cache_shape(layout, k[0], s.num_kv_heads, q[2], s.block_size);
  if (!(v == want_v)) refuse(fmt::format("value_cache: shape {} does not match {}", v.str(), want_v.str()));
  if (form.csr && form.num_seqs != q[0])
    refuse(fmt::format("kv_indptr: {} entries, but the query has S = {} sequences (S + 1 expected)", form.num_seqs + 1,
                       q[0]));
  if (!form.csr && in.block_tables.shape()[0] != q[0])
    refuse(fmt::format("block_tables: {} rows, but the query has S = {} sequences", in.block_tables.shape()[0], q[0]));
  if (!form.csr && in.context_lens.shape()[0] != q[0])
    refuse(fmt::format("context_lens: {} entries, but the query has S = {} sequences", in.context_lens.shape()[0], q[0]));
  detail::check_host_per_head(in.alibi_slopes, in.sinks, q[1]);

  // The CSR form's own rules are checked here; what follows holds for its expansion by construction.
  const auto [tables, lens] = detail::dense_page_tables(page_tables, form, s.block_size, s.num_blocks);
  s.max_context_len = uint32_t(detail::check_host_page_tables(tables, lens, detail::decode_problem(s)));
  return s;
}

}  // namespace vkpaged
