// SPDX-License-Identifier: Apache-2.0
#include "support/decode_bf16_range.hpp"

#include <gtest/gtest.h>

#include <cmath>
#include <random>
#include <vector>

#include "support/decode_case.hpp"
#include "vkpaged/reference.hpp"

namespace vkpaged::test {
namespace {

// What one sequence's keys, values and query are multiplied by (powers of two, exact in bf16).
struct SequenceScales {
  int key = 0;          // every key element: 2^key; the query 2^-key, so the logits stay O(1)
  int value = 0;        // every value element
  int query = 0;        // the query on top of 2^-key (large logits)
  int key_every = 1;    // only every n-th token's key is scaled (others stay in U(-1, 1))
  int value_every = 1;  // only every n-th token's value is scaled
};

}  // namespace

void expect_bf16_far_outside_f16_range_kept(Context& ctx, const DecodeOptions& options, const DecodeParams& params,
                                            KvLayout layout) {
  DecodeCase c;
  c.query_dtype = c.cache_dtype = DType::bf16;
  c.heads = 8;
  c.kv_heads = 2;
  c.lens = {40, 300, 100, 600, 33, 77};
  const std::vector<SequenceScales> scales = {
      {40, 30},            // both overflow f16
      {-30, -40},          // both below f16's normal range
      {12, 15},            // large but representable: no rescaling needed
      {0, 24, 0, 1, 3},    // every third token's value overflows f16, the rest in U(-1, 1)
      {-20, 0, -20, 5, 1}, // every fifth token's key is tiny next to the others (query unscaled)
      {0, 0, 6},           // a query of 2^6 U(-1, 1) (with the scale): logits near one-hot
  };
  std::mt19937 rng(17);
  DecodeInputs in = make_decode_inputs(c, rng);
  const int64_t H = c.heads, Hkv = c.kv_heads, D = c.head_size, B = c.block_size;
  for (size_t s = 0; s < scales.size(); ++s) {
    const SequenceScales& f = scales[s];
    for (int64_t i = 0; i < H * D; ++i) {
      const size_t at = size_t(int64_t(s) * H * D + i);
      in.query.set(at, std::ldexp(in.query.get(at), f.query - f.key));
    }
    for (int64_t t = 0; t < int64_t(c.lens[s]); ++t) {
      const int64_t block = block_of_token(c, in, int64_t(s), t), off = t % B;
      for (int64_t g = 0; g < Hkv; ++g)
        for (int64_t d = 0; d < D; ++d) {
          const size_t ki = key_cache_index(c, block, g, d, off), vi = value_cache_index(c, block, g, d, off);
          if (t % f.key_every == 0) in.key_cache.set(ki, std::ldexp(in.key_cache.get(ki), f.key));
          if (t % f.value_every == 0) in.value_cache.set(vi, std::ldexp(in.value_cache.get(vi), f.value));
        }
    }
  }
  const DecodeResult want = reference::decode_attention(in, options, params);
  const DecodeResult got = decode_attention(ctx, with_layout(in, layout), options, params);
  const double tol = tolerance(c.query_dtype, c.cache_dtype);
  for (size_t s = 0; s < scales.size(); ++s) {
    const double unit = std::ldexp(1.0, scales[s].value);  // the outputs' scale
    double worst = 0.0;
    for (int64_t i = 0; i < H * D; ++i) {
      const size_t at = size_t(int64_t(s) * H * D + i);
      const double w = want.output.get(at), g = got.output.get(at);
      ASSERT_TRUE(std::isfinite(w)) << "reference, sequence " << s << " element " << i;
      ASSERT_TRUE(std::isfinite(g)) << "sequence " << s << " element " << i << " is " << g;
      worst = std::max(worst, std::fabs(g - w) / unit);
    }
    EXPECT_LE(worst, tol) << "sequence " << s << " (key 2^" << scales[s].key << ", value 2^" << scales[s].value
                          << ", query 2^" << scales[s].query - scales[s].key << ")";
  }
}

}  // namespace vkpaged::test
