// SPDX-License-Identifier: Apache-2.0
#include "support/mla_case.hpp"

#include <cstring>

namespace vkpaged::test {

namespace {

// Columns [from, from + width) of the rows of a [N, B, D] tensor (element-wise, any dtype).
HostTensor columns(const HostTensor& t, int64_t from, int64_t width) {
  const auto& s = t.shape();
  const int64_t rows = s[0] * s[1], D = s[2];
  const size_t e = dtype_size(t.dtype());
  HostTensor out(t.dtype(), Shape{s[0], s[1], width});
  for (int64_t r = 0; r < rows; ++r)
    std::memcpy(static_cast<std::byte*>(out.data()) + size_t(r * width) * e,
                static_cast<const std::byte*>(t.data()) + size_t(r * D + from) * e, size_t(width) * e);
  return out;
}

}  // namespace

MlaDraw make_mla_inputs(const MlaCase& c, std::mt19937& rng) {
  AttentionCase a = c.attention;
  a.kv_heads = 1;
  a.layout = KvLayout::nhd;
  a.head_size = c.value_head_size + c.rope_head_size;
  const int64_t Dk = a.head_size, Dv = c.value_head_size;
  MlaDraw draw;
  AttentionInputs& in = draw.attention;
  in = make_attention_inputs(a, rng);
  const Shape& k = in.key_cache.shape();  // [N, B, 1, Dk]
  HostTensor rows(in.key_cache.dtype(), Shape{k[0], k[1], Dk});
  std::memcpy(rows.data(), in.key_cache.data(), in.key_cache.bytes());
  // The values: the rows' first Dv entries, the rest 0 (encode(0) is 0 in every dtype).
  std::memcpy(in.value_cache.data(), in.key_cache.data(), in.key_cache.bytes());
  const size_t e = dtype_size(in.value_cache.dtype());
  for (int64_t r = 0; r < k[0] * k[1]; ++r)
    std::memset(static_cast<std::byte*>(in.value_cache.data()) + size_t(r * Dk + Dv) * e, 0, size_t(Dk - Dv) * e);

  MlaInputs& m = draw.mla;
  m.query = in.query;
  m.mla_cache = rows;
  m.value_head_size = uint32_t(Dv);
  m.block_tables = in.block_tables;
  m.context_lens = in.context_lens;
  m.query_starts = in.query_starts;
  m.tree_mask = in.tree_mask;
  m.alibi_slopes = in.alibi_slopes;
  m.sinks = in.sinks;
  m.cache_dtype = in.cache_dtype;
  m.sliding_window = in.sliding_window;
  if (c.form == MlaCacheForm::two_pools) m = with_cache_form(m, MlaCacheForm::two_pools);
  return draw;
}

MlaInputs with_cache_form(const MlaInputs& in, MlaCacheForm form) {
  MlaInputs out = in;
  const bool one = !in.mla_cache.empty();
  if (form == MlaCacheForm::two_pools && one) {
    const int64_t Dk = in.mla_cache.shape()[2], Dv = in.value_head_size;
    out.ckv_cache = columns(in.mla_cache, 0, Dv);
    out.kpe_cache = columns(in.mla_cache, Dv, Dk - Dv);
    out.mla_cache = HostTensor();
    out.value_head_size = 0;
  } else if (form == MlaCacheForm::one_pool && !one) {
    const Shape &c = in.ckv_cache.shape(), &k = in.kpe_cache.shape();
    const int64_t Dv = c[2], R = k[2], rows = c[0] * c[1];
    const size_t e = dtype_size(in.ckv_cache.dtype());
    out.mla_cache = HostTensor(in.ckv_cache.dtype(), Shape{c[0], c[1], Dv + R});
    auto* dst = static_cast<std::byte*>(out.mla_cache.data());
    for (int64_t r = 0; r < rows; ++r) {
      std::memcpy(dst + size_t(r * (Dv + R)) * e, static_cast<const std::byte*>(in.ckv_cache.data()) + size_t(r * Dv) * e,
                  size_t(Dv) * e);
      std::memcpy(dst + size_t(r * (Dv + R) + Dv) * e,
                  static_cast<const std::byte*>(in.kpe_cache.data()) + size_t(r * R) * e, size_t(R) * e);
    }
    out.ckv_cache = HostTensor();
    out.kpe_cache = HostTensor();
    out.value_head_size = uint32_t(Dv);
  }
  return out;
}

HostTensor leading_dims(const HostTensor& t, int64_t width) {
  const auto& s = t.shape();
  HostTensor out(t.dtype(), Shape{s[0], s[1], width});
  for (int64_t r = 0; r < s[0] * s[1]; ++r)
    for (int64_t d = 0; d < width; ++d) out.set(size_t(r * width + d), t.get(size_t(r * s[2] + d)));
  return out;
}

}  // namespace vkpaged::test
