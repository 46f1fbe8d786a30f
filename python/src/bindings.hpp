// SPDX-License-Identifier: Apache-2.0
#pragma once
// What the binding files share: the Python-side owners of vkpaged's objects and the bind_*
// functions module.cpp calls. Every object made on a Context holds a reference to that Context's
// Python object, so Python's reference counting destroys them before it (the C++ API's rule).
#include <pybind11/pybind11.h>

#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "vkpaged/block_manager.hpp"
#include "vkpaged/context.hpp"
#include "vkpaged/error.hpp"
#include "vkpaged/kv_cache.hpp"
#include "vkpaged/tensor.hpp"

namespace vkpaged::python {

namespace py = pybind11;

// A Context with the option the command buffers need again (Context does not expose it).
struct PyContext {
  explicit PyContext(const ContextOptions& options) : context(options), fence_timeout_ms(options.fence_timeout_ms) {}
  Context context;
  uint32_t fence_timeout_ms;
};

// A DeviceBuffer and the Context it was made on.
struct PyBuffer {
  py::object context;  // PyContext
  DeviceBuffer buffer;
  bool host_visible = false;
};

// A range of a buffer (a DeviceBuffer's or a KvCache pool's), and what keeps that buffer alive.
struct PyBufferView {
  py::object owner;    // PyBuffer or PyKvCache
  py::object context;  // PyContext
  BufferView view;
};

// The same with a dtype and a shape: what the operators take.
struct PyTensorView {
  py::object owner;
  py::object context;
  TensorView view;
};

// A KvCache and the Context it was made on.
struct PyKvCache {
  py::object context;
  KvCache cache;
};

[[noreturn]] inline void refuse(const std::string& message) { throw Error(ErrorCode::invalid_argument, message); }

// (src, dst) pairs as the cache's copies take them: BlockCopy objects, 2-tuples, an [n, 2] array.
std::vector<BlockCopy> to_block_copies(const py::handle& pairs, std::string_view argument);

inline PyContext& context_of(const py::object& context) { return context.cast<PyContext&>(); }

void bind_errors(py::module_& m);
void bind_dtypes(py::module_& m);
void bind_context(py::module_& m);
void bind_buffers(py::module_& m);
void bind_command_buffer(py::module_& m);
void bind_host_ops(py::module_& m);
void bind_shapes(py::module_& m);
void bind_plans(py::module_& m);
void bind_mla(py::module_& m);  // after the plans and the host ops (it extends vkpaged.reference)
void bind_cache_ops(py::module_& m);
void bind_kv_cache(py::module_& m);
void bind_block_manager(py::module_& m);
void bind_prepare(py::module_& m);  // Context.prepare and the pipeline cache: after Context and KvCache

}  // namespace vkpaged::python
