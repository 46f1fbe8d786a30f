// SPDX-License-Identifier: Apache-2.0
// Devices and the Context: list the Vulkan devices, choose one, turn the validation layer on.
#include <pybind11/stl.h>

#include <memory>
#include <string>

#include "bindings.hpp"
#include "host_array.hpp"

namespace vkpaged::python {

namespace {

// An index (int) or what ContextOptions::device takes (a string: index, name substring, "").
std::string device_arg(const py::object& device) {
  if (py::isinstance<py::bool_>(device)) refuse("device: a bool is not a device index or name");
  if (py::isinstance<py::int_>(device)) {
    const long long index = device.cast<long long>();
    if (index < 0) refuse("device: " + std::to_string(index) + " is not a device index");
    return std::to_string(index);
  }
  if (py::isinstance<py::str>(device)) return device.cast<std::string>();
  refuse("device: give an index (int) or a name substring (str)");
}

std::unique_ptr<PyContext> make_context(const py::object& device, bool validation, bool disable_subgroup_arithmetic,
                                        uint32_t fence_timeout_ms, bool read_environment) {
  ContextOptions options;
  options.device = device_arg(device);
  options.validation = validation;
  options.disable_subgroup_arithmetic = disable_subgroup_arithmetic;
  options.fence_timeout_ms = fence_timeout_ms;
  options.read_environment = read_environment;
  return std::make_unique<PyContext>(options);
}

void bind_device_info(py::module_& m) {
  py::class_<CooperativeMatrixShape>(m, "CooperativeMatrixShape",
                                     "One matrix shape VK_KHR_cooperative_matrix offers (A m x k, B k x n, C m x n); "
                                     "component types and scope keep Vulkan's values.")
      .def_readonly("m", &CooperativeMatrixShape::m)
      .def_readonly("n", &CooperativeMatrixShape::n)
      .def_readonly("k", &CooperativeMatrixShape::k)
      .def_readonly("a_type", &CooperativeMatrixShape::a_type)
      .def_readonly("b_type", &CooperativeMatrixShape::b_type)
      .def_readonly("c_type", &CooperativeMatrixShape::c_type)
      .def_readonly("result_type", &CooperativeMatrixShape::result_type)
      .def_readonly("saturating_accumulation", &CooperativeMatrixShape::saturating_accumulation)
      .def_readonly("scope", &CooperativeMatrixShape::scope)
      .def("__str__", [](const CooperativeMatrixShape& s) { return to_string(s); })
      .def("__repr__", [](const CooperativeMatrixShape& s) { return "<CooperativeMatrixShape " + to_string(s) + ">"; });

  py::class_<DeviceInfo>(m, "DeviceInfo", "What vkpaged reads off a Vulkan device and uses to pick its kernels.")
      .def_readonly("index", &DeviceInfo::index)
      .def_readonly("name", &DeviceInfo::name)
      .def_readonly("type", &DeviceInfo::type)
      .def_readonly("driver", &DeviceInfo::driver)
      .def_readonly("vendor_id", &DeviceInfo::vendor_id)
      .def_readonly("api_version", &DeviceInfo::api_version)
      .def_readonly("subgroup_size", &DeviceInfo::subgroup_size)
      .def_readonly("subgroup_arithmetic", &DeviceInfo::subgroup_arithmetic)
      .def_readonly("subgroup_shuffle", &DeviceInfo::subgroup_shuffle)
      .def_readonly("storage_16bit", &DeviceInfo::storage_16bit)
      .def_readonly("storage_8bit", &DeviceInfo::storage_8bit)
      .def_readonly("shader_float16", &DeviceInfo::shader_float16)
      .def_readonly("shader_int64", &DeviceInfo::shader_int64)
      .def_readonly("buffer_device_address", &DeviceInfo::buffer_device_address)
      .def_readonly("cooperative_matrix", &DeviceInfo::cooperative_matrix)
      .def_readonly("decode_timeline", &DeviceInfo::decode_timeline)
      .def_readonly("vulkan_memory_model", &DeviceInfo::vulkan_memory_model)
      .def_readonly("vulkan_memory_model_device_scope", &DeviceInfo::vulkan_memory_model_device_scope)
      .def_readonly("cooperative_matrix_khr", &DeviceInfo::cooperative_matrix_khr)
      .def_readonly("cooperative_matrix_khr_shapes", &DeviceInfo::cooperative_matrix_khr_shapes)
      .def_readonly("push_descriptor", &DeviceInfo::push_descriptor)
      .def_readonly("timestamps", &DeviceInfo::timestamps)
      .def_readonly("max_storage_buffer_range", &DeviceInfo::max_storage_buffer_range)
      .def_readonly("max_shared_memory", &DeviceInfo::max_shared_memory)
      .def_readonly("max_workgroup_invocations", &DeviceInfo::max_workgroup_invocations)
      .def_readonly("max_push_constants", &DeviceInfo::max_push_constants)
      .def_readonly("min_storage_buffer_offset_alignment", &DeviceInfo::min_storage_buffer_offset_alignment)
      .def_readonly("compute_units", &DeviceInfo::compute_units)
      .def_readonly("compute_units_reported", &DeviceInfo::compute_units_reported)
      .def_readonly("timestamp_period_ns", &DeviceInfo::timestamp_period_ns)
      .def_readonly("timestamp_valid_bits", &DeviceInfo::timestamp_valid_bits)
      .def_readonly("device_local_bytes", &DeviceInfo::device_local_bytes)
      .def_readonly("memory_budget", &DeviceInfo::memory_budget)
      .def_readonly("device_local_free_bytes", &DeviceInfo::device_local_free_bytes)
      .def_readonly("max_memory_allocation_size", &DeviceInfo::max_memory_allocation_size)
      .def("__repr__", [](const DeviceInfo& d) {
        return "<DeviceInfo " + std::to_string(d.index) + ": " + d.name + " (" + d.type + ")>";
      });

  py::class_<DeviceList>(m, "DeviceList", "Every Vulkan device the loader sees, and which one the default picks.")
      .def_readonly("devices", &DeviceList::devices)
      .def_readonly("default_index", &DeviceList::default_index)
      .def("__repr__", [](const DeviceList& l) {
        return "<DeviceList of " + std::to_string(l.devices.size()) + ", default " + std::to_string(l.default_index) +
               ">";
      });
  m.def("list_devices", &list_devices,
        "Every Vulkan device in enumeration order and the default choice (discrete GPU, then integrated, then "
        "virtual, then CPU). Raises vkpaged.Error when there is no Vulkan at all.");
}

}  // namespace

void bind_context(py::module_& m) {
  bind_device_info(m);
  py::class_<PyContext>(m, "Context",
                        "One Vulkan device and what vkpaged keeps for it (pipelines, command pool, staging). Make "
                        "one per device and share it; every buffer, plan, cache and command buffer made on it keeps "
                        "it alive. Not to be used from several Python threads at once.")
      .def(py::init(&make_context), py::arg("device") = "", py::kw_only(), py::arg("validation") = false,
           py::arg("disable_subgroup_arithmetic") = false, py::arg("fence_timeout_ms") = 60000,
           py::arg("read_environment") = false,
           "device: an index (int), a name substring ('llvmpipe', 'H200') or '' for the default choice (discrete, "
           "integrated, virtual, CPU). validation: the Khronos validation layer; its messages go to stderr and are "
           "counted (validation_message_count). fence_timeout_ms: how long the calls that wait wait before they "
           "raise DeviceError (0: no limit). read_environment: whether this Context reads vkpaged's environment "
           "variables (docs/environment.md: VKPAGED_DEVICE where device is '', VKPAGED_VALIDATION, "
           "VKPAGED_PIPELINE_STATS, VKPAGED_DECODE_TUNE); off, it follows its arguments alone, whatever the "
           "process inherited.")
      .def_property_readonly(
          "device_info", [](const PyContext& c) { return c.context.device_info(); }, "The device's DeviceInfo.")
      .def_property_readonly(
          "validation_message_count", [](const PyContext& c) { return c.context.validation_message_count(); },
          "Validation-layer messages seen since creation (0 unless validation is on).")
      .def_readonly("fence_timeout_ms", &PyContext::fence_timeout_ms)
      .def("__repr__", [](const PyContext& c) { return "<vkpaged.Context on " + c.context.device_info().name + ">"; });
}

}  // namespace vkpaged::python
