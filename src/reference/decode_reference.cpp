// SPDX-License-Identifier: Apache-2.0
// CPU reference of decode attention, straight from docs/contract.md, in double precision, over
// every cache layout (read through KvBlockGeometry).
// Non-finite inputs (step 9) are found on the inputs themselves, not through the arithmetic:
// a NaN or infinite element of the query or of an attended key makes its head's outputs and
// LSE NaN; one of an attended value makes that dim's outputs NaN.
#include <fmt/format.h>

#include <cmath>
#include <limits>
#include <vector>

#include "ops/decode_validation.hpp"
#include "ops/host_page_tables.hpp"
#include "vkpaged/reference.hpp"

namespace vkpaged::reference {

namespace {

// Reads element i of a cache tensor as the contract says: decode(byte) * scale for fp8.
double cache_element(const HostTensor& t, DType cache, uint64_t i, double fp8_scale) {
  if (is_fp8_dtype(cache)) return double(load_element(t.data(), cache, size_t(i))) * fp8_scale;
  return t.get(size_t(i));
}

}  // namespace

DecodeResult decode_attention(const DecodeInputs& in, const DecodeOptions& options, const DecodeParams& params,
                              bool want_lse) {
  DecodeShape s = decode_shape_of(in, want_lse);
  s.softcap = params.softcap != 0.0f;
  detail::validate_decode_options(options);
  detail::validate_decode_params(params, s);
  const size_t S = s.num_seqs, H = s.num_heads, Hkv = s.num_kv_heads, D = s.head_size, B = s.block_size;
  const size_t M = s.max_blocks_per_seq;
  const KvBlockGeometry geometry{s.num_kv_heads, s.head_size, s.block_size, cache_pack_factor(s.cache_dtype)};
  const uint64_t block_elements = geometry.block_elements();
  const double scale = params.scale ? double(*params.scale) : 1.0 / std::sqrt(double(D));
  // Either form, as the dense values it stands for (the CSR form's, its expansion).
  const auto page_tables = detail::page_table_inputs(in);
  const auto [tables, lens] =
      detail::dense_page_tables(page_tables, detail::page_table_form(page_tables), s.block_size, s.num_blocks);

  DecodeResult r;
  r.output = HostTensor(in.query.dtype(), in.query.shape());
  if (want_lse) r.lse = HostTensor(DType::f32, Shape{int64_t(S), int64_t(H)});
  constexpr double kNaN = std::numeric_limits<double>::quiet_NaN();
  std::vector<double> logits, out(D);
  std::vector<bool> value_non_finite(D);

  for (size_t seq = 0; seq < S; ++seq) {
    const size_t len = size_t(lens[seq]);
    const size_t t0 = options.sliding_window > 0 && len > options.sliding_window ? len - options.sliding_window : 0;
    for (size_t h = 0; h < H; ++h) {
      const size_t g = h / (H / Hkv);
      logits.assign(len, 0.0);
      double m = -std::numeric_limits<double>::infinity();
      // Step 9: the query reaches the outputs through the logits, so only where some position
      // is attended; a key, through its position's logit.
      bool poisoned = false;
      for (size_t d = 0; d < D && t0 < len; ++d) poisoned = poisoned || !std::isfinite(in.query.get((seq * H + h) * D + d));
      for (size_t t = t0; t < len; ++t) {
        const size_t block = size_t(tables[seq * M + t / B]);
        const size_t off = t % B;
        double dot = 0.0;
        for (size_t d = 0; d < D; ++d) {
          const uint64_t ki = block * block_elements + geometry.key_offset(s.kv_layout, uint32_t(g), uint32_t(d), uint32_t(off));
          const double k = cache_element(in.key_cache, s.cache_dtype, ki, params.k_scale);
          poisoned = poisoned || !std::isfinite(k);
          dot += in.query.get((seq * H + h) * D + d) * k;
        }
        double l = scale * dot;
        if (params.softcap > 0.0f) l = params.softcap * std::tanh(l / params.softcap);
        if (s.alibi) l += in.alibi_slopes.get(h) * (double(t) - double(len) + 1.0);
        logits[t] = l;
        m = std::max(m, l);
      }
      if (poisoned) {
        for (size_t d = 0; d < D; ++d) r.output.set((seq * H + h) * D + d, kNaN);
        if (want_lse) r.lse.set(seq * H + h, kNaN);
        continue;
      }
      const bool sink = s.sinks;
      const double z = sink ? in.sinks.get(h) : 0.0;
      if (sink) m = std::max(m, z);
      double den = sink ? std::exp(z - m) : 0.0;
      std::fill(out.begin(), out.end(), 0.0);
      std::fill(value_non_finite.begin(), value_non_finite.end(), false);
      for (size_t t = t0; t < len; ++t) {
        const double p = std::exp(logits[t] - m);
        den += p;
        const size_t block = size_t(tables[seq * M + t / B]);
        for (size_t d = 0; d < D; ++d) {
          const uint64_t vi =
              block * block_elements + geometry.value_offset(s.kv_layout, uint32_t(g), uint32_t(d), uint32_t(t % B));
          const double v = cache_element(in.value_cache, s.cache_dtype, vi, params.v_scale);
          value_non_finite[d] = value_non_finite[d] || !std::isfinite(v);  // whatever its probability
          out[d] += p * v;
        }
      }
      for (size_t d = 0; d < D; ++d)
        r.output.set((seq * H + h) * D + d, value_non_finite[d] ? kNaN : den > 0.0 ? out[d] / den : 0.0);
      if (want_lse)
        r.lse.set(seq * H + h, den > 0.0 ? m + std::log(den) : -std::numeric_limits<double>::infinity());
    }
  }
  return r;
}

}  // namespace vkpaged::reference
