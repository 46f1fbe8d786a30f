// SPDX-License-Identifier: Apache-2.0
// The CPU reference's attention math (attention_math.hpp). Non-finite inputs (step 9) are found
// on the inputs themselves, not through the arithmetic: a NaN or infinite element of the query
// or of an attended key makes its row's outputs and LSE NaN; one of an attended value makes
// that dim's outputs NaN.
#include "reference/attention_math.hpp"

#include <cmath>
#include <limits>

namespace vkpaged::reference::math {

double cache_element(const HostTensor& t, DType cache, uint64_t i, double fp8_scale) {
  if (is_fp8_dtype(cache)) return double(load_element(t.data(), cache, size_t(i))) * fp8_scale;
  return t.get(size_t(i));
}

AttentionResult attend_inputs(const AttentionShape& s, uint32_t key_width, uint32_t value_width,
                              const HostTensor& query, const vkpaged::detail::HostRequestInputs& in,
                              const KvReader& cache, const AttentionParams& params, bool want_lse) {
  namespace d = vkpaged::detail;
  const std::vector<int32_t> starts = d::host_query_starts(in.query_starts);
  const d::DensePageTables tables =
      d::dense_page_tables(in.page_tables, d::page_table_form(in.page_tables), s.block_size, s.num_blocks);
  const AttentionProblem problem{s, key_width, value_width, query, in.tree_mask, in.alibi_slopes, in.sinks, starts,
                                 tables};
  return attend(problem, cache, params, want_lse);
}

AttentionResult attend(const AttentionProblem& pr, const KvReader& cache, const AttentionParams& params,
                       bool want_lse) {
  const AttentionShape& s = pr.shape;
  const size_t H = s.num_heads, Hkv = s.num_kv_heads, B = s.block_size, M = s.max_blocks_per_seq;
  const size_t Dk = pr.key_width, Dv = pr.value_width;
  const double scale = params.scale ? double(*params.scale) : 1.0 / std::sqrt(double(Dk));
  const double softcap = params.softcap;
  const double k_scale = params.k_scale, v_scale = params.v_scale;
  const uint32_t W = s.sliding_window;
  const auto& starts = pr.query_starts;
  const auto& tables = pr.tables.block_tables;
  const auto& lens = pr.tables.context_lens;
  constexpr double kNaN = std::numeric_limits<double>::quiet_NaN();
  constexpr double kNegInf = -std::numeric_limits<double>::infinity();

  AttentionResult r;
  r.output = HostTensor(pr.query.dtype(), Shape{int64_t(s.num_query_tokens), int64_t(H), int64_t(Dv)});
  if (want_lse) r.lse = HostTensor(DType::f32, Shape{int64_t(s.num_query_tokens), int64_t(H)});
  std::vector<size_t> attended;
  std::vector<double> logits, out(Dv);
  std::vector<bool> value_non_finite(Dv);
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
        if (s.tree_mask && t >= first_new) visible = pr.tree_mask.as<uint8_t>()[mask_base + j * q + (t - first_new)] != 0;
        if (visible) attended.push_back(t);
      }
      for (size_t h = 0; h < H; ++h) {
        const uint32_t g = uint32_t(h / (H / Hkv));
        const size_t row = token * H + h;
        // Step 9: the query reaches the outputs through the logits, so only where some position
        // is attended; a key, through its position's logit.
        bool poisoned = false;
        for (size_t d = 0; d < Dk && !attended.empty(); ++d)
          poisoned = poisoned || !std::isfinite(pr.query.get(row * Dk + d));
        logits.assign(attended.size(), 0.0);
        double m = kNegInf;
        for (size_t i = 0; i < attended.size(); ++i) {
          const size_t t = attended[i];
          const uint64_t block = uint64_t(tables[seq * M + t / B]);
          double dot = 0.0;
          for (size_t d = 0; d < Dk; ++d) {
            const CacheSlot key = cache.key(block, uint32_t(t % B), g, uint32_t(d));
            const double k = cache_element(key.tensor, s.cache_dtype, key.index, k_scale);
            poisoned = poisoned || !std::isfinite(k);
            dot += pr.query.get(row * Dk + d) * k;
          }
          double l = scale * dot;
          if (softcap > 0.0) l = softcap * std::tanh(l / softcap);               // step 4
          if (s.alibi) l += pr.alibi_slopes.get(h) * (double(t) - double(p));    // relative to p
          logits[i] = l;
          m = std::max(m, l);
        }
        if (poisoned) {
          for (size_t d = 0; d < Dv; ++d) r.output.set(row * Dv + d, kNaN);
          if (want_lse) r.lse.set(row, kNaN);
          continue;
        }
        const double z = s.sinks ? pr.sinks.get(h) : 0.0;  // step 6
        if (s.sinks) m = std::max(m, z);
        double den = s.sinks ? std::exp(z - m) : 0.0;
        std::fill(out.begin(), out.end(), 0.0);
        std::fill(value_non_finite.begin(), value_non_finite.end(), false);
        for (size_t i = 0; i < attended.size(); ++i) {
          const size_t t = attended[i];
          const double w = std::exp(logits[i] - m);
          den += w;
          const uint64_t block = uint64_t(tables[seq * M + t / B]);
          for (size_t d = 0; d < Dv; ++d) {
            const CacheSlot value = cache.value(block, uint32_t(t % B), g, uint32_t(d));
            const double v = cache_element(value.tensor, s.cache_dtype, value.index, v_scale);
            value_non_finite[d] = value_non_finite[d] || !std::isfinite(v);  // whatever its probability
            out[d] += w * v;
          }
        }
        for (size_t d = 0; d < Dv; ++d)  // steps 7 and 8
          r.output.set(row * Dv + d, value_non_finite[d] ? kNaN : den > 0.0 ? out[d] / den : 0.0);
        if (want_lse) r.lse.set(row, den > 0.0 ? m + std::log(den) : kNegInf);
      }
    }
    if (s.tree_mask) mask_base += uint64_t(q) * q;
  }
  return r;
}

}  // namespace vkpaged::reference::math
