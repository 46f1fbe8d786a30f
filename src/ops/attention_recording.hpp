// SPDX-License-Identifier: Apache-2.0
#pragma once
// What record_attention and record_mla_attention share: their kernels (shaders/attention*.comp,
// shaders/mla_attention*.comp) take the same bindings and push block (shader_interface.h,
// ATTN_BINDING_*, AttentionPush), the same request views beside the cache, and the same split,
// merged by partition_merge.comp. Each operator checks its cache views and names what is bound as
// the key and value caches; the request views are checked and the kernels recorded here, once.
#include <vulkan/vulkan.h>

#include <functional>

#include "ops/attention_planner.hpp"
#include "ops/csr_page_table.hpp"
#include "ops/strided_rows.hpp"
#include "vk/context_impl.hpp"
#include "vkpaged/attention.hpp"

namespace vkpaged::detail {

// The views of one call: the request fields AttentionViews and MlaViews share by name, and the
// memory bound as the kernel's key and value caches (MLA: its pools).
struct AttentionCallViews {
  TensorView query, output, query_starts, lse, tree_mask, alibi_slopes, sinks;
  BufferView key_cache, value_cache;
  BufferView scratch, status;
  PageTableViews page_tables;
};

template <typename Views>
AttentionCallViews attention_call_views(const Views& v, const BufferView& key_cache, const BufferView& value_cache) {
  return {v.query,        v.output, v.query_starts, v.lse,     v.tree_mask,
          v.alibi_slopes, v.sinks,  key_cache,      value_cache, v.scratch,
          v.status,       {v.block_tables, v.context_lens, v.kv_indptr, v.kv_indices, v.kv_last_page_len}};
}

// What the views must match besides the shape: the output's width (the head size; MLA's Dv),
// whether the query and output may be strided (else contiguous rows), and the plan's CSR
// expansion, tree mask bytes and scratch bytes.
struct AttentionViewRules {
  int64_t value_width = 0;
  bool strided = true;
  const CsrExpansion& expansion;
  size_t tree_mask_bytes = 0;
  size_t scratch_bytes = 0;
};

// The query and output as rows, checked.
struct AttentionRows {
  RowsView query, output;
};

// Checks the call's views in the contract's order: the query, the caches (`check_caches`, the
// operator's own), the page tables, query_starts, the output, LSE, tree mask, ALiBi slopes,
// sinks, scratch and status. Throws invalid_argument naming the view.
AttentionRows check_attention_views(const ContextImpl& impl, const AttentionShape& shape, const AttentionCallViews& views,
                                    const AttentionViewRules& rules, const std::function<void()>& check_caches);

// What a plan made of its choice on the attention or MLA kernels.
struct AttentionKernels {
  const ComputePipeline& attention;
  const ComputePipeline* merge = nullptr;  // when split
  const CsrExpansion& csr;
};

// Records a checked call of S > 0 requests: the CSR expansion (when planned), the kernel over
// every kv head, tile and partition, then (split) the merge. With choice.address the caches are
// read by device address (the high words in AttentionPush), not bound.
void record_attention_kernels(const ContextImpl& impl, VkCommandBuffer cmd, const AttentionKernels& kernels,
                              const AttentionShape& shape, const AttentionChoice& choice,
                              const AttentionCallViews& views, const AttentionRows& rows,
                              const AttentionParams& params);

}  // namespace vkpaged::detail
