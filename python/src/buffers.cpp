// SPDX-License-Identifier: Apache-2.0
// Device memory from Python: DeviceBuffer, and the views the operators take (BufferView: a byte
// range; TensorView: with a dtype and a shape), with uploads from and downloads to numpy.
#include <pybind11/stl.h>

#include <algorithm>
#include <cstring>
#include <optional>
#include <string>

#include "bindings.hpp"
#include "host_array.hpp"
#include "names.hpp"

namespace vkpaged::python {

namespace {

// Host-visible buffers of ours are mapped: a copy, no submission. Everything else (device
// memory, a KvCache's pools) goes through the Context's staging path, which waits.
const PyBuffer* mapped_buffer(const py::object& owner) {
  if (!py::isinstance<PyBuffer>(owner)) return nullptr;
  const PyBuffer& b = owner.cast<const PyBuffer&>();
  return b.host_visible ? &b : nullptr;
}

void write_bytes(const py::object& owner, const py::object& context, const BufferView& view, const void* data,
                 size_t bytes, const std::string& what) {
  if (bytes > view.size)
    refuse(what + ": " + std::to_string(bytes) + " bytes do not fit a view of " + std::to_string(view.size) + " bytes");
  if (bytes == 0) return;
  if (const PyBuffer* b = mapped_buffer(owner))
    std::memcpy(static_cast<std::byte*>(b->buffer.mapped()) + view.offset, data, bytes);
  else
    context_of(context).context.upload(view, data, bytes);
}

std::vector<std::byte> read_bytes(const py::object& owner, const py::object& context, const BufferView& view,
                                  size_t bytes) {
  std::vector<std::byte> out(bytes);
  if (bytes == 0) return out;
  if (const PyBuffer* b = mapped_buffer(owner)) {
    if (bytes > view.size)
      refuse("read: " + std::to_string(bytes) + " bytes exceed a view of " + std::to_string(view.size));
    std::memcpy(out.data(), static_cast<const std::byte*>(b->buffer.mapped()) + view.offset, bytes);
  } else {
    context_of(context).context.download(view, out.data(), bytes);
  }
  return out;
}

size_t bytes_of(DType dtype, const std::vector<int64_t>& shape) {
  return size_t(Shape(shape).numel()) * dtype_size(dtype);
}

py::tuple shape_tuple(const Shape& shape) {
  py::tuple t(shape.rank());
  for (int i = 0; i < shape.rank(); ++i) t[size_t(i)] = shape[i];
  return t;
}

PyTensorView buffer_tensor(const py::object& self, const std::string& dtype, const std::vector<int64_t>& shape,
                           size_t offset) {
  const PyBuffer& b = self.cast<const PyBuffer&>();
  return PyTensorView{self, b.context, b.buffer.tensor(parse_dtype_arg("dtype", dtype), Shape(shape), offset)};
}

PyBufferView buffer_view(const py::object& self, size_t offset, std::optional<size_t> nbytes) {
  const PyBuffer& b = self.cast<const PyBuffer&>();
  if (offset > b.buffer.size())
    refuse("offset: " + std::to_string(offset) + " is past the buffer's " + std::to_string(b.buffer.size()) + " bytes");
  return PyBufferView{self, b.context, b.buffer.view(offset, nbytes.value_or(b.buffer.size() - offset))};
}

void tensor_write(const PyTensorView& t, const py::object& array) {
  const HostBytes in = to_host_bytes(array, "array", t.view.dtype);
  if (Shape(in.shape) != t.view.shape)
    refuse("array: shape " + Shape(in.shape).str() + " where the view is " + t.view.shape.str());
  write_bytes(t.owner, t.context, t.view.memory, in.bytes.data(), in.bytes.size(), "array");
}

py::array tensor_read(const PyTensorView& t) {
  const std::vector<std::byte> bytes = read_bytes(t.owner, t.context, t.view.memory, t.view.bytes());
  return to_numpy(t.view.dtype, t.view.shape.dims(), bytes.data());
}

void bind_views(py::module_& m) {
  py::class_<PyBufferView>(m, "BufferView", "A byte range of a device buffer (scratch, status words, order lists).")
      .def_property_readonly(
          "buffer", [](const PyBufferView& v) { return v.owner; },
          "The DeviceBuffer (or KvCache) whose memory this is.")
      .def_property_readonly("offset", [](const PyBufferView& v) { return v.view.offset; })
      .def_property_readonly("size", [](const PyBufferView& v) { return v.view.size; })
      .def("__repr__", [](const PyBufferView& v) {
        return "<BufferView " + std::to_string(v.view.size) + " bytes at " + std::to_string(v.view.offset) + ">";
      });

  py::class_<PyTensorView>(m, "TensorView",
                           "A dtype and a row-major shape at an offset of a device buffer: what the operators take. "
                           "bf16 views read and write uint16 arrays of raw bits, fp8 views uint8 arrays.")
      .def_property_readonly("buffer", [](const PyTensorView& v) { return v.owner; })
      .def_property_readonly("dtype", [](const PyTensorView& v) { return name_of(v.view.dtype); })
      .def_property_readonly("shape", [](const PyTensorView& v) { return shape_tuple(v.view.shape); })
      .def_property_readonly("offset", [](const PyTensorView& v) { return v.view.memory.offset; })
      .def_property_readonly("nbytes", [](const PyTensorView& v) { return v.view.bytes(); })
      .def_property_readonly(
          "memory",
          [](const PyTensorView& v) {
            return PyBufferView{v.owner, v.context, v.view.memory};
          },
          "The view's bytes as a BufferView.")
      .def("write", &tensor_write, py::arg("array"),
           "Copies a host array of the view's shape and dtype into it (host-visible buffers: a copy; others: an "
           "upload that waits).")
      .def("read", &tensor_read, "The view's contents as a numpy array (bf16 as uint16, fp8 as uint8).")
      .def("__repr__", [](const PyTensorView& v) {
        return "<TensorView " + name_of(v.view.dtype) + " " + v.view.shape.str() + " at " +
               std::to_string(v.view.memory.offset) + ">";
      });
}

}  // namespace

void bind_buffers(py::module_& m) {
  bind_views(m);
  py::class_<PyBuffer>(m, "DeviceBuffer",
                       "A buffer vkpaged allocated on a Context: device-local, or host-visible (mapped, coherent: "
                       "writes and reads are plain copies, the engine's per-step arrays).")
      .def_property_readonly("size", [](const PyBuffer& b) { return b.buffer.size(); })
      .def_readonly("host_visible", &PyBuffer::host_visible)
      .def_readonly("context", &PyBuffer::context)
      .def("view", &buffer_view, py::arg("offset") = 0, py::arg("nbytes") = py::none(),
           "A BufferView of [offset, offset + nbytes) (to the end by default); it must lie inside the buffer.")
      .def("tensor", &buffer_tensor, py::arg("dtype"), py::arg("shape"), py::arg("offset") = 0,
           "A TensorView of `dtype` and `shape` at `offset`; it must fit the buffer.")
      .def(
          "write",
          [](const py::object& self, const py::object& array, size_t offset, std::optional<std::string> dtype) {
            const PyBuffer& b = self.cast<const PyBuffer&>();
            const std::optional<DType> d = dtype ? std::optional(parse_dtype_arg("dtype", *dtype)) : std::nullopt;
            const HostBytes in = to_host_bytes(array, "array", d);
            write_bytes(self, b.context, b.buffer.view(offset, in.bytes.size()), in.bytes.data(), in.bytes.size(),
                        "array");
          },
          py::arg("array"), py::arg("offset") = 0, py::arg("dtype") = py::none(),
          "Copies the array's bytes to `offset` (dtype: 'bf16' for uint16 arrays of raw bits).")
      .def(
          "read",
          [](const py::object& self, const std::string& dtype, const std::vector<int64_t>& shape, size_t offset) {
            const PyBuffer& b = self.cast<const PyBuffer&>();
            const DType d = parse_dtype_arg("dtype", dtype);
            const size_t bytes = bytes_of(d, shape);
            const std::vector<std::byte> out = read_bytes(self, b.context, b.buffer.view(offset, bytes), bytes);
            return to_numpy(d, shape, out.data());
          },
          py::arg("dtype"), py::arg("shape"), py::arg("offset") = 0,
          "The bytes at `offset` as a numpy array of `dtype` and `shape` (bf16 as uint16, fp8 as uint8).")
      .def("__repr__", [](const PyBuffer& b) {
        return "<DeviceBuffer " + std::to_string(b.buffer.size()) + " bytes" +
               (b.host_visible ? ", host-visible>" : ">");
      });

  auto context = py::reinterpret_borrow<py::class_<PyContext>>(m.attr("Context"));
  context.def(
      "create_buffer",
      [](const py::object& self, size_t nbytes, bool host_visible) {
        PyContext& c = context_of(self);
        return PyBuffer{self,
                        c.context.create_buffer(nbytes, host_visible ? MemoryKind::host_visible : MemoryKind::device),
                        host_visible};
      },
      py::arg("nbytes"), py::kw_only(), py::arg("host_visible") = false,
      "A new DeviceBuffer of `nbytes` (contents undefined), device-local or host-visible.");
  context.def(
      "tensor_from",
      [](const py::object& self, const py::object& array, std::optional<std::string> dtype, bool host_visible) {
        PyContext& c = context_of(self);
        const std::optional<DType> d = dtype ? std::optional(parse_dtype_arg("dtype", *dtype)) : std::nullopt;
        const HostBytes in = to_host_bytes(array, "array", d);
        // Rounded to 16 bytes: the operators read some tensors 16 bytes at a time.
        const size_t bytes = std::max<size_t>(16, (in.bytes.size() + 15) / 16 * 16);
        py::object buffer = py::cast(
            PyBuffer{self, c.context.create_buffer(bytes, host_visible ? MemoryKind::host_visible : MemoryKind::device),
                     host_visible});
        const PyBuffer& b = buffer.cast<const PyBuffer&>();
        PyTensorView t{buffer, self, b.buffer.tensor(in.dtype, Shape(in.shape))};
        write_bytes(buffer, self, t.view.memory, in.bytes.data(), in.bytes.size(), "array");
        return t;
      },
      py::arg("array"), py::kw_only(), py::arg("dtype") = py::none(), py::arg("host_visible") = false,
      "A new buffer holding a copy of the array, as a TensorView of its shape and dtype (dtype: 'bf16' for "
      "uint16 arrays of raw bits, 'fp8_e4m3' or 'fp8_e5m2' for uint8 arrays of raw bytes).");
}

}  // namespace vkpaged::python
