// SPDX-License-Identifier: Apache-2.0
// DecodeShape and AttentionShape: what shapes a plan, fields as keywords, dtypes and layouts by
// name. KvCache.decode_shape / attention_shape fill in the cache's fields.
#include <string>

#include "bindings.hpp"
#include "names.hpp"
#include "vkpaged/attention.hpp"
#include "vkpaged/decode.hpp"

namespace vkpaged::python {

namespace {

std::string flag(const char* name, bool on) { return on ? std::string(", ") + name : std::string(); }

std::string repr(const DecodeShape& s) {
  return "DecodeShape(num_seqs=" + std::to_string(s.num_seqs) + ", num_heads=" + std::to_string(s.num_heads) +
         ", num_kv_heads=" + std::to_string(s.num_kv_heads) + ", head_size=" + std::to_string(s.head_size) +
         ", block_size=" + std::to_string(s.block_size) + ", num_blocks=" + std::to_string(s.num_blocks) +
         ", max_blocks_per_seq=" + std::to_string(s.max_blocks_per_seq) +
         ", max_context_len=" + std::to_string(s.max_context_len) + ", query_dtype='" + name_of(s.query_dtype) +
         "', cache_dtype='" + name_of(s.cache_dtype) + "', kv_layout='" + name_of(s.kv_layout) + "'" +
         flag("alibi", s.alibi) + flag("softcap", s.softcap) + flag("sinks", s.sinks) + flag("lse", s.lse) +
         flag("csr_page_table", s.csr_page_table) + ")";
}

std::string repr(const AttentionShape& s) {
  return "AttentionShape(num_requests=" + std::to_string(s.num_requests) +
         ", num_query_tokens=" + std::to_string(s.num_query_tokens) + ", num_heads=" + std::to_string(s.num_heads) +
         ", num_kv_heads=" + std::to_string(s.num_kv_heads) + ", head_size=" + std::to_string(s.head_size) +
         ", block_size=" + std::to_string(s.block_size) + ", num_blocks=" + std::to_string(s.num_blocks) +
         ", max_blocks_per_seq=" + std::to_string(s.max_blocks_per_seq) +
         ", max_context_len=" + std::to_string(s.max_context_len) + ", query_dtype='" + name_of(s.query_dtype) +
         "', cache_dtype='" + name_of(s.cache_dtype) + "', kv_layout='" + name_of(s.kv_layout) +
         "', sliding_window=" + std::to_string(s.sliding_window) + flag("softcap", s.softcap) + flag("alibi", s.alibi) +
         flag("sinks", s.sinks) + flag("lse", s.lse) + flag("tree_mask", s.tree_mask) +
         flag("csr_page_table", s.csr_page_table) + ")";
}

// dtype and layout fields read and written as their names.
template <typename Class, typename T>
void dtype_field(Class& cls, const char* name, DType T::*field) {
  cls.def_property(
      name, [field](const T& s) { return name_of(s.*field); },
      [field, name](T& s, const std::string& v) { s.*field = parse_dtype_arg(name, v); });
}

template <typename Class, typename T>
void layout_field(Class& cls, KvLayout T::*field) {
  cls.def_property(
      "kv_layout", [field](const T& s) { return name_of(s.*field); },
      [field](T& s, const std::string& v) { s.*field = parse_layout_arg("kv_layout", v); });
}

}  // namespace

void bind_shapes(py::module_& m) {
  py::class_<DecodeShape> decode(m, "DecodeShape",
                                 "What shapes a decode (vkpaged::DecodeShape); DecodePlan validates it. "
                                 "KvCache.decode_shape fills in the cache's fields.");
  decode
      .def(py::init([](uint32_t num_seqs, uint32_t num_heads, uint32_t num_kv_heads, uint32_t head_size,
                       uint32_t block_size, uint32_t num_blocks, uint32_t max_blocks_per_seq, uint32_t max_context_len,
                       const std::string& query_dtype, const std::string& cache_dtype, const std::string& kv_layout,
                       bool alibi, bool softcap, bool sinks, bool lse, bool csr_page_table) {
             DecodeShape s;
             s.num_seqs = num_seqs;
             s.num_heads = num_heads;
             s.num_kv_heads = num_kv_heads;
             s.head_size = head_size;
             s.block_size = block_size;
             s.num_blocks = num_blocks;
             s.max_blocks_per_seq = max_blocks_per_seq;
             s.max_context_len = max_context_len;
             s.query_dtype = parse_dtype_arg("query_dtype", query_dtype);
             s.cache_dtype = parse_dtype_arg("cache_dtype", cache_dtype);
             s.kv_layout = parse_layout_arg("kv_layout", kv_layout);
             s.alibi = alibi;
             s.softcap = softcap;
             s.sinks = sinks;
             s.lse = lse;
             s.csr_page_table = csr_page_table;
             return s;
           }),
           py::kw_only(), py::arg("num_seqs") = 0, py::arg("num_heads") = 0, py::arg("num_kv_heads") = 0,
           py::arg("head_size") = 0, py::arg("block_size") = 0, py::arg("num_blocks") = 0,
           py::arg("max_blocks_per_seq") = 0, py::arg("max_context_len") = 0, py::arg("query_dtype") = "f16",
           py::arg("cache_dtype") = "f16", py::arg("kv_layout") = "vllm", py::arg("alibi") = false,
           py::arg("softcap") = false, py::arg("sinks") = false, py::arg("lse") = false,
           py::arg("csr_page_table") = false)
      .def_readwrite("num_seqs", &DecodeShape::num_seqs)
      .def_readwrite("num_heads", &DecodeShape::num_heads)
      .def_readwrite("num_kv_heads", &DecodeShape::num_kv_heads)
      .def_readwrite("head_size", &DecodeShape::head_size)
      .def_readwrite("block_size", &DecodeShape::block_size)
      .def_readwrite("num_blocks", &DecodeShape::num_blocks)
      .def_readwrite("max_blocks_per_seq", &DecodeShape::max_blocks_per_seq)
      .def_readwrite("max_context_len", &DecodeShape::max_context_len)
      .def_readwrite("alibi", &DecodeShape::alibi)
      .def_readwrite("softcap", &DecodeShape::softcap)
      .def_readwrite("sinks", &DecodeShape::sinks)
      .def_readwrite("lse", &DecodeShape::lse)
      .def_readwrite("csr_page_table", &DecodeShape::csr_page_table,
                     "Page tables may come as kv_indptr, kv_indices and kv_last_page_len (FlashInfer's CSR form); "
                     "the scratch then holds their dense expansion.")
      .def("__repr__", [](const DecodeShape& s) { return repr(s); });
  dtype_field(decode, "query_dtype", &DecodeShape::query_dtype);
  dtype_field(decode, "cache_dtype", &DecodeShape::cache_dtype);
  layout_field(decode, &DecodeShape::kv_layout);

  py::class_<AttentionShape> attention(m, "AttentionShape",
                                       "What shapes a multi-query attention (vkpaged::AttentionShape); AttentionPlan "
                                       "validates it. KvCache.attention_shape fills in the cache's fields.");
  attention
      .def(py::init([](uint32_t num_requests, uint32_t num_query_tokens, uint32_t num_heads, uint32_t num_kv_heads,
                       uint32_t head_size, uint32_t block_size, uint32_t num_blocks, uint32_t max_blocks_per_seq,
                       uint32_t max_context_len, const std::string& query_dtype, const std::string& cache_dtype,
                       const std::string& kv_layout, uint32_t sliding_window, bool softcap, bool alibi, bool sinks,
                       bool lse, bool tree_mask, bool csr_page_table) {
             AttentionShape s;
             s.num_requests = num_requests;
             s.num_query_tokens = num_query_tokens;
             s.num_heads = num_heads;
             s.num_kv_heads = num_kv_heads;
             s.head_size = head_size;
             s.block_size = block_size;
             s.num_blocks = num_blocks;
             s.max_blocks_per_seq = max_blocks_per_seq;
             s.max_context_len = max_context_len;
             s.query_dtype = parse_dtype_arg("query_dtype", query_dtype);
             s.cache_dtype = parse_dtype_arg("cache_dtype", cache_dtype);
             s.kv_layout = parse_layout_arg("kv_layout", kv_layout);
             s.sliding_window = sliding_window;
             s.softcap = softcap;
             s.alibi = alibi;
             s.sinks = sinks;
             s.lse = lse;
             s.tree_mask = tree_mask;
             s.csr_page_table = csr_page_table;
             return s;
           }),
           py::kw_only(), py::arg("num_requests") = 0, py::arg("num_query_tokens") = 0, py::arg("num_heads") = 0,
           py::arg("num_kv_heads") = 0, py::arg("head_size") = 0, py::arg("block_size") = 0, py::arg("num_blocks") = 0,
           py::arg("max_blocks_per_seq") = 0, py::arg("max_context_len") = 0, py::arg("query_dtype") = "f16",
           py::arg("cache_dtype") = "f16", py::arg("kv_layout") = "vllm", py::arg("sliding_window") = 0,
           py::arg("softcap") = false, py::arg("alibi") = false, py::arg("sinks") = false, py::arg("lse") = false,
           py::arg("tree_mask") = false, py::arg("csr_page_table") = false)
      .def_readwrite("num_requests", &AttentionShape::num_requests)
      .def_readwrite("num_query_tokens", &AttentionShape::num_query_tokens)
      .def_readwrite("num_heads", &AttentionShape::num_heads)
      .def_readwrite("num_kv_heads", &AttentionShape::num_kv_heads)
      .def_readwrite("head_size", &AttentionShape::head_size)
      .def_readwrite("block_size", &AttentionShape::block_size)
      .def_readwrite("num_blocks", &AttentionShape::num_blocks)
      .def_readwrite("max_blocks_per_seq", &AttentionShape::max_blocks_per_seq)
      .def_readwrite("max_context_len", &AttentionShape::max_context_len)
      .def_readwrite("sliding_window", &AttentionShape::sliding_window)
      .def_readwrite("softcap", &AttentionShape::softcap)
      .def_readwrite("alibi", &AttentionShape::alibi)
      .def_readwrite("sinks", &AttentionShape::sinks)
      .def_readwrite("lse", &AttentionShape::lse)
      .def_readwrite("tree_mask", &AttentionShape::tree_mask)
      .def_readwrite("csr_page_table", &AttentionShape::csr_page_table,
                     "Page tables may come as kv_indptr, kv_indices and kv_last_page_len (FlashInfer's CSR form); "
                     "the scratch then holds their dense expansion.")
      .def("__repr__", [](const AttentionShape& s) { return repr(s); });
  dtype_field(attention, "query_dtype", &AttentionShape::query_dtype);
  dtype_field(attention, "cache_dtype", &AttentionShape::cache_dtype);
  layout_field(attention, &AttentionShape::kv_layout);
}

}  // namespace vkpaged::python
