// SPDX-License-Identifier: Apache-2.0
// FlashInfer's CSR page tables on the host side, without a device: the CPU references give the
// dense form's results bit for bit on every layout (ragged edges: requests without pages, one
// page, last pages of 1, B - 1 and B tokens, shuffled block ids, S = 1 and S > 1), the shapes
// decode_shape_of and attention_shape_of derive, and every refusal of the contract, each
// naming the array and the value. These run in vkpaged_host_tests too (ASan, UBSan).
#include <gtest/gtest.h>

#include <algorithm>
#include <random>
#include <string>

#include "support/attention_case.hpp"
#include "support/csr_tables.hpp"
#include "support/decode_case.hpp"
#include "support/expect_error.hpp"
#include "vkpaged/reference.hpp"

namespace vkpaged::test {
namespace {

constexpr uint32_t kB = 8;

bool bytes_equal(const HostTensor& a, const HostTensor& b) {
  return a.shape() == b.shape() && a.dtype() == b.dtype() && a.bytes() == b.bytes() &&
         std::equal(static_cast<const char*>(a.data()), static_cast<const char*>(a.data()) + a.bytes(),
                    static_cast<const char*>(b.data()));
}

// Lengths whose last pages hold 1, B - 1 and B tokens, requests without pages and of one page.
DecodeCase ragged_decode(std::vector<uint32_t> lens) {
  DecodeCase c;
  c.block_size = kB;
  c.lens = std::move(lens);
  return c;
}

TEST(CsrPageTables, DecodeReferenceEqualsTheDenseFormOnEveryLayout) {
  for (KvLayout layout : {KvLayout::vllm, KvLayout::nhd, KvLayout::hnd})
    for (const auto& lens : {std::vector<uint32_t>{0, 1, 7, 8, 9, 0, 31}, std::vector<uint32_t>{17}}) {
      std::mt19937 rng(11);
      const DecodeInputs dense = with_layout(make_decode_inputs(ragged_decode(lens), rng), layout);
      const DecodeInputs csr = with_csr(dense, kB);
      const std::string label = std::string(kv_layout_name(layout)) + " S=" + std::to_string(lens.size());
      DecodeOptions o;
      o.sliding_window = 5;
      const DecodeResult want = reference::decode_attention(dense, o, {}, true);
      const DecodeResult got = reference::decode_attention(csr, o, {}, true);
      EXPECT_TRUE(bytes_equal(got.output, want.output)) << label;
      EXPECT_TRUE(bytes_equal(got.lse, want.lse)) << label;
    }
}

TEST(CsrPageTables, AttentionReferenceEqualsTheDenseFormOnEveryLayout) {
  for (KvLayout layout : {KvLayout::vllm, KvLayout::nhd, KvLayout::hnd}) {
    AttentionCase c;
    c.block_size = kB;
    c.layout = layout;
    c.lens = {1, 7, 8, 9, 30};  // last pages of 1, B - 1, B, 1 and B - 2 tokens
    c.new_tokens = {1, 3, 8, 2, 5};
    c.tree_mask = TreeMask::tree;
    std::mt19937 rng(12);
    const AttentionInputs dense = make_attention_inputs(c, rng);
    const AttentionInputs csr = with_csr(dense, kB);
    const AttentionResult want = reference::batch_attention(dense, default_params(c), true);
    const AttentionResult got = reference::batch_attention(csr, default_params(c), true);
    EXPECT_TRUE(bytes_equal(got.output, want.output)) << c.str();
    EXPECT_TRUE(bytes_equal(got.lse, want.lse)) << c.str();
  }
}

TEST(CsrPageTables, ShapesSayCsrAndTakeMFromThePages) {
  std::mt19937 rng(13);
  const DecodeInputs dense = make_decode_inputs(ragged_decode({0, 9, 24}), rng);  // 0, 2 and 3 pages
  DecodeInputs csr = with_csr(dense, kB);
  const DecodeShape given = decode_shape_of(csr);
  EXPECT_TRUE(given.csr_page_table);
  EXPECT_FALSE(decode_shape_of(dense).csr_page_table);
  EXPECT_EQ(given.max_blocks_per_seq, dense.block_tables.shape()[1]);  // as given
  EXPECT_EQ(given.max_context_len, 24u);
  csr.max_blocks_per_seq = 0;
  EXPECT_EQ(decode_shape_of(csr).max_blocks_per_seq, 3u);  // the most pages
  // No pages at all: M is still 1.
  DecodeInputs empty = with_csr(make_decode_inputs(ragged_decode({0, 0}), rng), kB);
  empty.max_blocks_per_seq = 0;
  EXPECT_EQ(decode_shape_of(empty).max_blocks_per_seq, 1u);
  EXPECT_EQ(decode_shape_of(empty).max_context_len, 0u);

  AttentionCase c;
  c.block_size = kB;
  const AttentionInputs attention = with_csr(make_attention_inputs(c, rng), kB);
  const AttentionShape s = attention_shape_of(attention);
  EXPECT_TRUE(s.csr_page_table);
  EXPECT_EQ(s.num_requests, 2u);
  EXPECT_EQ(s.max_blocks_per_seq, attention.max_blocks_per_seq);
}

// Decode inputs of S = 3 requests with 0, 2 and 3 pages (lengths 0, 9, 24) in the CSR form:
// kv_indptr {0, 0, 2, 5}, kv_last_page_len {0, 1, 8}, N = 8 blocks.
class CsrRefusals : public ::testing::Test {
 protected:
  DecodeInputs good() {
    std::mt19937 rng(14);
    DecodeCase c = ragged_decode({0, 9, 24});
    c.extra_columns = 0;
    DecodeInputs in = with_csr(make_decode_inputs(c, rng), kB);
    in.max_blocks_per_seq = 0;
    return in;
  }
  static int32_t& at(HostTensor& t, int64_t i) { return t.as<int32_t>()[i]; }

  // The decode and attention entry points on the host refuse it, naming `parts`.
  void expect_refused_everywhere(const DecodeInputs& in, std::initializer_list<std::string> parts) {
    expect_refused([&] { decode_shape_of(in); }, ErrorCode::invalid_argument, parts);
    expect_refused([&] { reference::decode_attention(in); }, ErrorCode::invalid_argument, parts);
    const AttentionInputs attention = single_token_batch(in, 0);
    expect_refused([&] { attention_shape_of(attention); }, ErrorCode::invalid_argument, parts);
    expect_refused([&] { reference::batch_attention(attention); }, ErrorCode::invalid_argument, parts);
  }
};

TEST_F(CsrRefusals, GoodInputsPass) {
  const DecodeInputs in = good();
  EXPECT_EQ(in.kv_indptr.as<int32_t>()[3], 5);
  EXPECT_NO_THROW(reference::decode_attention(in));
}

TEST_F(CsrRefusals, IndptrNotStartingAtZero) {
  DecodeInputs in = good();
  at(in.kv_indptr, 0) = 1;
  expect_refused_everywhere(in, {"kv_indptr[0]: 1 is not 0"});
}

TEST_F(CsrRefusals, IndptrDecreasing) {
  DecodeInputs in = good();
  at(in.kv_indptr, 1) = 2;
  at(in.kv_indptr, 2) = 1;  // {0, 2, 1, 5}
  expect_refused_everywhere(in, {"kv_indptr[2]: 1 is less than kv_indptr[1] = 2"});
}

TEST_F(CsrRefusals, IndptrPastTheIndices) {
  DecodeInputs in = good();
  at(in.kv_indptr, 3) = 6;  // 5 indices
  expect_refused_everywhere(in, {"kv_indptr[3]: 6 is past kv_indices' length 5"});
  in = good();
  in.kv_indices = HostTensor(DType::i32, Shape{7});  // longer than kv_indptr[S]
  expect_refused_everywhere(in, {"kv_indices: 7 entries, but kv_indptr[S] = kv_indptr[3] = 5"});
}

TEST_F(CsrRefusals, BlockIdsOutsideTheCache) {
  DecodeInputs in = good();
  const int64_t N = in.key_cache.shape()[0];
  at(in.kv_indices, 3) = int32_t(N);
  expect_refused_everywhere(in, {"kv_indices[3]: block id " + std::to_string(N), "request 2's page 1",
                                 "outside [0, N = " + std::to_string(N) + ")"});
  at(in.kv_indices, 3) = -1;
  expect_refused_everywhere(in, {"kv_indices[3]: block id -1"});
}

TEST_F(CsrRefusals, LastPageLengths) {
  DecodeInputs in = good();
  at(in.kv_last_page_len, 1) = 0;  // with pages
  expect_refused_everywhere(in, {"kv_last_page_len[1]: 0 is outside [1, B = 8] for request 1, which holds 2 pages"});
  at(in.kv_last_page_len, 1) = kB + 1;
  expect_refused_everywhere(in, {"kv_last_page_len[1]: 9 is outside [1, B = 8]"});
  in = good();
  at(in.kv_last_page_len, 0) = 3;  // without pages
  expect_refused_everywhere(in, {"kv_last_page_len[0]: 3 is not 0 for request 0, which holds no pages"});
}

TEST_F(CsrRefusals, MorePagesThanM) {
  DecodeInputs in = good();
  in.max_blocks_per_seq = 2;
  expect_refused_everywhere(in, {"kv_indptr[3]: request 2 holds 3 pages", "more than M = max_blocks_per_seq = 2"});
}

TEST_F(CsrRefusals, OneFormComplete) {
  DecodeInputs in = good();
  in.block_tables = HostTensor(DType::i32, Shape{3, 3});
  expect_refused_everywhere(in, {"block_tables: given together with kv_indptr"});
  in = good();
  in.context_lens = HostTensor(DType::i32, Shape{3});
  expect_refused_everywhere(in, {"context_lens: given together with kv_indptr"});
  in = good();
  in.kv_last_page_len = HostTensor();
  expect_refused_everywhere(in, {"kv_last_page_len: absent, but kv_indptr is given"});
  in = good();
  in.kv_indptr = HostTensor();
  expect_refused_everywhere(in, {"kv_indptr: absent, but kv_indices is given"});
}

TEST_F(CsrRefusals, ShapesAndDtypes) {
  DecodeInputs in = good();
  in.kv_indices = HostTensor(DType::i32, Shape{1, 5});
  expect_refused_everywhere(in, {"kv_indices: shape [1, 5] is not [kv_indptr[S]]"});
  in = good();
  in.kv_last_page_len = HostTensor(DType::i32, Shape{2});
  expect_refused_everywhere(in, {"kv_last_page_len: 2 entries, but kv_indptr's 4 give S = 3 requests"});
  in = good();
  in.kv_indptr = HostTensor(DType::f32, Shape{4});
  expect_refused_everywhere(in, {"kv_indptr: dtype f32 is not i32, u32 or i64"});
  in = good();
  in.kv_indptr = HostTensor(DType::i32, Shape{0});
  expect_refused_everywhere(in, {"kv_indptr: no entries"});
  // S from kv_indptr against the query's.
  in = good();
  in.kv_indptr = HostTensor(DType::i32, Shape{3});
  in.kv_last_page_len = HostTensor(DType::i32, Shape{2});
  in.kv_indices = HostTensor(DType::i32, Shape{0});
  expect_refused([&] { decode_shape_of(in); }, "kv_indptr: 3 entries, but the query has S = 3 sequences");
}

TEST_F(CsrRefusals, MaxBlocksPerSeqAgainstADenseTable) {
  std::mt19937 rng(15);
  DecodeInputs dense = make_decode_inputs(ragged_decode({9, 24}), rng);
  const int64_t M = dense.block_tables.shape()[1];
  dense.max_blocks_per_seq = uint32_t(M);
  EXPECT_NO_THROW(decode_shape_of(dense));
  dense.max_blocks_per_seq = uint32_t(M + 1);
  expect_refused([&] { decode_shape_of(dense); },
                 "max_blocks_per_seq: " + std::to_string(M + 1) + " given, but block_tables has M = " + std::to_string(M));
}

TEST(CsrPageTables, AMultiQueryRequestWithoutPagesHasNoRoomForItsTokens) {
  // q_s >= 1 new tokens must be in the cache: a request without pages has length 0.
  AttentionCase c;
  c.block_size = kB;
  c.lens = {5, 9};
  c.new_tokens = {1, 2};
  std::mt19937 rng(16);
  AttentionInputs in = with_csr(make_attention_inputs(c, rng), kB);
  // Request 0 loses its page: kv_indptr {0, 0, 2}, kv_indices request 1's two.
  in.kv_indptr.as<int32_t>()[1] = 0;
  HostTensor indices(DType::i32, Shape{2});
  for (int i = 0; i < 2; ++i) indices.as<int32_t>()[i] = in.kv_indices.as<int32_t>()[i + 1];
  in.kv_indices = std::move(indices);
  in.kv_indptr.as<int32_t>()[2] = 2;
  in.kv_last_page_len.as<int32_t>()[0] = 0;
  expect_refused([&] { attention_shape_of(in); }, "context_lens[0]: 0 is less than the request's q_s = 1");
}

}  // namespace
}  // namespace vkpaged::test
