// SPDX-License-Identifier: Apache-2.0
#include "ops/attention_validation.hpp"

#include <fmt/format.h>

#include <algorithm>
#include <cfloat>
#include <cmath>

#include "ops/block_size_rule.hpp"
#include "ops/decode_validation.hpp"
#include "ops/host_page_tables.hpp"
#include "ops/scale_validation.hpp"
#include "vkpaged/error.hpp"

namespace vkpaged::detail {

namespace {

[[noreturn]] void refuse(const std::string& message) { throw Error(ErrorCode::invalid_argument, message); }

constexpr uint64_t kMaxTreeMaskBytes = 0xffffffffull;

}  // namespace

void validate_attention_shape(const AttentionShape& s) {
  if (!is_float_dtype(s.query_dtype))
    refuse(fmt::format("query: dtype {} is not f32, f16 or bf16", dtype_name(s.query_dtype)));
  if (!is_float_dtype(s.cache_dtype) && !is_fp8_dtype(s.cache_dtype))
    refuse(fmt::format("kv_dtype: {} is not a cache dtype (f32, f16, bf16, fp8_e4m3, fp8_e5m2)", dtype_name(s.cache_dtype)));
  if (s.kv_layout != KvLayout::vllm && s.kv_layout != KvLayout::nhd && s.kv_layout != KvLayout::hnd)
    refuse(fmt::format("kv_layout: {} is not a cache layout (vllm, nhd, hnd)", uint32_t(s.kv_layout)));
  if (s.num_heads == 0) refuse("num_heads: must be at least 1, got 0");
  if (s.num_kv_heads == 0) refuse("num_kv_heads: must be at least 1, got 0");
  if (s.num_heads % s.num_kv_heads != 0)
    refuse(fmt::format("num_heads: {} is not a multiple of num_kv_heads {}", s.num_heads, s.num_kv_heads));
  const bool head_ok = (s.head_size >= 32 && s.head_size <= 256 && s.head_size % 8 == 0) || s.head_size == 512;
  if (!head_ok)
    refuse(fmt::format("head_size: {} is not supported (multiples of 8 from 32 to 256, and 512)", s.head_size));
  const uint32_t x = cache_pack_factor(s.cache_dtype);
  if (s.head_size % x != 0)
    refuse(fmt::format("head_size: D = {} is not a multiple of x = {} for the {} cache", s.head_size, x,
                       dtype_name(s.cache_dtype)));
  if (!is_supported_block_size(s.block_size)) refuse(fmt::format("block_size: {} is not {}", s.block_size, kBlockSizeRule));
  if (s.num_blocks == 0 && s.num_requests > 0) refuse("num_blocks: the cache has no blocks (N = 0)");
  const uint64_t cap = uint64_t(s.max_blocks_per_seq) * s.block_size;
  if (cap > 0x7fffffffu) refuse(fmt::format("max_blocks_per_seq: M * B = {} exceeds 2^31 - 1 positions", cap));
  if (s.max_context_len > cap) refuse(fmt::format("max_context_len: {} exceeds M * B = {}", s.max_context_len, cap));
  if (s.num_requests > 0x7fffffffu) refuse(fmt::format("num_requests: S = {} exceeds 2^31 - 1", s.num_requests));
  if (s.num_query_tokens < s.num_requests)
    refuse(fmt::format("num_query_tokens: T = {} is less than S = {} requests of at least one token each",
                       s.num_query_tokens, s.num_requests));
  if (s.num_query_tokens > 0x7fffffffu)
    refuse(fmt::format("num_query_tokens: T = {} exceeds 2^31 - 1", s.num_query_tokens));
}

QueryStartsSummary validate_query_starts(const AttentionShape& s, std::span<const int32_t> starts) {
  if (starts.size() != size_t(s.num_requests) + 1)
    refuse(fmt::format("query_starts: {} entries, expected S + 1 = {}", starts.size(), uint64_t(s.num_requests) + 1));
  if (starts[0] != 0) refuse(fmt::format("query_starts[0]: {} is not 0", starts[0]));
  const uint64_t longest = s.max_context_len ? s.max_context_len : uint64_t(s.max_blocks_per_seq) * s.block_size;
  QueryStartsSummary summary;
  for (size_t i = 0; i < s.num_requests; ++i) {
    const int64_t q = int64_t(starts[i + 1]) - starts[i];
    if (q < 1)
      refuse(fmt::format("query_starts[{}]: {} after query_starts[{}] = {} gives request {} q_s = {} new tokens (at least 1)",
                         i + 1, starts[i + 1], i, starts[i], i, q));
    if (uint64_t(q) > longest)
      refuse(fmt::format("query_starts[{}]: request {} brings q_s = {} new tokens, more than the {} positions a context "
                         "may hold ({})",
                         i + 1, i, q, longest, s.max_context_len ? "max_context_len" : "M * B"));
    summary.max_query_tokens = std::max(summary.max_query_tokens, uint32_t(q));
    summary.single_tokens = summary.single_tokens && q == 1;
    summary.tree_mask_bytes += uint64_t(q) * uint64_t(q);
  }
  if (int64_t(starts[s.num_requests]) != int64_t(s.num_query_tokens))
    refuse(fmt::format("query_starts[{}]: {} is not T = num_query_tokens = {}", s.num_requests, starts[s.num_requests],
                       s.num_query_tokens));
  if (s.tree_mask && summary.tree_mask_bytes > kMaxTreeMaskBytes)
    refuse(fmt::format("tree_mask: the requests' q_s x q_s masks take {} bytes, past 2^32 - 1", summary.tree_mask_bytes));
  if (!s.tree_mask) summary.tree_mask_bytes = 0;
  return summary;
}

void validate_attention_params(const AttentionParams& p, const AttentionShape& s) {
  if (p.scale) check_scale("scale", *p.scale);
  if (!std::isfinite(p.softcap) || p.softcap < 0.0f)
    refuse(fmt::format("softcap: {} must be finite and >= 0 (0 = off)", p.softcap));
  if (s.softcap && p.softcap == 0.0f)
    refuse("softcap: 0 (off), but the plan's shape.softcap is true: give the cap (> 0), or plan without shape.softcap");
  if (!s.softcap && p.softcap > 0.0f)
    refuse(fmt::format("softcap: {}, but the plan's shape.softcap is false: plan with shape.softcap to apply a cap",
                       p.softcap));
  check_scale("k_scale", p.k_scale, s.cache_dtype);
  check_scale("v_scale", p.v_scale, s.cache_dtype);
}

Shape key_cache_shape(KvLayout layout, int64_t n, int64_t hkv, int64_t d, int64_t b, int64_t x) {
  switch (layout) {
    case KvLayout::nhd: return Shape{n, b, hkv, d};
    case KvLayout::hnd: return Shape{n, hkv, b, d};
    case KvLayout::vllm: break;
  }
  return Shape{n, hkv, d / x, b, x};
}

Shape value_cache_shape(KvLayout layout, int64_t n, int64_t hkv, int64_t d, int64_t b) {
  switch (layout) {
    case KvLayout::nhd: return Shape{n, b, hkv, d};
    case KvLayout::hnd: return Shape{n, hkv, b, d};
    case KvLayout::vllm: break;
  }
  return Shape{n, hkv, d, b};
}

void check_host_cache_dtypes(const HostTensor& key_cache, const HostTensor& value_cache, DType cache) {
  for (const auto& [name, t] : {std::pair{"key_cache", &key_cache}, std::pair{"value_cache", &value_cache}}) {
    const DType stored = t->dtype();
    if (is_fp8_dtype(cache) ? (stored != DType::u8 && stored != cache) : stored != cache)
      refuse(fmt::format("{}: dtype {} does not hold a {} cache", name, dtype_name(stored), dtype_name(cache)));
  }
}

void check_host_per_head(const HostTensor& alibi_slopes, const HostTensor& sinks, int64_t num_heads) {
  for (const auto& [name, t] : {std::pair{"alibi_slopes", &alibi_slopes}, std::pair{"sinks", &sinks}}) {
    if (t->empty()) continue;
    if (t->dtype() != DType::f32) refuse(fmt::format("{}: dtype {} is not f32", name, dtype_name(t->dtype())));
    if (t->shape().rank() != 1 || t->shape()[0] != num_heads)
      refuse(fmt::format("{}: shape {} is not [H] = [{}]", name, t->shape().str(), num_heads));
  }
}

int64_t check_host_page_tables(std::span<const int64_t> tables, std::span<const int64_t> lens, const AttentionShape& s) {
  const int64_t cap = int64_t(s.max_blocks_per_seq) * s.block_size;
  int64_t max_len = 0;
  for (size_t i = 0; i < lens.size(); ++i) {
    if (lens[i] < 0 || lens[i] > cap) refuse(fmt::format("context_lens[{}]: {} is outside [0, M * B = {}]", i, lens[i], cap));
    max_len = std::max(max_len, lens[i]);
  }
  for (size_t i = 0; i < lens.size(); ++i) {
    const int64_t used = (lens[i] + s.block_size - 1) / s.block_size;
    for (int64_t j = 0; j < used; ++j) {
      const int64_t id = tables[i * s.max_blocks_per_seq + size_t(j)];
      if (id < 0 || id >= int64_t(s.num_blocks))
        refuse(fmt::format("block_tables[{}][{}]: block id {} is outside [0, N = {})", i, j, id, s.num_blocks));
    }
  }
  return max_len;
}

std::vector<int32_t> host_query_starts(const HostTensor& t) {
  if (t.shape().rank() != 1) refuse(fmt::format("query_starts: shape {} is not [S + 1]", t.shape().str()));
  const auto values = host_index_values(t, "query_starts");
  std::vector<int32_t> starts(values.size());
  for (size_t i = 0; i < values.size(); ++i) {
    if (values[i] < 0 || values[i] > INT32_MAX)
      refuse(fmt::format("query_starts[{}]: {} is outside [0, 2^31 - 1]", i, values[i]));
    starts[i] = int32_t(values[i]);
  }
  return starts;
}

void check_host_request_counts(const HostRequestInputs& in, const PageTableForm& form) {
  if (in.query_starts.shape().rank() != 1)
    refuse(fmt::format("query_starts: shape {} is not [S + 1]", in.query_starts.shape().str()));
  const int64_t S = form.num_seqs;
  if (!form.csr && in.page_tables.context_lens.shape()[0] != S)
    refuse(fmt::format("context_lens: {} entries, but block_tables has S = {} rows",
                       in.page_tables.context_lens.shape()[0], S));
  if (in.query_starts.shape()[0] != S + 1)
    refuse(fmt::format("query_starts: {} entries, expected S + 1 = {}{}", in.query_starts.shape()[0], S + 1,
                       form.csr ? " (S from kv_indptr)" : ""));
}

void read_request_fields(AttentionShape& s, const HostRequestInputs& in, const PageTableForm& form,
                         const AttentionParams& params, bool want_lse) {
  s.num_requests = uint32_t(form.num_seqs);
  s.max_blocks_per_seq = form.max_blocks_per_seq;
  s.csr_page_table = form.csr;
  s.sliding_window = in.sliding_window;
  s.softcap = params.softcap > 0.0f;
  s.alibi = !in.alibi_slopes.empty();
  s.sinks = !in.sinks.empty();
  s.lse = want_lse;
  s.tree_mask = !in.tree_mask.empty();
}

void check_host_requests(AttentionShape& s, const HostRequestInputs& in, const PageTableForm& form,
                         std::span<const int32_t> starts) {
  // The CSR form's own rules are checked here; what follows holds for its expansion by construction.
  const auto [tables, lens] = dense_page_tables(in.page_tables, form, s.block_size, s.num_blocks);
  s.max_context_len = uint32_t(check_host_page_tables(tables, lens, s));
  const auto summary = validate_query_starts(s, starts);
  for (size_t i = 0; i < lens.size(); ++i) {
    const int64_t new_tokens = int64_t(starts[i + 1]) - starts[i];
    if (lens[i] < new_tokens)
      refuse(fmt::format("context_lens[{}]: {} is less than the request's q_s = {} new tokens (query_starts), whose keys "
                         "and values the cache must already hold",
                         i, lens[i], new_tokens));
  }
  if (!s.tree_mask) return;
  const HostTensor& m = in.tree_mask;
  if (m.dtype() != DType::u8) refuse(fmt::format("tree_mask: dtype {} is not u8", dtype_name(m.dtype())));
  if (m.shape().rank() != 1 || uint64_t(m.shape()[0]) != summary.tree_mask_bytes)
    refuse(fmt::format("tree_mask: shape {} is not [sum of q_s^2] = [{}]", m.shape().str(), summary.tree_mask_bytes));
  for (int64_t i = 0; i < m.numel(); ++i)
    if (m.as<uint8_t>()[i] > 1) refuse(fmt::format("tree_mask[{}]: {} is not 0 or 1", i, m.as<uint8_t>()[i]));
}

}  // namespace vkpaged::detail

namespace vkpaged {

namespace {

using detail::refuse;

const char* input_name(const AttentionInputs& in, const HostTensor* t) {
  if (t == &in.query) return "query";
  if (t == &in.key_cache) return "key_cache";
  if (t == &in.value_cache) return "value_cache";
  if (t == &in.block_tables) return "block_tables";
  if (t == &in.context_lens) return "context_lens";
  return "query_starts";
}

}  // namespace

AttentionShape attention_shape_of(const AttentionInputs& in, const AttentionParams& params, bool want_lse) {
  const auto& q = in.query.shape();
  if (q.rank() != 3) refuse(fmt::format("query: shape {} is not [T, H, D]", q.str()));
  for (const auto* t : {&in.query, &in.key_cache, &in.value_cache, &in.block_tables, &in.context_lens, &in.query_starts})
    for (int i = 0; i < t->shape().rank(); ++i)
      if (t->shape()[i] > int64_t(INT32_MAX))
        refuse(fmt::format("{}: dimension {} of shape {} exceeds 2^31 - 1", input_name(in, t), i, t->shape().str()));
  const detail::HostRequestInputs requests = detail::request_inputs(in);
  const detail::PageTableForm form = detail::page_table_form(requests.page_tables);
  detail::check_host_request_counts(requests, form);

  const DType cache = in.cache_dtype;
  detail::check_host_cache_dtypes(in.key_cache, in.value_cache, cache);

  AttentionShape s;
  detail::read_request_fields(s, requests, form, params, want_lse);
  s.num_query_tokens = uint32_t(q[0]);
  s.num_heads = uint32_t(q[1]);
  s.head_size = uint32_t(q[2]);
  s.query_dtype = in.query.dtype();
  s.cache_dtype = cache;
  s.kv_layout = in.kv_layout;
  // The cache's N, Hkv and B, read off the key cache in its layout.
  const auto& k = in.key_cache.shape();
  const int rank = in.kv_layout == KvLayout::vllm ? 5 : 4;
  const char* symbols = in.kv_layout == KvLayout::vllm ? "[N, Hkv, D/x, B, x]"
                        : in.kv_layout == KvLayout::nhd ? "[N, B, Hkv, D]"
                                                        : "[N, Hkv, B, D]";
  if (k.rank() != rank)
    refuse(fmt::format("key_cache: shape {} is not {} (kv_layout {})", k.str(), symbols, kv_layout_name(in.kv_layout)));
  s.num_blocks = uint32_t(k[0]);
  s.num_kv_heads = uint32_t(in.kv_layout == KvLayout::nhd ? k[2] : k[1]);
  s.block_size = uint32_t(in.kv_layout == KvLayout::vllm ? k[3] : in.kv_layout == KvLayout::nhd ? k[1] : k[2]);
  detail::validate_attention_shape(s);

  const int64_t x = cache_pack_factor(cache);
  const Shape want_k = detail::key_cache_shape(s.kv_layout, k[0], s.num_kv_heads, q[2], s.block_size, x);
  const Shape want_v = detail::value_cache_shape(s.kv_layout, k[0], s.num_kv_heads, q[2], s.block_size);
  if (!(k == want_k))
    refuse(fmt::format("key_cache: shape {} does not match {} {} for head size D = {} and x = {}", k.str(), symbols,
                       want_k.str(), q[2], x));
  if (!(in.value_cache.shape() == want_v))
    refuse(fmt::format("value_cache: shape {} does not match {}", in.value_cache.shape().str(), want_v.str()));
  detail::check_host_per_head(in.alibi_slopes, in.sinks, q[1]);

  detail::check_host_requests(s, requests, form, detail::host_query_starts(in.query_starts));
  return s;
}

}  // namespace vkpaged
