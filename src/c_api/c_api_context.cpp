// SPDX-License-Identifier: Apache-2.0
// C API: devices, contexts (own or adopted device), buffers, uploads and run-and-wait.
#include <fmt/format.h>

#include <algorithm>
#include <memory>
#include <type_traits>

#include "c_api/c_api_calls.hpp"
#include "c_api/c_api_convert.hpp"
#include "c_api/c_api_guard.hpp"
#include "c_api/c_api_handles.hpp"
#include "vkpaged/vkpaged.h"

using namespace vkpaged;
using namespace vkpaged::c_api;

namespace {

// Thrown through Context::run_and_wait when the caller's record callback fails, so that
// nothing is submitted; caught before guarded() sees it.
struct RecordAbandoned {};

// A callback to record with, and what it is given.
struct RecordCallback {
  vkp_record_fn fn = nullptr;
  void* user_data = nullptr;
};

// `before`, where given, is recorded untimed ahead of `record`: vkp_run_and_time_after.
vkp_status run_with_callback(const char* function, vkp_context* context, RecordCallback record, bool timed,
                             double* elapsed_ns, const RecordCallback* before = nullptr) {
  vkp_status from_callback = VKP_OK;
  const vkp_status status = guarded(function, [&] {
    auto& ctx = require(context, "context")->context;
    if (before) require(before->fn, "before");
    require(record.fn, "record");
    if (timed) require(elapsed_ns, "elapsed_ns");
    auto or_abandon = [&](RecordCallback callback) {
      return [&from_callback, callback](VkCommandBuffer cmd) {
        from_callback = callback.fn(cmd, callback.user_data);
        if (from_callback != VKP_OK) throw RecordAbandoned{};
      };
    };
    try {
      if (before)
        *elapsed_ns = ctx.run_and_time(or_abandon(record), or_abandon(*before));
      else if (timed)
        *elapsed_ns = ctx.run_and_time(or_abandon(record));
      else
        ctx.run_and_wait(or_abandon(record));
    } catch (const RecordAbandoned&) {
    }
  });
  if (status != VKP_OK || from_callback == VKP_OK) return status;
  // Keep the message of the call that failed inside the callback, where there is one.
  if (vkp_last_error()[0] == '\0') set_error(from_callback, function, "the record callback returned an error");
  return from_callback;
}

// The device side of vkp_upload / vkp_download and the caller's host memory, checked in that
// order; a copy of 0 bytes needs neither memory nor a buffer.
BufferView transfer_view(const vkp_buffer_view* view, const char* view_name, const void* host, const char* host_name,
                         size_t bytes) {
  require(view, view_name);
  if (bytes > 0) require(host, host_name);
  if (bytes > 0 && view->buffer == VK_NULL_HANDLE)
    throw Error(ErrorCode::invalid_argument, std::string(view_name) + ": no buffer");
  return to_cpp(*view);
}

}  // namespace

extern "C" {

VKP_API vkp_status VKP_CALL vkp_list_devices(vkp_device_info* infos, uint32_t* count, uint32_t* default_index) {
  return guarded("vkp_list_devices", [&] {
    require(count, "count");
    const StructArrayOut<vkp_device_info> out(infos, infos != nullptr ? *count : 0, "infos");
    const DeviceList list = list_devices();
    if (default_index != nullptr) *default_index = list.default_index;
    if (infos == nullptr) {
      *count = uint32_t(list.devices.size());
      return;
    }
    const uint32_t n = std::min<uint32_t>(*count, uint32_t(list.devices.size()));
    for (uint32_t i = 0; i < n; ++i) out.set(i, to_c(list.devices[i]));
    *count = n;
  });
}

VKP_API vkp_status VKP_CALL vkp_context_create(const vkp_context_options* options, vkp_context** out) {
  return guarded("vkp_context_create", [&] {
    require(out, "out");
    *out = nullptr;
    const ContextOptions o = to_cpp(read_optional_struct(options, "options"), "options");
    *out = adopt(new vkp_context{Context(o)});
  });
}

VKP_API vkp_status VKP_CALL vkp_context_create_external(const vkp_external_device* external, vkp_context** out) {
  return guarded("vkp_context_create_external", [&] {
    require(out, "out");
    *out = nullptr;
    const ExternalDevice e = to_cpp(read_struct(external, "external"), "external");
    *out = adopt(new vkp_context{Context(e)});
  });
}

// A context with live buffers, plans, caches or reads is not destroyed (their Vulkan objects
// would outlive its device): the call says which, and the caller destroys them first.
VKP_API void VKP_CALL vkp_context_destroy(vkp_context* context) {
  if (context != nullptr && handle_is_live(HandleKind::context, context)) {
    const std::string children = live_children(context);
    if (!children.empty()) {
      guarded("vkp_context_destroy", [&] {
        throw Error(ErrorCode::invalid_argument,
                    "context: " + children + " made on it still live; destroy them first (nothing destroyed)");
      });
      return;
    }
  }
  destroy_handle("vkp_context_destroy", context, "context");
}

VKP_GETTER(vkp_context_device_info, vkp_context, context, vkp_device_info, to_c(h.context.device_info()))

VKP_API vkp_status VKP_CALL vkp_context_cooperative_matrix_shapes(const vkp_context* context, uint32_t* count,
                                                                  vkp_cooperative_matrix_shape* shapes) {
  return guarded("vkp_context_cooperative_matrix_shapes", [&] {
    const auto& ctx = require(context, "context")->context;
    require(count, "count");
    const StructArrayOut<vkp_cooperative_matrix_shape> out(shapes, shapes != nullptr ? *count : 0, "shapes");
    const auto& all = ctx.device_info().cooperative_matrix_khr_shapes;
    if (shapes == nullptr) {
      *count = uint32_t(all.size());
      return;
    }
    const uint32_t n = std::min<uint32_t>(*count, uint32_t(all.size()));
    for (uint32_t i = 0; i < n; ++i) out.set(i, to_c(all[i]));
    *count = n;
  });
}

// vkp_vulkan_handles' fields: each the Context getter of its name.
#define VKP_VULKAN_HANDLES_FIELDS(X) X(instance) X(physical_device) X(device) X(queue) X(queue_family)
VKP_INFO_GETTER(vkp_context_vulkan_handles, vkp_context, context, vkp_vulkan_handles, context, VKP_VULKAN_HANDLES_FIELDS)

VKP_API vkp_status VKP_CALL vkp_context_validation_message_count(const vkp_context* context, uint32_t* out) {
  return guarded("vkp_context_validation_message_count", [&] {
    auto* result = require(out, "out");
    *result = require(context, "context")->context.validation_message_count();
  });
}

VKP_API vkp_status VKP_CALL vkp_run_and_wait(vkp_context* context, vkp_record_fn record, void* user_data) {
  return run_with_callback("vkp_run_and_wait", context, {record, user_data}, false, nullptr);
}

VKP_API vkp_status VKP_CALL vkp_run_and_time(vkp_context* context, vkp_record_fn record, void* user_data, double* elapsed_ns) {
  return run_with_callback("vkp_run_and_time", context, {record, user_data}, true, elapsed_ns);
}

VKP_API vkp_status VKP_CALL vkp_run_and_time_after(vkp_context* context, vkp_record_fn before, void* before_user_data,
                                          vkp_record_fn record, void* user_data, double* elapsed_ns) {
  const RecordCallback untimed{before, before_user_data};
  return run_with_callback("vkp_run_and_time_after", context, {record, user_data}, true, elapsed_ns, &untimed);
}

VKP_API vkp_status VKP_CALL vkp_record_compute_barrier(const vkp_context* context, VkCommandBuffer cmd) {
  return record_with("vkp_record_compute_barrier", context, "context", cmd, [&](const vkp_context& c) {
    record_compute_barrier(c.context, cmd);
  });
}

// ---- buffers ----

VKP_API vkp_status VKP_CALL vkp_buffer_create(vkp_context* context, size_t bytes, vkp_memory_kind kind,
                                              vkp_buffer** out) {
  return guarded("vkp_buffer_create", [&] {
    require(out, "out");
    *out = nullptr;
    auto& ctx = require(context, "context")->context;
    if (kind != VKP_MEMORY_DEVICE && kind != VKP_MEMORY_HOST_VISIBLE)
      throw Error(ErrorCode::invalid_argument,
                  fmt::format("kind: {} is not a vkp_memory_kind", std::underlying_type_t<vkp_memory_kind>(kind)));
    auto buffer = std::make_unique<vkp_buffer>();
    buffer->buffer = ctx.create_buffer(bytes, kind == VKP_MEMORY_DEVICE ? MemoryKind::device : MemoryKind::host_visible);
    *out = adopt(buffer.release(), context);
  });
}

VKP_API void VKP_CALL vkp_buffer_destroy(vkp_buffer* buffer) { destroy_handle("vkp_buffer_destroy", buffer, "buffer"); }

VKP_API VkBuffer VKP_CALL vkp_buffer_handle(const vkp_buffer* buffer) {
  return guarded_value("vkp_buffer_handle", VkBuffer(VK_NULL_HANDLE),
                       [&] { return require(buffer, "buffer")->buffer.handle(); });
}

VKP_API size_t VKP_CALL vkp_buffer_size(const vkp_buffer* buffer) {
  return guarded_value("vkp_buffer_size", size_t(0), [&] { return require(buffer, "buffer")->buffer.size(); });
}

VKP_API void* VKP_CALL vkp_buffer_mapped(const vkp_buffer* buffer) {
  return guarded_value("vkp_buffer_mapped", static_cast<void*>(nullptr),
                       [&] { return require(buffer, "buffer")->buffer.mapped(); });
}

VKP_API vkp_buffer_view VKP_CALL vkp_buffer_view_of(const vkp_buffer* buffer, VkDeviceSize offset, VkDeviceSize bytes) {
  return guarded_value("vkp_buffer_view_of", vkp_buffer_view{VK_NULL_HANDLE, 0, 0},
                       [&] { return to_c(require(buffer, "buffer")->buffer.view(offset, bytes)); });
}

VKP_API vkp_status VKP_CALL vkp_buffer_tensor(const vkp_buffer* buffer, vkp_dtype dtype, const int64_t* shape,
                                              int32_t rank, VkDeviceSize offset, vkp_tensor_view* out) {
  return guarded("vkp_buffer_tensor", [&] {
    const auto& b = require(buffer, "buffer")->buffer;
    require(out, "out");
    if (rank > 0) require(shape, "shape");
    *out = to_c(b.tensor(to_dtype(dtype, "dtype"), to_shape(shape, rank, "shape"), offset));
  });
}

VKP_API vkp_status VKP_CALL vkp_upload(vkp_context* context, const vkp_buffer_view* dst, const void* src, size_t bytes) {
  return guarded("vkp_upload", [&] {
    auto& ctx = require(context, "context")->context;
    ctx.upload(transfer_view(dst, "dst", src, "src", bytes), src, bytes);
  });
}

VKP_API vkp_status VKP_CALL vkp_download(vkp_context* context, const vkp_buffer_view* src, void* dst, size_t bytes) {
  return guarded("vkp_download", [&] {
    auto& ctx = require(context, "context")->context;
    ctx.download(transfer_view(src, "src", dst, "dst", bytes), dst, bytes);
  });
}

}  // extern "C"
