// SPDX-License-Identifier: Apache-2.0
#include "ops/host_page_tables.hpp"

#include <fmt/format.h>

#include <algorithm>
#include <cstdint>
#include <utility>

#include "ops/decode_validation.hpp"
#include "vkpaged/error.hpp"

namespace vkpaged::detail {

namespace {

[[noreturn]] void refuse(const std::string& message) { throw Error(ErrorCode::invalid_argument, message); }

constexpr const char* kForms =
    "give one page-table form: block_tables and context_lens, or kv_indptr, kv_indices and kv_last_page_len";

void check_rank_one(const HostTensor& t, const char* name, const char* symbols) {
  if (t.shape().rank() != 1) refuse(fmt::format("{}: shape {} is not {}", name, t.shape().str(), symbols));
  if (t.shape()[0] > int64_t(INT32_MAX))
    refuse(fmt::format("{}: {} entries exceed 2^31 - 1", name, t.shape()[0]));
}

PageTableForm dense_form(const HostPageTableInputs& in) {
  if (in.block_tables.shape().rank() != 2)
    refuse(fmt::format("block_tables: shape {} is not [S, M]", in.block_tables.shape().str()));
  if (in.context_lens.shape().rank() != 1)
    refuse(fmt::format("context_lens: shape {} is not [S]", in.context_lens.shape().str()));
  PageTableForm form;
  form.num_seqs = in.block_tables.shape()[0];
  const int64_t columns = in.block_tables.shape()[1];
  if (in.max_blocks_per_seq != 0 && int64_t(in.max_blocks_per_seq) != columns)
    refuse(fmt::format("max_blocks_per_seq: {} given, but block_tables has M = {} columns (0 takes them)",
                       in.max_blocks_per_seq, columns));
  form.max_blocks_per_seq = uint32_t(std::min<int64_t>(columns, UINT32_MAX));
  return form;
}

}  // namespace

PageTableForm page_table_form(const HostPageTableInputs& in) {
  if (!in.csr()) return dense_form(in);
  const char* given = !in.kv_indptr.empty() ? "kv_indptr" : !in.kv_indices.empty() ? "kv_indices" : "kv_last_page_len";
  if (!in.block_tables.empty()) refuse(fmt::format("block_tables: given together with {}: {}", given, kForms));
  if (!in.context_lens.empty()) refuse(fmt::format("context_lens: given together with {}: {}", given, kForms));
  for (const auto& [t, name] : {std::pair{&in.kv_indptr, "kv_indptr"}, std::pair{&in.kv_indices, "kv_indices"},
                                std::pair{&in.kv_last_page_len, "kv_last_page_len"}})
    if (t->empty())
      refuse(fmt::format("{}: absent, but {} is given (the CSR form takes kv_indptr, kv_indices and kv_last_page_len)",
                         name, given));
  check_rank_one(in.kv_indptr, "kv_indptr", "[S + 1]");
  check_rank_one(in.kv_indices, "kv_indices", "[kv_indptr[S]]");
  check_rank_one(in.kv_last_page_len, "kv_last_page_len", "[S]");
  if (in.kv_indptr.shape()[0] == 0) refuse("kv_indptr: no entries; it holds S + 1, kv_indptr[0] = 0 first");

  PageTableForm form;
  form.csr = true;
  form.num_seqs = in.kv_indptr.shape()[0] - 1;
  if (in.kv_last_page_len.shape()[0] != form.num_seqs)
    refuse(fmt::format("kv_last_page_len: {} entries, but kv_indptr's {} give S = {} requests",
                       in.kv_last_page_len.shape()[0], in.kv_indptr.shape()[0], form.num_seqs));
  const auto indptr = host_index_values(in.kv_indptr, "kv_indptr");
  const int64_t nnz = in.kv_indices.shape()[0];
  if (indptr[0] != 0) refuse(fmt::format("kv_indptr[0]: {} is not 0", indptr[0]));
  int64_t most_pages = 0;
  for (size_t i = 1; i < indptr.size(); ++i) {
    if (indptr[i] < indptr[i - 1])
      refuse(fmt::format("kv_indptr[{}]: {} is less than kv_indptr[{}] = {}", i, indptr[i], i - 1, indptr[i - 1]));
    if (indptr[i] > nnz) refuse(fmt::format("kv_indptr[{}]: {} is past kv_indices' length {}", i, indptr[i], nnz));
    most_pages = std::max(most_pages, indptr[i] - indptr[i - 1]);
  }
  if (indptr.back() != nnz)
    refuse(fmt::format("kv_indices: {} entries, but kv_indptr[S] = kv_indptr[{}] = {} (its shape is [kv_indptr[S]])", nnz,
                       indptr.size() - 1, indptr.back()));
  form.max_blocks_per_seq = in.max_blocks_per_seq != 0 ? in.max_blocks_per_seq : uint32_t(std::max<int64_t>(most_pages, 1));
  // The expansion is as large as a dense table of the same S and M would be.
  if (uint64_t(form.num_seqs) * form.max_blocks_per_seq * 4 > uint64_t(INT32_MAX))
    refuse(fmt::format("max_blocks_per_seq: the dense expansion of S * M = {} * {} int32 block ids exceeds 2^31 - 1 bytes",
                       form.num_seqs, form.max_blocks_per_seq));
  for (size_t i = 1; i < indptr.size(); ++i)
    if (indptr[i] - indptr[i - 1] > int64_t(form.max_blocks_per_seq))
      refuse(fmt::format("kv_indptr[{}]: request {} holds {} pages (kv_indptr[{}] - kv_indptr[{}]), more than M = "
                         "max_blocks_per_seq = {}",
                         i, i - 1, indptr[i] - indptr[i - 1], i, i - 1, form.max_blocks_per_seq));
  return form;
}

DensePageTables dense_page_tables(const HostPageTableInputs& in, const PageTableForm& form, uint32_t block_size,
                                  uint32_t num_blocks) {
  if (!form.csr)
    return {host_index_values(in.block_tables, "block_tables"), host_index_values(in.context_lens, "context_lens")};
  const auto indptr = host_index_values(in.kv_indptr, "kv_indptr");
  const auto indices = host_index_values(in.kv_indices, "kv_indices");
  const auto last = host_index_values(in.kv_last_page_len, "kv_last_page_len");
  const size_t S = size_t(form.num_seqs), M = form.max_blocks_per_seq;
  DensePageTables dense;
  dense.block_tables.assign(S * M, 0);
  dense.context_lens.assign(S, 0);
  for (size_t s = 0; s < S; ++s) {
    const int64_t pages = indptr[s + 1] - indptr[s];
    if (pages == 0 && last[s] != 0)
      refuse(fmt::format("kv_last_page_len[{}]: {} is not 0 for request {}, which holds no pages", s, last[s], s));
    if (pages > 0 && (last[s] < 1 || last[s] > int64_t(block_size)))
      refuse(fmt::format("kv_last_page_len[{}]: {} is outside [1, B = {}] for request {}, which holds {} pages", s,
                         last[s], block_size, s, pages));
    for (int64_t j = 0; j < pages; ++j) {
      const size_t k = size_t(indptr[s] + j);
      if (indices[k] < 0 || indices[k] >= int64_t(num_blocks))
        refuse(fmt::format("kv_indices[{}]: block id {} (request {}'s page {}) is outside [0, N = {})", k, indices[k], s,
                           j, num_blocks));
      dense.block_tables[s * M + size_t(j)] = indices[k];
    }
    dense.context_lens[s] = pages == 0 ? 0 : (pages - 1) * int64_t(block_size) + last[s];
  }
  return dense;
}

DensePageTableTensors dense_tensors(const DensePageTables& dense, const PageTableForm& form) {
  DensePageTableTensors t;
  t.block_tables = HostTensor(DType::i32, Shape{form.num_seqs, int64_t(form.max_blocks_per_seq)});
  t.context_lens = HostTensor(DType::i32, Shape{form.num_seqs});
  for (size_t i = 0; i < dense.block_tables.size(); ++i) t.block_tables.as<int32_t>()[i] = int32_t(dense.block_tables[i]);
  for (size_t i = 0; i < dense.context_lens.size(); ++i) t.context_lens.as<int32_t>()[i] = int32_t(dense.context_lens[i]);
  return t;
}

}  // namespace vkpaged::detail
