// SPDX-License-Identifier: Apache-2.0
// The engine path's attention: shapes, plans made once (per batch shape, or per step for
// multi-query attention), and record_decode / record_attention into a CommandBuffer per step.
#include <pybind11/stl.h>

#include <string>

#include "bindings.hpp"
#include "host_array.hpp"
#include "names.hpp"
#include "record_args.hpp"

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
         flag("alibi", s.alibi) + flag("softcap", s.softcap) + flag("sinks", s.sinks) + flag("lse", s.lse) + ")";
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
         flag("sinks", s.sinks) + flag("lse", s.lse) + flag("tree_mask", s.tree_mask) + ")";
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

void bind_shapes(py::module_& m) {
  py::class_<DecodeShape> decode(m, "DecodeShape",
                                 "What shapes a decode (vkpaged::DecodeShape); DecodePlan validates it. "
                                 "KvCache.decode_shape fills in the cache's fields.");
  decode
      .def(py::init([](uint32_t num_seqs, uint32_t num_heads, uint32_t num_kv_heads, uint32_t head_size,
                       uint32_t block_size, uint32_t num_blocks, uint32_t max_blocks_per_seq, uint32_t max_context_len,
                       const std::string& query_dtype, const std::string& cache_dtype, const std::string& kv_layout,
                       bool alibi, bool softcap, bool sinks, bool lse) {
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
             return s;
           }),
           py::kw_only(), py::arg("num_seqs") = 0, py::arg("num_heads") = 0, py::arg("num_kv_heads") = 0,
           py::arg("head_size") = 0, py::arg("block_size") = 0, py::arg("num_blocks") = 0,
           py::arg("max_blocks_per_seq") = 0, py::arg("max_context_len") = 0, py::arg("query_dtype") = "f16",
           py::arg("cache_dtype") = "f16", py::arg("kv_layout") = "vllm", py::arg("alibi") = false,
           py::arg("softcap") = false, py::arg("sinks") = false, py::arg("lse") = false)
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
                       bool lse, bool tree_mask) {
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
             return s;
           }),
           py::kw_only(), py::arg("num_requests") = 0, py::arg("num_query_tokens") = 0, py::arg("num_heads") = 0,
           py::arg("num_kv_heads") = 0, py::arg("head_size") = 0, py::arg("block_size") = 0, py::arg("num_blocks") = 0,
           py::arg("max_blocks_per_seq") = 0, py::arg("max_context_len") = 0, py::arg("query_dtype") = "f16",
           py::arg("cache_dtype") = "f16", py::arg("kv_layout") = "vllm", py::arg("sliding_window") = 0,
           py::arg("softcap") = false, py::arg("alibi") = false, py::arg("sinks") = false, py::arg("lse") = false,
           py::arg("tree_mask") = false)
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
      .def("__repr__", [](const AttentionShape& s) { return repr(s); });
  dtype_field(attention, "query_dtype", &AttentionShape::query_dtype);
  dtype_field(attention, "cache_dtype", &AttentionShape::cache_dtype);
  layout_field(attention, &AttentionShape::kv_layout);
}

void bind_decode_plan(py::module_& m) {
  py::class_<PyDecodePlan>(m, "DecodePlan",
                           "A decode plan (vkpaged::DecodePlan::create): validates the shape and options, picks the "
                           "kernel and the split, creates the pipelines. Made once per batch shape; record_decode "
                           "runs it on new data every step.")
      .def(py::init([](const py::object& context, const DecodeShape& shape, uint32_t sliding_window,
                       const std::string& split, uint32_t partition_tokens, const std::string& kernel,
                       const std::string& order, const std::string& merge) {
             DecodeOptions o;
             o.sliding_window = sliding_window;
             o.split = parse_split_arg("split", split);
             o.partition_tokens = partition_tokens;
             o.kernel = parse_decode_kernel_arg("kernel", kernel);
             o.order = parse_decode_order_arg("order", order);
             o.merge = parse_decode_merge_arg("merge", merge);
             return PyDecodePlan{context, DecodePlan::create(context_of(context).context, shape, o)};
           }),
           py::arg("context"), py::arg("shape"), py::kw_only(), py::arg("sliding_window") = 0,
           py::arg("split") = "auto", py::arg("partition_tokens") = 0, py::arg("kernel") = "auto",
           py::arg("order") = "auto", py::arg("merge") = "reduce_pass")
      .def_property_readonly("shape", [](const PyDecodePlan& p) { return p.plan.shape(); })
      .def_property_readonly("split", [](const PyDecodePlan& p) { return p.plan.split(); })
      .def_property_readonly("num_partitions", [](const PyDecodePlan& p) { return p.plan.num_partitions(); })
      .def_property_readonly("partition_tokens", [](const PyDecodePlan& p) { return p.plan.partition_tokens(); })
      .def_property_readonly("scratch_bytes", [](const PyDecodePlan& p) { return p.plan.scratch_bytes(); })
      .def_property_readonly("longest_first", [](const PyDecodePlan& p) { return p.plan.longest_first(); })
      .def_property_readonly("order_bytes", [](const PyDecodePlan& p) { return p.plan.order_bytes(); })
      .def_property_readonly("merge_counter_bytes", [](const PyDecodePlan& p) { return p.plan.merge_counter_bytes(); })
      .def("describe", [](const PyDecodePlan& p) { return p.plan.describe(); })
      .def("__repr__", [](const PyDecodePlan& p) { return "<DecodePlan " + p.plan.describe() + ">"; });

  m.def(
      "record_decode",
      [](PyCommandBuffer& cmd, const PyDecodePlan& plan, View query, View key_cache, View value_cache,
         View block_tables, View context_lens, View output, View alibi_slopes, View sinks, View lse, Bytes scratch,
         Bytes order, Bytes status, Bytes merge_counters, std::optional<float> scale, float softcap, float k_scale,
         float v_scale) {
        check_plan_context(cmd, plan.context);
        const DecodeViews v = decode_views(cmd, query, key_cache, value_cache, block_tables, context_lens, output,
                                           alibi_slopes, sinks, lse, scratch, order, status, merge_counters);
        record_decode(cmd.context(), cmd.recording(), plan.plan, v, decode_params(scale, softcap, k_scale, v_scale));
      },
      py::arg("cmd"), py::arg("plan"), py::kw_only(), py::arg("query"), py::arg("key_cache"), py::arg("value_cache"),
      py::arg("block_tables"), py::arg("context_lens"), py::arg("output"), py::arg("alibi_slopes") = py::none(),
      py::arg("sinks") = py::none(), py::arg("lse") = py::none(), py::arg("scratch") = py::none(),
      py::arg("order") = py::none(), py::arg("status") = py::none(), py::arg("merge_counters") = py::none(),
      py::arg("scale") = py::none(), py::arg("softcap") = 0.0f, py::arg("k_scale") = 1.0f, py::arg("v_scale") = 1.0f,
      "Records the plan's decode over TensorViews in the contract's layouts (vkpaged::record_decode); scratch "
      "(plan.scratch_bytes), order (plan.order_bytes), merge_counters and status are BufferViews.");
  m.def(
      "record_decode_order",
      [](PyCommandBuffer& cmd, const PyDecodePlan& plan, View context_lens, Bytes order) {
        check_plan_context(cmd, plan.context);
        const TensorView lens = cmd.use(context_lens, "context_lens");
        const BufferView list = cmd.use(order, "order");
        record_decode_order(cmd.context(), cmd.recording(), plan.plan, lens, list);
      },
      py::arg("cmd"), py::arg("plan"), py::arg("context_lens"), py::arg("order"),
      "Writes a longest_first plan's work list from the lengths (once per step; a barrier before the decodes).");
}

void bind_attention_plan(py::module_& m) {
  py::class_<PyAttentionPlan>(m, "AttentionPlan",
                              "A multi-query attention plan (vkpaged::AttentionPlan::create): checks the step's "
                              "query_starts, picks the kernel family and the split, sizes the scratch. Made once "
                              "per step (or once for steps with the same query_starts); one plan serves every "
                              "layer.")
      .def(py::init([](const py::object& context, const AttentionShape& shape, const py::object& query_starts,
                       const std::string& kernel, const std::string& split, uint32_t partition_tokens) {
             AttentionOptions o;
             o.kernel = parse_attention_kernel_arg("kernel", kernel);
             o.split = parse_split_arg("split", split);
             o.partition_tokens = partition_tokens;
             const std::vector<int32_t> starts = to_int32_vector(query_starts, "query_starts");
             return PyAttentionPlan{context, AttentionPlan::create(context_of(context).context, shape, starts, o)};
           }),
           py::arg("context"), py::arg("shape"), py::arg("query_starts"), py::kw_only(), py::arg("kernel") = "auto",
           py::arg("split") = "auto", py::arg("partition_tokens") = 0)
      .def_property_readonly("shape", [](const PyAttentionPlan& p) { return p.plan.shape(); })
      .def_property_readonly("kernel", [](const PyAttentionPlan& p) { return name_of(p.plan.kernel()); })
      .def_property_readonly("max_query_tokens", [](const PyAttentionPlan& p) { return p.plan.max_query_tokens(); })
      .def_property_readonly("tree_mask_bytes", [](const PyAttentionPlan& p) { return p.plan.tree_mask_bytes(); })
      .def_property_readonly("split", [](const PyAttentionPlan& p) { return p.plan.split(); })
      .def_property_readonly("num_partitions", [](const PyAttentionPlan& p) { return p.plan.num_partitions(); })
      .def_property_readonly("scratch_bytes", [](const PyAttentionPlan& p) { return p.plan.scratch_bytes(); })
      .def("describe", [](const PyAttentionPlan& p) { return p.plan.describe(); })
      .def("__repr__", [](const PyAttentionPlan& p) { return "<AttentionPlan " + p.plan.describe() + ">"; });

  m.def(
      "record_attention",
      [](PyCommandBuffer& cmd, const PyAttentionPlan& plan, View query, View key_cache, View value_cache,
         View block_tables, View context_lens, View query_starts, View output, View lse, View tree_mask,
         View alibi_slopes, View sinks, Bytes scratch, Bytes status, std::optional<float> scale, float softcap,
         float k_scale, float v_scale) {
        check_plan_context(cmd, plan.context);
        const AttentionViews v =
            attention_views(cmd, query, key_cache, value_cache, block_tables, context_lens, query_starts, output, lse,
                            tree_mask, alibi_slopes, sinks, scratch, status);
        record_attention(cmd.context(), cmd.recording(), plan.plan, v, decode_params(scale, softcap, k_scale, v_scale));
      },
      py::arg("cmd"), py::arg("plan"), py::kw_only(), py::arg("query"), py::arg("key_cache"), py::arg("value_cache"),
      py::arg("block_tables"), py::arg("context_lens"), py::arg("query_starts"), py::arg("output"),
      py::arg("lse") = py::none(), py::arg("tree_mask") = py::none(), py::arg("alibi_slopes") = py::none(),
      py::arg("sinks") = py::none(), py::arg("scratch") = py::none(), py::arg("status") = py::none(),
      py::arg("scale") = py::none(), py::arg("softcap") = 0.0f, py::arg("k_scale") = 1.0f, py::arg("v_scale") = 1.0f,
      "Records the plan's attention over TensorViews (vkpaged::record_attention); query_starts on the device must "
      "hold the values the plan was made with; scratch (plan.scratch_bytes) and status are BufferViews.");
}

}  // namespace

void bind_plans(py::module_& m) {
  bind_shapes(m);
  bind_decode_plan(m);
  bind_attention_plan(m);
}

}  // namespace vkpaged::python
