// SPDX-License-Identifier: Apache-2.0
#pragma once
// What the plan classes share (DecodePlan, AttentionPlan, MlaPlan): the step plans' making from
// the step's query starts, the bucket plans' making and their buckets for Context.prepare, and
// the members every plan reads back.
#include <cstdint>
#include <string>
#include <type_traits>
#include <utility>
#include <vector>

#include "bindings.hpp"
#include "host_array.hpp"
#include "names.hpp"

namespace vkpaged::python {

// A plan made once per step's query starts (AttentionPlan, MlaPlan), holding its Context.
template <typename PyPlan, typename Shape, typename Options>
PyPlan plan_for_query_starts(const py::object& context, const Shape& shape, const py::object& query_starts,
                             const Options& options) {
  const std::vector<int32_t> starts = to_int32_vector(query_starts, "query_starts");
  return PyPlan{context, decltype(PyPlan::plan)::create(context_of(context).context, shape, starts, options)};
}

// shape, split, num_partitions, scratch_bytes, describe() and the repr "<`name` description>".
template <typename PyPlan>
void def_plan_readback(py::class_<PyPlan>& cls, const std::string& name) {
  cls.def_property_readonly("shape", [](const PyPlan& p) { return p.plan.shape(); })
      .def_property_readonly("split", [](const PyPlan& p) { return p.plan.split(); })
      .def_property_readonly("num_partitions", [](const PyPlan& p) { return p.plan.num_partitions(); })
      .def_property_readonly("scratch_bytes", [](const PyPlan& p) { return p.plan.scratch_bytes(); })
      .def("describe", [](const PyPlan& p) { return p.plan.describe(); })
      .def("__repr__", [name](const PyPlan& p) { return "<" + name + " " + p.plan.describe() + ">"; });
}

// The step plans' (AttentionPlan, MlaPlan): the above and tree_mask_bytes.
template <typename PyPlan>
void def_step_plan_readback(py::class_<PyPlan>& cls, const std::string& name) {
  def_plan_readback(cls, name);
  cls.def_property_readonly("tree_mask_bytes", [](const PyPlan& p) { return p.plan.tree_mask_bytes(); });
}

// The keywords kernel, split and partition_tokens as a plan's options (attention_options,
// mla_options).
template <typename Options>
using OptionsFromKeywords = Options (*)(const std::string& kernel, const std::string& split, uint32_t partition_tokens);

// The bucket plans' (AttentionPlan, MlaPlan): the static create_bucket and max_scratch_bytes,
// their options from the keywords by `options`, and bucket and max_query_tokens read back.
template <typename PyPlan>
void def_bucket_plan(py::class_<PyPlan>& cls,
                     OptionsFromKeywords<std::remove_cvref_t<decltype(std::declval<PyPlan>().plan.options())>> options,
                     const char* create_doc, const char* scratch_doc) {
  using Plan = decltype(PyPlan::plan);
  using Shape = std::remove_cvref_t<decltype(std::declval<Plan>().shape())>;
  cls.def_static(
         "create_bucket",
         [options](const py::object& context, const Shape& shape, uint32_t max_query_tokens, const std::string& kernel,
                   const std::string& split, uint32_t partition_tokens) {
           return PyPlan{context, Plan::create_bucket(context_of(context).context, shape, max_query_tokens,
                                                      options(kernel, split, partition_tokens))};
         },
         py::arg("context"), py::arg("shape"), py::arg("max_query_tokens") = 0, py::kw_only(),
         py::arg("kernel") = "auto", py::arg("split") = "auto", py::arg("partition_tokens") = 0, create_doc)
      .def_static(
          "max_scratch_bytes",
          [options](const py::object& context, const Shape& shape, uint32_t max_query_tokens,
                    const std::string& kernel, const std::string& split, uint32_t partition_tokens) {
            return Plan::max_scratch_bytes(context_of(context).context, shape, max_query_tokens,
                                           options(kernel, split, partition_tokens));
          },
          py::arg("context"), py::arg("shape"), py::arg("max_query_tokens") = 0, py::kw_only(),
          py::arg("kernel") = "auto", py::arg("split") = "auto", py::arg("partition_tokens") = 0, scratch_doc)
      .def_property_readonly("bucket", [](const PyPlan& p) { return p.plan.bucket(); }, "Whether create_bucket made it.")
      .def_property_readonly("max_query_tokens", [](const PyPlan& p) { return p.plan.max_query_tokens(); });
}

// A bucket plan's arguments for Context.prepare (AttentionBucket, MlaBucket): its shape,
// max_query_tokens and the options, from the keywords by `options`.
template <typename Bucket>
void bind_plan_bucket(py::module_& m, const char* name, const char* doc,
                      OptionsFromKeywords<decltype(Bucket::options)> options) {
  using Shape = decltype(Bucket::shape);
  py::class_<Bucket>(m, name, doc)
      .def(py::init([options](const Shape& shape, uint32_t max_query_tokens, const std::string& kernel,
                              const std::string& split, uint32_t partition_tokens) {
             return Bucket{shape, max_query_tokens, options(kernel, split, partition_tokens)};
           }),
           py::arg("shape"), py::arg("max_query_tokens") = 0, py::kw_only(), py::arg("kernel") = "auto",
           py::arg("split") = "auto", py::arg("partition_tokens") = 0)
      .def_readonly("shape", &Bucket::shape)
      .def_readonly("max_query_tokens", &Bucket::max_query_tokens)
      .def_property_readonly("kernel", [](const Bucket& b) { return name_of(b.options.kernel); })
      .def_property_readonly("split", [](const Bucket& b) { return name_of(b.options.split); })
      .def_property_readonly("partition_tokens", [](const Bucket& b) { return b.options.partition_tokens; });
}

}  // namespace vkpaged::python
