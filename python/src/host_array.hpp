// SPDX-License-Identifier: Apache-2.0
#pragma once
// Host arrays in and out: numpy arrays, any object with __dlpack__ on the CPU (torch CPU tensors,
// numpy >= 1.22, ...) and anything numpy.asarray takes, copied into HostTensors; HostTensors and
// raw bytes back out as numpy arrays. numpy has no bfloat16 nor fp8: those travel as uint16 and
// uint8 arrays of raw bits, with the dtype given explicitly (a DLPack bfloat16 tensor is taken
// as bf16 directly).
#include <pybind11/numpy.h>

#include <cstdint>
#include <optional>
#include <string_view>
#include <vector>

#include "bindings.hpp"
#include "vkpaged/tensor.hpp"

namespace vkpaged::python {

// `object` as a HostTensor of `dtype`, or of the array's own dtype when none is given (uint16
// arrays then are refused: their dtype must be said). `argument` names it in refusals.
HostTensor to_host_tensor(const py::handle& object, std::string_view argument,
                          std::optional<DType> dtype = std::nullopt);
// The same with the array's own dtype, uint16 arrays read as `u16_dtype` (bf16): for arrays that
// may be f32 or the other tensors' dtype (a cos/sin cache).
HostTensor to_host_tensor_u16_as(const py::handle& object, std::string_view argument, std::optional<DType> u16_dtype);
// The same, with None giving an empty HostTensor (an absent optional input).
HostTensor to_optional_host_tensor(const py::handle& object, std::string_view argument,
                                   std::optional<DType> dtype = std::nullopt);

// An array's raw bytes and shape, for uploads: checked against `dtype` as above.
struct HostBytes {
  std::vector<std::byte> bytes;
  std::vector<int64_t> shape;
  DType dtype = DType::f32;
};
HostBytes to_host_bytes(const py::handle& object, std::string_view argument, std::optional<DType> dtype);

// A 1-D sequence of integers (a list, a numpy or DLPack integer array), each within int32 or
// int64, as the block manager and the plans take them.
std::vector<int32_t> to_int32_vector(const py::handle& object, std::string_view argument);
std::vector<int64_t> to_int64_vector(const py::handle& object, std::string_view argument);

// A numpy array of `dtype` (bf16 as uint16, fp8 as uint8) and `shape`, copied from `data`.
py::array to_numpy(DType dtype, const std::vector<int64_t>& shape, const void* data);
py::array to_numpy(const HostTensor& tensor);
// An optional output: None for an empty HostTensor.
py::object to_optional_numpy(const HostTensor& tensor);
// What the host attention calls return from a DecodeResult or AttentionResult: the output, or
// (output, lse) with return_lse.
template <typename Result>
py::object output_and_lse(const Result& r, bool return_lse) {
  if (!return_lse) return to_numpy(r.output);
  return py::make_tuple(to_numpy(r.output), to_numpy(r.lse));
}

}  // namespace vkpaged::python
