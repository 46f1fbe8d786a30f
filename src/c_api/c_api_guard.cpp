// SPDX-License-Identifier: Apache-2.0
// The thread-local error message behind vkp_last_error(), the status of each ErrorCode, and
// the registry of live handles.
#include "c_api/c_api_guard.hpp"

#include <fmt/format.h>

#include <cstdio>
#include <mutex>
#include <shared_mutex>
#include <map>
#include <string>
#include <utility>

namespace vkpaged::c_api {

namespace {
thread_local char last_error[1024] = "";

struct Handles {
  std::shared_mutex mutex;  // shared for the check on every call
  std::map<std::pair<HandleKind, const void*>, const void*> live;  // handle -> its context
};

Handles& handles() {
  static Handles* h = new Handles;  // never destroyed: handles may be released after static destruction
  return *h;
}

const char* kind_name(HandleKind kind) {
  switch (kind) {
    case HandleKind::context: return "vkp_context";
    case HandleKind::buffer: return "vkp_buffer";
    case HandleKind::decode_plan: return "vkp_decode_plan";
    case HandleKind::attention_plan: return "vkp_attention_plan";
    case HandleKind::mla_plan: return "vkp_mla_plan";
    case HandleKind::block_manager: return "vkp_block_manager";
    case HandleKind::kv_cache: return "vkp_kv_cache";
    case HandleKind::streaming_read: return "vkp_streaming_read";
    case HandleKind::pipeline_set: return "vkp_pipeline_set";
  }
  return "handle";
}
}  // namespace

void clear_error() noexcept { last_error[0] = '\0'; }
const char* last_error_message() noexcept { return last_error; }

vkp_status set_error(vkp_status status, const char* function, const char* message) noexcept {
  std::snprintf(last_error, sizeof(last_error), "%s: %s", function, message);
  return status;
}

vkp_status status_of(ErrorCode code) noexcept {
  switch (code) {
    case ErrorCode::invalid_argument: return VKP_ERROR_INVALID_ARGUMENT;
    case ErrorCode::unsupported: return VKP_ERROR_UNSUPPORTED;
    case ErrorCode::out_of_memory: return VKP_ERROR_OUT_OF_MEMORY;
    case ErrorCode::device_error: return VKP_ERROR_DEVICE;
    case ErrorCode::io_error: return VKP_ERROR_IO;
    case ErrorCode::internal: return VKP_ERROR_INTERNAL;
  }
  return VKP_ERROR_INTERNAL;
}

void register_handle(HandleKind kind, const void* handle, const void* parent) {
  Handles& h = handles();
  std::lock_guard lock(h.mutex);
  h.live[{kind, handle}] = parent;
}

bool unregister_handle(HandleKind kind, const void* handle) noexcept {
  Handles& h = handles();
  std::lock_guard lock(h.mutex);
  return h.live.erase({kind, handle}) == 1;
}

bool handle_is_live(HandleKind kind, const void* handle) noexcept {
  Handles& h = handles();
  std::shared_lock lock(h.mutex);
  return h.live.count({kind, handle}) == 1;
}

std::string live_children(const void* context) {
  std::map<HandleKind, int> counts;
  {
    Handles& h = handles();
    std::shared_lock lock(h.mutex);
    for (const auto& [key, parent] : h.live)
      if (parent == context) ++counts[key.first];
  }
  std::string text;
  for (const auto& [kind, n] : counts) text += fmt::format("{}{} {}", text.empty() ? "" : ", ", n, kind_name(kind));
  return text;
}

void refuse_dead_handle(const char* name, const char* type, const void* handle) {
  throw Error(ErrorCode::invalid_argument,
              fmt::format("{}: {} is not a live {} (destroyed, or not made by vkpaged)", name, handle, type));
}

// The two enums are one list; the C header spells it without C++.
static_assert(int(VKP_ERROR_INVALID_ARGUMENT) == int(ErrorCode::invalid_argument) &&
              int(VKP_ERROR_UNSUPPORTED) == int(ErrorCode::unsupported) &&
              int(VKP_ERROR_OUT_OF_MEMORY) == int(ErrorCode::out_of_memory) &&
              int(VKP_ERROR_DEVICE) == int(ErrorCode::device_error) && int(VKP_ERROR_IO) == int(ErrorCode::io_error) &&
              int(VKP_ERROR_INTERNAL) == int(ErrorCode::internal));

}  // namespace vkpaged::c_api
