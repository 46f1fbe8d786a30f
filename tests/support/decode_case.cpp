// SPDX-License-Identifier: Apache-2.0
#include "support/decode_case.hpp"

#include <fmt/format.h>

#include <algorithm>
#include <cmath>
#include <cstring>
#include <limits>
#include <numeric>

#include "support/cache_draws.hpp"

namespace vkpaged::test {

std::string DecodeCase::str() const {
  return fmt::format("H={} Hkv={} D={} B={} q={} cache={} lens=[{}]{}{}", heads, kv_heads, head_size, block_size,
                     dtype_name(query_dtype), dtype_name(cache_dtype), fmt::join(lens, ","), alibi ? " alibi" : "",
                     sinks ? " sinks" : "");
}

DecodeParams default_params(const DecodeCase& c) {
  DecodeParams p;
  if (is_fp8_dtype(c.cache_dtype)) p.k_scale = p.v_scale = c.fp8_scale;
  return p;
}

std::vector<FeatureMix> feature_mixes() {
  std::vector<FeatureMix> mixes;
  DecodeCase c;
  c.heads = 8;
  c.kv_heads = 2;
  c.lens = {0, 1, 16, 17, 100, 333};
  for (uint32_t mask = 0; mask < 16; ++mask) {
    c.alibi = mask & 1;
    c.sinks = mask & 2;
    DecodeOptions o;
    DecodeParams p = default_params(c);
    if (mask & 4) p.softcap = 3.0f;
    if (mask & 8) o.sliding_window = 37;
    p.scale = 0.3f;
    mixes.push_back({c, o, p, mask});
  }
  return mixes;
}

DecodeShape plan_shape(uint32_t num_seqs, uint32_t num_heads, uint32_t num_kv_heads, uint32_t head_size,
                       uint32_t max_context_len) {
  DecodeShape s;
  s.num_seqs = num_seqs;
  s.num_heads = num_heads;
  s.num_kv_heads = num_kv_heads;
  s.head_size = head_size;
  s.block_size = 16;
  s.max_blocks_per_seq = (max_context_len + s.block_size - 1) / s.block_size;
  s.num_blocks = s.max_blocks_per_seq;
  s.max_context_len = max_context_len;
  return s;
}

size_t key_cache_index(const DecodeCase& c, int64_t block, int64_t kv_head, int64_t dim, int64_t offset) {
  const int64_t Hkv = c.kv_heads, D = c.head_size, B = c.block_size, x = cache_pack_factor(c.cache_dtype);
  return size_t((((block * Hkv + kv_head) * (D / x) + dim / x) * B + offset) * x + dim % x);
}

size_t value_cache_index(const DecodeCase& c, int64_t block, int64_t kv_head, int64_t dim, int64_t offset) {
  return size_t(((block * c.kv_heads + kv_head) * c.head_size + dim) * c.block_size + offset);
}

DecodeInputs with_layout(const DecodeInputs& in, KvLayout layout) {
  if (layout == KvLayout::vllm) return in;
  const Shape& k = in.key_cache.shape();  // [N, Hkv, D/x, B, x]
  const int64_t N = k[0], Hkv = k[1], B = k[3], x = k[4], D = k[2] * k[4];
  const KvBlockGeometry geometry{uint32_t(Hkv), uint32_t(D), uint32_t(B), uint32_t(x)};
  const Shape shape = layout == KvLayout::nhd ? Shape{N, B, Hkv, D} : Shape{N, Hkv, B, D};
  DecodeInputs out = in;
  out.kv_layout = layout;
  out.key_cache = HostTensor(in.key_cache.dtype(), shape);
  out.value_cache = HostTensor(in.value_cache.dtype(), shape);
  const size_t bytes = dtype_size(in.key_cache.dtype());
  const uint64_t block = geometry.block_elements();
  auto move = [&](const HostTensor& from, HostTensor& to, bool key) {
    for (int64_t n = 0; n < N; ++n)
      for (uint32_t g = 0; g < geometry.num_kv_heads; ++g)
        for (uint32_t d = 0; d < geometry.head_size; ++d)
          for (uint32_t o = 0; o < geometry.block_size; ++o) {
            const uint64_t src = uint64_t(n) * block + (key ? geometry.key_offset(KvLayout::vllm, g, d, o)
                                                  : geometry.value_offset(KvLayout::vllm, g, d, o));
            const uint64_t dst = uint64_t(n) * block + geometry.key_offset(layout, g, d, o);
            std::memcpy(static_cast<char*>(to.data()) + dst * bytes, static_cast<const char*>(from.data()) + src * bytes,
                        bytes);
          }
  };
  move(in.key_cache, out.key_cache, true);
  move(in.value_cache, out.value_cache, false);
  return out;
}

int64_t block_of_token(const DecodeCase& c, const DecodeInputs& in, int64_t seq, int64_t token) {
  return in.block_tables.as<int32_t>()[seq * in.block_tables.shape()[1] + token / c.block_size];
}

DecodeInputs make_decode_inputs(const DecodeCase& c, std::mt19937& rng) {
  std::uniform_real_distribution<float> uni(-1.0f, 1.0f);
  const int64_t S = int64_t(c.lens.size()), H = c.heads, Hkv = c.kv_heads, D = c.head_size, B = c.block_size;
  const int64_t max_len = c.lens.empty() ? 0 : *std::max_element(c.lens.begin(), c.lens.end());
  const int64_t M = (max_len + B - 1) / B + c.extra_columns;
  int64_t used = 0;
  for (uint32_t len : c.lens) used += (len + B - 1) / B;
  const int64_t N = used + c.extra_blocks;
  const bool fp8 = is_fp8_dtype(c.cache_dtype);
  const DType stored = fp8 ? DType::u8 : c.cache_dtype;
  const int64_t x = cache_pack_factor(c.cache_dtype);
  const double fp8_inv = 1.0 / c.fp8_scale;

  DecodeInputs in;
  in.cache_dtype = c.cache_dtype;
  in.query = HostTensor(c.query_dtype, Shape{S, H, D});
  for (int64_t i = 0; i < in.query.numel(); ++i) in.query.set(size_t(i), uni(rng));
  in.key_cache = HostTensor(stored, Shape{N, Hkv, D / x, B, x});
  in.value_cache = HostTensor(stored, Shape{N, Hkv, D, B});
  fill_cache_pools(in.key_cache, in.value_cache, c.cache_dtype, rng, [fp8_inv](float u) { return float(u * fp8_inv); });

  // Physical blocks handed out in random order.
  std::vector<int32_t> ids(static_cast<size_t>(N));
  std::iota(ids.begin(), ids.end(), 0);
  std::shuffle(ids.begin(), ids.end(), rng);
  in.block_tables = HostTensor(DType::i32, Shape{S, M});
  in.context_lens = HostTensor(DType::i32, Shape{S});
  size_t next = 0;
  std::uniform_int_distribution<int32_t> any_block(0, int32_t(N - 1));
  for (int64_t s = 0; s < S; ++s) {
    const int64_t len = c.lens[size_t(s)];
    in.context_lens.as<int32_t>()[s] = int32_t(len);
    const int64_t blocks = (len + B - 1) / B;
    for (int64_t j = 0; j < M; ++j) in.block_tables.as<int32_t>()[s * M + j] = j < blocks ? ids[next++] : any_block(rng);
    // Slots past the length in the last block hold garbage that must not reach the output.
    if (len % B != 0 && !fp8) {
      const int64_t block = in.block_tables.as<int32_t>()[s * M + blocks - 1];
      for (int64_t off = len % B; off < B; ++off)
        for (int64_t g = 0; g < Hkv; ++g)
          for (int64_t d = 0; d < D; ++d) {
            in.key_cache.set(key_cache_index(c, block, g, d, off), std::numeric_limits<double>::quiet_NaN());
            in.value_cache.set(value_cache_index(c, block, g, d, off), std::numeric_limits<double>::quiet_NaN());
          }
    }
  }
  draw_alibi_and_sinks(H, c.alibi, c.sinks, rng, in.alibi_slopes, in.sinks);
  return in;
}

double tolerance(DType query, DType cache) {
  if (cache == DType::bf16 || query == DType::bf16) return 2e-2;
  if (cache == DType::f16 || query == DType::f16 || is_fp8_dtype(cache)) return 3e-3;
  return 1e-4;
}

double max_abs_diff(const HostTensor& a, const HostTensor& b) {
  if (!(a.shape() == b.shape())) return std::numeric_limits<double>::quiet_NaN();
  double worst = 0.0;
  for (int64_t i = 0; i < a.numel(); ++i) {
    const double x = a.get(size_t(i)), y = b.get(size_t(i));
    if (!std::isfinite(x) || !std::isfinite(y)) return std::numeric_limits<double>::quiet_NaN();
    worst = std::max(worst, std::fabs(x - y));
  }
  return worst;
}

}  // namespace vkpaged::test
