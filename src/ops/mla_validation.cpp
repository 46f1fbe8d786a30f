// SPDX-License-Identifier: Apache-2.0
// mla_shape_of (mla.hpp): the MLA cache's checks, then the request fields' with the helpers
// attention_shape_of uses for them (attention_validation.hpp: read_request_fields,
// check_host_requests).
#include <fmt/format.h>

#include <cstdint>

#include "ops/attention_validation.hpp"
#include "ops/decode_validation.hpp"  // is_power_of_two
#include "vkpaged/error.hpp"
#include "vkpaged/mla.hpp"

namespace vkpaged {

namespace {

[[noreturn]] void refuse(const std::string& message) { throw Error(ErrorCode::invalid_argument, message); }

bool holds_cache(const HostTensor& t, DType cache) {
  return is_fp8_dtype(cache) ? (t.dtype() == DType::u8 || t.dtype() == cache) : t.dtype() == cache;
}

void check_pool(const char* name, const HostTensor& t, DType cache) {
  if (t.shape().rank() != 3) refuse(fmt::format("{}: shape {} is not [N, B, width]", name, t.shape().str()));
  for (int i = 0; i < 3; ++i)
    if (t.shape()[i] > int64_t(INT32_MAX))
      refuse(fmt::format("{}: dimension {} of shape {} exceeds 2^31 - 1", name, i, t.shape().str()));
  if (!holds_cache(t, cache))
    refuse(fmt::format("{}: dtype {} does not hold a {} cache", name, dtype_name(t.dtype()), dtype_name(cache)));
}

// The cache form, N, B, Dk and Dv, checked.
void read_cache(const MlaInputs& in, MlaShape& m) {
  AttentionShape& s = m.attention;
  const bool one = !in.mla_cache.empty();
  if (one && (!in.ckv_cache.empty() || !in.kpe_cache.empty()))
    refuse("mla_cache: given together with ckv_cache or kpe_cache: give one pool, or the two");
  if (!one && (in.ckv_cache.empty() || in.kpe_cache.empty()))
    refuse(fmt::format("{}: the two-pool form needs both ckv_cache and kpe_cache (or give mla_cache)",
                       in.ckv_cache.empty() ? "ckv_cache" : "kpe_cache"));
  if (one) {
    check_pool("mla_cache", in.mla_cache, in.cache_dtype);
    const auto& c = in.mla_cache.shape();
    if (in.value_head_size == 0 || in.value_head_size > c[2])
      refuse(fmt::format("value_head_size: Dv = {} is outside [1, Dk = {}] (mla_cache's width)", in.value_head_size,
                         c[2]));
    m.cache_form = MlaCacheForm::one_pool;
    s.num_blocks = uint32_t(c[0]);
    s.block_size = uint32_t(c[1]);
    s.head_size = uint32_t(c[2]);
    m.value_head_size = in.value_head_size;
    return;
  }
  check_pool("ckv_cache", in.ckv_cache, in.cache_dtype);
  check_pool("kpe_cache", in.kpe_cache, in.cache_dtype);
  const auto &c = in.ckv_cache.shape(), &k = in.kpe_cache.shape();
  if (c[0] != k[0] || c[1] != k[1])
    refuse(fmt::format("kpe_cache: shape {} does not have ckv_cache's N and B ({})", k.str(), c.str()));
  if (c[2] == 0) refuse(fmt::format("ckv_cache: shape {} holds no latent (Dv = 0)", c.str()));
  if (in.value_head_size != 0 && in.value_head_size != c[2])
    refuse(fmt::format("value_head_size: {} is not ckv_cache's width Dv = {} (0 takes it from ckv_cache)",
                       in.value_head_size, c[2]));
  m.cache_form = MlaCacheForm::two_pools;
  s.num_blocks = uint32_t(c[0]);
  s.block_size = uint32_t(c[1]);
  s.head_size = uint32_t(c[2] + k[2]);
  m.value_head_size = uint32_t(c[2]);
}

}  // namespace

MlaShape mla_shape_of(const MlaInputs& in, const AttentionParams& params, bool want_lse) {
  MlaShape m;
  AttentionShape& s = m.attention;
  const auto& q = in.query.shape();
  if (q.rank() != 3) refuse(fmt::format("query: shape {} is not [T, H, Dk]", q.str()));
  if (!is_float_dtype(in.query.dtype()))
    refuse(fmt::format("query: dtype {} is not f32, f16 or bf16", dtype_name(in.query.dtype())));
  if (!is_float_dtype(in.cache_dtype) && !is_fp8_dtype(in.cache_dtype))
    refuse(fmt::format("cache_dtype: {} is not a cache dtype (f32, f16, bf16, fp8_e4m3, fp8_e5m2)",
                       dtype_name(in.cache_dtype)));
  read_cache(in, m);
  if (q[2] != int64_t(s.head_size))
    refuse(fmt::format("query: shape {} is not [T, H, Dk] with the cache's Dk = Dv + R = {} + {}", q.str(),
                       m.value_head_size, m.rope_head_size()));
  if (q[1] == 0) refuse("query: H = 0 heads (at least 1)");
  if (!detail::is_power_of_two(s.block_size) || s.block_size > 128)
    refuse(fmt::format("block_size: B = {} is not a power of two from 1 to 128", s.block_size));

  const detail::HostRequestInputs requests = detail::request_inputs(in);
  const detail::PageTableForm form = detail::page_table_form(requests.page_tables);
  detail::check_host_request_counts(requests, form);
  if (form.num_seqs > 0 && s.num_blocks == 0) refuse("num_blocks: the cache has no blocks (N = 0)");

  detail::read_request_fields(s, requests, form, params, want_lse);
  s.num_query_tokens = uint32_t(q[0]);
  s.num_heads = uint32_t(q[1]);
  s.num_kv_heads = 1;
  s.query_dtype = in.query.dtype();
  s.cache_dtype = in.cache_dtype;
  s.kv_layout = KvLayout::nhd;
  const uint64_t cap = uint64_t(s.max_blocks_per_seq) * s.block_size;
  if (cap > 0x7fffffffu) refuse(fmt::format("max_blocks_per_seq: M * B = {} exceeds 2^31 - 1 positions", cap));
  detail::check_host_per_head(in.alibi_slopes, in.sinks, q[1]);
  if (s.num_query_tokens < s.num_requests)
    refuse(fmt::format("num_query_tokens: T = {} is less than S = {} requests of at least one token each",
                       s.num_query_tokens, s.num_requests));
  detail::check_host_requests(s, requests, form, detail::host_query_starts(in.query_starts));
  detail::validate_attention_params(params, s);
  return m;
}

}  // namespace vkpaged
