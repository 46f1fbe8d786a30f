// SPDX-License-Identifier: Apache-2.0
#pragma once
// Host side of shaders/csr_page_table.comp: FlashInfer's CSR page tables (kv_indptr, kv_indices,
// kv_last_page_len), given to record_decode or record_attention in place of block_tables and
// context_lens, are expanded on the device into the dense form in the plan's scratch; the
// kernels then run as they do on a dense table. Decode and attention plans share this.
#include <cstddef>
#include <cstdint>

#include "vk/context_impl.hpp"
#include "vk/pipeline_request.hpp"
#include "vkpaged/attention.hpp"
#include "vkpaged/tensor.hpp"

namespace vkpaged::detail {

// Where a plan made with csr_page_table expands the tables: block tables [S, M] i32 at `offset`
// in the scratch, then context lengths [S] i32 at `offset + table_bytes`. A plan without it
// has no pipeline and no bytes.
struct CsrExpansion {
  const ComputePipeline* pipeline = nullptr;
  size_t offset = 0;       // past the split's part of the scratch, 16-byte aligned
  size_t table_bytes = 0;  // the block tables' part, 16-byte aligned (at least 16)
  size_t bytes = 0;        // tables and lengths
  bool planned() const noexcept { return pipeline != nullptr; }
  size_t end() const noexcept { return offset + bytes; }
};

// The expansion's pipeline (one for every plan: its sizes are push constants), which
// Context::prepare builds with a plan's others.
vk::PipelineRequest csr_pipeline_request();

// Where the expansion of a plan of S requests and M columns goes, after the split's first
// `split_bytes` of the scratch, without a pipeline (a bucket's scratch before its plan).
CsrExpansion csr_expansion_layout(uint32_t num_seqs, uint32_t max_blocks_per_seq, size_t split_bytes);

// The scratch a plan of `shape` needs: the split's first `split_bytes`, then (CSR page tables)
// the expansion, as the plan places it (AttentionPlan's and MlaPlan's max_scratch_bytes).
size_t scratch_bytes_with_expansion(const AttentionShape& shape, size_t split_bytes);

// The expansion of a plan of S requests and M columns whose split takes the scratch's first
// `split_bytes`. Throws unsupported when the dense table would not fit one descriptor
// (maxStorageBufferRange), as a dense table given by the caller would not.
CsrExpansion plan_csr_expansion(ContextImpl& impl, uint32_t num_seqs, uint32_t max_blocks_per_seq, size_t split_bytes);

// The page tables of one call, in either form.
struct PageTableViews {
  TensorView block_tables;
  TensorView context_lens;
  TensorView kv_indptr;
  TensorView kv_indices;
  TensorView kv_last_page_len;
  bool csr() const noexcept { return !kv_indptr.empty() || !kv_indices.empty() || !kv_last_page_len.empty(); }
};

// Exactly one form, its views checked against S and M (i32 or u32, 4-byte aligned; kv_indices
// of rank 1, any length). The CSR form needs a plan that planned the expansion. Throws
// invalid_argument naming the view.
void check_page_table_views(const ContextImpl& impl, const PageTableViews& views, uint32_t num_seqs,
                            uint32_t max_blocks_per_seq, const CsrExpansion& expansion);

// The dense tables the kernels read: the caller's, or for the CSR form the expansion in
// `scratch`, recorded here (one dispatch, then a compute-to-compute barrier before the kernels).
struct DenseTables {
  TensorView block_tables;
  TensorView context_lens;
};
DenseTables record_page_tables(const ContextImpl& impl, VkCommandBuffer cmd, const PageTableViews& views,
                               uint32_t num_seqs, uint32_t max_blocks_per_seq, uint32_t block_size,
                               const CsrExpansion& expansion, const BufferView& scratch, const BufferView& status);

}  // namespace vkpaged::detail
