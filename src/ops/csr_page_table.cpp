// SPDX-License-Identifier: Apache-2.0
// Host side of shaders/csr_page_table.comp (see ops/csr_page_table.hpp).
#include "ops/csr_page_table.hpp"

#include <fmt/format.h>

#include <algorithm>
#include <array>
#include <cstdint>
#include <utility>

#include "common/shader_interface.h"
#include "embedded_shaders.hpp"
#include "ops/linear_grid.hpp"
#include "ops/view_checks.hpp"
#include "vkpaged/error.hpp"

namespace vkpaged::detail {

namespace {

constexpr size_t round16(size_t bytes) { return (bytes + 15) / 16 * 16; }

[[noreturn]] void refuse(const std::string& message) { throw Error(ErrorCode::invalid_argument, message); }

// "kv_indptr" when it was given: the first CSR view given, which the message names.
const char* first_csr_view(const PageTableViews& v) {
  return !v.kv_indptr.empty() ? "kv_indptr" : !v.kv_indices.empty() ? "kv_indices" : "kv_last_page_len";
}

}  // namespace

vk::PipelineRequest csr_pipeline_request() {
  return {&vk::shader_csr_page_table(), {}, CSR_BINDING_COUNT, sizeof(shader::CsrPageTablePush)};
}

CsrExpansion csr_expansion_layout(uint32_t num_seqs, uint32_t max_blocks_per_seq, size_t split_bytes) {
  CsrExpansion e;
  e.offset = round16(split_bytes);
  e.table_bytes = round16(std::max<size_t>(size_t(num_seqs) * max_blocks_per_seq * 4, 4));
  e.bytes = num_seqs == 0 ? 0 : e.table_bytes + round16(size_t(num_seqs) * 4);
  if (num_seqs == 0) e.table_bytes = 0;
  return e;
}

size_t scratch_bytes_with_expansion(const AttentionShape& shape, size_t split_bytes) {
  if (!shape.csr_page_table) return split_bytes;
  return csr_expansion_layout(shape.num_requests, shape.max_blocks_per_seq, split_bytes).end();
}

CsrExpansion plan_csr_expansion(ContextImpl& impl, uint32_t num_seqs, uint32_t max_blocks_per_seq, size_t split_bytes) {
  CsrExpansion e = csr_expansion_layout(num_seqs, max_blocks_per_seq, split_bytes);
  // The kernels bind the expanded table as one descriptor, as they would the caller's.
  if (e.table_bytes > impl.info.max_storage_buffer_range)
    throw Error(ErrorCode::unsupported,
                fmt::format("max_blocks_per_seq: the expanded CSR page tables, S * M * 4 = {} * {} * 4 bytes, exceed the "
                            "device's maxStorageBufferRange of {} bytes",
                            num_seqs, max_blocks_per_seq, impl.info.max_storage_buffer_range));
  e.pipeline = &impl.pipeline(csr_pipeline_request());
  return e;
}

void check_page_table_views(const ContextImpl& impl, const PageTableViews& v, uint32_t num_seqs,
                            uint32_t max_blocks_per_seq, const CsrExpansion& expansion) {
  const int64_t S = num_seqs;
  if (!v.csr()) {
    check_view(impl, "block_tables", v.block_tables, {DType::i32, DType::u32}, Shape{S, int64_t(max_blocks_per_seq)}, 4);
    check_view(impl, "context_lens", v.context_lens, {DType::i32, DType::u32}, Shape{S}, 4);
    return;
  }
  const char* csr = first_csr_view(v);
  if (!v.block_tables.empty())
    refuse(fmt::format("block_tables: given together with {}: give one page-table form, block_tables and context_lens "
                       "or kv_indptr, kv_indices and kv_last_page_len",
                       csr));
  if (!v.context_lens.empty())
    refuse(fmt::format("context_lens: given together with {}: give one page-table form, block_tables and context_lens "
                       "or kv_indptr, kv_indices and kv_last_page_len",
                       csr));
  if (!expansion.planned())
    refuse(fmt::format("{}: CSR page tables need a plan made with shape.csr_page_table (its scratch holds their "
                       "expansion); this plan's is false",
                       csr));
  for (const auto& [view, name] : {std::pair{&v.kv_indptr, "kv_indptr"}, std::pair{&v.kv_indices, "kv_indices"},
                                   std::pair{&v.kv_last_page_len, "kv_last_page_len"}})
    if (view->empty())
      refuse(fmt::format("{}: absent, but {} is given (the CSR form takes kv_indptr, kv_indices and kv_last_page_len)",
                         name, csr));
  check_view(impl, "kv_indptr", v.kv_indptr, {DType::i32, DType::u32}, Shape{S + 1}, 4);
  if (v.kv_indices.shape.rank() != 1)
    refuse(fmt::format("kv_indices: shape {} is not [nnz] (rank 1)", v.kv_indices.shape.str()));
  check_view(impl, "kv_indices", v.kv_indices, {DType::i32, DType::u32}, v.kv_indices.shape, 4);
  if (uint64_t(v.kv_indices.shape[0]) > uint64_t(INT32_MAX))
    refuse(fmt::format("kv_indices: {} entries exceed 2^31 - 1", v.kv_indices.shape[0]));
  check_view(impl, "kv_last_page_len", v.kv_last_page_len, {DType::i32, DType::u32}, Shape{S}, 4);
}

DenseTables record_page_tables(const ContextImpl& impl, VkCommandBuffer cmd, const PageTableViews& v, uint32_t num_seqs,
                               uint32_t max_blocks_per_seq, uint32_t block_size, const CsrExpansion& e,
                               const BufferView& scratch, const BufferView& status) {
  if (!v.csr()) return {v.block_tables, v.context_lens};
  DenseTables dense;
  dense.block_tables.memory = {scratch.buffer, scratch.offset + e.offset, e.table_bytes};
  dense.block_tables.dtype = DType::i32;
  dense.block_tables.shape = Shape{int64_t(num_seqs), int64_t(max_blocks_per_seq)};
  dense.context_lens.memory = {scratch.buffer, scratch.offset + e.offset + e.table_bytes, e.bytes - e.table_bytes};
  dense.context_lens.dtype = DType::i32;
  dense.context_lens.shape = Shape{int64_t(num_seqs)};
  if (num_seqs == 0) return dense;

  const uint32_t num_indices = uint32_t(v.kv_indices.shape[0]);
  std::array<BoundView, CSR_BINDING_COUNT> bound;
  bound[CSR_BINDING_INDPTR] = impl.bind_view(v.kv_indptr.memory);
  // No entry is read without indices (every request then has 0 pages): the dummy stands in.
  bound[CSR_BINDING_INDICES] = impl.bind_view(num_indices ? v.kv_indices.memory : BufferView{});
  bound[CSR_BINDING_LAST_PAGE_LEN] = impl.bind_view(v.kv_last_page_len.memory);
  bound[CSR_BINDING_BLOCK_TABLES] = impl.bind_view(dense.block_tables.memory);
  bound[CSR_BINDING_CONTEXT_LENS] = impl.bind_view(dense.context_lens.memory);
  bound[CSR_BINDING_STATUS] = impl.bind_view(status);

  const LinearGrid grid = linear_grid(uint64_t(num_seqs) * std::max(max_blocks_per_seq, 1u), CSR_WORKGROUP);
  shader::CsrPageTablePush push{};
  push.num_seqs = num_seqs;
  push.max_blocks_per_seq = max_blocks_per_seq;
  push.block_size = block_size;
  push.num_indices = num_indices;
  push.groups_x = grid.x;
  push.indptr_offset = bound[CSR_BINDING_INDPTR].word_offset;
  push.indices_offset = bound[CSR_BINDING_INDICES].word_offset;
  push.last_page_len_offset = bound[CSR_BINDING_LAST_PAGE_LEN].word_offset;
  push.block_tables_offset = bound[CSR_BINDING_BLOCK_TABLES].word_offset;
  push.context_lens_offset = bound[CSR_BINDING_CONTEXT_LENS].word_offset;
  push.status_offset = bound[CSR_BINDING_STATUS].word_offset;
  impl.dispatch(cmd, *e.pipeline, bound, &push, grid.x, grid.y, 1);

  // The kernels read the tables; the status word takes their atomics after the expansion's.
  VkMemoryBarrier barrier{VK_STRUCTURE_TYPE_MEMORY_BARRIER};
  barrier.srcAccessMask = VK_ACCESS_SHADER_WRITE_BIT;
  barrier.dstAccessMask = VK_ACCESS_SHADER_READ_BIT | VK_ACCESS_SHADER_WRITE_BIT;
  impl.d.vkCmdPipelineBarrier(cmd, VK_PIPELINE_STAGE_COMPUTE_SHADER_BIT, VK_PIPELINE_STAGE_COMPUTE_SHADER_BIT, 0, 1,
                              &barrier, 0, nullptr, 0, nullptr);
  return dense;
}

}  // namespace vkpaged::detail
