// SPDX-License-Identifier: Apache-2.0
#include "support/non_finite_case.hpp"

#include <gtest/gtest.h>

#include <cmath>
#include <limits>
#include <random>
#include <set>

#include "vkpaged/dtype.hpp"

namespace vkpaged::test {

namespace {

constexpr double kNaN = std::numeric_limits<double>::quiet_NaN();
constexpr double kInf = std::numeric_limits<double>::infinity();

// The fp8 byte of a non-finite value: E5M2 has infinities (0x7c, 0xfc) and NaN (0x7e); E4M3
// only NaN (S.1111.111).
uint8_t fp8_byte(DType cache, double v) {
  const uint8_t sign = std::signbit(v) ? 0x80 : 0x00;
  if (cache == DType::fp8_e4m3) return uint8_t(sign | 0x7f);
  return uint8_t(sign | (std::isnan(v) ? 0x7e : 0x7c));
}

void store(const DecodeCase& c, HostTensor& t, size_t i, double v) {
  if (is_fp8_dtype(c.cache_dtype)) t.as<uint8_t>()[i] = fp8_byte(c.cache_dtype, v);
  else t.set(i, v);
}

int64_t window_start(int64_t len, uint32_t window) { return window > 0 && len > int64_t(window) ? len - window : 0; }

}  // namespace

void place(const DecodeCase& c, DecodeInputs& in, const NonFinite& e) {
  switch (e.where) {
    case NonFinite::Where::query:
      in.query.set(size_t((e.seq * c.heads + e.head) * c.head_size + e.dim), e.value);
      break;
    case NonFinite::Where::key:
      store(c, in.key_cache, key_cache_index(c, block_of_token(c, in, e.seq, e.token), e.head, e.dim, e.token % c.block_size), e.value);
      break;
    case NonFinite::Where::value:
      store(c, in.value_cache, value_cache_index(c, block_of_token(c, in, e.seq, e.token), e.head, e.dim, e.token % c.block_size), e.value);
      break;
  }
}

void fill_unread_with_nan(const DecodeCase& c, DecodeInputs& in) {
  const int64_t S = in.query.shape()[0], M = in.block_tables.shape()[1], N = in.key_cache.shape()[0], B = c.block_size;
  std::set<int64_t> used;
  for (int64_t s = 0; s < S; ++s)
    for (int64_t j = 0; j < (int64_t(c.lens[size_t(s)]) + B - 1) / B; ++j) used.insert(in.block_tables.as<int32_t>()[s * M + j]);
  int64_t spare = -1;
  for (int64_t b = 0; b < N && spare < 0; ++b)
    if (!used.contains(b)) spare = b;
  EXPECT_GE(spare, 0) << "the case needs a spare block (extra_blocks)";
  auto poison_slot = [&](int64_t block, int64_t off) {
    for (int64_t g = 0; g < c.kv_heads; ++g)
      for (int64_t d = 0; d < c.head_size; ++d) {
        store(c, in.key_cache, key_cache_index(c, block, g, d, off), kNaN);
        store(c, in.value_cache, value_cache_index(c, block, g, d, off), kNaN);
      }
  };
  for (int64_t off = 0; off < B && spare >= 0; ++off) poison_slot(spare, off);
  for (int64_t s = 0; s < S; ++s) {
    const int64_t len = c.lens[size_t(s)], blocks = (len + B - 1) / B;
    for (int64_t off = len % B; len % B != 0 && off < B; ++off) poison_slot(block_of_token(c, in, s, len - 1), off);
    for (int64_t j = blocks; j < M && spare >= 0; ++j) in.block_tables.as<int32_t>()[s * M + j] = int32_t(spare);
  }
}

NonFiniteInputs make_non_finite_inputs(const DecodeCase& c, std::span<const NonFinite> elements, uint32_t seed) {
  std::mt19937 rng(seed);
  NonFiniteInputs in;
  in.clean = make_decode_inputs(c, rng);
  fill_unread_with_nan(c, in.clean);
  in.dirty = in.clean;
  for (const NonFinite& e : elements) place(c, in.dirty, e);
  return in;
}

NanMask nan_mask(const DecodeCase& c, const DecodeInputs& in, std::span<const NonFinite> elements, uint32_t window) {
  const int64_t S = in.query.shape()[0], H = c.heads, D = c.head_size, group = c.heads / c.kv_heads;
  NanMask m{std::vector<bool>(size_t(S * H * D)), std::vector<bool>(size_t(S * H))};
  for (int64_t s = 0; s < S; ++s) {
    const int64_t len = c.lens[size_t(s)], t0 = window_start(len, window);
    auto attended = [&](int64_t t) { return t >= t0 && t < len; };
    for (int64_t h = 0; h < H; ++h) {
      bool poisoned = false;
      std::vector<bool> dims(static_cast<size_t>(D), false);
      for (const NonFinite& e : elements) {
        if (e.seq != s) continue;
        if (e.where == NonFinite::Where::query) poisoned = poisoned || (e.head == h && t0 < len);
        else if (e.head == h / group && attended(e.token)) {
          if (e.where == NonFinite::Where::key) poisoned = true;
          else dims[size_t(e.dim)] = true;
        }
      }
      m.lse[size_t(s * H + h)] = poisoned;
      for (int64_t d = 0; d < D; ++d) m.output[size_t((s * H + h) * D + d)] = poisoned || dims[size_t(d)];
    }
  }
  return m;
}

void expect_nan_exactly_where(const DecodeResult& got, const DecodeResult& clean, const NanMask& mask, double tol,
                              bool lse, const std::string& label) {
  ASSERT_EQ(got.output.numel(), int64_t(mask.output.size())) << label;
  int failures = 0;
  for (size_t i = 0; i < mask.output.size() && failures < 10; ++i) {
    const double g = got.output.get(i), want = clean.output.get(i);
    const bool ok = mask.output[i] ? std::isnan(g) : std::isfinite(g) && std::fabs(g - want) <= tol;
    if (!ok) {
      ++failures;
      ADD_FAILURE() << label << ": output " << i << " is " << g << ", expected "
                    << (mask.output[i] ? std::string("NaN") : "about " + std::to_string(want));
    }
  }
  if (!lse) return;
  for (size_t i = 0; i < mask.lse.size() && failures < 20; ++i) {
    const double g = got.lse.get(i), want = clean.lse.get(i);
    bool ok;
    if (mask.lse[i]) ok = std::isnan(g);
    else if (std::isinf(want)) ok = std::isinf(g) && g < 0;
    else ok = std::fabs(g - want) <= 1e-3 + tol;
    if (!ok) {
      ++failures;
      ADD_FAILURE() << label << ": lse " << i << " is " << g << ", expected " << (mask.lse[i] ? std::string("NaN") : std::to_string(want));
    }
  }
}

DecodeCase non_finite_case(DType query, DType cache) {
  DecodeCase c;
  c.heads = 4;
  c.kv_heads = 2;
  c.head_size = 64;
  c.block_size = 16;
  c.lens = {0, 5, 40, 600, 300, 33};
  c.query_dtype = query;
  c.cache_dtype = cache;
  c.extra_blocks = 2;
  c.extra_columns = 2;
  return c;
}

std::vector<NonFinite> non_finite_elements() {
  using W = NonFinite::Where;
  return {
      {W::query, 0, 2, 0, 1, kNaN},     // an empty sequence: nothing attended, outputs stay 0
      {W::query, 1, 0, 0, 3, kNaN},
      {W::query, 2, 3, 0, 60, kInf},
      {W::query, 5, 1, 0, 0, -kInf},
      {W::key, 3, 0, 4, 7, kNaN},       // before a window of 24 (t0 = 576)
      {W::key, 4, 1, 290, 0, kInf},     // inside it (t0 = 276)
      {W::key, 3, 1, 599, 63, -kInf},   // the last position: a -Inf logit, no longer a silent 0
      {W::key, 5, 1, 20, 9, kNaN},
      {W::value, 1, 1, 0, 5, kNaN},     // the first position
      {W::value, 3, 0, 300, 10, kInf},  // before the window
      {W::value, 4, 0, 299, 63, -kInf}, // the last position
      {W::value, 5, 0, 2, 20, kInf},    // before the window (t0 = 9)
  };
}

}  // namespace vkpaged::test
