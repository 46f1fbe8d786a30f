// SPDX-License-Identifier: Apache-2.0
#pragma once
// The host path's inputs: host arrays (host_array.hpp) gathered into DecodeInputs and
// AttentionInputs, the page tables dense (block_tables, context_lens) or in FlashInfer's CSR form
// (kv_indptr, kv_indices, kv_last_page_len); the library checks which form was given. MLA's
// inputs (MlaInputs) the same, with the MLA pools in place of the key and value caches.
#include <optional>
#include <string>

#include "bindings.hpp"
#include "vkpaged/attention.hpp"
#include "vkpaged/decode.hpp"
#include "vkpaged/mla.hpp"

namespace vkpaged::python {

using OptStr = std::optional<std::string>;

// None or "auto": the array's own dtype.
std::optional<DType> optional_dtype(const OptStr& name, const char* argument);

// The query, the caches and the per-head arrays, read as the dtypes and layout given.
struct CacheInputs {
  HostTensor query, key_cache, value_cache, alibi_slopes, sinks;
  DType cache_dtype = DType::f16;
  KvLayout layout = KvLayout::vllm;
};
CacheInputs cache_inputs(const py::object& query, const py::object& key_cache, const py::object& value_cache,
                         const py::object& alibi_slopes, const py::object& sinks, const OptStr& query_dtype,
                         const OptStr& cache_dtype, const std::string& kv_layout);

// Either form, each array optional (None: absent).
struct PageTables {
  HostTensor block_tables, context_lens, kv_indptr, kv_indices, kv_last_page_len;
  uint32_t max_blocks_per_seq = 0;
};
PageTables page_tables(const py::object& block_tables, const py::object& context_lens, const py::object& kv_indptr,
                       const py::object& kv_indices, const py::object& kv_last_page_len, uint32_t max_blocks_per_seq);

DecodeInputs decode_inputs(CacheInputs&& cache, PageTables&& tables);
AttentionInputs attention_inputs(CacheInputs&& cache, PageTables&& tables, const py::object& query_starts,
                                 const py::object& tree_mask, uint32_t sliding_window);

// MLA's: the query, the pools in either form (one pool with value_head_size, or ckv and kpe),
// the per-head arrays, the page tables and the request fields, read as the dtypes given.
struct MlaCacheArrays {
  py::object mla_cache, ckv_cache, kpe_cache;
  uint32_t value_head_size = 0;
};
MlaInputs mla_inputs(const py::object& query, const MlaCacheArrays& cache, const py::object& alibi_slopes,
                     const py::object& sinks, const OptStr& query_dtype, const OptStr& cache_dtype,
                     PageTables&& tables, const py::object& query_starts, const py::object& tree_mask,
                     uint32_t sliding_window);

}  // namespace vkpaged::python
