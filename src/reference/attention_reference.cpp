// SPDX-License-Identifier: Apache-2.0
// CPU reference of multi-query attention, straight from docs/contract.md ("Multi-query
// attention", with the decode math of steps 1-9), in double precision, over every cache layout
// (read through KvBlockGeometry). Non-finite inputs (step 9) are found on the inputs themselves,
// not through the arithmetic: a NaN or infinite element of the query or of an attended key
// makes its row's outputs and LSE NaN; one of an attended value makes that dim's outputs NaN.
#include <fmt/format.h>

#include <cmath>
#include <limits>
#include <vector>

#include "ops/attention_validation.hpp"
#include "ops/decode_validation.hpp"
#include "ops/host_page_tables.hpp"
#include "vkpaged/reference.hpp"

namespace vkpaged::reference {

namespace {

// Element i of a cache tensor as the contract reads it: decode(byte) * scale for fp8.
double cache_element(const HostTensor& t, DType cache, uint64_t i, double fp8_scale) {
  if (is_fp8_dtype(cache)) return double(load_element(t.data(), cache, size_t(i))) * fp8_scale;
  return t.get(size_t(i));
}

}  // namespace

AttentionResult batch_attention(const AttentionInputs& in, const AttentionParams& params, bool want_lse) {
  const AttentionShape s = attention_shape_of(in, params, want_lse);
  detail::validate_attention_params(params, s);
  const size_t H = s.num_heads, Hkv = s.num_kv_heads, D = s.head_size, B = s.block_size, M = s.max_blocks_per_seq;
  const KvBlockGeometry geometry{s.num_kv_heads, s.head_size, s.block_size, cache_pack_factor(s.cache_dtype)};
  const uint64_t block_elements = geometry.block_elements();
  const double scale = params.scale ? double(*params.scale) : 1.0 / std::sqrt(double(D));
  const double softcap = params.softcap;
  const uint32_t W = in.sliding_window;
  const auto starts = detail::host_query_starts(in.query_starts);
  // Either form, as the dense values it stands for (the CSR form's, its expansion).
  const auto page_tables = detail::page_table_inputs(in);
  const auto [tables, lens] =
      detail::dense_page_tables(page_tables, detail::page_table_form(page_tables), s.block_size, s.num_blocks);
  constexpr double kNaN = std::numeric_limits<double>::quiet_NaN();
  constexpr double kNegInf = -std::numeric_limits<double>::infinity();

  AttentionResult r;
  r.output = HostTensor(in.query.dtype(), in.query.shape());
  if (want_lse) r.lse = HostTensor(DType::f32, Shape{int64_t(s.num_query_tokens), int64_t(H)});
  std::vector<size_t> attended;
  std::vector<double> logits, out(D);
  std::vector<bool> value_non_finite(D);
  uint64_t mask_base = 0;  // the request's first byte of the tree masks

  for (size_t seq = 0; seq < s.num_requests; ++seq) {
    const size_t len = size_t(lens[seq]);
    const size_t q = size_t(starts[seq + 1] - starts[seq]);
    const size_t first_new = len - q;
    for (size_t j = 0; j < q; ++j) {
      const size_t token = size_t(starts[seq]) + j;
      const size_t p = first_new + j;
      const size_t t0 = W > 0 && p + 1 > W ? p + 1 - W : 0;
      // Step 1 and the causal bound; with a tree mask the new tokens see what the mask says, and
      // the window holds for every position, the new tokens included.
      attended.clear();
      for (size_t t = t0; t < len; ++t) {
        bool visible = t <= p;
        if (s.tree_mask && t >= first_new) visible = in.tree_mask.as<uint8_t>()[mask_base + j * q + (t - first_new)] != 0;
        if (visible) attended.push_back(t);
      }
      for (size_t h = 0; h < H; ++h) {
        const size_t g = h / (H / Hkv);
        const size_t row = token * H + h;
        // Step 9: the query reaches the outputs through the logits, so only where some position
        // is attended; a key, through its position's logit.
        bool poisoned = false;
        for (size_t d = 0; d < D && !attended.empty(); ++d) poisoned = poisoned || !std::isfinite(in.query.get(row * D + d));
        logits.assign(attended.size(), 0.0);
        double m = kNegInf;
        for (size_t i = 0; i < attended.size(); ++i) {
          const size_t t = attended[i];
          const uint64_t block = uint64_t(tables[seq * M + t / B]);
          double dot = 0.0;
          for (size_t d = 0; d < D; ++d) {
            const double k = cache_element(in.key_cache, s.cache_dtype,
                                           block * block_elements + geometry.key_offset(s.kv_layout, g, d, t % B),
                                           params.k_scale);
            poisoned = poisoned || !std::isfinite(k);
            dot += in.query.get(row * D + d) * k;
          }
          double l = scale * dot;
          if (softcap > 0.0) l = softcap * std::tanh(l / softcap);                      // step 4
          if (s.alibi) l += in.alibi_slopes.get(h) * (double(t) - double(p));           // relative to p
          logits[i] = l;
          m = std::max(m, l);
        }
        if (poisoned) {
          for (size_t d = 0; d < D; ++d) r.output.set(row * D + d, kNaN);
          if (want_lse) r.lse.set(row, kNaN);
          continue;
        }
        const double z = s.sinks ? in.sinks.get(h) : 0.0;  // step 6
        if (s.sinks) m = std::max(m, z);
        double den = s.sinks ? std::exp(z - m) : 0.0;
        std::fill(out.begin(), out.end(), 0.0);
        std::fill(value_non_finite.begin(), value_non_finite.end(), false);
        for (size_t i = 0; i < attended.size(); ++i) {
          const size_t t = attended[i];
          const double w = std::exp(logits[i] - m);
          den += w;
          const uint64_t block = uint64_t(tables[seq * M + t / B]);
          for (size_t d = 0; d < D; ++d) {
            const double v = cache_element(in.value_cache, s.cache_dtype,
                                           block * block_elements + geometry.value_offset(s.kv_layout, g, d, t % B),
                                           params.v_scale);
            value_non_finite[d] = value_non_finite[d] || !std::isfinite(v);  // whatever its probability
            out[d] += w * v;
          }
        }
        for (size_t d = 0; d < D; ++d)  // steps 7 and 8
          r.output.set(row * D + d, value_non_finite[d] ? kNaN : den > 0.0 ? out[d] / den : 0.0);
        if (want_lse) r.lse.set(row, den > 0.0 ? m + std::log(den) : kNegInf);
      }
    }
    if (s.tree_mask) mask_base += uint64_t(q) * q;
  }
  return r;
}

}  // namespace vkpaged::reference
