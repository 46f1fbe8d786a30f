// SPDX-License-Identifier: Apache-2.0
#pragma once
// How the C API turns C++ outcomes into status codes: every exported function runs its body
// through guarded(), which catches everything (vkpaged::Error, std::bad_alloc, any other
// exception) and leaves a one-line message in a thread-local buffer for vkp_last_error().
// The buffer is fixed-size so that reporting an error never allocates or throws.
//
// Handles: every handle the API hands out is registered until it is destroyed, and require()
// refuses one that is not live (destroyed, never made, or of another handle type).
#include <exception>
#include <new>
#include <string>
#include <type_traits>

#include "vkpaged/error.hpp"
#include "vkpaged/vkpaged.h"

namespace vkpaged::c_api {

void clear_error() noexcept;
const char* last_error_message() noexcept;
// Stores "function: message" (truncated to the buffer) and returns status.
vkp_status set_error(vkp_status status, const char* function, const char* message) noexcept;
vkp_status status_of(ErrorCode code) noexcept;

template <typename Body>
vkp_status guarded(const char* function, Body&& body) noexcept {
  clear_error();
  try {
    body();
    return VKP_OK;
  } catch (const Error& e) {
    return set_error(status_of(e.code()), function, e.what());
  } catch (const std::bad_alloc&) {
    return set_error(VKP_ERROR_OUT_OF_MEMORY, function, "out of host memory");
  } catch (const std::exception& e) {
    return set_error(VKP_ERROR_INTERNAL, function, e.what());
  } catch (...) {
    return set_error(VKP_ERROR_INTERNAL, function, "unknown exception");
  }
}

// For calls that return a value instead of a status: `fallback` when the body fails (its
// message is then in vkp_last_error(), which a success clears).
template <typename R, typename Body>
R guarded_value(const char* function, R fallback, Body&& body) noexcept {
  R result = fallback;
  guarded(function, [&] { result = body(); });
  return result;
}

// ---- live handles ----

enum class HandleKind {
  context,
  buffer,
  decode_plan,
  attention_plan,
  mla_plan,
  block_manager,
  kv_cache,
  streaming_read,
  pipeline_set
};

template <typename T>
struct HandleTraits {
  static constexpr bool is_handle = false;
};
#define VKP_C_API_HANDLE(type, kind_name)                              \
  template <>                                                          \
  struct HandleTraits<type> {                                          \
    static constexpr bool is_handle = true;                            \
    static constexpr HandleKind kind = HandleKind::kind_name;          \
    static constexpr const char* name = #type;                         \
  };
VKP_C_API_HANDLE(vkp_context, context)
VKP_C_API_HANDLE(vkp_buffer, buffer)
VKP_C_API_HANDLE(vkp_decode_plan, decode_plan)
VKP_C_API_HANDLE(vkp_attention_plan, attention_plan)
VKP_C_API_HANDLE(vkp_mla_plan, mla_plan)
VKP_C_API_HANDLE(vkp_block_manager, block_manager)
VKP_C_API_HANDLE(vkp_kv_cache, kv_cache)
VKP_C_API_HANDLE(vkp_streaming_read, streaming_read)
VKP_C_API_HANDLE(vkp_pipeline_set, pipeline_set)
#undef VKP_C_API_HANDLE

// `parent`: the vkp_context a buffer, plan, cache or read was made on (NULL for others).
void register_handle(HandleKind kind, const void* handle, const void* parent);
// False (and nothing changes) when the handle was not live.
bool unregister_handle(HandleKind kind, const void* handle) noexcept;
bool handle_is_live(HandleKind kind, const void* handle) noexcept;
[[noreturn]] void refuse_dead_handle(const char* name, const char* type, const void* handle);
// "2 vkp_buffer, 1 vkp_decode_plan" made on `context` and still live; "" when none.
std::string live_children(const void* context);

// Throws Error(invalid_argument, "<name> is NULL") for a null pointer, and for a handle type
// "<name>: 0x... is not a live vkp_x ..." when it is not live; returns it otherwise.
template <typename T>
T* require(T* pointer, const char* name) {
  if (pointer == nullptr) throw Error(ErrorCode::invalid_argument, std::string(name) + " is NULL");
  using Traits = HandleTraits<std::remove_cv_t<T>>;
  if constexpr (Traits::is_handle)
    if (!handle_is_live(Traits::kind, pointer)) refuse_dead_handle(name, Traits::name, pointer);
  return pointer;
}

// Registers a handle the API hands out (after it is fully made) and returns it.
template <typename T>
T* adopt(T* handle, const vkp_context* parent = nullptr) {
  register_handle(HandleTraits<T>::kind, handle, parent);
  return handle;
}

// vkp_*_destroy: NULL is a no-op; a handle that is not live is left alone, with a message.
template <typename T>
void destroy_handle(const char* function, T* handle, const char* name) noexcept {
  clear_error();
  if (handle == nullptr) return;
  if (!unregister_handle(HandleTraits<T>::kind, handle)) {
    guarded(function, [&] { refuse_dead_handle(name, HandleTraits<T>::name, handle); });
    return;
  }
  delete handle;
}

}  // namespace vkpaged::c_api
