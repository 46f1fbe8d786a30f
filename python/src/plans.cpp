// SPDX-License-Identifier: Apache-2.0
// The engine path's attention: plans made once (per batch shape, per step's query starts, or per
// bucket of steps that one recording replays), and record_decode / record_attention into a
// CommandBuffer, page tables dense (block_tables, context_lens) or in FlashInfer's CSR form.
#include <pybind11/stl.h>

#include <string>

#include "bindings.hpp"
#include "host_array.hpp"
#include "names.hpp"
#include "plan_class.hpp"
#include "record_args.hpp"

namespace vkpaged::python {

namespace {

void bind_decode_plan(py::module_& m) {
  py::class_<PyDecodePlan> decode(m, "DecodePlan",
                                  "A decode plan (vkpaged::DecodePlan::create): validates the shape and options, "
                                  "picks the kernel and the split, creates the pipelines. Made once per batch shape; "
                                  "record_decode runs it on new data every step.");
  decode
      .def(py::init([](const py::object& context, const DecodeShape& shape, uint32_t sliding_window,
                       const std::string& split, uint32_t partition_tokens, const std::string& kernel,
                       const std::string& order, const std::string& merge) {
             const DecodeOptions o = decode_options(sliding_window, split, partition_tokens, kernel, order, merge);
             return PyDecodePlan{context, DecodePlan::create(context_of(context).context, shape, o)};
           }),
           py::arg("context"), py::arg("shape"), py::kw_only(), py::arg("sliding_window") = 0,
           py::arg("split") = "auto", py::arg("partition_tokens") = 0, py::arg("kernel") = "auto",
           py::arg("order") = "auto", py::arg("merge") = "reduce_pass")
      .def_property_readonly("partition_tokens", [](const PyDecodePlan& p) { return p.plan.partition_tokens(); })
      .def_property_readonly("longest_first", [](const PyDecodePlan& p) { return p.plan.longest_first(); })
      .def_property_readonly("order_bytes", [](const PyDecodePlan& p) { return p.plan.order_bytes(); })
      .def_property_readonly("merge_counter_bytes", [](const PyDecodePlan& p) { return p.plan.merge_counter_bytes(); });
  def_plan_readback(decode, "DecodePlan");

  m.def(
      "record_decode",
      [](PyCommandBuffer& cmd, const PyDecodePlan& plan, View query, View key_cache, View value_cache,
         View block_tables, View context_lens, View output, View kv_indptr, View kv_indices, View kv_last_page_len,
         View alibi_slopes, View sinks, View lse, Bytes scratch, Bytes order, Bytes status, Bytes merge_counters,
         std::optional<float> scale, float softcap, float k_scale, float v_scale) {
        check_plan_context(cmd, plan.context);
        DecodeViews v = decode_views(cmd, query, key_cache, value_cache, block_tables, context_lens, output,
                                     alibi_slopes, sinks, lse, scratch, order, status, merge_counters);
        use_csr(cmd, v, kv_indptr, kv_indices, kv_last_page_len);
        record_decode(cmd.context(), cmd.recording(), plan.plan, v, decode_params(scale, softcap, k_scale, v_scale));
      },
      py::arg("cmd"), py::arg("plan"), py::kw_only(), py::arg("query"), py::arg("key_cache"), py::arg("value_cache"),
      py::arg("block_tables") = py::none(), py::arg("context_lens") = py::none(), py::arg("output"),
      py::arg("kv_indptr") = py::none(), py::arg("kv_indices") = py::none(), py::arg("kv_last_page_len") = py::none(),
      py::arg("alibi_slopes") = py::none(), py::arg("sinks") = py::none(), py::arg("lse") = py::none(),
      py::arg("scratch") = py::none(), py::arg("order") = py::none(), py::arg("status") = py::none(),
      py::arg("merge_counters") = py::none(), py::arg("scale") = py::none(), py::arg("softcap") = 0.0f,
      py::arg("k_scale") = 1.0f, py::arg("v_scale") = 1.0f,
      "Records the plan's decode over TensorViews in the contract's layouts (vkpaged::record_decode); scratch "
      "(plan.scratch_bytes), order (plan.order_bytes), merge_counters and status are BufferViews. The page tables "
      "are block_tables and context_lens, or (a plan with shape.csr_page_table) kv_indptr [S + 1], kv_indices and "
      "kv_last_page_len [S], expanded into the scratch.");
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
  py::class_<PyAttentionPlan> attention(m, "AttentionPlan",
                                        "A multi-query attention plan (vkpaged::AttentionPlan::create): checks the "
                                        "step's query_starts, picks the kernel family and the split, sizes the "
                                        "scratch. Made once per step (or once for steps with the same query_starts), "
                                        "or once per bucket of steps (create_bucket); one plan serves every layer.");
  attention
      .def(py::init([](const py::object& context, const AttentionShape& shape, const py::object& query_starts,
                       const std::string& kernel, const std::string& split, uint32_t partition_tokens) {
             return plan_for_query_starts<PyAttentionPlan>(context, shape, query_starts,
                                                           attention_options(kernel, split, partition_tokens));
           }),
           py::arg("context"), py::arg("shape"), py::arg("query_starts"), py::kw_only(), py::arg("kernel") = "auto",
           py::arg("split") = "auto", py::arg("partition_tokens") = 0);
  def_bucket_plan(
      attention, &attention_options,
      "A plan for a bucket of steps (vkpaged::AttentionPlan::create_bucket), recorded once and replayed: shape's "
      "num_requests, num_query_tokens and max_context_len are the bucket's most requests, most new tokens and "
      "longest context (0: M * B), max_query_tokens its longest request (0: num_query_tokens; 1 with "
      "num_query_tokens = num_requests: decode steps, on the decode kernels). A step of the bucket pads itself "
      "to it: its requests first, then requests of no new tokens (query starts that stay at its token count) "
      "and context length 0; every length, block table and query start is read on the device.",
      "The scratch create_bucket's plan would need, the most any step of the bucket uses: to allocate once, "
      "before any plan. Makes no plan and builds no pipeline.");
  attention.def_property_readonly("kernel", [](const PyAttentionPlan& p) { return name_of(p.plan.kernel()); });
  def_step_plan_readback(attention, "AttentionPlan");

  m.def(
      "record_attention",
      taking_attention_request<PyCommandBuffer&, const PyAttentionPlan&, View, View, View>(
          [](PyCommandBuffer& cmd, const PyAttentionPlan& plan, View query, View key_cache, View value_cache,
             const AttentionRequest& r) {
            check_plan_context(cmd, plan.context);
            record_attention(cmd.context(), cmd.recording(), plan.plan,
                             attention_views(cmd, query, key_cache, value_cache, r), r.params);
          }),
      py::arg("cmd"), py::arg("plan"), py::kw_only(), py::arg("query"), py::arg("key_cache"), py::arg("value_cache"),
      VKPAGED_ATTENTION_REQUEST_KWARGS,
      "Records the plan's attention over TensorViews (vkpaged::record_attention); query_starts on the device must "
      "hold the values the plan was made with (a bucket's plan: any step of the bucket, padded); scratch "
      "(plan.scratch_bytes) and status are BufferViews. The page tables are block_tables and context_lens, or (a "
      "plan with shape.csr_page_table) kv_indptr [S + 1], kv_indices and kv_last_page_len [S].");
}

}  // namespace

void bind_plans(py::module_& m) {
  bind_decode_plan(m);
  bind_attention_plan(m);
}

}  // namespace vkpaged::python
