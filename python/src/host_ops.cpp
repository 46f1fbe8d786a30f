// SPDX-License-Identifier: Apache-2.0
// The host path: attention, decode, merge and rotary embedding over host arrays (the library's
// host-tensor conveniences: upload, run, wait, download), and the CPU references of attention.
#include <pybind11/stl.h>

#include <optional>
#include <string>

#include "bindings.hpp"
#include "host_array.hpp"
#include "host_inputs.hpp"
#include "names.hpp"
#include "record_args.hpp"
#include "vkpaged/attention.hpp"
#include "vkpaged/decode.hpp"
#include "vkpaged/merge.hpp"
#include "vkpaged/reference.hpp"
#include "vkpaged/rotary.hpp"

namespace vkpaged::python {

namespace {

// The keyword arguments every attention entry point takes, in one place for the four of them.
// The dense page tables may be left out for the CSR form's keywords.
#define VKPAGED_CACHE_ARGS                                                                                      \
  py::arg("query"), py::arg("key_cache"), py::arg("value_cache"), py::arg("block_tables") = py::none(), \
      py::arg("context_lens") = py::none()
#define VKPAGED_CSR_KWARGS                                                                         \
  py::arg("kv_indptr") = py::none(), py::arg("kv_indices") = py::none(),                           \
      py::arg("kv_last_page_len") = py::none(), py::arg("max_blocks_per_seq") = 0
#define VKPAGED_COMMON_KWARGS                                                                                     \
  py::arg("query_dtype") = py::none(), py::arg("cache_dtype") = py::none(), py::arg("kv_layout") = "vllm",        \
  py::arg("alibi_slopes") = py::none(), py::arg("sinks") = py::none(), py::arg("sliding_window") = 0,             \
  py::arg("scale") = py::none(), py::arg("softcap") = 0.0f, py::arg("k_scale") = 1.0f, py::arg("v_scale") = 1.0f, \
  py::arg("return_lse") = false

constexpr const char* kArrays =
    "Arrays (numpy, or any CPU object with __dlpack__): query [S, H, D] (decode) or [T, H, D] float32 or float16, "
    "or uint16 raw bits with query_dtype='bf16'; caches in kv_layout's shapes (vllm: key [N, Hkv, D/x, B, x], value "
    "[N, Hkv, D, B]; nhd [N, B, Hkv, D]; hnd [N, Hkv, B, D]) of cache_dtype: float32/float16 arrays as they are, "
    "uint16 raw bits for 'bf16', uint8 raw bytes for 'fp8_e4m3'/'fp8_e5m2' (read as byte value * k_scale or "
    "v_scale); block_tables [S, M] and context_lens [S] int32 (uint32, int64 accepted); alibi_slopes and sinks [H] "
    "float32; or, for block_tables and context_lens, FlashInfer's CSR page tables: kv_indptr [S + 1], kv_indices "
    "[kv_indptr[S]] and kv_last_page_len [S] int32 (request s holds blocks kv_indices[kv_indptr[s]:kv_indptr[s + "
    "1]], its length (pages - 1) * B + kv_last_page_len[s]), max_blocks_per_seq their M (0: the most pages of any "
    "request). The output has the query's dtype (bf16 as uint16); with return_lse, (output, lse) with lse float32. "
    "scale defaults to 1/sqrt(D); softcap 0 is off; sliding_window 0 is off.";

std::string doc(const char* what) { return std::string(what) + "\n\n" + kArrays; }

}  // namespace

void bind_host_ops(py::module_& m) {
  m.def(
      "decode_attention",
      [](PyContext& ctx, const py::object& query, const py::object& key_cache, const py::object& value_cache,
         const py::object& block_tables, const py::object& context_lens, const py::object& kv_indptr,
         const py::object& kv_indices, const py::object& kv_last_page_len, uint32_t max_blocks_per_seq,
         const OptStr& query_dtype, const OptStr& cache_dtype, const std::string& kv_layout,
         const py::object& alibi_slopes, const py::object& sinks, uint32_t sliding_window, std::optional<float> scale,
         float softcap, float k_scale, float v_scale, bool return_lse, const std::string& kernel,
         const std::string& split, uint32_t partition_tokens, const std::string& order, const std::string& merge) {
        DecodeInputs in = decode_inputs(
            cache_inputs(query, key_cache, value_cache, alibi_slopes, sinks, query_dtype, cache_dtype, kv_layout),
            page_tables(block_tables, context_lens, kv_indptr, kv_indices, kv_last_page_len, max_blocks_per_seq));
        const DecodeOptions o = decode_options(sliding_window, split, partition_tokens, kernel, order, merge);
        const DecodeResult r =
            decode_attention(ctx.context, in, o, decode_params(scale, softcap, k_scale, v_scale), return_lse);
        return output_and_lse(r, return_lse);
      },
      py::arg("context"), VKPAGED_CACHE_ARGS, py::kw_only(), VKPAGED_CSR_KWARGS, VKPAGED_COMMON_KWARGS,
      py::arg("kernel") = "auto",
      py::arg("split") = "auto", py::arg("partition_tokens") = 0, py::arg("order") = "auto",
      py::arg("merge") = "reduce_pass",
      doc("Decode attention on the device, one query token per sequence (vkpaged::decode_attention: uploads, "
          "plans, runs, waits, downloads). kernel: 'auto', 'scalar', 'matrix', 'matrix_khr'; split: 'auto', "
          "'single', 'split'; order: 'auto', 'grid', 'longest_first'; merge: 'reduce_pass', 'in_dispatch'.")
          .c_str());

  m.def(
      "batch_attention",
      [](PyContext& ctx, const py::object& query, const py::object& key_cache, const py::object& value_cache,
         const py::object& block_tables, const py::object& context_lens, const py::object& query_starts,
         const py::object& tree_mask, const py::object& kv_indptr, const py::object& kv_indices,
         const py::object& kv_last_page_len, uint32_t max_blocks_per_seq, const OptStr& query_dtype,
         const OptStr& cache_dtype, const std::string& kv_layout, const py::object& alibi_slopes,
         const py::object& sinks, uint32_t sliding_window, std::optional<float> scale, float softcap, float k_scale,
         float v_scale, bool return_lse, const std::string& kernel, const std::string& split,
         uint32_t partition_tokens) {
        AttentionInputs in = attention_inputs(
            cache_inputs(query, key_cache, value_cache, alibi_slopes, sinks, query_dtype, cache_dtype, kv_layout),
            page_tables(block_tables, context_lens, kv_indptr, kv_indices, kv_last_page_len, max_blocks_per_seq),
            query_starts, tree_mask, sliding_window);
        const AttentionOptions o = attention_options(kernel, split, partition_tokens);
        const AttentionResult r =
            batch_attention(ctx.context, in, decode_params(scale, softcap, k_scale, v_scale), o, return_lse);
        return output_and_lse(r, return_lse);
      },
      py::arg("context"), VKPAGED_CACHE_ARGS, py::arg("query_starts") = py::none(), py::kw_only(),
      py::arg("tree_mask") = py::none(), VKPAGED_CSR_KWARGS, VKPAGED_COMMON_KWARGS, py::arg("kernel") = "auto",
      py::arg("split") = "auto", py::arg("partition_tokens") = 0,
      doc("Multi-query attention for a whole engine step on the device (vkpaged::batch_attention): request s "
          "brings query rows [query_starts[s], query_starts[s + 1]) at the last positions of its context_lens[s] "
          "(docs/contract.md, 'Multi-query attention'). query_starts [S + 1] int32, always given (by keyword after "
          "CSR page tables); tree_mask: optional uint8 (or "
          "bool) [sum of q_s^2], each request's q_s x q_s matrix row by row. kernel: 'auto', 'decode', 'scalar', "
          "'matrix'; split: 'auto', 'single', 'split'.")
          .c_str());

  m.def(
      "merge_attention",
      [](PyContext& ctx, const py::object& output_a, const py::object& lse_a, const py::object& output_b,
         const py::object& lse_b, const OptStr& dtype) {
        const std::optional<DType> d = optional_dtype(dtype, "dtype");
        DecodeResult a, b;
        a.output = to_host_tensor(output_a, "output_a", d);
        a.lse = to_host_tensor(lse_a, "lse_a");
        b.output = to_host_tensor(output_b, "output_b", d);
        b.lse = to_host_tensor(lse_b, "lse_b");
        const DecodeResult r = merge_attention(ctx.context, a, b);
        return py::make_tuple(to_numpy(r.output), to_numpy(r.lse));
      },
      py::arg("context"), py::arg("output_a"), py::arg("lse_a"), py::arg("output_b"), py::arg("lse_b"), py::kw_only(),
      py::arg("dtype") = py::none(),
      "Merges two attention states over disjoint key sets (outputs [S, H, D], LSEs [S, H] float32, as the "
      "attention calls return them with return_lse) into attention over their union: (output, lse). dtype 'bf16' "
      "for uint16 outputs.");

  m.def(
      "rotary_cos_sin_cache",
      [](uint32_t max_position, uint32_t rotary_dim, double base, const std::string& dtype) {
        return to_numpy(rotary_cos_sin_cache(max_position, rotary_dim, base, parse_dtype_arg("dtype", dtype)));
      },
      py::arg("max_position"), py::arg("rotary_dim"), py::arg("base") = 10000.0, py::arg("dtype") = "f32",
      "vLLM's RotaryEmbedding cache [max_position, rotary_dim]: row p holds cos(p f_i) for i < rotary_dim / 2, then "
      "sin(p f_i), f_i = base^(-2i / rotary_dim); dtype 'f32', 'f16' or 'bf16' (uint16 bits).");

  m.def(
      "rotary_embedding",
      [](PyContext& ctx, const py::object& query, const py::object& key, const py::object& positions,
         const py::object& cos_sin_cache, const std::string& style, const OptStr& dtype) {
        const std::optional<DType> d = optional_dtype(dtype, "dtype");
        HostTensor q = to_optional_host_tensor(query, "query", d);
        HostTensor k = to_optional_host_tensor(key, "key", d);
        const HostTensor cs = to_host_tensor_u16_as(cos_sin_cache, "cos_sin_cache", d);
        rotary_embedding(ctx.context, q, k, to_host_tensor(positions, "positions"), cs,
                         parse_rotary_style_arg("style", style));
        return py::make_tuple(to_optional_numpy(q), to_optional_numpy(k));
      },
      py::arg("context"), py::arg("query"), py::arg("key"), py::arg("positions"), py::arg("cos_sin_cache"),
      py::kw_only(), py::arg("style") = "neox", py::arg("dtype") = py::none(),
      "Rotary embedding on the device (vkpaged::rotary_embedding): returns rotated copies (query, key) of query "
      "[T, H, D] and key [T, Hkv, D] (either may be None). positions [T] int64 or int32; cos_sin_cache "
      "[max_position, rotary_dim] float32 or the tensors' dtype; style 'neox' or 'gptj'; dtype 'bf16' for uint16 "
      "arrays.");

  py::module_ ref = m.def_submodule("reference", "The CPU references (double accumulation, from the contract).");
  ref.def(
      "decode_attention",
      [](const py::object& query, const py::object& key_cache, const py::object& value_cache,
         const py::object& block_tables, const py::object& context_lens, const py::object& kv_indptr,
         const py::object& kv_indices, const py::object& kv_last_page_len, uint32_t max_blocks_per_seq,
         const OptStr& query_dtype, const OptStr& cache_dtype, const std::string& kv_layout,
         const py::object& alibi_slopes, const py::object& sinks, uint32_t sliding_window, std::optional<float> scale,
         float softcap, float k_scale, float v_scale, bool return_lse) {
        DecodeInputs in = decode_inputs(
            cache_inputs(query, key_cache, value_cache, alibi_slopes, sinks, query_dtype, cache_dtype, kv_layout),
            page_tables(block_tables, context_lens, kv_indptr, kv_indices, kv_last_page_len, max_blocks_per_seq));
        DecodeOptions o;
        o.sliding_window = sliding_window;
        const DecodeResult r =
            reference::decode_attention(in, o, decode_params(scale, softcap, k_scale, v_scale), return_lse);
        return output_and_lse(r, return_lse);
      },
      VKPAGED_CACHE_ARGS, py::kw_only(), VKPAGED_CSR_KWARGS, VKPAGED_COMMON_KWARGS,
      doc("vkpaged::reference::decode_attention: decode attention on the CPU, as vkpaged.decode_attention.").c_str());
  ref.def(
      "batch_attention",
      [](const py::object& query, const py::object& key_cache, const py::object& value_cache,
         const py::object& block_tables, const py::object& context_lens, const py::object& query_starts,
         const py::object& tree_mask, const py::object& kv_indptr, const py::object& kv_indices,
         const py::object& kv_last_page_len, uint32_t max_blocks_per_seq, const OptStr& query_dtype,
         const OptStr& cache_dtype, const std::string& kv_layout, const py::object& alibi_slopes,
         const py::object& sinks, uint32_t sliding_window, std::optional<float> scale, float softcap, float k_scale,
         float v_scale, bool return_lse) {
        AttentionInputs in = attention_inputs(
            cache_inputs(query, key_cache, value_cache, alibi_slopes, sinks, query_dtype, cache_dtype, kv_layout),
            page_tables(block_tables, context_lens, kv_indptr, kv_indices, kv_last_page_len, max_blocks_per_seq),
            query_starts, tree_mask, sliding_window);
        const AttentionResult r =
            reference::batch_attention(in, decode_params(scale, softcap, k_scale, v_scale), return_lse);
        return output_and_lse(r, return_lse);
      },
      VKPAGED_CACHE_ARGS, py::arg("query_starts") = py::none(), py::kw_only(), py::arg("tree_mask") = py::none(),
      VKPAGED_CSR_KWARGS, VKPAGED_COMMON_KWARGS,
      doc("vkpaged::reference::batch_attention: multi-query attention on the CPU, as vkpaged.batch_attention.")
          .c_str());
}

}  // namespace vkpaged::python
