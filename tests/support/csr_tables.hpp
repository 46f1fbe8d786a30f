// SPDX-License-Identifier: Apache-2.0
#pragma once
// Dense page tables rewritten in FlashInfer's CSR form (the same blocks and lengths), for the
// tests that check the two forms give the same results.
#include <cstdint>

#include "vkpaged/attention.hpp"
#include "vkpaged/decode.hpp"

namespace vkpaged::test {

struct CsrTables {
  HostTensor kv_indptr;         // [S + 1] i32
  HostTensor kv_indices;        // [kv_indptr[S]] i32
  HostTensor kv_last_page_len;  // [S] i32
};

// Request s's first ceil(L_s / B) block-table entries as its pages, its last page holding what
// is left of L_s (0 without pages). `block_tables` [S, M], `context_lens` [S], i32.
CsrTables to_csr(const HostTensor& block_tables, const HostTensor& context_lens, uint32_t block_size);

// The inputs with block_tables and context_lens replaced by their CSR form, and M kept
// (max_blocks_per_seq), so that both forms plan the same shape.
DecodeInputs with_csr(DecodeInputs dense, uint32_t block_size);
AttentionInputs with_csr(AttentionInputs dense, uint32_t block_size);

}  // namespace vkpaged::test
