#pragma once
// How the C API turns C++ outcomes into status codes: every exported function runs its body
// through guarded(), which catches everything (vkpaged::Error, std::bad_alloc, any other
// exception) and leaves a one-line message in a thread-local buffer for vkp_last_error().
// The buffer is fixed-size so that reporting an error never allocates or throws.
#include <exception>
#include <new>

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

// Throws Error(invalid_argument, "<name> is NULL") for a null pointer; returns it otherwise.
template <typename T>
T* require(T* pointer, const char* name) {
  if (pointer == nullptr) throw Error(ErrorCode::invalid_argument, std::string(name) + " is NULL");
  return pointer;
}

}  // namespace vkpaged::c_api
