// SPDX-License-Identifier: Apache-2.0
// vkpaged::Error becomes the Python exception of its ErrorCode (vkpaged/_errors.py: one class
// per code, each deriving from vkpaged.Error) carrying the library's message unchanged.
#include <exception>

#include "bindings.hpp"

namespace vkpaged::python {

namespace {

void raise(const Error& e) {
  const std::string_view message = e.what();
  // The classes live in Python, where they can derive from ValueError and carry docstrings.
  const py::object cls = py::module_::import("vkpaged._errors").attr("error_class")(int(e.code()));
  // "replace": a device or file name that is not UTF-8 must not hide the error itself.
  const py::object text =
      py::reinterpret_steal<py::object>(PyUnicode_DecodeUTF8(message.data(), py::ssize_t(message.size()), "replace"));
  PyErr_SetObject(cls.ptr(), text.ptr());
}

}  // namespace

void bind_errors(py::module_& m) {
  py::register_exception_translator([](std::exception_ptr p) {
    try {
      if (p) std::rethrow_exception(p);
    } catch (const Error& e) {
      raise(e);
    }
  });
  m.def(
      "error_code_name", [](int code) { return std::string(to_string(ErrorCode(code))); }, py::arg("code"),
      "The library's name of an ErrorCode value (vkpaged::to_string).");
}

}  // namespace vkpaged::python
