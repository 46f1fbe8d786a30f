// SPDX-License-Identifier: Apache-2.0
// The C API's general surface: version, status codes and the error translation, dtypes,
// NULL handles, devices, contexts (own and adopted), buffers, run-and-wait callbacks.
// The operators through the C API: test_c_api_decode.cpp, test_c_api_cache_ops.cpp,
// test_c_api_block_manager.cpp.
#include <cstring>
#include <new>
#include <stdexcept>
#include <string>
#include <thread>

#include "c_api/c_api_guard.hpp"
#include "c_api/c_api_handles.hpp"
#include "c_api/c_api_test_helpers.hpp"
#include "support/scoped_env.hpp"
#include "vkpaged/error.hpp"

namespace vkpaged::test {
namespace {

using namespace c_api_helpers;

class CApiTest : public GpuTest {};

using OwnedContext = std::unique_ptr<vkp_context, decltype(&vkp_context_destroy)>;

// A second context on the default device, with the tests' validation setting; `disable_subgroup_arithmetic`
// as asked.
OwnedContext create_own_context(bool disable_subgroup_arithmetic = false) {
  vkp_context_options options;
  vkp_context_options_init(&options);
  const std::string index = std::to_string(list_devices().default_index);
  options.device = index.c_str();
  options.validation = validation_wanted() ? VKP_TRUE : VKP_FALSE;
  options.disable_subgroup_arithmetic = disable_subgroup_arithmetic ? VKP_TRUE : VKP_FALSE;
  options.read_environment = VKP_TRUE;  // as the tests' other contexts (VKPAGED_VALIDATION=sync...)
  vkp_context* own = nullptr;
  const vkp_status status = vkp_context_create(&options, &own);
  EXPECT_EQ(status, VKP_OK) << vkp_last_error();
  return OwnedContext(own, &vkp_context_destroy);
}

// The header's macros are the CMake project version (which the build passes in as
// VKPAGED_PROJECT_VERSION), the library answers the same, and the shared library's SONAME
// follows docs/api.md's rule: libvkpaged.so.0.<minor> while the major version is 0, else
// libvkpaged.so.<major>.
TEST_F(CApiTest, VersionMatchesTheProjectAndTheLibrary) {
  const std::string header = std::to_string(VKPAGED_VERSION_MAJOR) + "." + std::to_string(VKPAGED_VERSION_MINOR) + "." +
                             std::to_string(VKPAGED_VERSION_PATCH);
  EXPECT_EQ(header, VKPAGED_PROJECT_VERSION) << "vkpaged.h's VKPAGED_VERSION_* differ from CMakeLists.txt's project()";
  EXPECT_EQ(vkp_version(), uint32_t(VKPAGED_VERSION));
  EXPECT_EQ(std::string(vkp_version_string()), header);
  const std::string soname = VKPAGED_VERSION_MAJOR == 0 ? "libvkpaged.so.0." + std::to_string(VKPAGED_VERSION_MINOR)
                                                        : "libvkpaged.so." + std::to_string(VKPAGED_VERSION_MAJOR);
  EXPECT_EQ(std::string(VKPAGED_SONAME), soname);
}

TEST_F(CApiTest, StatusCodesMatchTheErrorCodes) {
  EXPECT_STREQ(vkp_status_name(VKP_OK), "ok");
  for (int code = 1; code <= 6; ++code)
    EXPECT_STREQ(vkp_status_name(vkp_status(code)), to_string(ErrorCode(code)));
  EXPECT_STREQ(vkp_status_name(vkp_status(99)), "unknown");
}

// Whatever the body throws, the caller gets a status and a message, never an exception.
TEST_F(CApiTest, TranslatesEveryExceptionIntoAStatus) {
  using vkpaged::c_api::guarded;
  EXPECT_EQ(guarded("f", [] { throw Error(ErrorCode::unsupported, "no such thing"); }), VKP_ERROR_UNSUPPORTED);
  EXPECT_STREQ(vkp_last_error(), "f: no such thing");
  EXPECT_EQ(guarded("f", [] { throw Error(ErrorCode::device_error, "lost"); }), VKP_ERROR_DEVICE);
  EXPECT_EQ(guarded("f", [] { throw Error(ErrorCode::io_error, "disk"); }), VKP_ERROR_IO);
  EXPECT_EQ(guarded("g", [] { throw std::bad_alloc(); }), VKP_ERROR_OUT_OF_MEMORY);
  EXPECT_STREQ(vkp_last_error(), "g: out of host memory");
  EXPECT_EQ(guarded("h", [] { throw std::logic_error("oops"); }), VKP_ERROR_INTERNAL);
  EXPECT_STREQ(vkp_last_error(), "h: oops");
  EXPECT_EQ(guarded("i", [] { throw 42; }), VKP_ERROR_INTERNAL);
  EXPECT_STREQ(vkp_last_error(), "i: unknown exception");
  // A long message is truncated, not overflowed.
  EXPECT_EQ(guarded("j", [] { throw Error(ErrorCode::internal, std::string(5000, 'x')); }), VKP_ERROR_INTERNAL);
  EXPECT_LT(std::string(vkp_last_error()).size(), 1024u);
  // The message is per thread, and a successful call clears it.
  std::string other = "unset";
  std::thread([&] { other = vkp_last_error(); }).join();
  EXPECT_EQ(other, "");
  EXPECT_EQ(guarded("k", [] {}), VKP_OK);
  EXPECT_STREQ(vkp_last_error(), "");
}

TEST_F(CApiTest, DtypesAndConversionsMatchTheCppApi) {
  for (int t = 0; t <= 8; ++t) {
    EXPECT_EQ(vkp_dtype_size(vkp_dtype(t)), dtype_size(DType(t)));
    EXPECT_EQ(std::string(vkp_dtype_name(vkp_dtype(t))), dtype_name(DType(t)));
    vkp_dtype parsed = VKP_DTYPE_U8;
    EXPECT_VKP_OK(vkp_dtype_parse(vkp_dtype_name(vkp_dtype(t)), &parsed));
    EXPECT_EQ(parsed, vkp_dtype(t));
  }
  EXPECT_EQ(vkp_dtype_size(vkp_dtype(17)), 0u);
  EXPECT_STREQ(vkp_dtype_name(vkp_dtype(17)), "unknown");
  vkp_dtype parsed;
  expect_refused(vkp_dtype_parse("f17", &parsed), "\"f17\"");
  EXPECT_EQ(vkp_dtype_max(VKP_DTYPE_FP8_E4M3), 448.0f);
  for (float v : {0.0f, -1.5f, 3.14159f, 1e-6f, 500.0f, 70000.0f}) {
    EXPECT_EQ(vkp_f32_to_f16(v), f32_to_f16(v));
    EXPECT_EQ(vkp_f32_to_bf16(v), f32_to_bf16(v));
    EXPECT_EQ(vkp_f32_to_fp8_e4m3(v), f32_to_fp8_e4m3(v));
    EXPECT_EQ(vkp_f32_to_fp8_e5m2(v), f32_to_fp8_e5m2(v));
  }
  EXPECT_EQ(vkp_f16_to_f32(0x3c00), 1.0f);
  EXPECT_EQ(vkp_bf16_to_f32(0x3f80), 1.0f);
  EXPECT_EQ(vkp_fp8_e4m3_to_f32(0x7e), 448.0f);
  EXPECT_EQ(vkp_fp8_e5m2_to_f32(0x7b), 57344.0f);
}

// Every call that takes a handle refuses NULL, naming it; destroy(NULL) and accessors are safe.
TEST_F(CApiTest, RefusesNullHandles) {
  VkCommandBuffer cmd = reinterpret_cast<VkCommandBuffer>(uintptr_t(1));  // never reached
  vkp_device_info info;
  vkp_device_info_init(&info);
  vkp_buffer* buffer = nullptr;
  vkp_decode_plan* plan = nullptr;
  vkp_decode_shape shape;
  vkp_decode_shape_init(&shape);
  vkp_decode_views views;
  vkp_decode_views_init(&views);
  vkp_buffer_view view{};
  uint32_t u = 0;
  int32_t i = 0;
  vkp_bool32 b = VKP_FALSE;
  expect_refused(vkp_context_create(nullptr, nullptr), "out is NULL");
  expect_refused(vkp_context_create_external(nullptr, reinterpret_cast<vkp_context**>(&buffer)), "external is NULL");
  expect_refused(vkp_context_device_info(nullptr, &info), "context is NULL");
  expect_refused(vkp_context_validation_message_count(nullptr, &u), "context is NULL");
  expect_refused(vkp_buffer_create(nullptr, 16, VKP_MEMORY_DEVICE, &buffer), "context is NULL");
  EXPECT_EQ(buffer, nullptr);
  expect_refused(vkp_upload(nullptr, &view, &u, 4), "context is NULL");
  expect_refused(vkp_download(c_context(), nullptr, &u, 4), "src is NULL");
  expect_refused(vkp_run_and_wait(nullptr, nullptr, nullptr), "context is NULL");
  expect_refused(vkp_run_and_wait(c_context(), nullptr, nullptr), "record is NULL");
  expect_refused(vkp_record_compute_barrier(c_context(), VK_NULL_HANDLE), "cmd is NULL");
  expect_refused(vkp_decode_plan_create(nullptr, &shape, nullptr, &plan), "context is NULL");
  expect_refused(vkp_decode_plan_create(c_context(), nullptr, nullptr, &plan), "shape is NULL");
  expect_refused(vkp_record_decode(c_context(), cmd, nullptr, &views, nullptr), "plan is NULL");
  expect_refused(vkp_record_decode(c_context(), VK_NULL_HANDLE, nullptr, &views, nullptr), "cmd is NULL");
  expect_refused(vkp_decode_plan_info_get(nullptr, nullptr), "plan is NULL");
  expect_refused(vkp_decode_attention(nullptr, nullptr, nullptr, nullptr, nullptr, 0, nullptr, 0), "context is NULL");
  expect_refused(vkp_reference_decode_attention(nullptr, nullptr, nullptr, nullptr, 0, nullptr, 0), "inputs is NULL");
  expect_refused(vkp_attention_plan_create(nullptr, nullptr, nullptr, 0, nullptr, nullptr), "out is NULL");
  expect_refused(vkp_attention_plan_info_get(nullptr, nullptr), "plan is NULL");
  expect_refused(vkp_record_attention(c_context(), cmd, nullptr, nullptr, nullptr), "plan is NULL");
  expect_refused(vkp_batch_attention(nullptr, nullptr, nullptr, nullptr, nullptr, 0, nullptr, 0), "context is NULL");
  expect_refused(vkp_record_rotary_embedding(nullptr, cmd, nullptr), "context is NULL");
  expect_refused(vkp_kv_cache_record_reshape_and_cache(nullptr, cmd, 0, nullptr, nullptr, nullptr), "cache is NULL");
  expect_refused(vkp_record_reshape_and_cache(nullptr, cmd, nullptr, nullptr), "context is NULL");
  expect_refused(vkp_record_copy_blocks(c_context(), cmd, nullptr, 1, nullptr, 0), "layers is NULL");
  expect_refused(vkp_record_gather(c_context(), cmd, nullptr, nullptr), "views is NULL");
  expect_refused(vkp_record_absmax(c_context(), cmd, nullptr, &view), "x is NULL");
  expect_refused(vkp_record_fill_random(nullptr, cmd, nullptr, 0), "context is NULL");
  expect_refused(vkp_block_manager_block_size(nullptr, &i), "manager is NULL");
  expect_refused(vkp_block_manager_add_sequence(nullptr, 1, nullptr, 0, nullptr), "manager is NULL");
  expect_refused(vkp_block_manager_contains(nullptr, 1, &b), "manager is NULL");
  expect_refused(vkp_block_manager_create(4, 16, nullptr, nullptr), "out is NULL");
  expect_refused(vkp_record_merge_attention(nullptr, cmd, nullptr), "context is NULL");
  expect_refused(vkp_merge_attention(c_context(), nullptr, nullptr, nullptr, nullptr, nullptr, nullptr), "a.output is NULL");
  expect_refused(vkp_kv_cache_info_get(nullptr, nullptr), "cache is NULL");
  expect_refused(vkp_kv_cache_record_copy_blocks(nullptr, cmd, nullptr, 0), "cache is NULL");
  expect_refused(vkp_kv_cache_create(nullptr, nullptr, nullptr, nullptr), "out is NULL");
  vkp_context_destroy(nullptr);
  vkp_buffer_destroy(nullptr);
  vkp_decode_plan_destroy(nullptr);
  vkp_attention_plan_destroy(nullptr);
  vkp_block_manager_destroy(nullptr);
  vkp_kv_cache_destroy(nullptr);
  EXPECT_EQ(vkp_buffer_handle(nullptr), VK_NULL_HANDLE);
  EXPECT_EQ(vkp_buffer_size(nullptr), 0u);
  EXPECT_EQ(vkp_buffer_mapped(nullptr), nullptr);
  EXPECT_EQ(vkp_decode_plan_scratch_bytes(nullptr), 0u);
  EXPECT_STREQ(vkp_decode_plan_describe(nullptr), "");
  EXPECT_STREQ(vkp_attention_plan_describe(nullptr), "");
}

TEST_F(CApiTest, ListsDevicesAndDescribesTheAdoptedContext) {
  uint32_t count = 0, default_index = 99;
  ASSERT_VKP_OK(vkp_list_devices(nullptr, &count, &default_index));
  const DeviceList cpp = list_devices();
  ASSERT_EQ(count, cpp.devices.size());
  EXPECT_EQ(default_index, cpp.default_index);
  std::vector<vkp_device_info> infos(count + 1);
  for (auto& entry : infos) vkp_device_info_init(&entry);
  count = uint32_t(infos.size());
  ASSERT_VKP_OK(vkp_list_devices(infos.data(), &count, nullptr));
  ASSERT_EQ(count, cpp.devices.size());
  for (uint32_t i = 0; i < count; ++i) {
    EXPECT_EQ(std::string(infos[i].name), cpp.devices[i].name);
    EXPECT_EQ(std::string(infos[i].type), cpp.devices[i].type);
    EXPECT_EQ(infos[i].subgroup_size, cpp.devices[i].subgroup_size);
    EXPECT_EQ(infos[i].max_storage_buffer_range, cpp.devices[i].max_storage_buffer_range);
    EXPECT_EQ(infos[i].subgroup_shuffle, vkp_bool32(cpp.devices[i].subgroup_shuffle));
    EXPECT_EQ(infos[i].device_local_bytes, cpp.devices[i].device_local_bytes);
    EXPECT_EQ(infos[i].max_memory_allocation_size, cpp.devices[i].max_memory_allocation_size);
    EXPECT_EQ(infos[i].cooperative_matrix_khr, vkp_bool32(cpp.devices[i].cooperative_matrix_khr));
    EXPECT_EQ(infos[i].vulkan_memory_model, vkp_bool32(cpp.devices[i].vulkan_memory_model));
    EXPECT_EQ(infos[i].vulkan_memory_model_device_scope, vkp_bool32(cpp.devices[i].vulkan_memory_model_device_scope));
    // Vulkan 1.1 guarantees at least 2^30 bytes.
    EXPECT_GE(infos[i].max_memory_allocation_size, uint64_t(1) << 30);
  }

  vkp_device_info info;
  vkp_device_info_init(&info);
  ASSERT_VKP_OK(vkp_context_device_info(c_context(), &info));
  EXPECT_EQ(std::string(info.name), ctx().device_info().name);
  EXPECT_EQ(info.push_descriptor, VKP_TRUE);
  // The adopted context's own answers (KHR only where the test helper said the engine enabled it).
  const DeviceInfo& adopted = c_context()->context.device_info();
  EXPECT_EQ(info.cooperative_matrix_khr, vkp_bool32(adopted.cooperative_matrix_khr));
  EXPECT_EQ(info.vulkan_memory_model, vkp_bool32(adopted.vulkan_memory_model));
  EXPECT_EQ(info.vulkan_memory_model_device_scope, vkp_bool32(adopted.vulkan_memory_model_device_scope));
  EXPECT_EQ(info.cooperative_matrix, vkp_bool32(adopted.cooperative_matrix));

  // The KHR matrix shapes, Vulkan style: the count, then as many as asked for.
  uint32_t shape_count = 99;
  ASSERT_VKP_OK(vkp_context_cooperative_matrix_shapes(c_context(), &shape_count, nullptr));
  const auto& shapes = adopted.cooperative_matrix_khr_shapes;
  ASSERT_EQ(shape_count, shapes.size());
  std::vector<vkp_cooperative_matrix_shape> c_shapes(shapes.size() + 1);
  for (auto& entry : c_shapes) vkp_cooperative_matrix_shape_init(&entry);
  shape_count = uint32_t(c_shapes.size());
  ASSERT_VKP_OK(vkp_context_cooperative_matrix_shapes(c_context(), &shape_count, c_shapes.data()));
  ASSERT_EQ(shape_count, shapes.size());
  for (uint32_t i = 0; i < shape_count; ++i) {
    SCOPED_TRACE(to_string(shapes[i]));
    EXPECT_EQ(c_shapes[i].m, shapes[i].m);
    EXPECT_EQ(c_shapes[i].n, shapes[i].n);
    EXPECT_EQ(c_shapes[i].k, shapes[i].k);
    EXPECT_EQ(c_shapes[i].a_type, shapes[i].a_type);
    EXPECT_EQ(c_shapes[i].b_type, shapes[i].b_type);
    EXPECT_EQ(c_shapes[i].c_type, shapes[i].c_type);
    EXPECT_EQ(c_shapes[i].result_type, shapes[i].result_type);
    EXPECT_EQ(c_shapes[i].saturating_accumulation, vkp_bool32(shapes[i].saturating_accumulation));
    EXPECT_EQ(c_shapes[i].scope, shapes[i].scope);
  }
  if (!shapes.empty()) {  // fewer asked for than there are: that many written, the rest untouched
    shape_count = 1;
    std::vector<vkp_cooperative_matrix_shape> one(2);
    for (auto& entry : one) vkp_cooperative_matrix_shape_init(&entry);
    ASSERT_VKP_OK(vkp_context_cooperative_matrix_shapes(c_context(), &shape_count, one.data()));
    EXPECT_EQ(shape_count, 1u);
    EXPECT_EQ(one[0].m, shapes[0].m);
    EXPECT_EQ(one[1].m, 0u);
  }
  vkp_vulkan_handles handles;
  vkp_vulkan_handles_init(&handles);
  ASSERT_VKP_OK(vkp_context_vulkan_handles(c_context(), &handles));
  EXPECT_EQ(handles.instance, ctx().instance());
  EXPECT_EQ(handles.device, ctx().device());
  EXPECT_EQ(handles.queue, ctx().queue());
  EXPECT_EQ(handles.queue_family, ctx().queue_family());
}

// A context on its own device, with options; a decode on it matches the reference.
TEST_F(CApiTest, CreatesItsOwnContextWithOptions) {
  const OwnedContext owner = create_own_context(true);
  vkp_context* own = owner.get();
  ASSERT_NE(own, nullptr);
  vkp_device_info info;
  vkp_device_info_init(&info);
  ASSERT_VKP_OK(vkp_context_device_info(own, &info));
  EXPECT_EQ(info.subgroup_arithmetic, VKP_FALSE);
  vkp_vulkan_handles handles;
  vkp_vulkan_handles_init(&handles);
  ASSERT_VKP_OK(vkp_context_vulkan_handles(own, &handles));
  EXPECT_NE(handles.device, ctx().device());

  // 64 floats through a host-visible buffer: upload, download and the mapping agree.
  std::vector<float> values(64), back(64);
  for (size_t i = 0; i < values.size(); ++i) values[i] = float(i) * 0.5f - 3.0f;
  vkp_buffer* raw = nullptr;
  ASSERT_VKP_OK(vkp_buffer_create(own, 256, VKP_MEMORY_HOST_VISIBLE, &raw));
  BufferPtr buffer(raw, &vkp_buffer_destroy);
  EXPECT_EQ(vkp_buffer_size(raw), 256u);
  ASSERT_NE(vkp_buffer_mapped(raw), nullptr);
  const vkp_buffer_view view = vkp_buffer_view_of(raw, 0, 256);
  ASSERT_VKP_OK(vkp_upload(own, &view, values.data(), 256));
  EXPECT_EQ(std::memcmp(vkp_buffer_mapped(raw), values.data(), 256), 0);
  ASSERT_VKP_OK(vkp_download(own, &view, back.data(), 256));
  EXPECT_EQ(back, values);
  expect_refused(vkp_upload(own, &view, values.data(), 260), "260 bytes");
  buffer.reset();

  uint32_t messages = 99;
  ASSERT_VKP_OK(vkp_context_validation_message_count(own, &messages));
  EXPECT_EQ(messages, 0u);
  EXPECT_EQ(own->context.impl().fence_timeout_ms, 60000u) << "the default";
}

// The fence timeout and the features an engine enabled reach the context they configure.
TEST_F(CApiTest, ContextOptionsAndAdoptedFeaturesReachTheContext) {
  vkp_context_options options;
  vkp_context_options_init(&options);
  const std::string index = std::to_string(list_devices().default_index);
  options.device = index.c_str();
  options.validation = validation_wanted() ? VKP_TRUE : VKP_FALSE;
  options.read_environment = VKP_TRUE;
  options.fence_timeout_ms = 1234;
  vkp_context* raw = nullptr;
  ASSERT_VKP_OK(vkp_context_create(&options, &raw));
  const OwnedContext own(raw, &vkp_context_destroy);
  EXPECT_EQ(raw->context.impl().fence_timeout_ms, 1234u);

  vkp_external_device ext = shared_device();
  ext.fence_timeout_ms = 0;  // no limit
  ASSERT_VKP_OK(vkp_context_create_external(&ext, &raw));
  const OwnedContext adopted(raw, &vkp_context_destroy);
  EXPECT_EQ(raw->context.impl().fence_timeout_ms, 0u);
  // Features the engine did not say it enabled stay off, whatever the device has.
  EXPECT_FALSE(raw->context.impl().vulkan_memory_model);
  EXPECT_FALSE(raw->context.impl().cooperative_matrix_khr);
  // The helper's adopted context was told what the shared context enabled, and has it.
  const detail::ContextImpl& shared = ctx().impl();
  const detail::ContextImpl& helper = c_context()->context.impl();
  EXPECT_EQ(helper.vulkan_memory_model, shared.vulkan_memory_model);
  EXPECT_EQ(helper.vulkan_memory_model_device_scope, shared.vulkan_memory_model_device_scope);
  EXPECT_EQ(helper.cooperative_matrix_khr, shared.cooperative_matrix_khr);
  EXPECT_EQ(helper.cooperative_matrix, shared.cooperative_matrix);
  // The memory model without its device scope is refused where the device has the model.
  if (ctx().device_info().vulkan_memory_model) {
    ext.vulkan_memory_model = VKP_TRUE;
    ext.vulkan_memory_model_device_scope = VKP_FALSE;
    vkp_context* refused = nullptr;
    expect_refused(vkp_context_create_external(&ext, &refused), "vulkan_memory_model_device_scope");
    EXPECT_EQ(refused, nullptr);
  }
}

// vkp_context_options.read_environment: VKPAGED_DEVICE (like vkpaged's other variables) reaches
// a context only when it asks (docs/environment.md).
TEST_F(CApiTest, ReadsTheEnvironmentOnlyWhenAsked) {
  const ScopedEnv device("VKPAGED_DEVICE", "no such device at all");
  vkp_context_options options;
  vkp_context_options_init(&options);
  options.validation = validation_wanted() ? VKP_TRUE : VKP_FALSE;
  vkp_context* raw = nullptr;
  ASSERT_VKP_OK(vkp_context_create(&options, &raw));
  const OwnedContext quiet(raw, &vkp_context_destroy);
  EXPECT_FALSE(raw->context.impl().read_environment);
  options.read_environment = VKP_TRUE;
  vkp_context* refused = nullptr;
  expect_refused(vkp_context_create(&options, &refused), "VKPAGED_DEVICE: no Vulkan device name contains");
  EXPECT_EQ(refused, nullptr);
}

TEST_F(CApiTest, RefusesBadContextArguments) {
  vkp_context_options options;
  vkp_context_options_init(&options);
  options.device = "no such device at all";
  vkp_context* c = reinterpret_cast<vkp_context*>(uintptr_t(8));
  expect_refused(vkp_context_create(&options, &c), "no such device at all");
  EXPECT_EQ(c, nullptr);
  vkp_external_device ext;
  vkp_external_device_init(&ext);
  ext.instance = ctx().instance();
  ext.physical_device = ctx().physical_device();
  expect_refused(vkp_context_create_external(&ext, &c), "device is null");
  ext.device = ctx().device();
  ext.queue_family = 1000;
  expect_refused(vkp_context_create_external(&ext, &c), "queue_family 1000");
  vkp_buffer* b = nullptr;
  expect_refused(vkp_buffer_create(c_context(), 16, vkp_memory_kind(7), &b), "kind: 7");
  ASSERT_VKP_OK(vkp_buffer_create(c_context(), 64, VKP_MEMORY_DEVICE, &b));
  BufferPtr owner(b, &vkp_buffer_destroy);
  EXPECT_EQ(vkp_buffer_mapped(b), nullptr);
  vkp_tensor_view t;
  const int64_t dims[] = {2, -3};
  expect_refused(vkp_buffer_tensor(b, VKP_DTYPE_F32, dims, 2, 0, &t), "shape[1] is negative");
  expect_refused(vkp_buffer_tensor(b, VKP_DTYPE_F32, dims, 6, 0, &t), "rank 6");
  expect_refused(vkp_buffer_tensor(b, vkp_dtype(12), dims, 1, 0, &t), "dtype: 12");
  ASSERT_VKP_OK(vkp_buffer_tensor(b, VKP_DTYPE_F16, dims, 1, 8, &t));
  EXPECT_EQ(t.memory.offset, 8u);
  EXPECT_EQ(t.memory.size, 4u);
}

// A record callback that fails abandons the submission and its status and message come back.
TEST_F(CApiTest, RunAndWaitPassesCallbackFailuresThrough) {
  auto failing = [](VkCommandBuffer cmd) {
    vkp_tensor_view odd{};  // 3 f16 values: not a whole number of words, refused before any use
    odd.memory = {reinterpret_cast<VkBuffer>(uintptr_t(16)), 0, 6};
    odd.dtype = VKP_DTYPE_F16;
    odd.rank = 1;
    odd.shape[0] = 3;
    return vkp_record_fill_random(c_context(), cmd, &odd, 1);
  };
  expect_refused(run(c_context(), failing), "vkp_record_fill_random: fill_random: 6 bytes");
  auto silent = [](VkCommandBuffer) { return VKP_ERROR_UNSUPPORTED; };
  expect_refused(run(c_context(), silent), "the record callback returned an error", VKP_ERROR_UNSUPPORTED);
  int calls = 0;
  auto fine = [&](VkCommandBuffer cmd) {
    ++calls;
    return vkp_record_compute_barrier(c_context(), cmd);
  };
  EXPECT_VKP_OK(run(c_context(), fine));
  EXPECT_EQ(calls, 1);
  EXPECT_STREQ(vkp_last_error(), "");
}

// vkp_run_and_time_after: `before` runs first, untimed, and finishes before `record` starts.
TEST_F(CApiTest, RunAndTimeAfterRecordsTheUntimedWorkFirst) {
  vkp_device_info info;
  vkp_device_info_init(&info);
  ASSERT_VKP_OK(vkp_context_device_info(c_context(), &info));
  if (!info.timestamps) GTEST_SKIP() << "no timestamps on " << info.name;
  CTensor target = zeros(c_context(), DType::u32, Shape{256});
  CTensor want = zeros(c_context(), DType::u32, Shape{256});
  struct Fill {
    const vkp_tensor_view* view;
    uint32_t seed;
  };
  auto fill = [](VkCommandBuffer cmd, void* user) {
    const auto* f = static_cast<const Fill*>(user);
    return vkp_record_fill_random(c_context(), cmd, f->view, f->seed);
  };
  auto words = [](const CTensor& t) {
    const HostTensor h = download(c_context(), t);
    return std::vector<uint32_t>(h.as<uint32_t>(), h.as<uint32_t>() + 256);
  };
  Fill first{&target.view, 5}, second{&target.view, 6}, reference{&want.view, 6};
  double ns = -1;
  ASSERT_VKP_OK(vkp_run_and_time_after(c_context(), fill, &first, fill, &second, &ns));
  EXPECT_GE(ns, 0.0);
  ASSERT_VKP_OK(vkp_run_and_wait(c_context(), fill, &reference));
  // The timed fill came second: the target holds its values, not the untimed one's.
  EXPECT_EQ(words(target), words(want));

  expect_refused(vkp_run_and_time_after(c_context(), nullptr, nullptr, fill, &second, &ns), "before is NULL");
  expect_refused(vkp_run_and_time_after(c_context(), fill, &first, nullptr, nullptr, &ns), "record is NULL");
  expect_refused(vkp_run_and_time_after(c_context(), fill, &first, fill, &second, nullptr), "elapsed_ns is NULL");
  // A failing `before` abandons the submission: the target keeps the last values written.
  Fill other{&target.view, 9};
  auto failing = [](VkCommandBuffer, void*) { return VKP_ERROR_UNSUPPORTED; };
  expect_refused(vkp_run_and_time_after(c_context(), failing, nullptr, fill, &other, &ns),
                 "the record callback returned an error", VKP_ERROR_UNSUPPORTED);
  EXPECT_EQ(words(target), words(want));
}

TEST_F(CApiTest, RunAndTimeAndBandwidth) {
  vkp_device_info info;
  vkp_device_info_init(&info);
  ASSERT_VKP_OK(vkp_context_device_info(c_context(), &info));
  auto barrier = [](VkCommandBuffer cmd, void*) { return vkp_record_compute_barrier(c_context(), cmd); };
  double ns = -1;
  const vkp_status timed = vkp_run_and_time(c_context(), barrier, nullptr, &ns);
  if (!info.timestamps) {
    EXPECT_EQ(timed, VKP_ERROR_UNSUPPORTED);
    GTEST_SKIP() << "no timestamps on " << info.name;
  }
  ASSERT_VKP_OK(timed);
  EXPECT_GE(ns, 0.0);
  expect_refused(vkp_run_and_time(c_context(), barrier, nullptr, nullptr), "elapsed_ns is NULL");
  vkp_bandwidth bw;
  vkp_bandwidth_init(&bw);
  ASSERT_VKP_OK(vkp_measure_read_bandwidth(c_context(), 1 << 20, 2, &bw));
  EXPECT_EQ(bw.bytes, size_t(1) << 20);
  EXPECT_GT(bw.bytes_per_second, 0.0);
  expect_refused(vkp_measure_read_bandwidth(c_context(), 1 << 20, 0, &bw), "repetitions");
  expect_refused(vkp_measure_read_bandwidth(c_context(), 15, 2, &bw), "bytes: 15 is less than 16");
}

TEST_F(CApiTest, StreamingReadIsSizedRecordedAndChecked) {
  vkp_streaming_read* raw = nullptr;
  ASSERT_VKP_OK(vkp_streaming_read_create(c_context(), (size_t(1) << 20) + 5, &raw));
  std::unique_ptr<vkp_streaming_read, decltype(&vkp_streaming_read_destroy)> read(raw, &vkp_streaming_read_destroy);
  EXPECT_EQ(vkp_streaming_read_bytes(raw), size_t(1) << 20);
  EXPECT_EQ(vkp_streaming_read_bytes(nullptr), 0u);
  int calls = 0;
  auto record = [&](VkCommandBuffer cmd) {
    ++calls;
    return vkp_record_streaming_read(c_context(), cmd, raw);
  };
  EXPECT_VKP_OK(run(c_context(), record));
  EXPECT_VKP_OK(run(c_context(), record));
  EXPECT_EQ(calls, 2);

  vkp_streaming_read* none = reinterpret_cast<vkp_streaming_read*>(&calls);
  expect_refused(vkp_streaming_read_create(c_context(), 15, &none), "bytes: 15 is less than 16");
  EXPECT_EQ(none, nullptr) << "a refused create leaves *out NULL";
  expect_refused(vkp_streaming_read_create(c_context(), 64, nullptr), "out is NULL");
  expect_refused(run(c_context(), [](VkCommandBuffer cmd) { return vkp_record_streaming_read(c_context(), cmd, nullptr); }),
                 "read is NULL");

  // It is timed as it is.
  vkp_bandwidth bandwidth;
  vkp_bandwidth_init(&bandwidth);
  ASSERT_VKP_OK(vkp_measure_streaming_read(c_context(), raw, 2, &bandwidth));
  EXPECT_EQ(bandwidth.bytes, size_t(1) << 20);
  EXPECT_GT(bandwidth.median_ns, 0.0);
  EXPECT_GT(bandwidth.bytes_per_second, 0.0);
  expect_refused(vkp_measure_streaming_read(c_context(), raw, 0, &bandwidth), "repetitions: must be at least 1, got 0");
  expect_refused(vkp_measure_streaming_read(c_context(), nullptr, 2, &bandwidth), "read is NULL");
  expect_refused(vkp_measure_streaming_read(c_context(), raw, 2, nullptr), "out is NULL");
  // ... and after another read, untimed, in the same command buffer.
  vkp_streaming_read* raw_before = nullptr;
  ASSERT_VKP_OK(vkp_streaming_read_create(c_context(), size_t(1) << 24, &raw_before));
  std::unique_ptr<vkp_streaming_read, decltype(&vkp_streaming_read_destroy)> before(raw_before, &vkp_streaming_read_destroy);
  vkp_bandwidth after;
  vkp_bandwidth_init(&after);
  ASSERT_VKP_OK(vkp_measure_streaming_read_after(c_context(), raw, raw_before, 2, &after));
  EXPECT_EQ(after.bytes, size_t(1) << 20);
  EXPECT_GT(after.median_ns, 0.0);
  expect_refused(vkp_measure_streaming_read_after(c_context(), raw, nullptr, 2, &after), "untimed_before is NULL");
  expect_refused(vkp_measure_streaming_read_after(c_context(), nullptr, raw_before, 2, &after), "read is NULL");
  expect_refused(vkp_measure_streaming_read_after(c_context(), raw, raw_before, 0, &after),
                 "repetitions: must be at least 1, got 0");
  expect_refused(vkp_measure_streaming_read_after(c_context(), raw, raw_before, 2, nullptr), "out is NULL");

  // A read belongs to the context that made it.
  const OwnedContext owner = create_own_context();
  vkp_context* own = owner.get();
  ASSERT_NE(own, nullptr);
  expect_refused(run(own, [&](VkCommandBuffer cmd) { return vkp_record_streaming_read(own, cmd, raw); }),
                 "read: created on another context");
  expect_refused(vkp_measure_streaming_read(own, raw, 2, &bandwidth), "read: created on another context");
  vkp_streaming_read* raw_theirs = nullptr;
  ASSERT_VKP_OK(vkp_streaming_read_create(own, 64, &raw_theirs));
  std::unique_ptr<vkp_streaming_read, decltype(&vkp_streaming_read_destroy)> theirs(raw_theirs, &vkp_streaming_read_destroy);
  expect_refused(vkp_measure_streaming_read_after(c_context(), raw, raw_theirs, 2, &bandwidth),
                 "untimed_before: created on another context");
}

// The same kernel over the caller's memory: recorded, timed, the data left as it was; views it
// cannot bind refused naming them.
TEST_F(CApiTest, StreamingReadOfCallerMemory) {
  vkp_device_info info;
  vkp_device_info_init(&info);
  ASSERT_VKP_OK(vkp_context_device_info(c_context(), &info));
  const VkDeviceSize align = std::max<VkDeviceSize>(info.min_storage_buffer_offset_alignment, 16);
  const size_t bytes = size_t(align) + 4096;
  vkp_buffer* raw_data = nullptr;
  vkp_buffer* raw_sink = nullptr;
  ASSERT_VKP_OK(vkp_buffer_create(c_context(), bytes, VKP_MEMORY_DEVICE, &raw_data));
  BufferPtr data(raw_data, &vkp_buffer_destroy);
  ASSERT_VKP_OK(vkp_buffer_create(c_context(), 64, VKP_MEMORY_DEVICE, &raw_sink));
  BufferPtr sink(raw_sink, &vkp_buffer_destroy);
  std::vector<uint32_t> values(bytes / 4);
  for (size_t i = 0; i < values.size(); ++i) values[i] = uint32_t(i * 2654435761u);
  const vkp_buffer_view whole = vkp_buffer_view_of(raw_data, 0, bytes);
  ASSERT_VKP_OK(vkp_upload(c_context(), &whole, values.data(), bytes));
  const vkp_buffer_view view = vkp_buffer_view_of(raw_data, align, 4096 - 4);  // read rounded down to 16
  const vkp_buffer_view sink_view = vkp_buffer_view_of(raw_sink, 0, 16);
  auto record = [&](VkCommandBuffer cmd) { return vkp_record_streaming_read_of(c_context(), cmd, &view, &sink_view); };
  ASSERT_VKP_OK(run(c_context(), record));
  if (info.timestamps) {
    double ns = 0;
    ASSERT_VKP_OK(vkp_run_and_time(
        c_context(), [](VkCommandBuffer cmd, void* user) { return (*static_cast<decltype(record)*>(user))(cmd); },
        &record, &ns));
    EXPECT_GT(ns, 0.0);
  }
  std::vector<uint32_t> after(values.size());
  ASSERT_VKP_OK(vkp_download(c_context(), &whole, after.data(), bytes));
  EXPECT_EQ(after, values);

  const vkp_buffer_view misaligned = vkp_buffer_view_of(raw_data, 8, 64);
  const vkp_buffer_view small = vkp_buffer_view_of(raw_data, 0, 8);
  const vkp_buffer_view small_sink = vkp_buffer_view_of(raw_sink, 0, 4);
  const vkp_buffer_view absent{};
  EXPECT_VKP_OK(run(c_context(), [&](VkCommandBuffer cmd) {
    expect_refused(vkp_record_streaming_read_of(c_context(), cmd, &misaligned, &sink_view),
                   "vkp_record_streaming_read_of: data: offset 8 is not a multiple of");
    expect_refused(vkp_record_streaming_read_of(c_context(), cmd, &small, &sink_view),
                   "data: buffer view of 8 bytes is too small, 16 bytes needed");
    expect_refused(vkp_record_streaming_read_of(c_context(), cmd, &view, &small_sink),
                   "sink: buffer view of 4 bytes is too small");
    expect_refused(vkp_record_streaming_read_of(c_context(), cmd, &view, &absent), "sink: no buffer given");
    return VKP_OK;
  }));
}

}  // namespace
}  // namespace vkpaged::test
