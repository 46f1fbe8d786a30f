// SPDX-License-Identifier: Apache-2.0
#include "host_inputs.hpp"

#include <utility>

#include "host_array.hpp"
#include "names.hpp"

namespace vkpaged::python {

namespace {

// A cache array: of `dtype` where given, else its own (uint8 bytes need their fp8 format said).
HostTensor cache_tensor(const py::object& array, const char* argument, std::optional<DType> dtype) {
  HostTensor t = to_host_tensor(array, argument, dtype);
  if (!dtype && t.dtype() == DType::u8)
    refuse(std::string(argument) +
           ": a uint8 array: say cache_dtype 'fp8_e4m3' or 'fp8_e5m2' (fp8 caches are raw "
           "bytes)");
  return t;
}

// The page tables, in whichever form they came (DecodeInputs, AttentionInputs, MlaInputs).
template <typename Inputs>
void take_page_tables(Inputs& in, PageTables&& p) {
  in.block_tables = std::move(p.block_tables);
  in.context_lens = std::move(p.context_lens);
  in.kv_indptr = std::move(p.kv_indptr);
  in.kv_indices = std::move(p.kv_indices);
  in.kv_last_page_len = std::move(p.kv_last_page_len);
  in.max_blocks_per_seq = p.max_blocks_per_seq;
}

// The fields DecodeInputs and AttentionInputs share.
template <typename Inputs>
Inputs inputs_of(CacheInputs&& c, PageTables&& p) {
  Inputs in;
  in.query = std::move(c.query);
  in.key_cache = std::move(c.key_cache);
  in.value_cache = std::move(c.value_cache);
  in.alibi_slopes = std::move(c.alibi_slopes);
  in.sinks = std::move(c.sinks);
  in.cache_dtype = c.cache_dtype;
  in.kv_layout = c.layout;
  take_page_tables(in, std::move(p));
  return in;
}

// A keyword with a default only so that the page tables before it may be left out.
HostTensor required_query_starts(const py::object& query_starts) {
  if (query_starts.is_none()) refuse("query_starts: missing: the step's [S + 1] query starts are needed");
  return to_host_tensor(query_starts, "query_starts");
}

}  // namespace

std::optional<DType> optional_dtype(const OptStr& name, const char* argument) {
  if (!name || *name == "auto") return std::nullopt;
  return parse_dtype_arg(argument, *name);
}

CacheInputs cache_inputs(const py::object& query, const py::object& key_cache, const py::object& value_cache,
                         const py::object& alibi_slopes, const py::object& sinks, const OptStr& query_dtype,
                         const OptStr& cache_dtype, const std::string& kv_layout) {
  CacheInputs in;
  in.query = to_host_tensor(query, "query", optional_dtype(query_dtype, "query_dtype"));
  const std::optional<DType> cache = optional_dtype(cache_dtype, "cache_dtype");
  in.key_cache = cache_tensor(key_cache, "key_cache", cache);
  in.value_cache = cache_tensor(value_cache, "value_cache", cache);
  in.cache_dtype = cache.value_or(in.key_cache.dtype());
  in.alibi_slopes = to_optional_host_tensor(alibi_slopes, "alibi_slopes");
  in.sinks = to_optional_host_tensor(sinks, "sinks");
  in.layout = parse_layout_arg("kv_layout", kv_layout);
  return in;
}

PageTables page_tables(const py::object& block_tables, const py::object& context_lens, const py::object& kv_indptr,
                       const py::object& kv_indices, const py::object& kv_last_page_len, uint32_t max_blocks_per_seq) {
  PageTables p;
  p.block_tables = to_optional_host_tensor(block_tables, "block_tables");
  p.context_lens = to_optional_host_tensor(context_lens, "context_lens");
  p.kv_indptr = to_optional_host_tensor(kv_indptr, "kv_indptr");
  p.kv_indices = to_optional_host_tensor(kv_indices, "kv_indices");
  p.kv_last_page_len = to_optional_host_tensor(kv_last_page_len, "kv_last_page_len");
  p.max_blocks_per_seq = max_blocks_per_seq;
  return p;
}

DecodeInputs decode_inputs(CacheInputs&& cache, PageTables&& tables) {
  return inputs_of<DecodeInputs>(std::move(cache), std::move(tables));
}

AttentionInputs attention_inputs(CacheInputs&& cache, PageTables&& tables, const py::object& query_starts,
                                 const py::object& tree_mask, uint32_t sliding_window) {
  HostTensor starts = required_query_starts(query_starts);
  AttentionInputs in = inputs_of<AttentionInputs>(std::move(cache), std::move(tables));
  in.query_starts = std::move(starts);
  in.tree_mask = to_optional_host_tensor(tree_mask, "tree_mask");
  in.sliding_window = sliding_window;
  return in;
}

MlaInputs mla_inputs(const py::object& query, const MlaCacheArrays& cache, const py::object& alibi_slopes,
                     const py::object& sinks, const OptStr& query_dtype, const OptStr& cache_dtype,
                     PageTables&& tables, const py::object& query_starts, const py::object& tree_mask,
                     uint32_t sliding_window) {
  HostTensor starts = required_query_starts(query_starts);
  MlaInputs in;
  in.query = to_host_tensor(query, "query", optional_dtype(query_dtype, "query_dtype"));
  const std::optional<DType> dtype = optional_dtype(cache_dtype, "cache_dtype");
  // Absent pools stay empty: mla_shape_of says which form is missing what.
  auto pool = [&](const py::object& array, const char* argument) {
    return array.is_none() ? HostTensor() : cache_tensor(array, argument, dtype);
  };
  in.mla_cache = pool(cache.mla_cache, "mla_cache");
  in.ckv_cache = pool(cache.ckv_cache, "ckv_cache");
  in.kpe_cache = pool(cache.kpe_cache, "kpe_cache");
  in.value_head_size = cache.value_head_size;
  const HostTensor& first = !in.mla_cache.empty() ? in.mla_cache : in.ckv_cache;
  in.cache_dtype = dtype.value_or(first.empty() ? DType::f16 : first.dtype());
  in.alibi_slopes = to_optional_host_tensor(alibi_slopes, "alibi_slopes");
  in.sinks = to_optional_host_tensor(sinks, "sinks");
  take_page_tables(in, std::move(tables));
  in.query_starts = std::move(starts);
  in.tree_mask = to_optional_host_tensor(tree_mask, "tree_mask");
  in.sliding_window = sliding_window;
  return in;
}

}  // namespace vkpaged::python
