// SPDX-License-Identifier: Apache-2.0
// Element types: sizes, limits, and the library's bit-exact conversions over whole arrays, so
// that bf16 and fp8 data (which numpy cannot hold) is made and read as the library does.
#include <pybind11/numpy.h>

#include <string>

#include "bindings.hpp"
#include "host_array.hpp"
#include "names.hpp"
#include "vkpaged/dtype.hpp"

namespace vkpaged::python {

namespace {

DType float_dtype_arg(const std::string& name) {
  const DType d = parse_dtype_arg("dtype", name);
  if (!is_float_dtype(d) && !is_fp8_dtype(d))
    refuse("dtype: '" + name + "' is not a floating-point dtype (f32, f16, bf16, fp8_e4m3, fp8_e5m2)");
  return d;
}

py::array float_to_bits(const py::array_t<float, py::array::c_style | py::array::forcecast>& values,
                        const std::string& name) {
  const DType d = float_dtype_arg(name);
  const std::vector<int64_t> shape(values.shape(), values.shape() + values.ndim());
  std::vector<std::byte> bits(size_t(values.size()) * dtype_size(d));
  for (py::ssize_t i = 0; i < values.size(); ++i) store_element(bits.data(), d, size_t(i), values.data()[i]);
  return to_numpy(d, shape, bits.data());
}

py::array bits_to_float(const py::object& bits, const std::string& name) {
  const DType d = float_dtype_arg(name);
  const HostBytes in = to_host_bytes(bits, "bits", d);
  py::array_t<float> out(std::vector<py::ssize_t>(in.shape.begin(), in.shape.end()));
  for (py::ssize_t i = 0; i < out.size(); ++i) out.mutable_data()[i] = load_element(in.bytes.data(), d, size_t(i));
  return out;
}

}  // namespace

void bind_dtypes(py::module_& m) {
  m.def(
      "dtype_size", [](const std::string& name) { return dtype_size(parse_dtype_arg("dtype", name)); },
      py::arg("dtype"), "Bytes of one element of `dtype` ('f32', 'f16', 'bf16', 'fp8_e4m3', ...).");
  m.def(
      "dtype_max", [](const std::string& name) { return dtype_max(float_dtype_arg(name)); }, py::arg("dtype"),
      "The largest finite value of a floating-point dtype (448 for fp8_e4m3, 57344 for fp8_e5m2).");
  m.def(
      "cache_pack_factor", [](const std::string& name) { return cache_pack_factor(parse_dtype_arg("dtype", name)); },
      py::arg("dtype"), "x of the vllm key layout: how many cache elements make 16 bytes.");
  m.def("float_to_bits", &float_to_bits, py::arg("values"), py::arg("dtype"),
        "The values (converted to float32 first) stored as `dtype`, rounded to nearest even, fp8 saturating at "
        "the format's max: float32 or float16 arrays for f32 and f16, uint16 arrays of raw bits for bf16, uint8 "
        "arrays of raw bytes for fp8. The library's own conversions, bit for bit.");
  m.def("bits_to_float", &bits_to_float, py::arg("bits"), py::arg("dtype"),
        "What an array of `dtype` holds, as float32: uint16 raw bits for bf16, uint8 raw bytes for fp8 "
        "(NaN codes give NaN), float16 or float32 arrays for f16 and f32.");
}

}  // namespace vkpaged::python
