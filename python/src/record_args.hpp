// SPDX-License-Identifier: Apache-2.0
#pragma once
// The engine path's arguments: views of device memory gathered into the C++ views structs (each
// checked to be of the command buffer's Context, its owner kept alive until the submission
// finishes), and the plans, which remember the Context they were made on. Shared by the free
// record_* functions and KvCache's, which take the same views but the pools.
#include <optional>
#include <string>

#include "bindings.hpp"
#include "command_buffer.hpp"
#include "vkpaged/attention.hpp"
#include "vkpaged/decode.hpp"
#include "vkpaged/mla_attention.hpp"
#include "vkpaged/mla_cache_ops.hpp"

namespace vkpaged::python {

struct PyDecodePlan {
  py::object context;
  DecodePlan plan;
};

struct PyAttentionPlan {
  py::object context;
  AttentionPlan plan;
};

struct PyMlaPlan {
  py::object context;
  MlaPlan plan;
};

// Refuses a plan made on another Context than the command buffer's.
void check_plan_context(const PyCommandBuffer& cmd, const py::object& plan_context);

using View = const PyTensorView*;  // None = absent
using Bytes = const PyBufferView*;

DecodeViews decode_views(PyCommandBuffer& cmd, View query, View key_cache, View value_cache, View block_tables,
                         View context_lens, View output, View alibi_slopes, View sinks, View lse, Bytes scratch,
                         Bytes order, Bytes status, Bytes merge_counters);
// What record_attention and record_mla_attention (the free ones and KvCache's) take after the
// cache's pools, as given: the request's views (VKPAGED_ATTENTION_REQUEST_KWARGS) and the per-call values.
struct AttentionRequest {
  View block_tables, context_lens, query_starts, output, kv_indptr, kv_indices, kv_last_page_len, lse, tree_mask,
      alibi_slopes, sinks;
  Bytes scratch, status;
  DecodeParams params;
};
// The pools None where the cache supplies them (KvCache's record_attention / record_mla_attention).
AttentionViews attention_views(PyCommandBuffer& cmd, View query, View key_cache, View value_cache,
                               const AttentionRequest& request);
MlaViews mla_views(PyCommandBuffer& cmd, View query, View mla_cache, View ckv_cache, View kpe_cache,
                   const AttentionRequest& request);
// RoPE on k_pe for the MLA cache writes: positions and cos_sin_cache together, or neither.
std::optional<MlaRopeViews> mla_rope(PyCommandBuffer& cmd, View positions, View cos_sin_cache,
                                     const std::string& style);
DecodeParams decode_params(std::optional<float> scale, float softcap, float k_scale, float v_scale);
// The options as the plans, buckets and host calls take them: keywords, enums by name.
DecodeOptions decode_options(uint32_t sliding_window, const std::string& split, uint32_t partition_tokens,
                             const std::string& kernel, const std::string& order, const std::string& merge);
AttentionOptions attention_options(const std::string& kernel, const std::string& split, uint32_t partition_tokens);
MlaOptions mla_options(const std::string& kernel, const std::string& split, uint32_t partition_tokens);

// FlashInfer's CSR page tables (kv_indptr, kv_indices, kv_last_page_len) into DecodeViews,
// AttentionViews or MlaViews, in place of block_tables and context_lens.
template <typename Views>
void use_csr(PyCommandBuffer& cmd, Views& v, View kv_indptr, View kv_indices, View kv_last_page_len) {
  v.kv_indptr = cmd.use(kv_indptr, "kv_indptr");
  v.kv_indices = cmd.use(kv_indices, "kv_indices");
  v.kv_last_page_len = cmd.use(kv_last_page_len, "kv_last_page_len");
}

// The keywords of record_attention and record_mla_attention (the free ones and KvCache's) after
// the cache's pools: the request's views and the per-call values.
#define VKPAGED_ATTENTION_REQUEST_KWARGS                                                                        \
  py::arg("block_tables") = py::none(), py::arg("context_lens") = py::none(), py::arg("query_starts"),        \
      py::arg("output"), py::arg("kv_indptr") = py::none(), py::arg("kv_indices") = py::none(),               \
      py::arg("kv_last_page_len") = py::none(), py::arg("lse") = py::none(), py::arg("tree_mask") = py::none(), \
      py::arg("alibi_slopes") = py::none(), py::arg("sinks") = py::none(), py::arg("scratch") = py::none(),   \
      py::arg("status") = py::none(), py::arg("scale") = py::none(), py::arg("softcap") = 0.0f,               \
      py::arg("k_scale") = 1.0f, py::arg("v_scale") = 1.0f

// fn(lead..., request) as a function of lead... and then the request's keywords, in the order of
// VKPAGED_ATTENTION_REQUEST_KWARGS: one list of the request's arguments for the four bindings.
template <typename... Lead, typename Fn>
auto taking_attention_request(Fn fn) {
  return [fn](Lead... lead, View block_tables, View context_lens, View query_starts, View output, View kv_indptr,
              View kv_indices, View kv_last_page_len, View lse, View tree_mask, View alibi_slopes, View sinks,
              Bytes scratch, Bytes status, std::optional<float> scale, float softcap, float k_scale, float v_scale) {
    fn(lead..., AttentionRequest{block_tables, context_lens, query_starts, output, kv_indptr, kv_indices,
                                 kv_last_page_len, lse, tree_mask, alibi_slopes, sinks, scratch, status,
                                 decode_params(scale, softcap, k_scale, v_scale)});
  };
}

}  // namespace vkpaged::python
