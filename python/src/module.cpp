// SPDX-License-Identifier: Apache-2.0
// vkpaged._core: the bindings, one bind_* per concern; vkpaged/__init__.py re-exports them.
#include "bindings.hpp"
#include "vkpaged/vkpaged.h"

PYBIND11_MODULE(_core, m) {
  using namespace vkpaged::python;
  m.doc() = "vkpaged's C++ API (PagedAttention over a paged KV cache on Vulkan) for Python.";
  m.attr("__version__") = vkp_version_string();  // the linked library's "major.minor.patch"
  // Classes others extend or take come first (Context before its buffers, views before the
  // operators that take them).
  bind_errors(m);
  bind_dtypes(m);
  bind_context(m);
  bind_buffers(m);
  bind_command_buffer(m);
  bind_host_ops(m);
  bind_shapes(m);
  bind_plans(m);
  bind_mla(m);
  bind_cache_ops(m);
  bind_kv_cache(m);
  bind_block_manager(m);
  bind_prepare(m);
}
