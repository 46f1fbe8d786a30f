// SPDX-License-Identifier: Apache-2.0
// Multi-head latent attention (mla.hpp, mla_attention.hpp, mla_cache_ops.hpp) on any views:
// MlaShape and MlaPlan (made once per step's query starts), the MLA cache write (kv_c and k_pe
// into their slots, RoPE on k_pe fused), record_mla_attention, and the host path over arrays
// (mla_attention, reference.mla_attention). KvCache's per-layer forms are in kv_cache.cpp.
#include <pybind11/stl.h>

#include <optional>
#include <string>

#include "bindings.hpp"
#include "host_array.hpp"
#include "host_inputs.hpp"
#include "names.hpp"
#include "plan_class.hpp"
#include "record_args.hpp"
#include "vkpaged/mla_attention.hpp"
#include "vkpaged/mla_cache_ops.hpp"
#include "vkpaged/reference.hpp"

namespace vkpaged::python {

namespace {

std::string repr(const MlaShape& s) {
  return "MlaShape(value_head_size=" + std::to_string(s.value_head_size) + ", rope_head_size=" +
         std::to_string(s.rope_head_size()) + ", cache_form='" + name_of(s.cache_form) +
         "', attention=" + py::repr(py::cast(s.attention)).cast<std::string>() + ")";
}

void bind_shape(py::module_& m) {
  py::class_<MlaShape>(m, "MlaShape",
                       "What shapes MLA attention (vkpaged::MlaShape): the multi-query shape with num_kv_heads 1, "
                       "head_size Dk = Dv + R and kv_layout 'nhd', plus the value width Dv and the cache form. "
                       "MlaPlan validates it; KvCache.mla_shape makes it for an MLA cache.")
      .def(py::init([](const AttentionShape& attention, uint32_t value_head_size, const std::string& cache_form) {
             MlaShape s;
             s.attention = attention;
             s.value_head_size = value_head_size;
             s.cache_form = parse_mla_cache_form_arg("cache_form", cache_form);
             return s;
           }),
           py::arg("attention"), py::kw_only(), py::arg("value_head_size") = 0, py::arg("cache_form") = "one_pool")
      .def_readwrite("attention", &MlaShape::attention)
      .def_readwrite("value_head_size", &MlaShape::value_head_size)
      .def_property(
          "cache_form", [](const MlaShape& s) { return name_of(s.cache_form); },
          [](MlaShape& s, const std::string& v) { s.cache_form = parse_mla_cache_form_arg("cache_form", v); })
      .def_property_readonly("rope_head_size", &MlaShape::rope_head_size, "R = attention.head_size - value_head_size")
      .def("__repr__", [](const MlaShape& s) { return repr(s); });
}

// MlaPlan(context, shape, query_starts, *, kernel, split, partition_tokens).
PyMlaPlan make_plan(const py::object& context, const MlaShape& shape, const py::object& query_starts,
                    const std::string& kernel, const std::string& split, uint32_t partition_tokens) {
  return plan_for_query_starts<PyMlaPlan>(context, shape, query_starts, mla_options(kernel, split, partition_tokens));
}

void bind_plan(py::module_& m) {
  py::class_<PyMlaPlan> plan(m, "MlaPlan",
                             "An MLA attention plan (vkpaged::MlaPlan::create): checks the shape and the step's "
                             "query_starts, chooses the rows, key tile and split, sizes the scratch and creates the "
                             "pipelines. Made once per step (or once for steps with the same query_starts); one plan "
                             "serves every layer.");
  plan.def(py::init(&make_plan), py::arg("context"), py::arg("shape"), py::arg("query_starts"), py::kw_only(),
           py::arg("kernel") = "auto", py::arg("split") = "auto", py::arg("partition_tokens") = 0);
  def_bucket_plan(
      plan, &mla_options,
      "A plan for a bucket of steps (vkpaged::MlaPlan::create_bucket), recorded once and replayed, as "
      "AttentionPlan.create_bucket's: shape.attention's num_requests, num_query_tokens and max_context_len are "
      "the bucket's most requests, most new tokens and longest context, max_query_tokens its longest request "
      "(0: num_query_tokens). A step pads itself to it with requests of no new tokens and context length 0.",
      "The scratch create_bucket's plan would need: to allocate once, before any plan. Makes no plan and builds "
      "no pipeline.");
  plan.def_property_readonly("kernel", [](const PyMlaPlan& p) { return name_of(p.plan.kernel()); },
                             "The kernel that runs it: 'scalar' (portable) or 'matrix' (tensor cores).");
  def_step_plan_readback(plan, "MlaPlan");
}

void bind_records(py::module_& m) {
  m.def(
      "record_mla_reshape_and_cache",
      [](PyCommandBuffer& cmd, View kv_c, View k_pe, View slot_mapping, View mla_cache, View ckv_cache,
         View kpe_cache, Bytes status, View positions, View cos_sin_cache, const std::string& rotary_style,
         float scale) {
        MlaReshapeAndCacheViews v;
        v.kv_c = cmd.use(kv_c, "kv_c");
        v.k_pe = cmd.use(k_pe, "k_pe");
        v.slot_mapping = cmd.use(slot_mapping, "slot_mapping");
        v.cache = {cmd.use(mla_cache, "mla_cache"), cmd.use(ckv_cache, "ckv_cache"), cmd.use(kpe_cache, "kpe_cache")};
        v.status = cmd.use(status, "status");
        const std::optional<MlaRopeViews> rope = mla_rope(cmd, positions, cos_sin_cache, rotary_style);
        record_mla_reshape_and_cache(cmd.context(), cmd.recording(), v, scale, rope ? &*rope : nullptr);
      },
      py::arg("cmd"), py::kw_only(), py::arg("kv_c"), py::arg("k_pe"), py::arg("slot_mapping"),
      py::arg("mla_cache") = py::none(), py::arg("ckv_cache") = py::none(), py::arg("kpe_cache") = py::none(),
      py::arg("status") = py::none(), py::arg("positions") = py::none(), py::arg("cos_sin_cache") = py::none(),
      py::arg("rotary_style") = "neox", py::arg("scale") = 1.0f,
      "Records each new token's latent kv_c [T, Dv] and rotary key part k_pe [T, R] (f32, f16 or bf16) into the row "
      "of its slot (slot_mapping [T] i64 or i32; negative: padding) of the MLA pools: mla_cache [N, B, Dv + R], or "
      "ckv_cache [N, B, Dv] and kpe_cache [N, B, R] (vkpaged::record_mla_reshape_and_cache). With positions [T] and "
      "cos_sin_cache [max_position, rotary_dim <= R], k_pe is rotated on its way in (k_pe itself is not written). "
      "fp8 pools store value * (1 / scale).");

  m.def(
      "record_mla_attention",
      taking_attention_request<PyCommandBuffer&, const PyMlaPlan&, View, View, View, View>(
          [](PyCommandBuffer& cmd, const PyMlaPlan& plan, View query, View mla_cache, View ckv_cache, View kpe_cache,
             const AttentionRequest& r) {
            check_plan_context(cmd, plan.context);
            record_mla_attention(cmd.context(), cmd.recording(), plan.plan,
                                 mla_views(cmd, query, mla_cache, ckv_cache, kpe_cache, r), r.params);
          }),
      py::arg("cmd"), py::arg("plan"), py::kw_only(), py::arg("query"), py::arg("mla_cache") = py::none(),
      py::arg("ckv_cache") = py::none(), py::arg("kpe_cache") = py::none(), VKPAGED_ATTENTION_REQUEST_KWARGS,
      "Records the plan's MLA attention (vkpaged::record_mla_attention): query [T, H, Dk], the pools in the plan's "
      "form (mla_cache [N, B, Dk], or ckv_cache [N, B, Dv] and kpe_cache [N, B, R]), output [T, H, Dv]; the rest as "
      "record_attention's (query_starts on the device must hold the plan's values). scale defaults to 1/sqrt(Dk).");
}

// The keywords of mla_attention and reference.mla_attention, in one place.
#define VKPAGED_MLA_ARGS                                                                                          \
  py::arg("query"), py::arg("block_tables") = py::none(), py::arg("context_lens") = py::none(),                 \
      py::arg("query_starts") = py::none(), py::kw_only(), py::arg("mla_cache") = py::none(),                   \
      py::arg("value_head_size") = 0, py::arg("ckv_cache") = py::none(), py::arg("kpe_cache") = py::none(),     \
      py::arg("tree_mask") = py::none(), py::arg("kv_indptr") = py::none(), py::arg("kv_indices") = py::none(), \
      py::arg("kv_last_page_len") = py::none(), py::arg("max_blocks_per_seq") = 0,                              \
      py::arg("query_dtype") = py::none(), py::arg("cache_dtype") = py::none(),                                 \
      py::arg("alibi_slopes") = py::none(), py::arg("sinks") = py::none(), py::arg("sliding_window") = 0,       \
      py::arg("scale") = py::none(), py::arg("softcap") = 0.0f, py::arg("k_scale") = 1.0f,                      \
      py::arg("v_scale") = 1.0f, py::arg("return_lse") = false

constexpr const char* kMlaArrays =
    "Arrays (numpy, or any CPU object with __dlpack__): query [T, H, Dk] float32 or float16, or uint16 raw bits "
    "with query_dtype='bf16' (the absorbed q_nope, then q_pe); the cache as one pool mla_cache [N, B, Dk] with "
    "value_head_size Dv (each row's first Dv entries are the value), or as ckv_cache [N, B, Dv] and kpe_cache "
    "[N, B, R], of cache_dtype (float32/float16 arrays as they are, uint16 raw bits for 'bf16', uint8 raw bytes for "
    "'fp8_e4m3'/'fp8_e5m2', read as byte value * k_scale); block_tables [S, M], context_lens [S] and query_starts "
    "[S + 1] int32, or the CSR page tables (kv_indptr, kv_indices, kv_last_page_len, as batch_attention's); "
    "tree_mask, alibi_slopes, sinks and sliding_window as batch_attention's. The output [T, H, Dv] has the query's "
    "dtype (bf16 as uint16); with return_lse, (output, lse) with lse float32 [T, H]. scale defaults to 1/sqrt(Dk).";

std::string mla_doc(const char* what) { return std::string(what) + "\n\n" + kMlaArrays; }

// fn(lead..., inputs, params, return_lse, trail...) as a function of lead..., then the arrays and
// values of VKPAGED_MLA_ARGS, then trail...: one list of those arguments for mla_attention and
// reference.mla_attention, whose result it returns as output or (output, lse).
template <typename... Lead>
struct TakingMlaArrays {
  template <typename... Trail, typename Fn>
  static auto then(Fn fn) {
    return [fn](Lead... lead, const py::object& query, const py::object& block_tables, const py::object& context_lens,
                const py::object& query_starts, const py::object& mla_cache, uint32_t value_head_size,
                const py::object& ckv_cache, const py::object& kpe_cache, const py::object& tree_mask,
                const py::object& kv_indptr, const py::object& kv_indices, const py::object& kv_last_page_len,
                uint32_t max_blocks_per_seq, const OptStr& query_dtype, const OptStr& cache_dtype,
                const py::object& alibi_slopes, const py::object& sinks, uint32_t sliding_window,
                std::optional<float> scale, float softcap, float k_scale, float v_scale, bool return_lse,
                Trail... trail) {
      const MlaInputs in = mla_inputs(
          query, {mla_cache, ckv_cache, kpe_cache, value_head_size}, alibi_slopes, sinks, query_dtype, cache_dtype,
          page_tables(block_tables, context_lens, kv_indptr, kv_indices, kv_last_page_len, max_blocks_per_seq),
          query_starts, tree_mask, sliding_window);
      return output_and_lse(fn(lead..., in, decode_params(scale, softcap, k_scale, v_scale), return_lse, trail...),
                            return_lse);
    };
  }
};

void bind_host(py::module_& m) {
  m.def(
      "mla_attention",
      TakingMlaArrays<PyContext&>::then<const std::string&, uint32_t>(
          [](PyContext& ctx, const MlaInputs& in, const DecodeParams& params, bool return_lse,
             const std::string& split, uint32_t partition_tokens) {
            MlaOptions o;
            o.split = parse_split_arg("split", split);
            o.partition_tokens = partition_tokens;
            return mla_attention(ctx.context, in, params, o, return_lse);
          }),
      py::arg("context"), VKPAGED_MLA_ARGS, py::arg("split") = "auto", py::arg("partition_tokens") = 0,
      mla_doc("Multi-head latent attention for an engine step on the device (vkpaged::mla_attention: uploads, plans, "
              "runs, waits, downloads): multi-query attention over one shared kv head whose key is Dk = Dv + R wide "
              "and whose value is the key's first Dv entries. split: 'auto', 'single', 'split'.")
          .c_str());

  py::module_ ref = m.attr("reference").cast<py::module_>();
  ref.def(
      "mla_attention",
      TakingMlaArrays<>::then([](const MlaInputs& in, const DecodeParams& params, bool return_lse) {
        return reference::mla_attention(in, params, return_lse);
      }),
      VKPAGED_MLA_ARGS,
      mla_doc("vkpaged::reference::mla_attention: MLA attention on the CPU, as vkpaged.mla_attention.").c_str());
}

}  // namespace

void bind_mla(py::module_& m) {
  bind_shape(m);
  bind_plan(m);
  bind_records(m);
  bind_host(m);
}

}  // namespace vkpaged::python
