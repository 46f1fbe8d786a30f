// SPDX-License-Identifier: Apache-2.0
#pragma once
// The page tables of host inputs (DecodeInputs, AttentionInputs) in either form, the dense
// vLLM one (block_tables, context_lens) or FlashInfer's CSR one (kv_indptr, kv_indices,
// kv_last_page_len), checked against the contract and read as the dense values the kernels
// see. Shared by decode_shape_of, attention_shape_of, the CPU references and the host
// conveniences. Host only (no Vulkan calls).
#include <cstdint>
#include <vector>

#include "vkpaged/tensor.hpp"

namespace vkpaged::detail {

struct HostPageTableInputs {
  const HostTensor& block_tables;
  const HostTensor& context_lens;
  const HostTensor& kv_indptr;
  const HostTensor& kv_indices;
  const HostTensor& kv_last_page_len;
  uint32_t max_blocks_per_seq;  // the inputs' M: 0, or for CSR the plan's columns
  bool csr() const noexcept { return !kv_indptr.empty() || !kv_indices.empty() || !kv_last_page_len.empty(); }
};

template <typename Inputs>
HostPageTableInputs page_table_inputs(const Inputs& in) {
  return {in.block_tables, in.context_lens, in.kv_indptr, in.kv_indices, in.kv_last_page_len, in.max_blocks_per_seq};
}

// What the tables say before the shape is checked: the form, S and M. Checks here: exactly one
// form, complete; the ranks and index dtypes; the CSR form's kv_indptr (0 first,
// nondecreasing, its last entry kv_indices' length) and M (as given, or the most pages of any
// request and at least 1; no request past it). Throws invalid_argument naming the array and
// the value.
struct PageTableForm {
  bool csr = false;
  int64_t num_seqs = 0;             // S: block_tables' rows, or kv_indptr's entries - 1
  uint32_t max_blocks_per_seq = 0;  // M
};
PageTableForm page_table_form(const HostPageTableInputs& in);

// The dense values, block tables [S * M] (row-major; CSR: entries past a request's pages 0) and
// context lengths [S]. The CSR form is checked here against B and N (every page's block id in
// [0, N), kv_last_page_len in [1, B] with pages and 0 without); the dense form's values are
// returned as given, for its callers' checks.
struct DensePageTables {
  std::vector<int64_t> block_tables;
  std::vector<int64_t> context_lens;
};
DensePageTables dense_page_tables(const HostPageTableInputs& in, const PageTableForm& form, uint32_t block_size,
                                  uint32_t num_blocks);

// The same as int32 host tensors ([S, M] and [S]), for an upload or a dense copy of the inputs.
struct DensePageTableTensors {
  HostTensor block_tables;
  HostTensor context_lens;
};
DensePageTableTensors dense_tensors(const DensePageTables& dense, const PageTableForm& form);

}  // namespace vkpaged::detail
