// SPDX-License-Identifier: Apache-2.0
#pragma once
// The shapes of entry point the C API repeats, each run through guarded() (c_api_guard.hpp)
// and checking its arguments in the order the C signature lists them:
// - fill_out: a live handle's struct, written to the caller's extensible `out`;
// - answer: a live handle's answer, written to the caller's scalar `out`;
// - record_with: a live handle and a command buffer, then what the call records into it.
// The vkp_*_get entry points, one line each, are fill_out's (VKP_GETTER, VKP_INFO_GETTER below).
#include <type_traits>

#include "c_api/c_api_convert.hpp"
#include "c_api/c_api_guard.hpp"
#include "c_api/c_api_structs.hpp"
#include "vkpaged/vkpaged.h"

namespace vkpaged::c_api {

// `fill(handle)` or, to set fields one by one, `fill(handle, blank)` (blank: StructOut::blank()).
template <typename Handle, typename Out, typename Fill>
vkp_status fill_out(const char* function, const Handle* handle, const char* name, Out* out, Fill&& fill) noexcept {
  return guarded(function, [&] {
    const Handle& h = *require(handle, name);
    const StructOut result(out, "out");
    if constexpr (std::is_invocable_v<Fill&, const Handle&, Out>)
      result.set(fill(h, result.blank()));
    else
      result.set(fill(h));
  });
}

// `*out = ask(handle)`; `out` is checked before `ask` runs, so a refusal inside it comes second.
template <typename Handle, typename Out, typename Ask>
vkp_status answer(const char* function, const Handle* handle, const char* name, Out* out, Ask&& ask) noexcept {
  return guarded(function, [&] {
    const Handle& h = *require(handle, name);
    Out* result = require(out, "out");
    *result = ask(h);
  });
}

// `record(handle)` records into `cmd` (the lambda holds it) once both are checked.
template <typename Handle, typename Record>
vkp_status record_with(const char* function, Handle* handle, const char* name, VkCommandBuffer cmd,
                       Record&& record) noexcept {
  return guarded(function, [&] {
    Handle& h = *require(handle, name);
    require(cmd, "cmd");
    record(h);
  });
}

// A getter's value as the C field of type C holds it: booleans as vkp_bool32, enums as the C enum.
template <typename C, typename Cpp>
C c_value(const Cpp& value) noexcept {
  if constexpr (std::is_same_v<Cpp, bool>)
    return to_c_bool(value);
  else if constexpr (std::is_enum_v<Cpp>)
    return to_c(value);
  else
    return C(value);
}

}  // namespace vkpaged::c_api

// `function(const Handle* handle_arg, Out* out)`: `out` gets the expression (of h, the handle).
#define VKP_GETTER(function, Handle, handle_arg, Out, ...)                          \
  VKP_API vkp_status VKP_CALL function(const Handle* handle_arg, Out* out) {        \
    return ::vkpaged::c_api::fill_out(#function, handle_arg, #handle_arg, out,      \
                                      [](const Handle& h) { return __VA_ARGS__; }); \
  }

// The same for a struct whose fields are getters of the handle's C++ object (h.member): each
// field f that LIST names gets the C value of h.member.f().
#define VKP_INFO_GETTER(function, Handle, handle_arg, Out, member, LIST)        \
  VKP_API vkp_status VKP_CALL function(const Handle* handle_arg, Out* out) {    \
    return ::vkpaged::c_api::fill_out(#function, handle_arg, #handle_arg, out,  \
                                      [](const Handle& h, Out info) {           \
                                        const auto& source = h.member;          \
                                        LIST(VKP_FROM_GETTER)                   \
                                        return info;                            \
                                      });                                       \
  }
#define VKP_FROM_GETTER(f) info.f = ::vkpaged::c_api::c_value<decltype(info.f)>(source.f());
