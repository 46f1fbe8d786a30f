// SPDX-License-Identifier: Apache-2.0
// The cache operations on any views (cache_ops.hpp, rotary.hpp, merge.hpp): new tokens into
// their slots (with rotary embedding fused, or not), rotary alone, paged to contiguous, and the
// merge of two attention states. KvCache's per-layer forms are in kv_cache.cpp.
#include <pybind11/stl.h>

#include "bindings.hpp"
#include "cache_record.hpp"
#include "command_buffer.hpp"
#include "names.hpp"
#include "vkpaged/cache_ops.hpp"
#include "vkpaged/merge.hpp"
#include "vkpaged/rotary.hpp"

namespace vkpaged::python {

std::optional<RotaryInputs> rotary_inputs(PyCommandBuffer& cmd, View query, View positions, View cos_sin_cache,
                                          const std::string& style) {
  const RotaryStyle s = parse_rotary_style_arg("rotary_style", style);
  if (!positions && !cos_sin_cache) {
    if (query) refuse("query: rotated only with positions and cos_sin_cache (rotary embedding)");
    return std::nullopt;
  }
  if (!positions) refuse("positions: needed with cos_sin_cache (rotary embedding)");
  if (!cos_sin_cache) refuse("cos_sin_cache: needed with positions (rotary embedding)");
  RotaryInputs r;
  r.query = cmd.use(query, "query");
  r.positions = cmd.use(positions, "positions");
  r.cos_sin_cache = cmd.use(cos_sin_cache, "cos_sin_cache");
  r.style = s;
  return r;
}

void bind_cache_ops(py::module_& m) {
  m.def(
      "record_reshape_and_cache",
      [](PyCommandBuffer& cmd, View key, View value, View slot_mapping, View key_cache, View value_cache,
         const std::string& layout, Bytes status, View query, View positions, View cos_sin_cache,
         const std::string& rotary_style, float k_scale, float v_scale) {
        ReshapeAndCacheViews v;
        v.key = cmd.use(key, "key");
        v.value = cmd.use(value, "value");
        v.slot_mapping = cmd.use(slot_mapping, "slot_mapping");
        v.key_cache = cmd.use(key_cache, "key_cache");
        v.value_cache = cmd.use(value_cache, "value_cache");
        v.status = cmd.use(status, "status");
        v.layout = parse_layout_arg("layout", layout);
        const std::optional<RotaryInputs> rotary = rotary_inputs(cmd, query, positions, cos_sin_cache, rotary_style);
        const CacheScales scales{k_scale, v_scale};
        if (rotary)
          record_reshape_and_cache_rotary(cmd.context(), cmd.recording(), v, *rotary, scales);
        else
          record_reshape_and_cache(cmd.context(), cmd.recording(), v, scales);
      },
      py::arg("cmd"), py::kw_only(), py::arg("key"), py::arg("value"), py::arg("slot_mapping"), py::arg("key_cache"),
      py::arg("value_cache"), py::arg("layout") = "vllm", py::arg("status") = py::none(), py::arg("query") = py::none(),
      py::arg("positions") = py::none(), py::arg("cos_sin_cache") = py::none(), py::arg("rotary_style") = "neox",
      py::arg("k_scale") = 1.0f, py::arg("v_scale") = 1.0f,
      "Records key/value [T, Hkv, D] into their slots (slot_mapping [T] i64 or i32; negative: padding) of caches in "
      "`layout` (vkpaged::record_reshape_and_cache); fp8 caches store value * (1 / scale). With positions [T] and "
      "cos_sin_cache [max_position, rotary_dim], the keys are rotated on their way in and query [T, H, D] (optional) "
      "in place, in the same dispatch (record_reshape_and_cache_rotary).");

  m.def(
      "record_rotary_embedding",
      [](PyCommandBuffer& cmd, View query, View key, View positions, View cos_sin_cache, const std::string& style,
         Bytes status) {
        RotaryViews v;
        v.query = cmd.use(query, "query");
        v.key = cmd.use(key, "key");
        v.positions = cmd.use(positions, "positions");
        v.cos_sin_cache = cmd.use(cos_sin_cache, "cos_sin_cache");
        v.status = cmd.use(status, "status");
        v.style = parse_rotary_style_arg("style", style);
        record_rotary_embedding(cmd.context(), cmd.recording(), v);
      },
      py::arg("cmd"), py::kw_only(), py::arg("query") = py::none(), py::arg("key") = py::none(), py::arg("positions"),
      py::arg("cos_sin_cache"), py::arg("style") = "neox", py::arg("status") = py::none(),
      "Records the rotation of query [T, H, D] and key [T, Hkv, D] in place (vkpaged::record_rotary_embedding).");

  m.def(
      "record_gather",
      [](PyCommandBuffer& cmd, View key_cache, View value_cache, View block_tables, View seq_starts, View key_out,
         View value_out, const std::string& layout, Bytes status, float k_scale, float v_scale) {
        GatherViews v;
        v.key_cache = cmd.use(key_cache, "key_cache");
        v.value_cache = cmd.use(value_cache, "value_cache");
        v.block_tables = cmd.use(block_tables, "block_tables");
        v.seq_starts = cmd.use(seq_starts, "seq_starts");
        v.key_out = cmd.use(key_out, "key_out");
        v.value_out = cmd.use(value_out, "value_out");
        v.status = cmd.use(status, "status");
        v.layout = parse_layout_arg("layout", layout);
        record_gather(cmd.context(), cmd.recording(), v, CacheScales{k_scale, v_scale});
      },
      py::arg("cmd"), py::kw_only(), py::arg("key_cache"), py::arg("value_cache"), py::arg("block_tables"),
      py::arg("seq_starts"), py::arg("key_out"), py::arg("value_out"), py::arg("layout") = "vllm",
      py::arg("status") = py::none(), py::arg("k_scale") = 1.0f, py::arg("v_scale") = 1.0f,
      "Records paged-to-contiguous (vkpaged::record_gather): sequence s's positions into rows [seq_starts[s], "
      "seq_starts[s + 1]) of key_out/value_out [T, Hkv, D] (f32, f16 or bf16), dequantized.");

  m.def(
      "record_merge_attention",
      [](PyCommandBuffer& cmd, View output_a, View lse_a, View output_b, View lse_b, View output, View lse) {
        MergeViews v;
        v.output_a = cmd.use(output_a, "output_a");
        v.lse_a = cmd.use(lse_a, "lse_a");
        v.output_b = cmd.use(output_b, "output_b");
        v.lse_b = cmd.use(lse_b, "lse_b");
        v.output = cmd.use(output, "output");
        v.lse = cmd.use(lse, "lse");
        record_merge_attention(cmd.context(), cmd.recording(), v);
      },
      py::arg("cmd"), py::kw_only(), py::arg("output_a"), py::arg("lse_a"), py::arg("output_b"), py::arg("lse_b"),
      py::arg("output"), py::arg("lse") = py::none(),
      "Records the merge of two attention states (vkpaged::record_merge_attention); output may alias either input.");

  m.def(
      "fp8_scale_from_amax",
      [](float amax, const std::string& dtype) { return fp8_scale_from_amax(amax, parse_dtype_arg("dtype", dtype)); },
      py::arg("amax"), py::arg("dtype"),
      "max(amax, 1e-12) / dtype_max(dtype): the k_scale or v_scale that maps amax to the fp8 format's max.");
}

}  // namespace vkpaged::python
