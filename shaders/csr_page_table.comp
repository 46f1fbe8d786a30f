// SPDX-License-Identifier: Apache-2.0
#version 450
// FlashInfer's CSR page tables (kv_indptr [S + 1], kv_indices, kv_last_page_len [S]) expanded
// into the dense form every attention kernel reads: block tables [S, M] and context lengths [S]
// (docs/contract.md). Request s holds the blocks kv_indices[kv_indptr[s] .. kv_indptr[s + 1])
// and its length is (pages - 1) * B + kv_last_page_len[s], 0 without pages.
//
// Why a dispatch of its own: the kernels stay as they are, so the CSR form gives exactly the
// dense form's results. One invocation per (request, column); column 0 also writes the length.
//
// The host checked nothing of these values (they live on the device): whatever breaks the
// contract is clamped so that no read or write leaves a buffer, and flagged
// (STATUS_BAD_PAGE_TABLE): kv_indptr into [0, num_indices] and never below the request's start,
// the pages to M, the last page's length into [1, B]. Block ids are copied as they are: the
// kernels skip and flag ids >= N, as for a dense table.
#extension GL_GOOGLE_include_directive : require
#include "common/shader_interface.h"

layout(local_size_x = CSR_WORKGROUP) in;

layout(push_constant) uniform PushBlock { CsrPageTablePush pc; };
layout(set = 0, binding = CSR_BINDING_INDPTR) readonly buffer Indptr { int kv_indptr[]; };
layout(set = 0, binding = CSR_BINDING_INDICES) readonly buffer Indices { uint kv_indices[]; };
layout(set = 0, binding = CSR_BINDING_LAST_PAGE_LEN) readonly buffer LastPageLen { int kv_last_page_len[]; };
layout(set = 0, binding = CSR_BINDING_BLOCK_TABLES) writeonly buffer BlockTables { uint block_tables[]; };
layout(set = 0, binding = CSR_BINDING_CONTEXT_LENS) writeonly buffer ContextLens { uint context_lens[]; };
layout(set = 0, binding = CSR_BINDING_STATUS) buffer Status { uint status[]; };

void main() {
  // M = 0 still needs one invocation per request for its length.
  const uint columns = max(pc.max_blocks_per_seq, 1u);
  const uint id = (gl_WorkGroupID.y * pc.groups_x + gl_WorkGroupID.x) * CSR_WORKGROUP + gl_LocalInvocationID.x;
  if (id >= pc.num_seqs * columns) return;
  const uint s = id / columns;
  const uint column = id % columns;

  // u32 views read as i32: values past 2^31 - 1 are out of range either way.
  const int n = int(pc.num_indices);
  const int first = kv_indptr[pc.indptr_offset + s];
  const int next = kv_indptr[pc.indptr_offset + s + 1u];
  const int start = clamp(first, 0, n);
  const int end = clamp(next, start, n);
  const uint pages = min(uint(end - start), pc.max_blocks_per_seq);

  if (column < pc.max_blocks_per_seq)
    block_tables[pc.block_tables_offset + s * pc.max_blocks_per_seq + column] =
        column < pages ? kv_indices[pc.indices_offset + uint(start) + column] : 0u;
  if (column != 0u) return;

  const int last = kv_last_page_len[pc.last_page_len_offset + s];
  const int B = int(pc.block_size);
  context_lens[pc.context_lens_offset + s] = pages == 0u ? 0u : (pages - 1u) * pc.block_size + uint(clamp(last, 1, B));

  const bool bad = (s == 0u && first != 0) || first < 0 || next < first || next > n ||
                   uint(end - start) > pc.max_blocks_per_seq || (pages == 0u ? last != 0 : last < 1 || last > B);
  if (bad) atomicOr(status[pc.status_offset], STATUS_BAD_PAGE_TABLE);
}
