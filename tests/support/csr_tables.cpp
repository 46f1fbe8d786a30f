// SPDX-License-Identifier: Apache-2.0
#include "support/csr_tables.hpp"

#include <vector>

namespace vkpaged::test {

CsrTables to_csr(const HostTensor& block_tables, const HostTensor& context_lens, uint32_t block_size) {
  const int64_t S = block_tables.shape()[0], M = block_tables.shape()[1], B = block_size;
  std::vector<int32_t> indices;
  CsrTables t;
  t.kv_indptr = HostTensor(DType::i32, Shape{S + 1});
  t.kv_last_page_len = HostTensor(DType::i32, Shape{S});
  for (int64_t s = 0; s < S; ++s) {
    const int64_t len = context_lens.as<int32_t>()[s];
    const int64_t pages = (len + B - 1) / B;
    for (int64_t j = 0; j < pages; ++j) indices.push_back(block_tables.as<int32_t>()[s * M + j]);
    t.kv_indptr.as<int32_t>()[s + 1] = int32_t(indices.size());
    t.kv_last_page_len.as<int32_t>()[s] = int32_t(pages == 0 ? 0 : len - (pages - 1) * B);
  }
  t.kv_indices = HostTensor(DType::i32, Shape{int64_t(indices.size())});
  for (size_t i = 0; i < indices.size(); ++i) t.kv_indices.as<int32_t>()[i] = indices[i];
  return t;
}

namespace {

template <typename Inputs>
Inputs replace_tables(Inputs in, uint32_t block_size) {
  CsrTables t = to_csr(in.block_tables, in.context_lens, block_size);
  in.max_blocks_per_seq = uint32_t(in.block_tables.shape()[1]);
  in.block_tables = HostTensor();
  in.context_lens = HostTensor();
  in.kv_indptr = std::move(t.kv_indptr);
  in.kv_indices = std::move(t.kv_indices);
  in.kv_last_page_len = std::move(t.kv_last_page_len);
  return in;
}

}  // namespace

DecodeInputs with_csr(DecodeInputs dense, uint32_t block_size) { return replace_tables(std::move(dense), block_size); }
AttentionInputs with_csr(AttentionInputs dense, uint32_t block_size) {
  return replace_tables(std::move(dense), block_size);
}

}  // namespace vkpaged::test
