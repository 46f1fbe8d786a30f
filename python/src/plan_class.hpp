// SPDX-License-Identifier: Apache-2.0
#pragma once
// What the plan classes share (DecodePlan, AttentionPlan, MlaPlan): the step plans' making from
// the step's query starts, and the members every plan reads back.
#include <cstdint>
#include <string>
#include <vector>

#include "bindings.hpp"
#include "host_array.hpp"

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

}  // namespace vkpaged::python
