// SPDX-License-Identifier: Apache-2.0
#include "support/attention_case.hpp"

#include <fmt/format.h>

#include <algorithm>
#include <cmath>
#include <limits>
#include <numeric>

#include "support/cache_draws.hpp"


namespace vkpaged::test {

namespace {

KvBlockGeometry geometry_of(const AttentionCase& c) {
  return {c.kv_heads, c.head_size, c.block_size, cache_pack_factor(c.cache_dtype)};
}

Shape key_shape(const AttentionCase& c, int64_t n) {
  const int64_t hkv = c.kv_heads, d = c.head_size, b = c.block_size, x = cache_pack_factor(c.cache_dtype);
  switch (c.layout) {
    case KvLayout::nhd: return Shape{n, b, hkv, d};
    case KvLayout::hnd: return Shape{n, hkv, b, d};
    case KvLayout::vllm: break;
  }
  return Shape{n, hkv, d / x, b, x};
}

Shape value_shape(const AttentionCase& c, int64_t n) {
  const int64_t hkv = c.kv_heads, d = c.head_size, b = c.block_size;
  switch (c.layout) {
    case KvLayout::nhd: return Shape{n, b, hkv, d};
    case KvLayout::hnd: return Shape{n, hkv, b, d};
    case KvLayout::vllm: break;
  }
  return Shape{n, hkv, d, b};
}

const char* mask_name(TreeMask m) {
  return m == TreeMask::none ? "" : m == TreeMask::random ? " random-mask" : " tree-mask";
}

}  // namespace

std::string AttentionCase::str() const {
  return fmt::format("H={} Hkv={} D={} B={} q={} cache={} layout={} lens=[{}] new=[{}]{}{}{}{}", heads, kv_heads,
                     head_size, block_size, dtype_name(query_dtype), dtype_name(cache_dtype), kv_layout_name(layout),
                     fmt::join(lens, ","), fmt::join(new_tokens, ","), alibi ? " alibi" : "", sinks ? " sinks" : "",
                     sliding_window ? fmt::format(" W={}", sliding_window) : "", mask_name(tree_mask));
}

AttentionInputs single_token_batch(const DecodeInputs& d, uint32_t sliding_window) {
  AttentionInputs a;
  a.query = d.query;
  a.key_cache = d.key_cache;
  a.value_cache = d.value_cache;
  a.block_tables = d.block_tables;
  a.context_lens = d.context_lens;
  a.alibi_slopes = d.alibi_slopes;
  a.sinks = d.sinks;
  a.cache_dtype = d.cache_dtype;
  a.kv_layout = d.kv_layout;
  a.sliding_window = sliding_window;
  a.kv_indptr = d.kv_indptr;
  a.kv_indices = d.kv_indices;
  a.kv_last_page_len = d.kv_last_page_len;
  a.max_blocks_per_seq = d.max_blocks_per_seq;
  const int64_t S = d.query.shape()[0];
  a.query_starts = HostTensor(DType::i32, Shape{S + 1});
  for (int64_t i = 0; i <= S; ++i) a.query_starts.as<int32_t>()[i] = int32_t(i);
  return a;
}

AttentionParams default_params(const AttentionCase& c) {
  AttentionParams p;
  if (is_fp8_dtype(c.cache_dtype)) p.k_scale = p.v_scale = c.fp8_scale;
  return p;
}

uint64_t key_index(const AttentionCase& c, int64_t block, int64_t kv_head, int64_t dim, int64_t offset) {
  const auto g = geometry_of(c);
  return uint64_t(block) * g.block_elements() + g.key_offset(c.layout, uint32_t(kv_head), uint32_t(dim), uint32_t(offset));
}

uint64_t value_index(const AttentionCase& c, int64_t block, int64_t kv_head, int64_t dim, int64_t offset) {
  const auto g = geometry_of(c);
  return uint64_t(block) * g.block_elements() + g.value_offset(c.layout, uint32_t(kv_head), uint32_t(dim), uint32_t(offset));
}

int64_t block_of(const AttentionCase& c, const AttentionInputs& in, int64_t s, int64_t t) {
  return in.block_tables.as<int32_t>()[s * in.block_tables.shape()[1] + t / c.block_size];
}

AttentionInputs make_attention_inputs(const AttentionCase& c, std::mt19937& rng) {
  std::uniform_real_distribution<float> uni(-1.0f, 1.0f);
  const int64_t S = int64_t(c.lens.size()), H = c.heads, Hkv = c.kv_heads, D = c.head_size, B = c.block_size;
  const int64_t max_len = c.lens.empty() ? 0 : *std::max_element(c.lens.begin(), c.lens.end());
  const int64_t M = (max_len + B - 1) / B + c.extra_columns;
  int64_t used = 0, T = 0;
  for (size_t s = 0; s < c.lens.size(); ++s) {
    used += (c.lens[s] + B - 1) / B;
    T += c.new_tokens[s];
  }
  const int64_t N = used + c.extra_blocks;
  const bool fp8 = is_fp8_dtype(c.cache_dtype);
  const DType stored = fp8 ? DType::u8 : c.cache_dtype;

  AttentionInputs in;
  in.cache_dtype = c.cache_dtype;
  in.kv_layout = c.layout;
  in.sliding_window = c.sliding_window;
  in.query = HostTensor(c.query_dtype, Shape{T, H, D});
  for (int64_t i = 0; i < in.query.numel(); ++i) in.query.set(size_t(i), uni(rng));
  in.key_cache = HostTensor(stored, key_shape(c, N));
  in.value_cache = HostTensor(stored, value_shape(c, N));
  fill_cache_pools(in.key_cache, in.value_cache, c.cache_dtype, rng, [&](float u) { return float(u / c.fp8_scale); });

  // Physical blocks handed out in random order.
  std::vector<int32_t> ids(static_cast<size_t>(N));
  std::iota(ids.begin(), ids.end(), 0);
  std::shuffle(ids.begin(), ids.end(), rng);
  in.block_tables = HostTensor(DType::i32, Shape{S, M});
  in.context_lens = HostTensor(DType::i32, Shape{S});
  in.query_starts = HostTensor(DType::i32, Shape{S + 1});
  size_t next = 0;
  std::uniform_int_distribution<int32_t> any_block(0, int32_t(N - 1));
  int32_t start = 0;
  for (int64_t s = 0; s < S; ++s) {
    const int64_t len = c.lens[size_t(s)];
    in.context_lens.as<int32_t>()[s] = int32_t(len);
    in.query_starts.as<int32_t>()[s] = start;
    start += int32_t(c.new_tokens[size_t(s)]);
    const int64_t blocks = (len + B - 1) / B;
    for (int64_t j = 0; j < M; ++j) in.block_tables.as<int32_t>()[s * M + j] = j < blocks ? ids[next++] : any_block(rng);
    // Slots past the length in the last block hold garbage that must not reach the output.
    if (len % B != 0 && !fp8) {
      const int64_t block = in.block_tables.as<int32_t>()[s * M + blocks - 1];
      for (int64_t off = len % B; off < B; ++off)
        for (int64_t g = 0; g < Hkv; ++g)
          for (int64_t d = 0; d < D; ++d) {
            in.key_cache.set(size_t(key_index(c, block, g, d, off)), std::numeric_limits<double>::quiet_NaN());
            in.value_cache.set(size_t(value_index(c, block, g, d, off)), std::numeric_limits<double>::quiet_NaN());
          }
    }
  }
  in.query_starts.as<int32_t>()[S] = start;
  if (c.tree_mask != TreeMask::none) {
    int64_t bytes = 0;
    for (uint32_t q : c.new_tokens) bytes += int64_t(q) * q;
    in.tree_mask = HostTensor(DType::u8, Shape{bytes});
    uint8_t* m = in.tree_mask.as<uint8_t>();
    std::bernoulli_distribution coin(0.5);
    for (uint32_t q : c.new_tokens) {
      std::vector<int64_t> parent(q, -1);
      for (uint32_t j = 1; j < q; ++j) parent[j] = q > 16 ? j - 1 : std::uniform_int_distribution<int64_t>(0, j - 1)(rng);
      for (uint32_t j = 0; j < q; ++j)
        for (uint32_t k = 0; k < q; ++k) {
          bool see = false;
          if (c.tree_mask == TreeMask::random) {
            see = coin(rng);
          } else {
            for (int64_t a = j; a >= 0 && !see; a = parent[size_t(a)]) see = a == int64_t(k);
          }
          m[j * q + k] = see ? 1 : 0;
        }
      m += int64_t(q) * q;
    }
  }
  draw_alibi_and_sinks(H, c.alibi, c.sinks, rng, in.alibi_slopes, in.sinks);
  return in;
}

void expect_attention_near(const AttentionResult& got, const AttentionResult& want, double tol, bool lse,
                           const std::string& label) {
  ASSERT_TRUE(got.output.shape() == want.output.shape()) << label;
  double worst = 0.0;
  int64_t nan_mismatch = -1;
  for (int64_t i = 0; i < want.output.numel(); ++i) {
    const double w = want.output.get(size_t(i)), g = got.output.get(size_t(i));
    if (std::isnan(w) != std::isnan(g) || std::isinf(g)) {
      if (nan_mismatch < 0) nan_mismatch = i;
      continue;
    }
    if (!std::isnan(w)) worst = std::max(worst, std::fabs(w - g));
  }
  EXPECT_LT(nan_mismatch, 0) << label << ": output " << nan_mismatch << " is " << got.output.get(size_t(nan_mismatch))
                             << ", the reference " << want.output.get(size_t(nan_mismatch));
  EXPECT_LE(worst, tol) << label;
  if (!lse) return;
  ASSERT_TRUE(got.lse.shape() == want.lse.shape()) << label;
  for (int64_t i = 0; i < want.lse.numel(); ++i) {
    const double w = want.lse.get(size_t(i)), g = got.lse.get(size_t(i));
    if (std::isnan(w)) EXPECT_TRUE(std::isnan(g)) << label << " lse " << i << ": " << g;
    else if (std::isinf(w)) EXPECT_TRUE(std::isinf(g) && g < 0) << label << " lse " << i << ": " << g;
    else EXPECT_NEAR(g, w, 1e-3 + tol) << label << " lse " << i;
  }
}

}  // namespace vkpaged::test
