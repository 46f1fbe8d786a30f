// SPDX-License-Identifier: Apache-2.0
// Cascade attention: attention over a prefix and over the rest, merged, equals attention over
// the whole context (on the device and in the reference).
#include <gtest/gtest.h>

#include <cstring>
#include <random>

#include "support/decode_case.hpp"
#include "support/expect_error.hpp"
#include "support/test_context.hpp"
#include "vkpaged/error.hpp"
#include "vkpaged/merge.hpp"
#include "vkpaged/reference.hpp"

namespace vkpaged::test {
namespace {

// Positions [begin[s], end[s]) of each sequence of `in` (inputs of case `c`) copied into a
// fresh cache, starting at position 0, blocks in order.
DecodeInputs extract(const DecodeCase& c, const DecodeInputs& in, const std::vector<int32_t>& begin,
                     const std::vector<int32_t>& end) {
  const auto& k = in.key_cache.shape();
  const int64_t Hkv = c.kv_heads, D = c.head_size, B = c.block_size, S = in.query.shape()[0];
  const size_t esize = dtype_size(in.key_cache.dtype());
  int64_t blocks = 0, M = 1;
  for (int64_t s = 0; s < S; ++s) {
    const int64_t n = (end[s] - begin[s] + B - 1) / B;
    blocks += n;
    M = std::max(M, n);
  }
  DecodeInputs out = in;
  out.key_cache = HostTensor(in.key_cache.dtype(), Shape{std::max<int64_t>(blocks, 1), k[1], k[2], k[3], k[4]});
  out.value_cache = HostTensor(in.value_cache.dtype(), Shape{std::max<int64_t>(blocks, 1), Hkv, D, B});
  out.block_tables = HostTensor(DType::i32, Shape{S, M});
  out.context_lens = HostTensor(DType::i32, Shape{S});
  int64_t next = 0;
  for (int64_t s = 0; s < S; ++s) {
    out.context_lens.as<int32_t>()[s] = end[s] - begin[s];
    for (int64_t t = begin[s]; t < end[s]; ++t) {
      const int64_t src_block = block_of_token(c, in, s, t), so = t % B;
      const int64_t pos = t - begin[s], dst_block = next + pos / B, dof = pos % B;
      out.block_tables.as<int32_t>()[s * M + pos / B] = int32_t(dst_block);
      for (int64_t g = 0; g < Hkv; ++g)
        for (int64_t d = 0; d < D; ++d) {
          const size_t ks = key_cache_index(c, src_block, g, d, so), kd = key_cache_index(c, dst_block, g, d, dof);
          const size_t vs = value_cache_index(c, src_block, g, d, so), vd = value_cache_index(c, dst_block, g, d, dof);
          std::memcpy(static_cast<char*>(out.key_cache.data()) + kd * esize, static_cast<const char*>(in.key_cache.data()) + ks * esize, esize);
          std::memcpy(static_cast<char*>(out.value_cache.data()) + vd * esize, static_cast<const char*>(in.value_cache.data()) + vs * esize, esize);
        }
    }
    next += (end[s] - begin[s] + B - 1) / B;
  }
  return out;
}

class MergeTest : public GpuTest {};

TEST_F(MergeTest, PrefixPlusSuffixEqualsWholeContext) {
  for (DType dt : {DType::f32, DType::f16, DType::bf16}) {
    DecodeCase c;
    c.heads = 8;
    c.kv_heads = 2;
    c.query_dtype = c.cache_dtype = dt;
    c.lens = {0, 1, 16, 40, 77, 300};
    std::mt19937 rng(21);
    const DecodeInputs whole = make_decode_inputs(c, rng);
    // Split points: empty prefix, empty suffix, mid-block and block edges.
    const std::vector<int32_t> zero(c.lens.size(), 0), split{0, 1, 16, 17, 0, 150};
    std::vector<int32_t> lens(c.lens.begin(), c.lens.end());
    const DecodeInputs prefix = extract(c, whole, zero, split), suffix = extract(c, whole, split, lens);
    const auto a = decode_attention(ctx(), prefix, {}, {}, true);
    const auto b = decode_attention(ctx(), suffix, {}, {}, true);
    const auto merged = merge_attention(ctx(), a, b);
    const auto want = reference::decode_attention(whole, {}, {}, true);
    const double tol = tolerance(dt, dt);
    EXPECT_LE(max_abs_diff(merged.output, want.output), 2 * tol) << dtype_name(dt);
    for (int64_t i = 0; i < want.lse.numel(); ++i) {
      const double w = want.lse.get(size_t(i)), g = merged.lse.get(size_t(i));
      if (std::isinf(w)) EXPECT_TRUE(std::isinf(g) && g < 0) << i;
      else EXPECT_NEAR(g, w, 1e-3) << i;
    }
    // The reference merge of the reference halves agrees too.
    const auto ref = reference::merge_attention(reference::decode_attention(prefix, {}, {}, true),
                                                reference::decode_attention(suffix, {}, {}, true));
    EXPECT_LE(max_abs_diff(ref.output, want.output), tol) << dtype_name(dt);
  }
}

// More rows than one dispatch may have in y (65535): the merge takes them in chunks.
TEST_F(MergeTest, MoreSequencesThanOneDispatchHolds) {
  const int64_t S = 65535 + 37, H = 1, D = 2;
  std::mt19937 rng(21);
  std::uniform_real_distribution<float> uni(-1.0f, 1.0f);
  DecodeResult a{HostTensor(DType::f32, Shape{S, H, D}), HostTensor(DType::f32, Shape{S, H})};
  DecodeResult b{HostTensor(DType::f32, Shape{S, H, D}), HostTensor(DType::f32, Shape{S, H})};
  for (DecodeResult* r : {&a, &b}) {
    for (int64_t i = 0; i < S * H * D; ++i) r->output.as<float>()[i] = uni(rng);
    for (int64_t i = 0; i < S * H; ++i) r->lse.as<float>()[i] = 3.0f * uni(rng);
  }
  const DecodeResult want = reference::merge_attention(a, b);
  const DecodeResult got = merge_attention(ctx(), a, b);
  EXPECT_LE(max_abs_diff(got.output, want.output), 1e-5);
  EXPECT_LE(max_abs_diff(got.lse, want.lse), 1e-5);
  // The last rows come from the second dispatch.
  EXPECT_NEAR(got.output.as<float>()[S * H * D - 1], want.output.as<float>()[S * H * D - 1], 1e-5);
}

TEST_F(MergeTest, RefusesMismatchedInputs) {
  DecodeResult a{HostTensor(DType::f16, Shape{2, 4, 64}), HostTensor(DType::f32, Shape{2, 4})};
  DecodeResult b{HostTensor(DType::f16, Shape{2, 4, 32}), HostTensor(DType::f32, Shape{2, 4})};
  expect_refused([&] { merge_attention(ctx(), a, b); }, "b.output: shape [2, 4, 32]");
  b = DecodeResult{HostTensor(DType::f16, Shape{2, 4, 64}), HostTensor()};
  EXPECT_THROW(merge_attention(ctx(), a, b), Error);
  EXPECT_THROW(reference::merge_attention(a, b), Error);
}

}  // namespace
}  // namespace vkpaged::test
