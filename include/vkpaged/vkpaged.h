// SPDX-License-Identifier: Apache-2.0
/* The vkpaged C API: the C++ API (context.hpp, decode.hpp, attention.hpp, cache_ops.hpp,
 * rotary.hpp, kv_cache.hpp, block_manager.hpp, reference.hpp, utilities.hpp, log.hpp,
 * dtype.hpp) behind opaque handles and plain structs, for C,
 * Rust, Python (ctypes/cffi) and every other language with a C FFI. docs/api.md describes each
 * call at length, and the ABI rules below in full; the layouts and the math are those of
 * docs/contract.md.
 *
 * Conventions:
 * - Every call that can fail returns a vkp_status. On failure vkp_last_error() holds one line
 *   that names the argument and the offending value; nothing was recorded or changed. No C++
 *   exception ever leaves this API. Calls that return a value instead of a status (accessors,
 *   vkp_buffer_view_of) return an empty value on failure and set vkp_last_error() too.
 * - A NULL handle or a NULL required pointer is refused with VKP_ERROR_INVALID_ARGUMENT, and so
 *   is a handle that is not live (already destroyed, never created, or of another type; see
 *   docs/api.md for what cannot be detected). Destroying a handle that is not live does nothing.
 * - Objects are created by vkp_*_create and released by vkp_*_destroy (NULL is a no-op).
 *   Buffers, decode and attention plans, caches and reads belong to their context: destroy
 *   them before it.
 * - Threads: a context may be used from several threads at once (recording into different
 *   command buffers, creating plans, buffers, uploads); decode and attention plans are
 *   immutable and may be shared; a vkp_block_manager must be used by one thread at a time.
 *   vkp_last_error() is per thread; the log callback is one per process.
 *
 * ABI rules (docs/api.md, "The C ABI"):
 * - Extensible structs (options, shapes, views, inputs, infos, results) begin with
 *   `uint32_t struct_size`, which the caller sets to sizeof the struct as *its* header declares
 *   it: call vkp_<struct>_init(&s) (a static inline over the exported vkp_<struct>_init_sized
 *   with sizeof(s)), which also fills in the defaults. A new version only appends fields; the
 *   library reads an input only up to its struct_size and takes defaults for the rest, writes an
 *   output only up to its struct_size, and refuses a struct_size no released header had.
 *   Arrays of extensible structs are laid out at the stride of their first element's
 *   struct_size; every element must carry the same one.
 * - Plain value structs (vkp_buffer_view, vkp_tensor_view, vkp_host_tensor, vkp_block_copy)
 *   carry no size: a change to one is an incompatible change of every struct that holds it.
 * - Enums are 32 bits wide (each has a _MAX_ENUM = 0x7FFFFFFF member); values outside the
 *   listed ones are refused naming the field. Booleans are vkp_bool32 (uint32_t, 0 or 1; other
 *   values are refused).
 * - Every function and callback uses the VKP_CALL convention; VKP_API exports it.
 */
#ifndef VKPAGED_VKPAGED_H
#define VKPAGED_VKPAGED_H

#include <stddef.h>
#include <stdint.h>
#include <vulkan/vulkan.h>

/* The version of these headers; vkp_version() answers the library's. While the major version
 * is 0, every minor version may change the ABI (the SONAME is libvkpaged.so.0.<minor>); from
 * 1.0 on only the major version may. */
#define VKPAGED_VERSION_MAJOR 0
#define VKPAGED_VERSION_MINOR 2
#define VKPAGED_VERSION_PATCH 0
#define VKPAGED_MAKE_VERSION(major, minor, patch) ((major) * 10000 + (minor) * 100 + (patch))
#define VKPAGED_VERSION VKPAGED_MAKE_VERSION(VKPAGED_VERSION_MAJOR, VKPAGED_VERSION_MINOR, VKPAGED_VERSION_PATCH)

/* VKP_API: exported from the shared library. The build defines VKPAGED_BUILDING while it
 * compiles vkpaged; a program that links the static library on Windows defines
 * VKPAGED_STATIC. VKP_CALL: the calling convention of every function and callback (cdecl on
 * Windows, the platform's C convention elsewhere). */
#ifndef VKP_API
#if defined(_WIN32) || defined(__CYGWIN__)
#if defined(VKPAGED_STATIC)
#define VKP_API
#elif defined(VKPAGED_BUILDING)
#define VKP_API __declspec(dllexport)
#else
#define VKP_API __declspec(dllimport)
#endif
#elif defined(VKPAGED_BUILDING) && (defined(__GNUC__) || defined(__clang__))
#define VKP_API __attribute__((visibility("default")))
#else
#define VKP_API
#endif
#endif

#ifndef VKP_CALL
#if defined(_WIN32) || defined(__CYGWIN__)
#define VKP_CALL __cdecl
#else
#define VKP_CALL
#endif
#endif

/* A boolean in structs and signatures: 0 or 1 (a fixed 32 bits, unlike C's bool). */
typedef uint32_t vkp_bool32;
#define VKP_FALSE 0u
#define VKP_TRUE 1u

#ifdef __cplusplus
extern "C" {
#endif

/* ===================================================================== status and errors */

/* Values equal vkpaged::ErrorCode's. */
typedef enum vkp_status {
  VKP_OK = 0,
  VKP_ERROR_INVALID_ARGUMENT = 1, /* a shape, dtype, index, size or handle the contract refuses */
  VKP_ERROR_UNSUPPORTED = 2,      /* valid, but not available on this device or build */
  VKP_ERROR_OUT_OF_MEMORY = 3,    /* a device or host allocation failed, or blocks ran out */
  VKP_ERROR_DEVICE = 4,           /* a Vulkan call failed (device lost, driver error) */
  VKP_ERROR_IO = 5,               /* a file could not be read or written */
  VKP_ERROR_INTERNAL = 6,         /* a bug in vkpaged */
  VKP_STATUS_MAX_ENUM = 0x7FFFFFFF
} vkp_status;

/* The message of the last failed call on this thread, "" after a call that succeeded. The
 * pointer stays valid until the next vkpaged call on this thread. Never NULL. */
VKP_API const char* VKP_CALL vkp_last_error(void);
/* "ok", "invalid_argument", "unsupported", ...; "unknown" for other values. */
VKP_API const char* VKP_CALL vkp_status_name(vkp_status status);

/* The library's version: VKPAGED_MAKE_VERSION(major, minor, patch). Compare with
 * VKPAGED_VERSION to detect headers that do not match the library. */
VKP_API uint32_t VKP_CALL vkp_version(void);
/* The library's version as "major.minor.patch". */
VKP_API const char* VKP_CALL vkp_version_string(void);

/* ===================================================================== log */

/* Levels of vkpaged's messages (vkpaged::LogLevel). */
typedef enum vkp_log_level {
  VKP_LOG_DEBUG = 0,   /* details for whoever debugs vkpaged itself */
  VKP_LOG_INFO = 1,    /* asked-for reports (pipeline statistics) */
  VKP_LOG_WARNING = 2, /* validation-layer warnings, performance warnings */
  VKP_LOG_ERROR = 3,   /* validation-layer errors: a Vulkan rule broken */
  VKP_LOG_LEVEL_MAX_ENUM = 0x7FFFFFFF
} vkp_log_level;

/* Receives one message: its level (a vkp_log_level value), the text (no trailing newline,
 * valid during the call only) and the user_data given with the callback. */
typedef void(VKP_CALL* vkp_log_fn)(uint32_t level, const char* message, void* user_data);

/* Sends every message of min_level and above to fn with user_data, from now on and instead of
 * the previous callback; fn NULL restores the default (stderr as "vkpaged: <message>", levels
 * from min_level up). Until a callback is set, messages of VKP_LOG_INFO and above go to stderr.
 * One callback per process (see log.hpp): messages may come from any thread that calls vkpaged,
 * but calls of fn never overlap. Once this returns, the previous callback is neither running nor
 * called again: its user_data may be freed. fn must not call vkp_set_log_callback (refused).
 * Errors: INVALID_ARGUMENT (min_level not a vkp_log_level, called from inside the callback). */
VKP_API vkp_status VKP_CALL vkp_set_log_callback(vkp_log_fn fn, void* user_data, vkp_log_level min_level);

/* ===================================================================== element types */

/* Values equal vkpaged::DType's and the shaders' DT_* constants. */
typedef enum vkp_dtype {
  VKP_DTYPE_F32 = 0,
  VKP_DTYPE_F16 = 1,
  VKP_DTYPE_BF16 = 2,
  VKP_DTYPE_FP8_E4M3 = 3, /* OCP E4M3FN: max 448, no infinities */
  VKP_DTYPE_FP8_E5M2 = 4, /* max 57344 */
  VKP_DTYPE_I32 = 5,
  VKP_DTYPE_U32 = 6,
  VKP_DTYPE_I64 = 7,
  VKP_DTYPE_U8 = 8,
  VKP_DTYPE_MAX_ENUM = 0x7FFFFFFF
} vkp_dtype;

/* Bytes per element (0 for an unknown value, which also sets vkp_last_error()). */
VKP_API size_t VKP_CALL vkp_dtype_size(vkp_dtype dtype);
/* "f32", "f16", "bf16", "fp8_e4m3", "fp8_e5m2", "i32", "u32", "i64", "u8"; "unknown" otherwise. */
VKP_API const char* VKP_CALL vkp_dtype_name(vkp_dtype dtype);
/* Parses a name vkp_dtype_name gives. Errors: INVALID_ARGUMENT for an unknown name. */
VKP_API vkp_status VKP_CALL vkp_dtype_parse(const char* name, vkp_dtype* out);
/* Largest finite value of a float dtype (448 for fp8_e4m3, 57344 for fp8_e5m2, ...). */
VKP_API float VKP_CALL vkp_dtype_max(vkp_dtype dtype);

/* Bit-exact scalar conversions: round to nearest even; fp8 saturates at the format's max and
 * never makes Inf or NaN from finite input; NaN stays NaN. */
VKP_API float VKP_CALL vkp_f16_to_f32(uint16_t bits);
VKP_API uint16_t VKP_CALL vkp_f32_to_f16(float value);
VKP_API float VKP_CALL vkp_bf16_to_f32(uint16_t bits);
VKP_API uint16_t VKP_CALL vkp_f32_to_bf16(float value);
VKP_API float VKP_CALL vkp_fp8_e4m3_to_f32(uint8_t bits);
VKP_API uint8_t VKP_CALL vkp_f32_to_fp8_e4m3(float value);
VKP_API float VKP_CALL vkp_fp8_e5m2_to_f32(uint8_t bits);
VKP_API uint8_t VKP_CALL vkp_f32_to_fp8_e5m2(float value);

/* ===================================================================== views and host arrays */

#define VKP_MAX_RANK 5

/* A byte range of a VkBuffer (size is the real size; VK_WHOLE_SIZE is refused). A view whose
 * buffer is VK_NULL_HANDLE is "absent" (for optional arguments). A plain value struct, without a
 * size (so are vkp_tensor_view, vkp_host_tensor and vkp_block_copy). A view of a buffer
 * vkpaged created (vkp_buffer_create, a KV cache's pools) must lie inside that buffer: every
 * call that takes a view refuses one that does not. */
typedef struct vkp_buffer_view {
  VkBuffer buffer;
  VkDeviceSize offset;
  VkDeviceSize size;
} vkp_buffer_view;

/* A buffer range with dtype, a shape of `rank` dimensions and their strides (vkpaged::TensorView).
 * strides[i]: elements from one index of dimension i to the next; 0 means the row-major stride
 * (the product of the later dimensions), so a zero-filled strides (vkp_buffer_tensor's) is a
 * contiguous view; negative strides are refused, and strides past `rank` are not read. Only the
 * queries, new keys and values, and outputs ([T, heads, D]) take other strides: a token and a
 * head stride that keep each row's start on 4 bytes, D contiguous (docs/api.md, "Strided views");
 * memory.size then covers the view from its first element to the end of its last. */
typedef struct vkp_tensor_view {
  vkp_buffer_view memory;
  vkp_dtype dtype;
  int32_t rank;
  int64_t shape[VKP_MAX_RANK];
  int64_t strides[VKP_MAX_RANK];
} vkp_tensor_view;

/* Host memory with dtype and row-major shape. data holds shape's product of elements; it is
 * read, except where a function says it writes it. Absent (optional) when data is NULL and
 * rank is 0. */
typedef struct vkp_host_tensor {
  void* data;
  vkp_dtype dtype;
  int32_t rank;
  int64_t shape[VKP_MAX_RANK];
} vkp_host_tensor;

/* ===================================================================== cache layouts */

/* How a paged KV cache lies in memory (vkpaged::KvLayout, kv_layout.hpp; docs/contract.md,
 * "Layouts" and "Other cache layouts"): one layout per cache, keys and values alike. x is the
 * cache's pack factor, 16 / element bytes. */
typedef enum vkp_kv_layout {
  VKP_KV_LAYOUT_VLLM = 0, /* key [N, Hkv, D/x, B, x], value [N, Hkv, D, B] (vLLM's paged_attention) */
  VKP_KV_LAYOUT_NHD = 1,  /* key and value [N, B, Hkv, D] (vLLM V1's flash layout, FlashInfer NHD) */
  VKP_KV_LAYOUT_HND = 2,  /* key and value [N, Hkv, B, D] (FlashInfer HND) */
  VKP_KV_LAYOUT_MAX_ENUM = 0x7FFFFFFF
} vkp_kv_layout;

/* ===================================================================== devices */

typedef struct vkp_device_info {
  uint32_t struct_size;
  uint32_t index; /* position in vkEnumeratePhysicalDevices */
  char name[256];
  char type[16];    /* "discrete", "integrated", "virtual", "cpu", "other" */
  char driver[256]; /* driver name and info, where reported */
  uint32_t vendor_id;
  uint32_t api_version;
  uint32_t subgroup_size;
  vkp_bool32 subgroup_arithmetic;
  vkp_bool32 storage_16bit;
  vkp_bool32 storage_8bit;
  vkp_bool32 shader_float16;
  vkp_bool32 shader_int64;
  vkp_bool32 buffer_device_address;
  vkp_bool32 push_descriptor;
  vkp_bool32 timestamps;
  uint32_t max_shared_memory;
  uint64_t max_storage_buffer_range;
  uint32_t max_workgroup_invocations;
  uint32_t max_push_constants;
  uint32_t min_storage_buffer_offset_alignment;
  uint32_t compute_units; /* reported by the driver, or estimated */
  vkp_bool32 compute_units_reported;
  uint32_t timestamp_valid_bits;
  double timestamp_period_ns;
  uint64_t device_local_bytes;
  vkp_bool32 subgroup_shuffle; /* subgroupShuffleXor in compute shaders */
  /* VK_EXT_memory_budget: whether the device reports it, and the device-local memory this
   * process could still allocate when the info was read (0 without it). */
  vkp_bool32 memory_budget;
  uint64_t device_local_free_bytes;
  /* VK_NV_cooperative_matrix with what the matrix decode kernel needs (see context.hpp). */
  vkp_bool32 cooperative_matrix;
  /* VK_KHR_cooperative_matrix with its cooperativeMatrix feature in compute shaders; its
   * shapes come from vkp_context_cooperative_matrix_shapes. Not queried (0) for an adopted
   * device whose engine did not enable it, nor under a validation layer older than the
   * extension (context.hpp). */
  vkp_bool32 cooperative_matrix_khr;
  /* VkPhysicalDeviceMaintenance3Properties: one allocation past this size may fail; a
   * KvCache pool is one allocation. */
  uint64_t max_memory_allocation_size;
  /* VkPhysicalDeviceVulkan12Features::vulkanMemoryModel and vulkanMemoryModelDeviceScope: the
   * matrix kernels need the first; a context enables both where the device has both. */
  vkp_bool32 vulkan_memory_model;
  vkp_bool32 vulkan_memory_model_device_scope;
} vkp_device_info;
/* An output struct: only struct_size matters on the way in (init zeroes the rest). */
VKP_API vkp_status VKP_CALL vkp_device_info_init_sized(vkp_device_info* info, uint32_t struct_size);
static inline vkp_status VKP_CALL vkp_device_info_init(vkp_device_info* info) {
  return vkp_device_info_init_sized(info, (uint32_t)sizeof(vkp_device_info));
}

/* Lists the Vulkan devices, Vulkan style: with infos NULL, sets *count to their number; else
 * fills min(*count, number) entries and sets *count to how many were written. Every entry of
 * infos carries the same struct_size (vkp_device_info_init each).
 * default_index (may be NULL) receives the index the default choice picks.
 * Errors: UNSUPPORTED or DEVICE when there is no Vulkan at all. */
VKP_API vkp_status VKP_CALL vkp_list_devices(vkp_device_info* infos, uint32_t* count, uint32_t* default_index);

/* One matrix shape VK_KHR_cooperative_matrix offers (a VkCooperativeMatrixPropertiesKHR): A is
 * m x k, B k x n, C and the result m x n. Types and scope keep Vulkan's values
 * (VkComponentTypeKHR: 0 f16, 1 f32, 3 s8, 7 u8, ...; VkScopeKHR: 3 subgroup). */
typedef struct vkp_cooperative_matrix_shape {
  uint32_t struct_size;
  uint32_t m;
  uint32_t n;
  uint32_t k;
  uint32_t a_type;
  uint32_t b_type;
  uint32_t c_type;
  uint32_t result_type;
  vkp_bool32 saturating_accumulation;
  uint32_t scope;
} vkp_cooperative_matrix_shape;
/* An output struct: only struct_size matters on the way in (init zeroes the rest). */
VKP_API vkp_status VKP_CALL vkp_cooperative_matrix_shape_init_sized(vkp_cooperative_matrix_shape* shape,
                                                                    uint32_t struct_size);
static inline vkp_status VKP_CALL vkp_cooperative_matrix_shape_init(vkp_cooperative_matrix_shape* shape) {
  return vkp_cooperative_matrix_shape_init_sized(shape, (uint32_t)sizeof(vkp_cooperative_matrix_shape));
}

/* ===================================================================== context */

typedef struct vkp_context vkp_context;

typedef struct vkp_context_options {
  uint32_t struct_size;
  /* Khronos validation layer (with read_environment, also VKPAGED_VALIDATION=1); default 0 */
  vkp_bool32 validation;
  /* NULL or "" (the default) = the default choice (discrete, integrated, virtual, CPU; with
   * read_environment, $VKPAGED_DEVICE where set). Otherwise an index ("1") or a name substring
   * ("H200", "llvmpipe"). */
  const char* device;
  vkp_bool32 disable_subgroup_arithmetic; /* force the shared-memory reductions; default 0 */
  /* How long the calls that wait (vkp_run_and_wait, vkp_run_and_time, vkp_upload,
   * vkp_download and the host conveniences) wait for the device before they fail with
   * VKP_ERROR_DEVICE ("did not finish within ... ms"; the work stays in flight: keep its
   * buffers until a later such call succeeds, see Context::run_and_wait); 0 = no limit.
   * Default 60000. */
  uint32_t fence_timeout_ms;
  /* Whether the context reads vkpaged's environment variables (VKPAGED_DEVICE, VKPAGED_VALIDATION,
   * VKPAGED_PIPELINE_STATS, VKPAGED_DECODE_TUNE: docs/environment.md); default 0, none. */
  vkp_bool32 read_environment;
  uint32_t reserved0; /* padding made explicit: ignored */
} vkp_context_options;
VKP_API vkp_status VKP_CALL vkp_context_options_init_sized(vkp_context_options* options, uint32_t struct_size);
static inline vkp_status VKP_CALL vkp_context_options_init(vkp_context_options* options) {
  return vkp_context_options_init_sized(options, (uint32_t)sizeof(vkp_context_options));
}

/* An engine's Vulkan objects for a context that adopts them. The device must have
 * VK_KHR_push_descriptor enabled and queue_family must support compute. vkpaged never
 * destroys them. Its convenience calls (upload, download, run_and_wait, decode_attention)
 * submit to (queue_family, queue_index): the engine must not submit to that queue from another
 * thread at the same time. get_instance_proc_addr NULL = the loader vkpaged links. */
typedef struct vkp_external_device {
  uint32_t struct_size;
  uint32_t queue_family;
  VkInstance instance;
  VkPhysicalDevice physical_device;
  VkDevice device;
  PFN_vkGetInstanceProcAddr get_instance_proc_addr;
  uint32_t queue_index;
  /* Whether the engine enabled the bufferDeviceAddress feature: caches larger than
   * maxStorageBufferRange need it (decode, attention, reshape_and_cache, gather, their MLA forms,
   * KvCache; see context.hpp). */
  vkp_bool32 buffer_device_address;
  /* Whether the engine enabled VK_NV_cooperative_matrix with its cooperativeMatrix feature,
   * shaderFloat16 and storageBuffer16BitAccess: the decode then may run on matrix units. */
  vkp_bool32 cooperative_matrix;
  /* Whether the engine enabled VkPhysicalDeviceVulkan12Features::vulkanMemoryModel and
   * vulkanMemoryModelDeviceScope. Every matrix kernel needs the first (without it they are
   * refused, naming the feature, and the portable kernels run); the first without the second
   * is refused here (vkpaged's portable shaders use Device-scope atomics). */
  vkp_bool32 vulkan_memory_model;
  vkp_bool32 vulkan_memory_model_device_scope;
  /* Whether the engine enabled VK_KHR_cooperative_matrix with its cooperativeMatrix feature and
   * VK_EXT_subgroup_size_control with computeFullSubgroups, beside the memory model,
   * shaderFloat16 and storageBuffer16BitAccess: the KHR matrix kernels then may run. */
  vkp_bool32 cooperative_matrix_khr;
  uint32_t fence_timeout_ms; /* as vkp_context_options.fence_timeout_ms; default 60000 */
  uint32_t reserved0;        /* padding made explicit: ignored */
} vkp_external_device;
/* Defaults: every handle NULL, queue family and index 0, every feature 0, fence_timeout_ms
 * 60000. */
VKP_API vkp_status VKP_CALL vkp_external_device_init_sized(vkp_external_device* external, uint32_t struct_size);
static inline vkp_status VKP_CALL vkp_external_device_init(vkp_external_device* external) {
  return vkp_external_device_init_sized(external, (uint32_t)sizeof(vkp_external_device));
}

/* Creates a context on its own instance and device. options NULL = defaults.
 * Errors: INVALID_ARGUMENT (no device matches options->device), UNSUPPORTED (Vulkan < 1.2, no
 * push descriptors, no compute queue), DEVICE. */
VKP_API vkp_status VKP_CALL vkp_context_create(const vkp_context_options* options, vkp_context** out);
/* Creates a context on an engine's device (see vkp_external_device).
 * Errors: INVALID_ARGUMENT (a NULL handle, a queue family without compute), UNSUPPORTED. */
VKP_API vkp_status VKP_CALL vkp_context_create_external(const vkp_external_device* external, vkp_context** out);
/* Waits for vkpaged's queue and destroys what the context created. NULL is a no-op. */
VKP_API void VKP_CALL vkp_context_destroy(vkp_context* context);

VKP_API vkp_status VKP_CALL vkp_context_device_info(const vkp_context* context, vkp_device_info* out);
/* The matrix shapes VK_KHR_cooperative_matrix offers on the context's device, in the driver's
 * order of preference (none where vkp_device_info.cooperative_matrix_khr is 0), Vulkan style:
 * with shapes NULL, sets *count to their number; else fills min(*count, number) entries and
 * sets *count to how many were written. Every entry of shapes carries the same struct_size
 * (vkp_cooperative_matrix_shape_init each). */
VKP_API vkp_status VKP_CALL vkp_context_cooperative_matrix_shapes(const vkp_context* context, uint32_t* count,
                                                                  vkp_cooperative_matrix_shape* shapes);

/* The Vulkan objects the context runs on (its own, or the adopted ones). */
typedef struct vkp_vulkan_handles {
  uint32_t struct_size;
  uint32_t queue_family;
  VkInstance instance;
  VkPhysicalDevice physical_device;
  VkDevice device;
  VkQueue queue;
} vkp_vulkan_handles;
VKP_API vkp_status VKP_CALL vkp_vulkan_handles_init_sized(vkp_vulkan_handles* handles, uint32_t struct_size);
static inline vkp_status VKP_CALL vkp_vulkan_handles_init(vkp_vulkan_handles* handles) {
  return vkp_vulkan_handles_init_sized(handles, (uint32_t)sizeof(vkp_vulkan_handles));
}
VKP_API vkp_status VKP_CALL vkp_context_vulkan_handles(const vkp_context* context, vkp_vulkan_handles* out);

/* Validation-layer messages seen since creation (0 unless validation is on). */
VKP_API vkp_status VKP_CALL vkp_context_validation_message_count(const vkp_context* context, uint32_t* out);

/* Records work into a command buffer. Return VKP_OK, or a failure to abandon the submission. */
typedef vkp_status(VKP_CALL* vkp_record_fn)(VkCommandBuffer cmd, void* user_data);

/* Records `record` into a fresh command buffer of the context, submits it and waits.
 * Errors: what `record` returned (nothing is submitted then; vkp_last_error() keeps its
 * message), DEVICE. */
VKP_API vkp_status VKP_CALL vkp_run_and_wait(vkp_context* context, vkp_record_fn record, void* user_data);
/* Same, with GPU timestamps around the work: *elapsed_ns receives the GPU time.
 * Errors: as vkp_run_and_wait, UNSUPPORTED (no compute timestamps). */
VKP_API vkp_status VKP_CALL vkp_run_and_time(vkp_context* context, vkp_record_fn record, void* user_data, double* elapsed_ns);
/* Same, with `before` recorded first in the same command buffer, untimed, and finished (a full
 * barrier) before the first timestamp: `record` is timed as an engine's later operators run,
 * without the submission's own start (Context::run_and_time with untimed_before).
 * Errors: as vkp_run_and_time (a NULL `before` is refused as a NULL `record` is). */
VKP_API vkp_status VKP_CALL vkp_run_and_time_after(vkp_context* context, vkp_record_fn before, void* before_user_data,
                                          vkp_record_fn record, void* user_data, double* elapsed_ns);

/* Records a compute+transfer -> compute+transfer barrier over all memory (what the convenience
 * paths put between operators; engines usually record narrower ones). */
VKP_API vkp_status VKP_CALL vkp_record_compute_barrier(const vkp_context* context, VkCommandBuffer cmd);

/* ===================================================================== buffers */

typedef struct vkp_buffer vkp_buffer;

typedef enum vkp_memory_kind {
  VKP_MEMORY_DEVICE = 0,      /* device-local, not mapped */
  VKP_MEMORY_HOST_VISIBLE = 1, /* host-visible, coherent, persistently mapped */
  VKP_MEMORY_KIND_MAX_ENUM = 0x7FFFFFFF
} vkp_memory_kind;

/* A buffer usable as storage buffer, transfer source and destination.
 * Errors: OUT_OF_MEMORY, INVALID_ARGUMENT (unknown kind), DEVICE. */
VKP_API vkp_status VKP_CALL vkp_buffer_create(vkp_context* context, size_t bytes, vkp_memory_kind kind, vkp_buffer** out);
VKP_API void VKP_CALL vkp_buffer_destroy(vkp_buffer* buffer);
/* The VkBuffer, its size and (host-visible buffers) its mapping; VK_NULL_HANDLE, 0, NULL for
 * a NULL or dead handle (vkp_last_error() says which). */
VKP_API VkBuffer VKP_CALL vkp_buffer_handle(const vkp_buffer* buffer);
VKP_API size_t VKP_CALL vkp_buffer_size(const vkp_buffer* buffer);
VKP_API void* VKP_CALL vkp_buffer_mapped(const vkp_buffer* buffer);
/* {handle, offset, bytes}, which must lie inside the buffer. Refused (a NULL or dead buffer,
 * offset + bytes past its size): returns the absent view {VK_NULL_HANDLE, 0, 0}, which every
 * call that needs a buffer refuses, and sets vkp_last_error(); success clears it. */
VKP_API vkp_buffer_view VKP_CALL vkp_buffer_view_of(const vkp_buffer* buffer, VkDeviceSize offset, VkDeviceSize bytes);
/* A tensor view of `dtype` and `shape` starting at `offset`, sized to hold it.
 * Errors: INVALID_ARGUMENT (rank outside [0, 5], a negative dimension, unknown dtype, a view
 * past the end of the buffer). */
VKP_API vkp_status VKP_CALL vkp_buffer_tensor(const vkp_buffer* buffer, vkp_dtype dtype, const int64_t* shape, int32_t rank,
                                     VkDeviceSize offset, vkp_tensor_view* out);

/* Copies host bytes into a buffer range, or a buffer range into host memory, through a
 * staging buffer, and waits (the whole copy is finished on return).
 * Errors: INVALID_ARGUMENT (bytes larger than the view, a view outside the vkpaged buffer it
 * names, an absent view), OUT_OF_MEMORY, DEVICE. */
VKP_API vkp_status VKP_CALL vkp_upload(vkp_context* context, const vkp_buffer_view* dst, const void* src, size_t bytes);
VKP_API vkp_status VKP_CALL vkp_download(vkp_context* context, const vkp_buffer_view* src, void* dst, size_t bytes);

/* ===================================================================== decode attention */

typedef enum vkp_split_mode {
  VKP_SPLIT_AUTOMATIC = 0,   /* from the batch, heads, lengths and compute units */
  VKP_SPLIT_SINGLE_PASS = 1, /* one workgroup covers a whole context */
  VKP_SPLIT_SPLIT = 2,       /* partitions merged by a reduce pass */
  VKP_SPLIT_MODE_MAX_ENUM = 0x7FFFFFFF
} vkp_split_mode;

/* Values equal vkpaged::DecodeKernel's. */
typedef enum vkp_decode_kernel {
  VKP_KERNEL_AUTOMATIC = 0, /* the matrix kernel for GQA groups of 16-bit dtypes where it can run, else scalar */
  VKP_KERNEL_SCALAR = 1,    /* the portable kernel (every device, dtype and shape) */
  /* Matrix units, through VK_NV_cooperative_matrix where it runs the plan, else
   * VK_KHR_cooperative_matrix: f16 or bf16 query; f16, bf16 or fp8 cache; head_size a multiple
   * of 32 (64 for fp8, and for the nhd and hnd layouts), block_size a multiple of 8, caches
   * within maxStorageBufferRange, a device whose fragment layout the kernel knows; refused
   * elsewhere with UNSUPPORTED. */
  VKP_KERNEL_MATRIX = 2,
  /* The matrix kernel through VK_KHR_cooperative_matrix even where the NV extension runs it
   * (tests and measurements); refused with UNSUPPORTED where KHR cannot run the plan. */
  VKP_KERNEL_MATRIX_KHR = 3,
  VKP_DECODE_KERNEL_MAX_ENUM = 0x7FFFFFFF
} vkp_decode_kernel;

/* Values equal vkpaged::DecodeOrder's. */
typedef enum vkp_decode_order {
  VKP_ORDER_AUTOMATIC = 0,    /* grid order */
  VKP_ORDER_GRID = 1,         /* workgroups take (sequence, partition) items in grid order */
  /* For batches whose lengths vary: workgroups take the items from a list that
   * vkp_record_decode_order writes from the lengths, longest first (views.order). At most
   * 4096 items (sequences x partitions); UNSUPPORTED past that. */
  VKP_ORDER_LONGEST_FIRST = 2,
  VKP_DECODE_ORDER_MAX_ENUM = 0x7FFFFFFF
} vkp_decode_order;

/* Where a split decode merges its partitions (vkpaged::DecodeMerge). */
typedef enum vkp_decode_merge {
  VKP_MERGE_REDUCE_PASS = 0, /* a second dispatch after a barrier */
  /* The matrix kernel's last workgroup of each head group merges them inside the decode
   * dispatch (no second dispatch, no barrier), counting in views.merge_counters; plans that do
   * not split on the matrix kernel merge as VKP_MERGE_REDUCE_PASS and need no counters. */
  VKP_MERGE_IN_DISPATCH = 1,
  VKP_DECODE_MERGE_MAX_ENUM = 0x7FFFFFFF
} vkp_decode_merge;

/* See vkpaged::DecodeShape. Dtypes: query f32/f16/bf16; cache f32/f16/bf16/fp8_e4m3/fp8_e5m2. */
typedef struct vkp_decode_shape {
  uint32_t struct_size;
  uint32_t num_seqs;           /* S */
  uint32_t num_heads;          /* H */
  uint32_t num_kv_heads;       /* Hkv, divides H */
  uint32_t head_size;          /* D */
  uint32_t block_size;         /* B */
  uint32_t num_blocks;         /* N */
  uint32_t max_blocks_per_seq; /* M */
  uint32_t max_context_len;    /* bound on every length, sizes the split; 0 = M * B */
  vkp_dtype query_dtype;
  vkp_dtype cache_dtype;
  /* The caches' layout. Decode reads VKP_KV_LAYOUT_VLLM only for now: the others are refused
   * (UNSUPPORTED) by vkp_decode_plan_create; vkp_attention_plan_create takes every layout. */
  vkp_kv_layout kv_layout;
  vkp_bool32 alibi;   /* ALiBi slopes [H] f32 will be given */
  vkp_bool32 softcap; /* a soft cap will be given (vkp_decode_params.softcap > 0) */
  vkp_bool32 sinks;   /* sink logits [H] f32 will be given */
  vkp_bool32 lse;     /* write log-sum-exp [S, H] f32 */
  /* Page tables may come in FlashInfer's CSR form (views.kv_indptr, kv_indices,
   * kv_last_page_len): the scratch then holds their expansion (scratch_bytes counts it), and
   * each call takes either form. */
  vkp_bool32 csr_page_table;
} vkp_decode_shape;
/* Defaults: every count 0, f16 query and cache, the vllm layout, no ALiBi, soft cap, sinks,
 * LSE or CSR page tables. */
VKP_API vkp_status VKP_CALL vkp_decode_shape_init_sized(vkp_decode_shape* shape, uint32_t struct_size);
static inline vkp_status VKP_CALL vkp_decode_shape_init(vkp_decode_shape* shape) {
  return vkp_decode_shape_init_sized(shape, (uint32_t)sizeof(vkp_decode_shape));
}

/* How the plan runs, beside the shape (vkpaged::DecodeOptions): fixed by vkp_decode_plan_create. */
typedef struct vkp_decode_options {
  uint32_t struct_size;
  uint32_t sliding_window; /* > 0: attend the last W positions; 0 = off */
  vkp_split_mode split;
  uint32_t partition_tokens; /* split: tokens per partition, a multiple of 256; 0 = auto */
  vkp_decode_kernel kernel;
  vkp_decode_order order;
  vkp_decode_merge merge;
} vkp_decode_options;
/* Defaults: window 0, automatic split, kernel and order, merge in a reduce pass. */
VKP_API vkp_status VKP_CALL vkp_decode_options_init_sized(vkp_decode_options* options, uint32_t struct_size);
static inline vkp_status VKP_CALL vkp_decode_options_init(vkp_decode_options* options) {
  return vkp_decode_options_init_sized(options, (uint32_t)sizeof(vkp_decode_options));
}

/* The per-call values of one decode or attention call (vkpaged::DecodeParams, which is also
 * vkpaged::AttentionParams): given to each vkp_record_decode / vkp_record_attention, they may
 * change between calls of one plan. Checked when recording, before anything is recorded. */
typedef struct vkp_decode_params {
  uint32_t struct_size;
  vkp_bool32 has_scale; /* 0: scale = 1 / sqrt(head_size) */
  float scale;          /* logit scale, finite and > 0, where has_scale */
  /* logit = c * tanh(logit / c): a finite c > 0 where the plan's shape.softcap is 1, 0 (off)
   * where it is 0; a value that contradicts the plan is refused. */
  float softcap;
  /* fp8 caches: key = decode(byte) * k_scale, value = decode(byte) * v_scale (other caches
   * ignore them); each finite and > 0, small enough that the format's max times it stays
   * finite. */
  float k_scale;
  float v_scale;
} vkp_decode_params;
/* Defaults: no scale given (1 / sqrt(head_size)), softcap 0, k_scale = v_scale = 1. */
VKP_API vkp_status VKP_CALL vkp_decode_params_init_sized(vkp_decode_params* params, uint32_t struct_size);
static inline vkp_status VKP_CALL vkp_decode_params_init(vkp_decode_params* params) {
  return vkp_decode_params_init_sized(params, (uint32_t)sizeof(vkp_decode_params));
}

typedef struct vkp_decode_plan vkp_decode_plan;

/* Validates the shape and options against the contract and the device, chooses the variant
 * and the split, and creates (or finds) the pipelines. Host only; records nothing. options
 * NULL = defaults. Errors: INVALID_ARGUMENT (naming the field: head_size, block_size,
 * num_heads, options.split...), UNSUPPORTED (the device cannot run this shape, a kv_layout
 * other than vllm, or VKP_KERNEL_MATRIX where the matrix kernel cannot run), DEVICE. */
VKP_API vkp_status VKP_CALL vkp_decode_plan_create(vkp_context* context, const vkp_decode_shape* shape,
                                          const vkp_decode_options* options, vkp_decode_plan** out);
VKP_API void VKP_CALL vkp_decode_plan_destroy(vkp_decode_plan* plan);

/* What the plan chose. Its shape and options come from vkp_decode_plan_shape_get and
 * vkp_decode_plan_options_get (extensible structs never hold one another, so each grows alone). */
typedef struct vkp_decode_plan_info {
  uint32_t struct_size;
  vkp_bool32 split;
  uint32_t num_partitions;     /* 1 when single pass */
  uint32_t partition_tokens;   /* 0 when single pass */
  vkp_bool32 longest_first;    /* items run from vkp_record_decode_order's list */
  uint32_t reserved0;          /* padding made explicit: written 0 */
  uint64_t scratch_bytes;      /* size of vkp_decode_views.scratch; 0 when single pass without csr_page_table */
  uint64_t order_bytes;        /* size of vkp_decode_views.order; 0 unless longest_first */
  uint64_t merge_counter_bytes; /* size of vkp_decode_views.merge_counters; 0 unless merged in the dispatch */
} vkp_decode_plan_info;
VKP_API vkp_status VKP_CALL vkp_decode_plan_info_init_sized(vkp_decode_plan_info* info, uint32_t struct_size);
static inline vkp_status VKP_CALL vkp_decode_plan_info_init(vkp_decode_plan_info* info) {
  return vkp_decode_plan_info_init_sized(info, (uint32_t)sizeof(vkp_decode_plan_info));
}
VKP_API vkp_status VKP_CALL vkp_decode_plan_info_get(const vkp_decode_plan* plan, vkp_decode_plan_info* out);
/* The shape and options the plan was made with (the options as given, not what they chose). */
VKP_API vkp_status VKP_CALL vkp_decode_plan_shape_get(const vkp_decode_plan* plan, vkp_decode_shape* out);
VKP_API vkp_status VKP_CALL vkp_decode_plan_options_get(const vkp_decode_plan* plan, vkp_decode_options* out);
/* Bytes of scratch the plan's views need (0 when single pass without csr_page_table, or for a
 * NULL or dead plan). */
VKP_API size_t VKP_CALL vkp_decode_plan_scratch_bytes(const vkp_decode_plan* plan);
/* Bytes of merge counters the plan's views need (0 unless merged in the dispatch, or NULL). */
VKP_API size_t VKP_CALL vkp_decode_plan_merge_counter_bytes(const vkp_decode_plan* plan);
/* "split 64 x 512 tokens, 4 heads/workgroup, ..."; owned by the plan ("" for a NULL or dead plan). */
VKP_API const char* VKP_CALL vkp_decode_plan_describe(const vkp_decode_plan* plan);

/* The buffers of one decode, in the contract's layouts. Optional views are absent when their
 * buffer is VK_NULL_HANDLE. */
typedef struct vkp_decode_views {
  uint32_t struct_size;
  uint32_t reserved0; /* padding made explicit: ignored */
  vkp_tensor_view query;        /* [S, H, D] query dtype */
  vkp_tensor_view key_cache;    /* [N, Hkv, D/x, B, x] cache dtype (u8 for fp8) */
  vkp_tensor_view value_cache;  /* [N, Hkv, D, B] */
  vkp_tensor_view block_tables; /* [S, M] i32 or u32 (absent with the CSR form) */
  vkp_tensor_view context_lens; /* [S] i32 or u32 (absent with the CSR form) */
  vkp_tensor_view output;       /* [S, H, D] query dtype */
  vkp_tensor_view alibi_slopes; /* [H] f32, when shape.alibi */
  vkp_tensor_view sinks;        /* [H] f32, when shape.sinks */
  vkp_tensor_view lse;          /* [S, H] f32, when shape.lse */
  vkp_buffer_view scratch;      /* scratch_bytes, when not 0 */
  vkp_buffer_view status;       /* optional [1] u32: VKP_STATUS_* bits ORed in on the device */
  /* order_bytes, when the plan runs longest first: a list vkp_record_decode_order wrote for
   * this plan (from any lengths: each list names every item once, so one made from other
   * lengths costs time, never correctness). */
  vkp_buffer_view order;
  /* merge_counter_bytes, when the plan merges in the dispatch: zero before the first decode
   * that uses them, written by nothing but decodes (each leaves them zero), never by two
   * decodes that overlap in time (vkpaged::DecodeViews::merge_counters). */
  vkp_buffer_view merge_counters;
  /* FlashInfer's CSR page tables, in place of block_tables and context_lens (a plan made with
   * shape.csr_page_table; docs/contract.md): request s holds the blocks
   * kv_indices[kv_indptr[s] .. kv_indptr[s + 1]), its length is
   * (pages - 1) * B + kv_last_page_len[s] (0 without pages). Expanded into the scratch by one
   * more dispatch, then decoded as a dense table. */
  vkp_tensor_view kv_indptr;        /* [S + 1] i32 or u32 */
  vkp_tensor_view kv_indices;       /* [nnz] i32 or u32, any length: entries past kv_indptr[S] unread */
  vkp_tensor_view kv_last_page_len; /* [S] i32 or u32 */
} vkp_decode_views;
/* Defaults: every view absent. */
VKP_API vkp_status VKP_CALL vkp_decode_views_init_sized(vkp_decode_views* views, uint32_t struct_size);
static inline vkp_status VKP_CALL vkp_decode_views_init(vkp_decode_views* views) {
  return vkp_decode_views_init_sized(views, (uint32_t)sizeof(vkp_decode_views));
}

/* Bits of the optional device status word. */
#define VKP_STATUS_BAD_BLOCK_ID 1u
#define VKP_STATUS_BAD_CONTEXT_LEN 2u
#define VKP_STATUS_BAD_SLOT 4u
#define VKP_STATUS_BAD_ORDER 8u /* views.order names no item of the plan (never written?) */
#define VKP_STATUS_BAD_MERGE_COUNTERS 16u /* views.merge_counters not zero, or shared by overlapping decodes */
#define VKP_STATUS_BAD_QUERY_STARTS 32u /* attention: query starts that fall or pass T */
#define VKP_STATUS_BAD_POSITION 64u     /* rotary: a position outside [0, max_position) */
/* CSR page tables that break the contract (kv_indptr not 0 first, decreasing or past kv_indices,
 * more than M pages, a last page length outside [1, B], or not 0 without pages): clamped */
#define VKP_STATUS_BAD_PAGE_TABLE 128u

/* Checks the params and the views against the plan (values, dtypes, shapes, sizes, alignment)
 * and records one or two dispatches into cmd (compute shader stage: SHADER_READ of the inputs,
 * SHADER_WRITE of output, lse, scratch, status). params NULL = defaults. Allocates nothing,
 * never waits; barriers are the caller's. Errors: INVALID_ARGUMENT naming the value (scale,
 * softcap, k_scale, v_scale) or the view, or a plan made on another context (nothing recorded
 * then). */
VKP_API vkp_status VKP_CALL vkp_record_decode(vkp_context* context, VkCommandBuffer cmd, const vkp_decode_plan* plan,
                                     const vkp_decode_views* views, const vkp_decode_params* params);

/* VKP_ORDER_LONGEST_FIRST: writes the plan's items, longest first by their tokens under
 * context_lens ([S] i32 or u32), into order (order_bytes). Record it when the lengths change
 * (once per decode step), with a compute-to-compute barrier before the decodes that read it;
 * plans of one step that agree on S, partitions and sliding window share one list. Errors:
 * INVALID_ARGUMENT naming the argument (plan: not longest first; context_lens; order). */
VKP_API vkp_status VKP_CALL vkp_record_decode_order(vkp_context* context, VkCommandBuffer cmd, const vkp_decode_plan* plan,
                                           const vkp_tensor_view* context_lens, const vkp_buffer_view* order);

/* Host inputs of the convenience path and the reference (see vkpaged::DecodeInputs). */
typedef struct vkp_decode_inputs {
  uint32_t struct_size;
  vkp_dtype cache_dtype;        /* how the cache bytes are read; default f16 */
  vkp_host_tensor query;        /* [S, H, D] f32, f16 or bf16 */
  vkp_host_tensor key_cache;    /* [N, Hkv, D/x, B, x] cache dtype, or u8 for fp8 */
  vkp_host_tensor value_cache;  /* [N, Hkv, D, B] */
  vkp_host_tensor block_tables; /* [S, M] i32, u32 or i64 (absent with the CSR form) */
  vkp_host_tensor context_lens; /* [S] i32, u32 or i64 (absent with the CSR form) */
  vkp_host_tensor alibi_slopes; /* optional [H] f32 */
  vkp_host_tensor sinks;        /* optional [H] f32 */
  /* FlashInfer's CSR page tables in place of block_tables and context_lens (i32, u32 or i64). */
  vkp_host_tensor kv_indptr;        /* [S + 1]: 0 first, nondecreasing */
  vkp_host_tensor kv_indices;       /* [kv_indptr[S]] block ids in [0, N) */
  vkp_host_tensor kv_last_page_len; /* [S]: 0 without pages, else in [1, B] */
  /* With the CSR form: M, the plan's block-table columns (0 = the most pages of any request,
   * at least 1); with block_tables 0 or its columns. */
  uint32_t max_blocks_per_seq;
  uint32_t reserved0; /* padding made explicit: ignored */
} vkp_decode_inputs;
/* Defaults: every tensor absent, cache_dtype f16, max_blocks_per_seq 0. */
VKP_API vkp_status VKP_CALL vkp_decode_inputs_init_sized(vkp_decode_inputs* inputs, uint32_t struct_size);
static inline vkp_status VKP_CALL vkp_decode_inputs_init(vkp_decode_inputs* inputs) {
  return vkp_decode_inputs_init_sized(inputs, (uint32_t)sizeof(vkp_decode_inputs));
}

/* Derives and validates the shape of host inputs (block ids < N, lengths <= M * B too).
 * Errors: INVALID_ARGUMENT naming the input. */
VKP_API vkp_status VKP_CALL vkp_decode_shape_of(const vkp_decode_inputs* inputs, vkp_bool32 want_lse, vkp_decode_shape* out);

/* Uploads, plans (the shape of vkp_decode_shape_of, its softcap from params->softcap != 0),
 * runs, waits and downloads. output: S * H * D elements of the query dtype (output_bytes at
 * least that); lse: NULL, or S * H floats (lse_count at least that). options and params NULL
 * = defaults. Errors: INVALID_ARGUMENT, UNSUPPORTED, OUT_OF_MEMORY, DEVICE. */
VKP_API vkp_status VKP_CALL vkp_decode_attention(vkp_context* context, const vkp_decode_inputs* inputs,
                                        const vkp_decode_options* options, const vkp_decode_params* params,
                                        void* output, size_t output_bytes, float* lse, size_t lse_count);
/* The CPU reference of the same (double accumulation), with the same arguments. */
VKP_API vkp_status VKP_CALL vkp_reference_decode_attention(const vkp_decode_inputs* inputs, const vkp_decode_options* options,
                                                  const vkp_decode_params* params, void* output,
                                                  size_t output_bytes, float* lse, size_t lse_count);

/* ===================================================================== multi-query attention */

/* Attention over the paged cache for a whole engine step (attention.hpp; docs/contract.md,
 * "Multi-query attention"): each request brings one or more new query tokens (decode,
 * speculative verification, prefill chunks after a cached prefix, whole prompts), all in one
 * recorded operator. A plan takes the step's query starts on the host; a batch of single tokens
 * runs on the decode kernels, any other on the attention kernels. */

/* Which kernel family runs a plan; values equal vkpaged::AttentionKernel's (new kernels are
 * appended: a value this library does not know is refused). */
typedef enum vkp_attention_kernel {
  /* the decode kernels for a batch of single tokens they can take (any layout, no tree mask),
   * else the matrix attention kernel where it can run, else the scalar one */
  VKP_ATTENTION_KERNEL_AUTOMATIC = 0,
  VKP_ATTENTION_KERNEL_DECODE = 1, /* the decode kernels: every q_s = 1, any layout, no tree mask */
  VKP_ATTENTION_KERNEL_SCALAR = 2, /* the portable attention kernel, whatever the batch */
  /* The tensor-core attention kernel (VK_KHR_cooperative_matrix with f16 products): f16 and bf16
   * queries, f16, bf16 and fp8 caches, pools within maxStorageBufferRange (MLA's: any, by device
   * address past it); UNSUPPORTED (naming
   * why) where it cannot run. */
  VKP_ATTENTION_KERNEL_MATRIX = 3,
  VKP_ATTENTION_KERNEL_MAX_ENUM = 0x7FFFFFFF
} vkp_attention_kernel;

/* What shapes the work (vkpaged::AttentionShape): validated by vkp_attention_plan_create. */
typedef struct vkp_attention_shape {
  uint32_t struct_size;
  uint32_t num_requests;       /* S */
  uint32_t num_query_tokens;   /* T = sum of q_s */
  uint32_t num_heads;          /* H */
  uint32_t num_kv_heads;       /* Hkv, divides H */
  uint32_t head_size;          /* D: a multiple of 8 from 32 to 256 (512 on the decode kernels) */
  uint32_t block_size;         /* B: a power of two from 1 to 128 */
  uint32_t num_blocks;         /* N */
  uint32_t max_blocks_per_seq; /* M */
  uint32_t max_context_len;    /* bound on every context length, sizes the split; 0 = M * B */
  vkp_dtype query_dtype;       /* query and output: f32, f16, bf16 */
  vkp_dtype cache_dtype;       /* f32, f16, bf16, fp8_e4m3, fp8_e5m2 */
  vkp_kv_layout kv_layout;
  uint32_t sliding_window;     /* W > 0: a query at p attends [max(0, p - W + 1), p]; 0 = off */
  vkp_bool32 softcap;          /* a soft cap will be given (vkp_decode_params.softcap > 0) */
  vkp_bool32 alibi;            /* ALiBi slopes [H] f32 will be given */
  vkp_bool32 sinks;            /* sink logits [H] f32 will be given */
  vkp_bool32 lse;              /* write log-sum-exp [T, H] f32 */
  vkp_bool32 tree_mask;        /* tree masks (views.tree_mask) will be given */
  /* Page tables may come in FlashInfer's CSR form (views.kv_indptr, ...): the scratch then
   * holds their expansion (scratch_bytes counts it), and each call takes either form. */
  vkp_bool32 csr_page_table;
} vkp_attention_shape;
/* Defaults: every count 0, f16 query and cache, the vllm layout, every feature off. */
VKP_API vkp_status VKP_CALL vkp_attention_shape_init_sized(vkp_attention_shape* shape, uint32_t struct_size);
static inline vkp_status VKP_CALL vkp_attention_shape_init(vkp_attention_shape* shape) {
  return vkp_attention_shape_init_sized(shape, (uint32_t)sizeof(vkp_attention_shape));
}

/* How the plan may run (vkpaged::AttentionOptions); nothing here changes the results beyond
 * the contract's tolerances. */
typedef struct vkp_attention_options {
  uint32_t struct_size;
  vkp_attention_kernel kernel;
  vkp_split_mode split;      /* split the key positions into partitions merged after */
  uint32_t partition_tokens; /* split: key positions per partition (a multiple of 256); 0 = auto */
} vkp_attention_options;
/* Defaults: automatic kernel and split. */
VKP_API vkp_status VKP_CALL vkp_attention_options_init_sized(vkp_attention_options* options, uint32_t struct_size);
static inline vkp_status VKP_CALL vkp_attention_options_init(vkp_attention_options* options) {
  return vkp_attention_options_init_sized(options, (uint32_t)sizeof(vkp_attention_options));
}

typedef struct vkp_attention_plan vkp_attention_plan;

/* Validates the shape, the query starts (num_query_starts = S + 1 values on the host, those the
 * device will hold: query_starts[0] = 0, each q_s >= 1, query_starts[S] = T) and the options
 * against the contract and the device, chooses the kernel and the split, and creates (or
 * finds) the pipelines. Host only; records nothing. options NULL = defaults. The plan belongs
 * to the context: destroy it first; it may be shared between threads.
 * Errors: INVALID_ARGUMENT naming the field or query_starts[i], UNSUPPORTED (the device cannot
 * run it, VKP_ATTENTION_KERNEL_DECODE for a batch the decode kernels cannot take), DEVICE. */
VKP_API vkp_status VKP_CALL vkp_attention_plan_create(vkp_context* context, const vkp_attention_shape* shape,
                                                      const int32_t* query_starts, size_t num_query_starts,
                                                      const vkp_attention_options* options, vkp_attention_plan** out);
VKP_API void VKP_CALL vkp_attention_plan_destroy(vkp_attention_plan* plan);

/* A plan for a bucket of steps, which every step inside it may run, recorded once and replayed
 * (AttentionPlan::create_bucket; docs/integration.md, "Replaying a recorded step"): shape's S, T
 * and max_context_len are the bucket's most requests, most new tokens and longest context
 * (0 = M * B), max_query_tokens its longest request's new tokens (0 = T; 1 with T = S: decode
 * steps, on the decode kernels). A step fills the plan's S and T with padding: its requests
 * first, then requests of no new tokens (query starts that stay at the step's token count) and
 * context length 0; output rows past its tokens are unspecified. Every length, block table and
 * query start is read on the device. Errors: as vkp_attention_plan_create, INVALID_ARGUMENT
 * naming max_query_tokens (above T or the longest context). */
VKP_API vkp_status VKP_CALL vkp_attention_plan_create_bucket(vkp_context* context, const vkp_attention_shape* shape,
                                                             uint32_t max_query_tokens,
                                                             const vkp_attention_options* options,
                                                             vkp_attention_plan** out);
/* The scratch the bucket's plan needs, the most any of its steps uses (AttentionPlan::
 * max_scratch_bytes): what vkp_attention_plan_create_bucket's plan would report, without a plan
 * or a pipeline, so that an engine allocates it once. Errors: as vkp_attention_plan_create_bucket. */
VKP_API vkp_status VKP_CALL vkp_attention_bucket_scratch_bytes(vkp_context* context, const vkp_attention_shape* shape,
                                                               uint32_t max_query_tokens,
                                                               const vkp_attention_options* options, uint64_t* bytes);

/* What the plan chose. Its shape and options come from vkp_attention_plan_shape_get and
 * vkp_attention_plan_options_get. */
typedef struct vkp_attention_plan_info {
  uint32_t struct_size;
  vkp_attention_kernel kernel; /* DECODE, SCALAR or MATRIX: the family that runs it */
  uint32_t max_query_tokens;   /* the longest request's q_s */
  vkp_bool32 split;
  uint32_t num_partitions;     /* 1 when not split */
  uint32_t reserved0;          /* padding made explicit: written 0 */
  uint64_t tree_mask_bytes;    /* sum of q_s^2 (a bucket's: the most): size of views.tree_mask; 0 without */
  uint64_t scratch_bytes;      /* size of views.scratch; 0 when not split, without csr_page_table */
  vkp_bool32 bucket;           /* made by vkp_attention_plan_create_bucket */
  uint32_t reserved1;          /* padding made explicit: written 0 */
} vkp_attention_plan_info;
VKP_API vkp_status VKP_CALL vkp_attention_plan_info_init_sized(vkp_attention_plan_info* info, uint32_t struct_size);
static inline vkp_status VKP_CALL vkp_attention_plan_info_init(vkp_attention_plan_info* info) {
  return vkp_attention_plan_info_init_sized(info, (uint32_t)sizeof(vkp_attention_plan_info));
}
VKP_API vkp_status VKP_CALL vkp_attention_plan_info_get(const vkp_attention_plan* plan, vkp_attention_plan_info* out);
/* The shape and options the plan was made with (the options as given, not what they chose). */
VKP_API vkp_status VKP_CALL vkp_attention_plan_shape_get(const vkp_attention_plan* plan, vkp_attention_shape* out);
VKP_API vkp_status VKP_CALL vkp_attention_plan_options_get(const vkp_attention_plan* plan, vkp_attention_options* out);
/* What the plan chose, in words; owned by the plan ("" for a NULL or dead plan). */
VKP_API const char* VKP_CALL vkp_attention_plan_describe(const vkp_attention_plan* plan);

/* The buffers of one call. Cache shapes by layout (x = 16 / element bytes): vllm key
 * [N, Hkv, D/x, B, x], value [N, Hkv, D, B]; nhd [N, B, Hkv, D]; hnd [N, Hkv, B, D]. Optional
 * views are absent when their buffer is VK_NULL_HANDLE. */
typedef struct vkp_attention_views {
  uint32_t struct_size;
  uint32_t reserved0;           /* padding made explicit: ignored */
  vkp_tensor_view query;        /* [T, H, D] query dtype */
  vkp_tensor_view key_cache;    /* cache dtype (u8 for fp8), in the shape's kv_layout */
  vkp_tensor_view value_cache;
  vkp_tensor_view block_tables; /* [S, M] i32 or u32 (absent with the CSR form) */
  vkp_tensor_view context_lens; /* [S] i32 or u32: L_s >= q_s, the new tokens included */
  vkp_tensor_view query_starts; /* [S + 1] i32 or u32: the plan's values */
  vkp_tensor_view output;       /* [T, H, D] query dtype */
  vkp_tensor_view lse;          /* [T, H] f32, when shape.lse */
  /* u8 [tree_mask_bytes], when shape.tree_mask: the requests' q_s x q_s matrices one after
   * another, row j (new token j) by row, 1 where token j sees token j'. The view's buffer
   * range covers whole 32-bit words (its size rounded up to 4 bytes). */
  vkp_tensor_view tree_mask;
  vkp_tensor_view alibi_slopes; /* [H] f32, when shape.alibi */
  vkp_tensor_view sinks;        /* [H] f32, when shape.sinks */
  vkp_buffer_view scratch;      /* scratch_bytes, when not 0 */
  /* optional [1] u32: VKP_STATUS_BAD_BLOCK_ID, _BAD_CONTEXT_LEN (also a length below its q_s),
   * _BAD_QUERY_STARTS, _BAD_PAGE_TABLE ORed in on the device */
  vkp_buffer_view status;
  /* FlashInfer's CSR page tables in place of block_tables and context_lens, as
   * vkp_decode_views' (a plan made with shape.csr_page_table). */
  vkp_tensor_view kv_indptr;        /* [S + 1] i32 or u32 */
  vkp_tensor_view kv_indices;       /* [nnz] i32 or u32, any length: entries past kv_indptr[S] unread */
  vkp_tensor_view kv_last_page_len; /* [S] i32 or u32 */
} vkp_attention_views;
/* Defaults: every view absent. */
VKP_API vkp_status VKP_CALL vkp_attention_views_init_sized(vkp_attention_views* views, uint32_t struct_size);
static inline vkp_status VKP_CALL vkp_attention_views_init(vkp_attention_views* views) {
  return vkp_attention_views_init_sized(views, (uint32_t)sizeof(vkp_attention_views));
}

/* Checks the params and the views against the plan and records the work (compute shader
 * stage, as vkp_record_decode; split plans: dispatches with compute-to-compute barriers
 * between them). params NULL = defaults. Allocates no GPU memory, never waits.
 * Errors: INVALID_ARGUMENT naming the value or the view, or a plan made on another context. */
VKP_API vkp_status VKP_CALL vkp_record_attention(vkp_context* context, VkCommandBuffer cmd,
                                                 const vkp_attention_plan* plan, const vkp_attention_views* views,
                                                 const vkp_decode_params* params);

/* Host inputs of the convenience path and the reference (vkpaged::AttentionInputs). */
typedef struct vkp_attention_inputs {
  uint32_t struct_size;
  vkp_dtype cache_dtype;        /* how the cache bytes are read; default f16 */
  vkp_host_tensor query;        /* [T, H, D] f32, f16 or bf16 */
  vkp_host_tensor key_cache;    /* in kv_layout; cache dtype, or u8 for fp8 */
  vkp_host_tensor value_cache;
  vkp_host_tensor block_tables; /* [S, M] i32, u32 or i64 */
  vkp_host_tensor context_lens; /* [S] i32, u32 or i64 */
  vkp_host_tensor query_starts; /* [S + 1] i32, u32 or i64 */
  vkp_host_tensor tree_mask;    /* optional u8 [sum of q_s^2] */
  vkp_host_tensor alibi_slopes; /* optional [H] f32 */
  vkp_host_tensor sinks;        /* optional [H] f32 */
  vkp_kv_layout kv_layout;      /* default vllm */
  uint32_t sliding_window;      /* default 0 (off) */
  /* FlashInfer's CSR page tables in place of block_tables and context_lens, as
   * vkp_decode_inputs' (and its max_blocks_per_seq). */
  vkp_host_tensor kv_indptr;
  vkp_host_tensor kv_indices;
  vkp_host_tensor kv_last_page_len;
  uint32_t max_blocks_per_seq;
  uint32_t reserved0; /* padding made explicit: ignored */
} vkp_attention_inputs;
/* Defaults: every tensor absent, cache_dtype f16, the vllm layout, no window,
 * max_blocks_per_seq 0. */
VKP_API vkp_status VKP_CALL vkp_attention_inputs_init_sized(vkp_attention_inputs* inputs, uint32_t struct_size);
static inline vkp_status VKP_CALL vkp_attention_inputs_init(vkp_attention_inputs* inputs) {
  return vkp_attention_inputs_init_sized(inputs, (uint32_t)sizeof(vkp_attention_inputs));
}

/* Derives and validates the shape of host inputs (the plan's checks, plus block ids < N,
 * q_s <= context lengths <= M * B, a tree mask of 0/1 bytes); softcap from
 * params->softcap > 0. params NULL = defaults. Errors: INVALID_ARGUMENT naming the input. */
VKP_API vkp_status VKP_CALL vkp_attention_shape_of(const vkp_attention_inputs* inputs, const vkp_decode_params* params,
                                                   vkp_bool32 want_lse, vkp_attention_shape* out);
/* Uploads, plans, runs, waits and downloads. output: T * H * D elements of the query dtype
 * (output_bytes at least that); lse: NULL, or T * H floats (lse_count at least that).
 * options and params NULL = defaults. Errors: INVALID_ARGUMENT, UNSUPPORTED, OUT_OF_MEMORY,
 * DEVICE, INTERNAL (the shaders flagged a value the host checks passed). */
VKP_API vkp_status VKP_CALL vkp_batch_attention(vkp_context* context, const vkp_attention_inputs* inputs,
                                                const vkp_attention_options* options, const vkp_decode_params* params,
                                                void* output, size_t output_bytes, float* lse, size_t lse_count);
/* The CPU reference of the same (double accumulation), every cache layout. */
VKP_API vkp_status VKP_CALL vkp_reference_batch_attention(const vkp_attention_inputs* inputs,
                                                          const vkp_decode_params* params, void* output,
                                                          size_t output_bytes, float* lse, size_t lse_count);

/* ===================================================================== cache operations */

/* fp8 caches: element = decode(byte) * scale; finite and > 0. NULL = both 1. */
typedef struct vkp_cache_scales {
  uint32_t struct_size;
  float k_scale; /* default 1 */
  float v_scale; /* default 1 */
} vkp_cache_scales;
VKP_API vkp_status VKP_CALL vkp_cache_scales_init_sized(vkp_cache_scales* scales, uint32_t struct_size);
static inline vkp_status VKP_CALL vkp_cache_scales_init(vkp_cache_scales* scales) {
  return vkp_cache_scales_init_sized(scales, (uint32_t)sizeof(vkp_cache_scales));
}

/* A whole-block copy: pairs for copy_blocks and swap_blocks, as the block manager hands out. */
typedef struct vkp_block_copy {
  int32_t src;
  int32_t dst;
} vkp_block_copy;

/* Cache views carry the cache dtype itself (f32, f16, bf16, fp8_e4m3, fp8_e5m2; copies also
 * take u8 for raw fp8 bytes) and the shapes of the views struct's layout (vkp_kv_layout), keys
 * and values alike; D is a multiple of x in every layout, and cache views start 16-byte
 * aligned. */
typedef struct vkp_reshape_and_cache_views {
  uint32_t struct_size;
  vkp_kv_layout layout;         /* of key_cache and value_cache; default vllm */
  vkp_tensor_view key;          /* [T, Hkv, D] f32, f16 or bf16 */
  vkp_tensor_view value;        /* [T, Hkv, D], key's dtype */
  vkp_tensor_view slot_mapping; /* [T] i64 or i32; negative = padding */
  vkp_tensor_view key_cache;    /* vllm [N, Hkv, D/x, B, x]; nhd [N, B, Hkv, D]; hnd [N, Hkv, B, D] */
  vkp_tensor_view value_cache;  /* vllm [N, Hkv, D, B]; nhd and hnd as key_cache */
  vkp_buffer_view status;       /* optional [1] u32: VKP_STATUS_BAD_SLOT (and _BAD_POSITION with rotary) */
} vkp_reshape_and_cache_views;
/* Defaults: every view absent, the vllm layout. */
VKP_API vkp_status VKP_CALL vkp_reshape_and_cache_views_init_sized(vkp_reshape_and_cache_views* views, uint32_t struct_size);
static inline vkp_status VKP_CALL vkp_reshape_and_cache_views_init(vkp_reshape_and_cache_views* views) {
  return vkp_reshape_and_cache_views_init_sized(views, (uint32_t)sizeof(vkp_reshape_and_cache_views));
}
/* Writes token i into block slot / B, offset slot % B (fp8: encode(value * (1 / scale))).
 * Compute shader stage: reads key, value, slot_mapping; writes the caches (atomics on the
 * value cache) and status. Errors: INVALID_ARGUMENT naming the view or scale. */
VKP_API vkp_status VKP_CALL vkp_record_reshape_and_cache(vkp_context* context, VkCommandBuffer cmd,
                                                const vkp_reshape_and_cache_views* views,
                                                const vkp_cache_scales* scales);

/* One layer's key and value pools. In arrays (layers, src, dst) every element carries the same
 * struct_size, which sets the array's stride. */
typedef struct vkp_layer_cache_views {
  uint32_t struct_size;
  vkp_kv_layout layout; /* copies move whole blocks, alike in every layout; the shapes are checked against it */
  vkp_tensor_view key_cache;
  vkp_tensor_view value_cache;
} vkp_layer_cache_views;
/* Defaults: both views absent, the vllm layout. */
VKP_API vkp_status VKP_CALL vkp_layer_cache_views_init_sized(vkp_layer_cache_views* views, uint32_t struct_size);
static inline vkp_status VKP_CALL vkp_layer_cache_views_init(vkp_layer_cache_views* views) {
  return vkp_layer_cache_views_init_sized(views, (uint32_t)sizeof(vkp_layer_cache_views));
}
/* Copies whole blocks within each of num_layers layers: one vkCmdCopyBuffer per pool.
 * Transfer stage. Errors: INVALID_ARGUMENT (ids outside [0, N), a dst given twice, a block
 * both source and destination, layouts that disagree). */
VKP_API vkp_status VKP_CALL vkp_record_copy_blocks(vkp_context* context, VkCommandBuffer cmd,
                                          const vkp_layer_cache_views* layers, size_t num_layers,
                                          const vkp_block_copy* pairs, size_t num_pairs);
/* Moves blocks src[l] -> dst[l] between caches of one layout except N (device <-> host
 * visible): pairs index src's and dst's blocks. Transfer stage (barrier transfer -> host
 * before reading a host-visible destination). Errors: INVALID_ARGUMENT (ids, a dst given
 * twice, num_dst != num_src, overlapping views). */
VKP_API vkp_status VKP_CALL vkp_record_swap_blocks(vkp_context* context, VkCommandBuffer cmd, const vkp_layer_cache_views* src,
                                          size_t num_src, const vkp_layer_cache_views* dst, size_t num_dst,
                                          const vkp_block_copy* pairs, size_t num_pairs);

typedef struct vkp_gather_views {
  uint32_t struct_size;
  vkp_kv_layout layout; /* of key_cache and value_cache; default vllm */
  vkp_tensor_view key_cache;
  vkp_tensor_view value_cache;
  vkp_tensor_view block_tables; /* [S, M] i32 or u32 */
  vkp_tensor_view seq_starts;   /* [S + 1] i32 or u32, non-decreasing */
  vkp_tensor_view key_out;      /* [T, Hkv, D] f32, f16 or bf16 */
  vkp_tensor_view value_out;    /* [T, Hkv, D], key_out's dtype */
  vkp_buffer_view status;       /* optional [1] u32: VKP_STATUS_BAD_BLOCK_ID / _BAD_CONTEXT_LEN */
} vkp_gather_views;
/* Defaults: every view absent, the vllm layout. */
VKP_API vkp_status VKP_CALL vkp_gather_views_init_sized(vkp_gather_views* views, uint32_t struct_size);
static inline vkp_status VKP_CALL vkp_gather_views_init(vkp_gather_views* views) {
  return vkp_gather_views_init_sized(views, (uint32_t)sizeof(vkp_gather_views));
}
/* Paged to contiguous: row seq_starts[s] + p of the outputs is position p of sequence s.
 * Compute shader stage. Errors: INVALID_ARGUMENT naming the view or scale. */
VKP_API vkp_status VKP_CALL vkp_record_gather(vkp_context* context, VkCommandBuffer cmd, const vkp_gather_views* views,
                                     const vkp_cache_scales* scales);

/* max |x| of x (f32, f16, bf16) combined by atomicMax into the f32 at amax_out, which the
 * caller zeroes first. Compute shader stage. Errors: INVALID_ARGUMENT. */
VKP_API vkp_status VKP_CALL vkp_record_absmax(vkp_context* context, VkCommandBuffer cmd, const vkp_tensor_view* x,
                                     const vkp_buffer_view* amax_out);
/* *scale = max(amax, 1e-12) / max of fp8_format. Errors: INVALID_ARGUMENT (not an fp8 dtype,
 * amax negative or not finite). */
VKP_API vkp_status VKP_CALL vkp_fp8_scale_from_amax(float amax, vkp_dtype fp8_format, float* scale);

/* Fills a view with reproducible pseudo-random values in (-1, 1) of its dtype (fp8: codes of
 * magnitude below 2; integer dtypes: random bits). Compute shader stage.
 * Errors: INVALID_ARGUMENT (not a whole number of 32-bit words, bad view). */
VKP_API vkp_status VKP_CALL vkp_record_fill_random(vkp_context* context, VkCommandBuffer cmd, const vkp_tensor_view* view,
                                          uint32_t seed);

typedef struct vkp_bandwidth {
  uint32_t struct_size;
  uint32_t reserved0;      /* padding made explicit: written 0 */
  uint64_t bytes;          /* bytes read per repetition */
  double median_ns;        /* median GPU time */
  double bytes_per_second;
} vkp_bandwidth;
VKP_API vkp_status VKP_CALL vkp_bandwidth_init_sized(vkp_bandwidth* bandwidth, uint32_t struct_size);
static inline vkp_status VKP_CALL vkp_bandwidth_init(vkp_bandwidth* bandwidth) {
  return vkp_bandwidth_init_sized(bandwidth, (uint32_t)sizeof(vkp_bandwidth));
}
/* Streams `bytes` from a device buffer: warm-up, then the median of `repetitions` timed runs.
 * Errors: INVALID_ARGUMENT, UNSUPPORTED (no timestamps), OUT_OF_MEMORY, DEVICE. */
VKP_API vkp_status VKP_CALL vkp_measure_read_bandwidth(vkp_context* context, size_t bytes, int32_t repetitions,
                                              vkp_bandwidth* out);

/* A device buffer of its own, read end to end with 16-byte loads (what vkp_measure_read_bandwidth
 * times). Recorded between a benchmark's repetitions, it leaves the GPU's caches holding its
 * data, so the next repetition reads from memory (a cache flush with nothing dirty to write
 * back). bytes is rounded down to 16 and capped at maxStorageBufferRange.
 * Errors: INVALID_ARGUMENT (bytes < 16, NULL), OUT_OF_MEMORY, DEVICE. */
typedef struct vkp_streaming_read vkp_streaming_read;
VKP_API vkp_status VKP_CALL vkp_streaming_read_create(vkp_context* context, size_t bytes, vkp_streaming_read** out);
VKP_API void VKP_CALL vkp_streaming_read_destroy(vkp_streaming_read* read);
/* Bytes it reads; 0 for NULL. */
VKP_API size_t VKP_CALL vkp_streaming_read_bytes(const vkp_streaming_read* read);
/* Records the read (compute stage). It may write a 16-byte sink of its own: two records in one
 * command buffer need a barrier between them. Errors: INVALID_ARGUMENT (NULL, another context). */
VKP_API vkp_status VKP_CALL vkp_record_streaming_read(vkp_context* context, VkCommandBuffer cmd, const vkp_streaming_read* read);
/* Records one streaming read of memory the caller owns (the same kernel): data is read end to
 * end with 16-byte loads, its size rounded down to 16 (at least 16 bytes, at most
 * maxStorageBufferRange, the offset a multiple of 16 and of minStorageBufferOffsetAlignment);
 * sink (16 bytes, the same rules) may be written, so two records sharing a sink need a barrier
 * between them. `vkpaged bench` reads a case's own cache pools this way. Compute stage.
 * Errors: INVALID_ARGUMENT naming the view (NULL, absent, outside its buffer, misaligned). */
VKP_API vkp_status VKP_CALL vkp_record_streaming_read_of(vkp_context* context, VkCommandBuffer cmd,
                                                         const vkp_buffer_view* data, const vkp_buffer_view* sink);
/* vkp_measure_read_bandwidth over this read's buffer (one buffer both to time and to flush with).
 * Errors: INVALID_ARGUMENT (NULL, another context, repetitions < 1), UNSUPPORTED, DEVICE. */
VKP_API vkp_status VKP_CALL vkp_measure_streaming_read(vkp_context* context, const vkp_streaming_read* read, int32_t repetitions,
                                              vkp_bandwidth* out);
/* The same with each timed run recorded after untimed_before in one command buffer (as
 * vkp_run_and_time_after): the read timed inside a command buffer already under way.
 * Errors: INVALID_ARGUMENT (NULL, another context, repetitions < 1), UNSUPPORTED, DEVICE. */
VKP_API vkp_status VKP_CALL vkp_measure_streaming_read_after(vkp_context* context, const vkp_streaming_read* read,
                                                    const vkp_streaming_read* untimed_before, int32_t repetitions,
                                                    vkp_bandwidth* out);

/* ===================================================================== rotary embedding */

/* Rotary position embedding (RoPE) as vLLM's rotary_embedding computes it (rotary.hpp): a token
 * at position p rotates the first rotary_dim elements of each of its query and key heads in
 * pairs, with c = cos_sin_cache[p][i], s = cos_sin_cache[p][rotary_dim / 2 + i]:
 * x' = x c - y s, y' = y c + x s in f32, rounded (nearest even) to the tensor's dtype; elements
 * past rotary_dim stay as they are. */
typedef enum vkp_rotary_style {
  VKP_ROTARY_NEOX = 0, /* pair i = (i, i + rotary_dim / 2): GPT-NeoX, Llama (vLLM is_neox_style) */
  VKP_ROTARY_GPTJ = 1, /* pair i = (2i, 2i + 1): GPT-J, interleaved */
  VKP_ROTARY_STYLE_MAX_ENUM = 0x7FFFFFFF
} vkp_rotary_style;

/* Queries and keys rotated in place. query [T, H, D] and key [T, Hkv, D]: f32, f16 or bf16, one
 * dtype; either may be absent (the other alone is rotated); they must not overlap. positions
 * [T] i64 or i32. cos_sin_cache [max_position, rotary_dim]: f32 or the query's dtype; rotary_dim
 * even, 2 <= rotary_dim <= D; D even. */
typedef struct vkp_rotary_views {
  uint32_t struct_size;
  vkp_rotary_style style; /* default VKP_ROTARY_NEOX */
  vkp_tensor_view query;
  vkp_tensor_view key;
  vkp_tensor_view positions;
  vkp_tensor_view cos_sin_cache;
  vkp_buffer_view status; /* optional [1] u32: VKP_STATUS_BAD_POSITION (its token left as it was) */
} vkp_rotary_views;
/* Defaults: every view absent, NeoX style. */
VKP_API vkp_status VKP_CALL vkp_rotary_views_init_sized(vkp_rotary_views* views, uint32_t struct_size);
static inline vkp_status VKP_CALL vkp_rotary_views_init(vkp_rotary_views* views) {
  return vkp_rotary_views_init_sized(views, (uint32_t)sizeof(vkp_rotary_views));
}
/* Records one dispatch (compute shader stage: reads positions and cos_sin_cache, reads and
 * writes query and key, ORs status). Errors: INVALID_ARGUMENT naming the view or the style. */
VKP_API vkp_status VKP_CALL vkp_record_rotary_embedding(vkp_context* context, VkCommandBuffer cmd,
                                                        const vkp_rotary_views* views);

/* What reshape_and_cache with rotary embedding takes beside its views: the keys
 * (vkp_reshape_and_cache_views.key) are rotated in place and written rotated into the cache,
 * the queries (optional) rotated in place. */
typedef struct vkp_rotary_inputs {
  uint32_t struct_size;
  vkp_rotary_style style;        /* default VKP_ROTARY_NEOX */
  vkp_tensor_view query;         /* [T, H, D] of the key's dtype and D, or absent */
  vkp_tensor_view positions;     /* [T] i64 or i32 */
  vkp_tensor_view cos_sin_cache; /* [max_position, rotary_dim] f32 or the key's dtype */
} vkp_rotary_inputs;
/* Defaults: every view absent, NeoX style. */
VKP_API vkp_status VKP_CALL vkp_rotary_inputs_init_sized(vkp_rotary_inputs* rotary, uint32_t struct_size);
static inline vkp_status VKP_CALL vkp_rotary_inputs_init(vkp_rotary_inputs* rotary) {
  return vkp_rotary_inputs_init_sized(rotary, (uint32_t)sizeof(vkp_rotary_inputs));
}
/* What vkp_record_rotary_embedding then vkp_record_reshape_and_cache would do, bit for bit, in
 * one dispatch. Every token is rotated, padding tokens (negative slots) included; a token whose
 * position is out of range is left as it was, cache slot included, and flagged
 * (VKP_STATUS_BAD_POSITION in views->status, beside VKP_STATUS_BAD_SLOT). scales NULL = 1, 1.
 * Errors: INVALID_ARGUMENT naming the view, the scale or the style. */
VKP_API vkp_status VKP_CALL vkp_record_reshape_and_cache_rotary(vkp_context* context, VkCommandBuffer cmd,
                                                                const vkp_reshape_and_cache_views* views,
                                                                const vkp_rotary_inputs* rotary,
                                                                const vkp_cache_scales* scales);

/* The cos/sin cache vLLM's RotaryEmbedding builds (computed in double, then rounded): row p
 * holds cos(p * f_i) for i < rotary_dim / 2, then sin(p * f_i), f_i = base^(-2i / rotary_dim).
 * out must carry the dtype wanted (f32, f16 or bf16) and the shape [max_position, rotary_dim];
 * it is written. Errors: INVALID_ARGUMENT (max_position 0, rotary_dim odd or below 2, base not
 * finite or <= 0, out's dtype not f32, f16 or bf16, out's shape not [max_position, rotary_dim]). */
VKP_API vkp_status VKP_CALL vkp_rotary_cos_sin_cache(uint32_t max_position, uint32_t rotary_dim, double base,
                                                     vkp_host_tensor* out);
/* Convenience: uploads, rotates on the device, waits and downloads query and key in place
 * (either may be NULL or absent; written only on success). Positions out of
 * [0, max_position) are refused, naming the first one and its value, before anything runs.
 * Errors: INVALID_ARGUMENT, OUT_OF_MEMORY, DEVICE. */
VKP_API vkp_status VKP_CALL vkp_rotary_embedding(vkp_context* context, vkp_host_tensor* query, vkp_host_tensor* key,
                                                 const vkp_host_tensor* positions,
                                                 const vkp_host_tensor* cos_sin_cache, vkp_rotary_style style);

/* ===================================================================== cascade merge */

/* Merges the (output, log-sum-exp) pairs of attention over two disjoint key sets (a shared
 * prefix and each sequence's suffix) into attention over their union; see merge.hpp. */
typedef struct vkp_merge_views {
  uint32_t struct_size;
  uint32_t reserved0; /* padding made explicit: ignored */
  vkp_tensor_view output_a; /* [S, H, D] f32, f16 or bf16 */
  vkp_tensor_view lse_a;    /* [S, H] f32 */
  vkp_tensor_view output_b; /* [S, H, D], output_a's dtype */
  vkp_tensor_view lse_b;    /* [S, H] f32 */
  vkp_tensor_view output;   /* [S, H, D]; may be output_a's or output_b's memory */
  vkp_tensor_view lse;      /* optional [S, H] f32 */
} vkp_merge_views;
/* Defaults: every view absent. */
VKP_API vkp_status VKP_CALL vkp_merge_views_init_sized(vkp_merge_views* views, uint32_t struct_size);
static inline vkp_status VKP_CALL vkp_merge_views_init(vkp_merge_views* views) {
  return vkp_merge_views_init_sized(views, (uint32_t)sizeof(vkp_merge_views));
}
/* Compute shader stage: reads the four inputs, writes output and lse.
 * Errors: INVALID_ARGUMENT naming the view. */
VKP_API vkp_status VKP_CALL vkp_record_merge_attention(vkp_context* context, VkCommandBuffer cmd, const vkp_merge_views* views);
/* The same over host arrays (upload, run, wait, download): the states a and b are (output
 * [S, H, D], lse [S, H] f32), named a.output, a.lse, b.output, b.lse in messages; output gets
 * [S, H, D] of a's dtype and lse (may be NULL) [S, H] f32: their dtype and shape must be those. */
VKP_API vkp_status VKP_CALL vkp_merge_attention(vkp_context* context, const vkp_host_tensor* a_output,
                                       const vkp_host_tensor* a_lse, const vkp_host_tensor* b_output,
                                       const vkp_host_tensor* b_lse, vkp_host_tensor* output, vkp_host_tensor* lse);
/* The CPU reference of the merge (double precision), with the same arguments. */
VKP_API vkp_status VKP_CALL vkp_reference_merge_attention(const vkp_host_tensor* a_output, const vkp_host_tensor* a_lse,
                                                 const vkp_host_tensor* b_output, const vkp_host_tensor* b_lse,
                                                 vkp_host_tensor* output, vkp_host_tensor* lse);

/* ===================================================================== CPU references */

/* The caches of these references are in `layout` (the shapes of vkp_reshape_and_cache_views);
 * results are written back into the caller's arrays only after every check passed. */

/* As vkp_record_reshape_and_cache, in place on host caches (key_cache and value_cache are
 * written). Refuses a slot >= N * B. */
VKP_API vkp_status VKP_CALL vkp_reference_reshape_and_cache(const vkp_host_tensor* key, const vkp_host_tensor* value,
                                                   const vkp_host_tensor* slot_mapping, vkp_host_tensor* key_cache,
                                                   vkp_host_tensor* value_cache, const vkp_cache_scales* scales,
                                                   vkp_kv_layout layout);
/* One layer of copy_blocks, in place. */
VKP_API vkp_status VKP_CALL vkp_reference_copy_blocks(vkp_host_tensor* key_cache, vkp_host_tensor* value_cache,
                                             const vkp_block_copy* pairs, size_t num_pairs, vkp_kv_layout layout);
/* One layer of swap_blocks: src blocks into dst blocks (dst is written). */
VKP_API vkp_status VKP_CALL vkp_reference_swap_blocks(const vkp_host_tensor* src_key_cache,
                                             const vkp_host_tensor* src_value_cache, vkp_host_tensor* dst_key_cache,
                                             vkp_host_tensor* dst_value_cache, const vkp_block_copy* pairs,
                                             size_t num_pairs, vkp_kv_layout layout);
/* gather into key_out and value_out, whose dtype (f32, f16, bf16) and shape [T, Hkv, D] with
 * T = seq_starts[S] the caller sets; they are written. */
VKP_API vkp_status VKP_CALL vkp_reference_gather(const vkp_host_tensor* key_cache, const vkp_host_tensor* value_cache,
                                        const vkp_host_tensor* block_tables, const vkp_host_tensor* seq_starts,
                                        const vkp_cache_scales* scales, vkp_kv_layout layout,
                                        vkp_host_tensor* key_out, vkp_host_tensor* value_out);
/* max |x| (NaN if x holds one). */
VKP_API vkp_status VKP_CALL vkp_reference_absmax(const vkp_host_tensor* x, float* out);
/* As vkp_rotary_embedding, in double precision from the stored inputs, then rounded: query and
 * key (either NULL or absent) rotated in place. Refuses a position outside [0, max_position)
 * (naming it) before writing anything. */
VKP_API vkp_status VKP_CALL vkp_reference_rotary_embedding(vkp_host_tensor* query, vkp_host_tensor* key,
                                                           const vkp_host_tensor* positions,
                                                           const vkp_host_tensor* cos_sin_cache,
                                                           vkp_rotary_style style);
/* The fused form: the rotary embedding of query (NULL or absent allowed) and key, then
 * reshape_and_cache of the rotated key and value into the caches; query, key and the caches
 * are written, all arguments checked before anything is. */
VKP_API vkp_status VKP_CALL vkp_reference_reshape_and_cache_rotary(
    vkp_host_tensor* query, vkp_host_tensor* key, const vkp_host_tensor* value, const vkp_host_tensor* slot_mapping,
    const vkp_host_tensor* positions, const vkp_host_tensor* cos_sin_cache, vkp_rotary_style style,
    vkp_host_tensor* key_cache, vkp_host_tensor* value_cache, const vkp_cache_scales* scales, vkp_kv_layout layout);

/* ===================================================================== KV cache */

/* The pools of an L-layer paged KV cache in device memory, plus an optional host-visible swap
 * pool of the same layout (see kv_cache.hpp). Block ids are a block manager's. */
typedef struct vkp_kv_cache vkp_kv_cache;

/* What a layer's pools hold (vkpaged::KvCacheKind). */
typedef enum vkp_kv_cache_kind {
  VKP_KV_CACHE_KEY_VALUE = 0,     /* a key pool and a value pool, in the shape's layout */
  VKP_KV_CACHE_MLA_ONE_POOL = 1,  /* MLA: one pool [N, B, Dv + R], the latent then the rotary part */
  VKP_KV_CACHE_MLA_TWO_POOLS = 2, /* MLA: ckv [N, B, Dv] and kpe [N, B, R] */
  VKP_KV_CACHE_KIND_MAX_ENUM = 0x7FFFFFFF
} vkp_kv_cache_kind;

typedef struct vkp_kv_cache_shape {
  uint32_t struct_size;
  uint32_t num_layers;   /* default 1 */
  uint32_t num_kv_heads; /* Hkv (MLA: 1) */
  uint32_t head_size;    /* D, a multiple of x = 16 / element bytes (MLA: Dv, the latent) */
  uint32_t block_size;   /* B, default 16 */
  vkp_dtype dtype;       /* f32, f16 (default), bf16, fp8_e4m3, fp8_e5m2 */
  vkp_kv_layout layout;  /* of every pool, keys and values alike; default vllm (MLA: nhd) */
  vkp_kv_cache_kind kind;  /* default VKP_KV_CACHE_KEY_VALUE */
  uint32_t rope_head_size; /* MLA: R, a positive multiple of x; default 0 (key_value) */
} vkp_kv_cache_shape;
VKP_API vkp_status VKP_CALL vkp_kv_cache_shape_init_sized(vkp_kv_cache_shape* shape, uint32_t struct_size);
static inline vkp_status VKP_CALL vkp_kv_cache_shape_init(vkp_kv_cache_shape* shape) {
  return vkp_kv_cache_shape_init_sized(shape, (uint32_t)sizeof(vkp_kv_cache_shape));
}

/* Exactly one of num_blocks, budget_bytes, budget_fraction (of the free device-local memory
 * where the device reports VK_EXT_memory_budget, else of the device-local heaps' size). */
typedef struct vkp_kv_cache_options {
  uint32_t struct_size;
  uint32_t num_blocks;
  uint64_t budget_bytes;
  double budget_fraction;
  uint32_t num_host_blocks; /* host-visible swap pool; 0 = none */
  uint32_t reserved0;       /* padding made explicit: ignored */
} vkp_kv_cache_options;
/* Defaults: all 0 (set exactly one of the three sizes). */
VKP_API vkp_status VKP_CALL vkp_kv_cache_options_init_sized(vkp_kv_cache_options* options, uint32_t struct_size);
static inline vkp_status VKP_CALL vkp_kv_cache_options_init(vkp_kv_cache_options* options) {
  return vkp_kv_cache_options_init_sized(options, (uint32_t)sizeof(vkp_kv_cache_options));
}

/* What a budget_fraction was taken of (vkpaged::MemorySource). */
typedef enum vkp_memory_source {
  VKP_MEMORY_SOURCE_NONE = 0,          /* the size was a block count or a byte budget */
  VKP_MEMORY_SOURCE_HEAP_SIZE = 1,     /* the device-local heaps' size */
  VKP_MEMORY_SOURCE_MEMORY_BUDGET = 2, /* free device-local memory (VK_EXT_memory_budget) */
  VKP_MEMORY_SOURCE_MAX_ENUM = 0x7FFFFFFF
} vkp_memory_source;

typedef struct vkp_kv_cache_sizing {
  uint32_t struct_size;
  uint32_t num_blocks;
  uint64_t num_tokens;      /* num_blocks * block_size */
  uint64_t block_bytes;     /* one block of one pool */
  uint64_t bytes_per_block; /* one block of every pool: 2 * num_layers * block_bytes */
  uint64_t pool_bytes;      /* one pool */
  uint64_t total_bytes;     /* every device pool */
  vkp_memory_source fraction_of; /* budget_fraction only: of which memory, and its bytes */
  uint32_t reserved0;            /* padding made explicit: written 0 */
  uint64_t fraction_of_bytes;
} vkp_kv_cache_sizing;
VKP_API vkp_status VKP_CALL vkp_kv_cache_sizing_init_sized(vkp_kv_cache_sizing* sizing, uint32_t struct_size);
static inline vkp_status VKP_CALL vkp_kv_cache_sizing_init(vkp_kv_cache_sizing* sizing) {
  return vkp_kv_cache_sizing_init_sized(sizing, (uint32_t)sizeof(vkp_kv_cache_sizing));
}

/* Sizing without a device or an allocation. Errors: INVALID_ARGUMENT for a bad shape. */
VKP_API vkp_status VKP_CALL vkp_kv_cache_sizing_of(const vkp_kv_cache_shape* shape, uint32_t num_blocks,
                                          vkp_kv_cache_sizing* out);
VKP_API vkp_status VKP_CALL vkp_kv_cache_blocks_for_budget(const vkp_kv_cache_shape* shape, uint64_t bytes, uint32_t* out);
VKP_API vkp_status VKP_CALL vkp_kv_cache_max_blocks_per_pool(const vkp_kv_cache_shape* shape,
                                                    uint64_t max_storage_buffer_range, uint32_t* out);
/* What vkp_kv_cache_create would allocate on a device (from vkp_list_devices or
 * vkp_context_device_info), with every device check except the host pool's heap.
 * Errors: INVALID_ARGUMENT, OUT_OF_MEMORY (over the device memory), UNSUPPORTED (a pool over
 * maxStorageBufferRange on a device without buffer device addresses). */
VKP_API vkp_status VKP_CALL vkp_kv_cache_plan(const vkp_device_info* device, const vkp_kv_cache_shape* shape,
                                     const vkp_kv_cache_options* options, vkp_kv_cache_sizing* out);
/* Checks everything, then allocates the pools (contents undefined). A budget_fraction is taken
 * of the free memory read now. Pools over maxStorageBufferRange need a context with buffer
 * device addresses (the operators then reach them by address). The cache belongs to the
 * context: destroy it first. Errors: as vkp_kv_cache_plan; nothing is allocated then. */
VKP_API vkp_status VKP_CALL vkp_kv_cache_create(vkp_context* context, const vkp_kv_cache_shape* shape,
                                       const vkp_kv_cache_options* options, vkp_kv_cache** out);
VKP_API void VKP_CALL vkp_kv_cache_destroy(vkp_kv_cache* cache);

/* The cache's counts; its shape and the sizing of its device pools come from
 * vkp_kv_cache_shape_get and vkp_kv_cache_sizing_get. */
typedef struct vkp_kv_cache_info {
  uint32_t struct_size;
  uint32_t num_blocks;
  uint32_t num_host_blocks;
  uint32_t reserved0;  /* padding made explicit: written 0 */
  uint64_t num_tokens;
  uint64_t host_bytes; /* of every host pool together */
} vkp_kv_cache_info;
VKP_API vkp_status VKP_CALL vkp_kv_cache_info_init_sized(vkp_kv_cache_info* info, uint32_t struct_size);
static inline vkp_status VKP_CALL vkp_kv_cache_info_init(vkp_kv_cache_info* info) {
  return vkp_kv_cache_info_init_sized(info, (uint32_t)sizeof(vkp_kv_cache_info));
}
VKP_API vkp_status VKP_CALL vkp_kv_cache_info_get(const vkp_kv_cache* cache, vkp_kv_cache_info* out);
VKP_API vkp_status VKP_CALL vkp_kv_cache_shape_get(const vkp_kv_cache* cache, vkp_kv_cache_shape* out);
VKP_API vkp_status VKP_CALL vkp_kv_cache_sizing_get(const vkp_kv_cache* cache, vkp_kv_cache_sizing* out);
/* Layer `layer`'s device pools (host = 0) or host pools (host = 1) as the operators take them,
 * with the cache's layout. Errors: INVALID_ARGUMENT (layer out of range, no host pool, an MLA
 * cache: vkp_kv_cache_mla_layer). */
VKP_API vkp_status VKP_CALL vkp_kv_cache_layer(const vkp_kv_cache* cache, uint32_t layer, vkp_bool32 host,
                                      vkp_layer_cache_views* out);
/* copy_blocks over every layer; swap_out (device block, host block) and swap_in (host block,
 * device block) pairs, as the block manager returns them. Transfer stage. */
VKP_API vkp_status VKP_CALL vkp_kv_cache_record_copy_blocks(const vkp_kv_cache* cache, VkCommandBuffer cmd,
                                                   const vkp_block_copy* pairs, size_t num_pairs);
VKP_API vkp_status VKP_CALL vkp_kv_cache_record_swap_out(const vkp_kv_cache* cache, VkCommandBuffer cmd,
                                                const vkp_block_copy* pairs, size_t num_pairs);
VKP_API vkp_status VKP_CALL vkp_kv_cache_record_swap_in(const vkp_kv_cache* cache, VkCommandBuffer cmd,
                                               const vkp_block_copy* pairs, size_t num_pairs);

/* One layer's new tokens for vkp_kv_cache_record_reshape_and_cache (vkp_reshape_and_cache_views
 * without the pools, which the cache supplies). */
typedef struct vkp_new_tokens {
  uint32_t struct_size;
  uint32_t reserved0;           /* padding made explicit: ignored */
  vkp_tensor_view key;          /* [T, Hkv, D] f32, f16 or bf16 */
  vkp_tensor_view value;        /* [T, Hkv, D] of key's dtype */
  vkp_tensor_view slot_mapping; /* [T] i64 or i32; negative = padding */
  vkp_buffer_view status;       /* optional [1] u32: VKP_STATUS_BAD_SLOT, VKP_STATUS_BAD_POSITION */
} vkp_new_tokens;
/* Defaults: every view absent. */
VKP_API vkp_status VKP_CALL vkp_new_tokens_init_sized(vkp_new_tokens* tokens, uint32_t struct_size);
static inline vkp_status VKP_CALL vkp_new_tokens_init(vkp_new_tokens* tokens) {
  return vkp_new_tokens_init_sized(tokens, (uint32_t)sizeof(vkp_new_tokens));
}
/* vkp_record_reshape_and_cache into layer `layer`'s device pools (the cache's layout), or with
 * rotary (not NULL) vkp_record_reshape_and_cache_rotary: the keys rotated on their way in, the
 * queries in place. scales NULL = 1, 1. Compute shader stage.
 * Errors: INVALID_ARGUMENT (layer out of range, and as those calls). */
VKP_API vkp_status VKP_CALL vkp_kv_cache_record_reshape_and_cache(const vkp_kv_cache* cache, VkCommandBuffer cmd,
                                                                  uint32_t layer, const vkp_new_tokens* tokens,
                                                                  const vkp_rotary_inputs* rotary,
                                                                  const vkp_cache_scales* scales);
/* ---- multi-head latent attention (MLA) caches (mla.hpp, mla_cache_ops.hpp) ---- */

/* One layer's MLA pools: mla_cache [N, B, Dv + R], or ckv_cache [N, B, Dv] and kpe_cache
 * [N, B, R] (absent views for the other form). */
typedef struct vkp_mla_cache_views {
  uint32_t struct_size;
  uint32_t reserved0; /* padding made explicit: ignored, written 0 */
  vkp_tensor_view mla_cache;
  vkp_tensor_view ckv_cache;
  vkp_tensor_view kpe_cache;
} vkp_mla_cache_views;
/* Defaults: every view absent. */
VKP_API vkp_status VKP_CALL vkp_mla_cache_views_init_sized(vkp_mla_cache_views* views, uint32_t struct_size);
static inline vkp_status VKP_CALL vkp_mla_cache_views_init(vkp_mla_cache_views* views) {
  return vkp_mla_cache_views_init_sized(views, (uint32_t)sizeof(vkp_mla_cache_views));
}

/* reshape_and_cache for MLA (vLLM's concat_and_cache_mla): token i's kv_c and k_pe into the row
 * of its slot; Dv and R multiples of x; pools 16-byte aligned (past maxStorageBufferRange:
 * written by device address, on a context with buffer device addresses). */
typedef struct vkp_mla_reshape_and_cache_views {
  uint32_t struct_size;
  uint32_t reserved0;           /* padding made explicit: ignored */
  vkp_tensor_view kv_c;         /* [T, Dv] f32, f16 or bf16 */
  vkp_tensor_view k_pe;         /* [T, R] of kv_c's dtype */
  vkp_tensor_view slot_mapping; /* [T] i64 or i32; negative = padding */
  vkp_tensor_view mla_cache;    /* one pool [N, B, Dv + R], or */
  vkp_tensor_view ckv_cache;    /* two pools: [N, B, Dv] */
  vkp_tensor_view kpe_cache;    /*            [N, B, R] */
  vkp_buffer_view status;       /* optional [1] u32: VKP_STATUS_BAD_SLOT, VKP_STATUS_BAD_POSITION */
} vkp_mla_reshape_and_cache_views;
/* Defaults: every view absent. */
VKP_API vkp_status VKP_CALL vkp_mla_reshape_and_cache_views_init_sized(vkp_mla_reshape_and_cache_views* views,
                                                                       uint32_t struct_size);
static inline vkp_status VKP_CALL vkp_mla_reshape_and_cache_views_init(vkp_mla_reshape_and_cache_views* views) {
  return vkp_mla_reshape_and_cache_views_init_sized(views, (uint32_t)sizeof(vkp_mla_reshape_and_cache_views));
}

/* RoPE on k_pe on its way in: positions [T] i64 or i32, cos_sin_cache [max_position,
 * rotary_dim] f32 or k_pe's dtype (rotary_dim even, at most R). */
typedef struct vkp_mla_rope_views {
  uint32_t struct_size;
  vkp_rotary_style style; /* default VKP_ROTARY_NEOX */
  vkp_tensor_view positions;
  vkp_tensor_view cos_sin_cache;
} vkp_mla_rope_views;
/* Defaults: both views absent, NeoX style. */
VKP_API vkp_status VKP_CALL vkp_mla_rope_views_init_sized(vkp_mla_rope_views* rope, uint32_t struct_size);
static inline vkp_status VKP_CALL vkp_mla_rope_views_init(vkp_mla_rope_views* rope) {
  return vkp_mla_rope_views_init_sized(rope, (uint32_t)sizeof(vkp_mla_rope_views));
}

/* Writes kv_c and k_pe (rotated first when rope is not NULL; k_pe itself is not written) into
 * the MLA pools at their slots; fp8 pools store encode(x * (1 / scale)), one scale for both
 * parts. Compute shader stage: reads kv_c, k_pe, slot_mapping, positions, cos_sin_cache; writes
 * the pools; ORs status. Errors: INVALID_ARGUMENT naming the view, the scale or the style. */
VKP_API vkp_status VKP_CALL vkp_record_mla_reshape_and_cache(vkp_context* context, VkCommandBuffer cmd,
                                                             const vkp_mla_reshape_and_cache_views* views,
                                                             float scale, const vkp_mla_rope_views* rope);

/* Layer `layer`'s MLA pools, device (host = 0) or host (host = 1). Errors: INVALID_ARGUMENT
 * (a key_value cache, layer out of range, no host pool). */
VKP_API vkp_status VKP_CALL vkp_kv_cache_mla_layer(const vkp_kv_cache* cache, uint32_t layer, vkp_bool32 host,
                                                   vkp_mla_cache_views* out);

/* One layer's new MLA tokens for vkp_kv_cache_record_mla_reshape_and_cache
 * (vkp_mla_reshape_and_cache_views without the pools, which the cache supplies). */
typedef struct vkp_mla_new_tokens {
  uint32_t struct_size;
  uint32_t reserved0;           /* padding made explicit: ignored */
  vkp_tensor_view kv_c;         /* [T, Dv] f32, f16 or bf16 */
  vkp_tensor_view k_pe;         /* [T, R] of kv_c's dtype */
  vkp_tensor_view slot_mapping; /* [T] i64 or i32; negative = padding */
  vkp_buffer_view status;       /* optional [1] u32 */
} vkp_mla_new_tokens;
/* Defaults: every view absent. */
VKP_API vkp_status VKP_CALL vkp_mla_new_tokens_init_sized(vkp_mla_new_tokens* tokens, uint32_t struct_size);
static inline vkp_status VKP_CALL vkp_mla_new_tokens_init(vkp_mla_new_tokens* tokens) {
  return vkp_mla_new_tokens_init_sized(tokens, (uint32_t)sizeof(vkp_mla_new_tokens));
}
/* vkp_record_mla_reshape_and_cache into layer `layer`'s MLA pools. Errors: INVALID_ARGUMENT (a
 * key_value cache, layer out of range, and as that call). */
VKP_API vkp_status VKP_CALL vkp_kv_cache_record_mla_reshape_and_cache(const vkp_kv_cache* cache, VkCommandBuffer cmd,
                                                                      uint32_t layer, const vkp_mla_new_tokens* tokens,
                                                                      float scale, const vkp_mla_rope_views* rope);

/* ---- multi-head latent attention (MLA) on the device (mla_attention.hpp) ---- */

/* The MLA cache's form (vkpaged::MlaCacheForm). */
typedef enum vkp_mla_cache_form {
  VKP_MLA_ONE_POOL = 0,  /* [N, B, Dk]: each row the latent followed by the rotary part */
  VKP_MLA_TWO_POOLS = 1, /* ckv [N, B, Dv] and kpe [N, B, R] */
  VKP_MLA_CACHE_FORM_MAX_ENUM = 0x7FFFFFFF
} vkp_mla_cache_form;

/* How an MLA plan may run (vkpaged::MlaOptions). */
typedef struct vkp_mla_options {
  uint32_t struct_size;
  vkp_split_mode split;      /* split the key positions into partitions merged after */
  uint32_t partition_tokens; /* split: key positions per partition (a multiple of 64); 0 = auto */
  /* AUTOMATIC: the tensor-core kernel where it can run the shape, else the portable one; SCALAR:
   * the portable kernel; MATRIX: the tensor-core kernel (VK_KHR_cooperative_matrix with an f16
   * product; f16 and bf16 queries, f16, bf16 and fp8 caches), UNSUPPORTED (naming why) where it
   * cannot run; DECODE is refused. */
  vkp_attention_kernel kernel;
} vkp_mla_options;
/* Defaults: automatic split and kernel. */
VKP_API vkp_status VKP_CALL vkp_mla_options_init_sized(vkp_mla_options* options, uint32_t struct_size);
static inline vkp_status VKP_CALL vkp_mla_options_init(vkp_mla_options* options) {
  return vkp_mla_options_init_sized(options, (uint32_t)sizeof(vkp_mla_options));
}

typedef struct vkp_mla_plan vkp_mla_plan;

/* MlaPlan::create: `shape` holds the multi-query fields with num_kv_heads 1, kv_layout nhd and
 * head_size Dk (a multiple of 8 up to 576); value_head_size is Dv (a multiple of 8 up to
 * min(Dk, 512)); cache_form the pools' form (two pools: R = Dk - Dv >= 8). query_starts as
 * vkp_attention_plan_create's; options NULL = defaults. The plan belongs to the context: destroy
 * it first. Pools past maxStorageBufferRange are read by device address. Errors: INVALID_ARGUMENT
 * naming the field and the value, UNSUPPORTED (a pool past maxStorageBufferRange on a context
 * without buffer device addresses; options.kernel MATRIX where the tensor-core kernel cannot run, naming
 * why), DEVICE. */
VKP_API vkp_status VKP_CALL vkp_mla_plan_create(vkp_context* context, const vkp_attention_shape* shape,
                                                uint32_t value_head_size, vkp_mla_cache_form cache_form,
                                                const int32_t* query_starts, size_t num_query_starts,
                                                const vkp_mla_options* options, vkp_mla_plan** out);
/* A plan for a bucket of steps, recorded once and replayed (MlaPlan::create_bucket; as
 * vkp_attention_plan_create_bucket's, docs/integration.md "Replaying a recorded step"): shape's
 * S, T and max_context_len are the bucket's most requests, most new tokens and longest context,
 * max_query_tokens its longest request's new tokens (0 = T); a step fills S and T with padding
 * requests of no new tokens and context length 0. Errors: as vkp_mla_plan_create, and
 * INVALID_ARGUMENT naming max_query_tokens where it exceeds T or the longest context. */
VKP_API vkp_status VKP_CALL vkp_mla_plan_create_bucket(vkp_context* context, const vkp_attention_shape* shape,
                                                       uint32_t value_head_size, vkp_mla_cache_form cache_form,
                                                       uint32_t max_query_tokens, const vkp_mla_options* options,
                                                       vkp_mla_plan** out);
/* The scratch the bucket's plan needs, the most any of its steps uses (MlaPlan::max_scratch_bytes),
 * without a plan or a pipeline. Errors: as vkp_mla_plan_create_bucket. */
VKP_API vkp_status VKP_CALL vkp_mla_bucket_scratch_bytes(vkp_context* context, const vkp_attention_shape* shape,
                                                         uint32_t value_head_size, vkp_mla_cache_form cache_form,
                                                         uint32_t max_query_tokens, const vkp_mla_options* options,
                                                         uint64_t* bytes);
VKP_API void VKP_CALL vkp_mla_plan_destroy(vkp_mla_plan* plan);

/* What the MLA plan chose. */
typedef struct vkp_mla_plan_info {
  uint32_t struct_size;
  vkp_bool32 split;
  uint32_t num_partitions;  /* 1 when not split */
  uint32_t reserved0;       /* padding made explicit: written 0 */
  uint64_t tree_mask_bytes; /* sum of q_s^2: size of views.tree_mask; 0 without */
  uint64_t scratch_bytes;   /* size of views.scratch; 0 when not split, without csr_page_table */
  vkp_attention_kernel kernel; /* SCALAR or MATRIX: the kernel that runs it */
  uint32_t reserved1;          /* padding made explicit: written 0 */
  vkp_bool32 bucket;           /* made by vkp_mla_plan_create_bucket */
  uint32_t max_query_tokens;   /* the longest request's q_s (a bucket's: its bound) */
} vkp_mla_plan_info;
VKP_API vkp_status VKP_CALL vkp_mla_plan_info_init_sized(vkp_mla_plan_info* info, uint32_t struct_size);
static inline vkp_status VKP_CALL vkp_mla_plan_info_init(vkp_mla_plan_info* info) {
  return vkp_mla_plan_info_init_sized(info, (uint32_t)sizeof(vkp_mla_plan_info));
}
VKP_API vkp_status VKP_CALL vkp_mla_plan_info_get(const vkp_mla_plan* plan, vkp_mla_plan_info* out);
/* What the plan chose, in words; owned by the plan ("" for a NULL or dead plan). */
VKP_API const char* VKP_CALL vkp_mla_plan_describe(const vkp_mla_plan* plan);

/* The buffers of one MLA call (vkpaged::MlaViews): vkp_attention_views' request fields, the
 * cache in the plan's form. Optional views are absent when their buffer is VK_NULL_HANDLE. */
typedef struct vkp_mla_views {
  uint32_t struct_size;
  uint32_t reserved0;           /* padding made explicit: ignored */
  vkp_tensor_view query;        /* [T, H, Dk] query dtype */
  vkp_tensor_view mla_cache;    /* one pool [N, B, Dk] (cache dtype, u8 for fp8), or */
  vkp_tensor_view ckv_cache;    /* two pools: [N, B, Dv] */
  vkp_tensor_view kpe_cache;    /*            [N, B, R] */
  vkp_tensor_view block_tables; /* [S, M] i32 or u32 (absent with the CSR form) */
  vkp_tensor_view context_lens; /* [S] i32 or u32 */
  vkp_tensor_view query_starts; /* [S + 1] i32 or u32: the plan's values */
  vkp_tensor_view output;       /* [T, H, Dv] query dtype */
  vkp_tensor_view lse;          /* [T, H] f32, when shape.lse */
  vkp_tensor_view tree_mask;    /* u8 [tree_mask_bytes], whole 32-bit words, when shape.tree_mask */
  vkp_tensor_view alibi_slopes; /* [H] f32, when shape.alibi */
  vkp_tensor_view sinks;        /* [H] f32, when shape.sinks */
  vkp_buffer_view scratch;      /* scratch_bytes, when not 0 */
  vkp_buffer_view status;       /* optional [1] u32, the bits of vkp_attention_views.status */
  vkp_tensor_view kv_indptr;    /* CSR page tables (shape.csr_page_table), as vkp_attention_views' */
  vkp_tensor_view kv_indices;
  vkp_tensor_view kv_last_page_len;
} vkp_mla_views;
/* Defaults: every view absent. */
VKP_API vkp_status VKP_CALL vkp_mla_views_init_sized(vkp_mla_views* views, uint32_t struct_size);
static inline vkp_status VKP_CALL vkp_mla_views_init(vkp_mla_views* views) {
  return vkp_mla_views_init_sized(views, (uint32_t)sizeof(vkp_mla_views));
}

/* record_mla_attention: checks the params (NULL = defaults; scale default 1/sqrt(Dk)) and the
 * views against the plan and records the MLA kernel (and the merge when split) into `cmd`,
 * allocating and waiting for nothing; storage-buffer reads and writes in the compute shader
 * stage, the barriers the caller's. Errors: INVALID_ARGUMENT naming the view or the value, a
 * plan made on another context, NULL cmd. */
VKP_API vkp_status VKP_CALL vkp_record_mla_attention(vkp_context* context, VkCommandBuffer cmd,
                                                     const vkp_mla_plan* plan, const vkp_mla_views* views,
                                                     const vkp_decode_params* params);

/* A decode shape for this cache: batch's fields for what the batch brings (num_seqs, num_heads,
 * max_blocks_per_seq, max_context_len, query_dtype, alibi, softcap, sinks, lse), the cache's
 * for what it knows (num_kv_heads, head_size, block_size, num_blocks, cache_dtype, kv_layout),
 * whatever batch held there. Checks batch's enums and booleans only: vkp_decode_plan_create
 * checks the rest. */
VKP_API vkp_status VKP_CALL vkp_kv_cache_decode_shape(const vkp_kv_cache* cache, const vkp_decode_shape* batch,
                                                      vkp_decode_shape* out);
/* The same for multi-query attention: batch's fields for what the batch brings (num_requests,
 * num_query_tokens, num_heads, max_blocks_per_seq, max_context_len, query_dtype,
 * sliding_window, softcap, alibi, sinks, lse, tree_mask), the cache's for what it knows
 * (num_kv_heads, head_size, block_size, num_blocks, cache_dtype, kv_layout), whatever batch
 * held there. Checks batch's enums and booleans only: vkp_attention_plan_create checks the rest. */
VKP_API vkp_status VKP_CALL vkp_kv_cache_attention_shape(const vkp_kv_cache* cache, const vkp_attention_shape* batch,
                                                         vkp_attention_shape* out);
/* vkp_record_decode / vkp_record_attention over layer `layer`'s device pools: views carry every
 * view but the pools (query, block tables, context lengths, query starts, output, scratch, ...)
 * and leave key_cache and value_cache absent (vkp_*_views_init does); the cache supplies them.
 * The plan must have been made on the cache's context, from a shape of this cache
 * (vkp_kv_cache_decode_shape / vkp_kv_cache_attention_shape). params NULL = defaults. Compute
 * shader stage, as those calls. Errors: INVALID_ARGUMENT (layer out of range, a pool view given,
 * a plan of another context or whose num_kv_heads, head_size, block_size, num_blocks,
 * cache_dtype or kv_layout are not the cache's; then as vkp_record_decode /
 * vkp_record_attention), nothing recorded then. */
VKP_API vkp_status VKP_CALL vkp_kv_cache_record_decode(const vkp_kv_cache* cache, VkCommandBuffer cmd, uint32_t layer,
                                                       const vkp_decode_plan* plan, const vkp_decode_views* views,
                                                       const vkp_decode_params* params);
VKP_API vkp_status VKP_CALL vkp_kv_cache_record_attention(const vkp_kv_cache* cache, VkCommandBuffer cmd,
                                                          uint32_t layer, const vkp_attention_plan* plan,
                                                          const vkp_attention_views* views,
                                                          const vkp_decode_params* params);
/* MLA attention over an MLA cache (KvCache::mla_shape, KvCache::record_mla_attention). The
 * shape of an MLA plan for this cache: batch's fields for what the batch brings (as
 * vkp_kv_cache_attention_shape's), the cache's for what it knows (num_kv_heads 1, head_size
 * Dk = Dv + R, block_size, num_blocks, cache_dtype, kv_layout nhd) into out, and
 * vkp_mla_plan_create's other two arguments: value_head_size Dv and cache_form (of the cache's
 * kind). Errors: INVALID_ARGUMENT (a key_value cache, NULL outputs, batch's enums and
 * booleans); nothing written then. */
VKP_API vkp_status VKP_CALL vkp_kv_cache_mla_shape(const vkp_kv_cache* cache, const vkp_attention_shape* batch,
                                                   vkp_attention_shape* out, uint32_t* value_head_size,
                                                   vkp_mla_cache_form* cache_form);
/* vkp_record_mla_attention over layer `layer`'s MLA pools: views carry every view but the pools
 * and leave mla_cache, ckv_cache and kpe_cache absent (vkp_mla_views_init does); the cache
 * supplies its form's. The plan must have been made on the cache's context, from
 * vkp_kv_cache_mla_shape's shape, value_head_size and cache_form. params NULL = defaults.
 * Compute shader stage, as that call. Errors: INVALID_ARGUMENT (a key_value cache, layer out of
 * range, a pool view given, a plan of another context or whose num_kv_heads, head_size,
 * block_size, num_blocks, cache_dtype, kv_layout, value_head_size or cache_form are not the
 * cache's; then as vkp_record_mla_attention), nothing recorded then. */
VKP_API vkp_status VKP_CALL vkp_kv_cache_record_mla_attention(const vkp_kv_cache* cache, VkCommandBuffer cmd,
                                                              uint32_t layer, const vkp_mla_plan* plan,
                                                              const vkp_mla_views* views,
                                                              const vkp_decode_params* params);

/* ===================================================================== start-up: prepared pipelines */

/* What an engine's steps will record (vkpaged::PipelineSet, vkpaged/prepare.hpp), for vkp_prepare
 * to build every pipeline of it before the first step. Host data only, no context. */
typedef struct vkp_pipeline_set vkp_pipeline_set;
VKP_API vkp_status VKP_CALL vkp_pipeline_set_create(vkp_pipeline_set** out);
VKP_API void VKP_CALL vkp_pipeline_set_destroy(vkp_pipeline_set* set);
/* A bucket's plan: vkp_attention_plan_create_bucket's arguments (options NULL = defaults). The
 * structs are read now (their sizes, enums and booleans checked); vkp_prepare plans them. */
VKP_API vkp_status VKP_CALL vkp_pipeline_set_add_attention(vkp_pipeline_set* set, const vkp_attention_shape* shape,
                                                           uint32_t max_query_tokens,
                                                           const vkp_attention_options* options);
/* A decode plan: vkp_decode_plan_create's arguments (options NULL = defaults). */
VKP_API vkp_status VKP_CALL vkp_pipeline_set_add_decode(vkp_pipeline_set* set, const vkp_decode_shape* shape,
                                                        const vkp_decode_options* options);

/* An MLA bucket's plan: vkp_mla_plan_create_bucket's arguments (options NULL = defaults). */
VKP_API vkp_status VKP_CALL vkp_pipeline_set_add_mla(vkp_pipeline_set* set, const vkp_attention_shape* shape,
                                                     uint32_t value_head_size, vkp_mla_cache_form cache_form,
                                                     uint32_t max_query_tokens, const vkp_mla_options* options);

/* One kind of cache write (vkpaged::CacheWriteKind): vkp_record_reshape_and_cache (or its rotary
 * form, vkp_kv_cache_record_reshape_and_cache) into pools of this geometry, each one buffer from
 * its start; with an MLA cache_kind, vkp_kv_cache_record_mla_reshape_and_cache's writes. */
typedef struct vkp_cache_write_kind {
  uint32_t struct_size;
  uint32_t num_kv_heads;           /* the cache's Hkv */
  uint32_t head_size;              /* D */
  uint32_t block_size;             /* B; default 16 */
  vkp_dtype cache_dtype;           /* default f16 */
  vkp_kv_layout layout;            /* default vllm */
  uint32_t num_blocks;             /* N of each pool (past maxStorageBufferRange: by device address) */
  vkp_dtype token_dtype;           /* the new keys and values: f32, f16 (default), bf16 */
  vkp_dtype slot_dtype;            /* the slot mapping: i64 (default) or i32 */
  vkp_bool32 rotary;               /* the keys rotated on their way in, as the fields below say */
  vkp_rotary_style rotary_style;   /* default neox */
  uint32_t rotary_dim;             /* columns of the cos/sin cache */
  vkp_dtype cos_sin_dtype;         /* f32 (default) or the token dtype */
  vkp_dtype position_dtype;        /* i64 (default) or i32 */
  /* An MLA cache's writes (vkp_kv_cache_record_mla_reshape_and_cache; rotary: the rope on k_pe,
   * rotary_dim its R): its kind and R; key_value (default) and 0 otherwise. Appended in 0.2.0. */
  vkp_kv_cache_kind cache_kind;
  uint32_t rope_head_size;
} vkp_cache_write_kind;
VKP_API vkp_status VKP_CALL vkp_cache_write_kind_init_sized(vkp_cache_write_kind* kind, uint32_t struct_size);
static inline vkp_status VKP_CALL vkp_cache_write_kind_init(vkp_cache_write_kind* kind) {
  return vkp_cache_write_kind_init_sized(kind, (uint32_t)sizeof(vkp_cache_write_kind));
}
/* The geometry of a cache's writes: num_kv_heads, head_size, block_size, cache_dtype, layout,
 * num_blocks, cache_kind and rope_head_size of `cache` written into `kind` (an input and output:
 * its other fields stay). */
VKP_API vkp_status VKP_CALL vkp_kv_cache_write_kind(const vkp_kv_cache* cache, vkp_cache_write_kind* kind);
VKP_API vkp_status VKP_CALL vkp_pipeline_set_add_cache_write(vkp_pipeline_set* set, const vkp_cache_write_kind* kind);

typedef struct vkp_prepare_report {
  uint32_t struct_size;
  uint32_t pipelines; /* distinct pipelines the set uses */
  uint32_t created;   /* of them, built by this call (the others the context had built before) */
} vkp_prepare_report;
VKP_API vkp_status VKP_CALL vkp_prepare_report_init_sized(vkp_prepare_report* report, uint32_t struct_size);
static inline vkp_status VKP_CALL vkp_prepare_report_init(vkp_prepare_report* report) {
  return vkp_prepare_report_init_sized(report, (uint32_t)sizeof(vkp_prepare_report));
}
/* Context::prepare: plans every entry of the set as its create call would (refusing what it
 * would, naming "attention[i]: ...", "decode[i]: ..." or "cache_writes[i].<field>: ...", before
 * anything is built), then builds every pipeline the context lacks, on several threads. Plans
 * made and writes recorded later find their pipelines built. report NULL: not wanted.
 * Errors: as the create calls, DEVICE. */
VKP_API vkp_status VKP_CALL vkp_prepare(vkp_context* context, const vkp_pipeline_set* set, vkp_prepare_report* report);

/* The context's VkPipelineCache (vkGetPipelineCacheData), for the next run's context: Vulkan
 * style, data NULL sets *size to the bytes needed; else up to *size bytes are written and *size
 * set to the bytes written. The cache grows as pipelines are built: a *size below what it holds
 * now is refused (INVALID_ARGUMENT, nothing written; ask again). */
VKP_API vkp_status VKP_CALL vkp_context_pipeline_cache_data(const vkp_context* context, void* data, size_t* size);
/* Context::load_pipeline_cache: merges a saved cache into the context's, after checking its
 * VkPipelineCacheHeaderVersionOne against the device. Errors: INVALID_ARGUMENT naming why a blob
 * is refused (of another device: vendorID, deviceID; of another driver: pipelineCacheUUID;
 * damaged: its sizes or header version), nothing merged then; DEVICE. */
VKP_API vkp_status VKP_CALL vkp_context_load_pipeline_cache(vkp_context* context, const void* data, size_t size);

/* ===================================================================== block manager */

typedef struct vkp_block_manager vkp_block_manager;

typedef struct vkp_block_manager_options {
  uint32_t struct_size;
  vkp_bool32 enable_prefix_caching; /* default 1 */
  double watermark;                 /* fraction of blocks admission keeps free (default 0.01) */
  uint64_t hash_salt;               /* mixed into every block hash (default 0) */
  int32_t num_host_blocks;          /* swap space in blocks (default 0) */
  uint32_t reserved0;               /* padding made explicit: ignored */
} vkp_block_manager_options;
VKP_API vkp_status VKP_CALL vkp_block_manager_options_init_sized(vkp_block_manager_options* options, uint32_t struct_size);
static inline vkp_status VKP_CALL vkp_block_manager_options_init(vkp_block_manager_options* options) {
  return vkp_block_manager_options_init_sized(options, (uint32_t)sizeof(vkp_block_manager_options));
}

typedef enum vkp_admission {
  VKP_ADMISSION_OK = 0,    /* fits now and leaves the watermark free */
  VKP_ADMISSION_LATER = 1, /* would fit once other sequences release blocks */
  VKP_ADMISSION_NEVER = 2, /* more blocks than the cache has above the watermark */
  VKP_ADMISSION_MAX_ENUM = 0x7FFFFFFF
} vkp_admission;

/* Host-side block tables of sequences with caller-chosen ids (see block_manager.hpp). Not
 * thread-safe. Errors of every call: INVALID_ARGUMENT (unknown or duplicate id, swapped-out
 * sequence, bad width...), OUT_OF_MEMORY (no free block; check the can_* calls first). A
 * refused call changes nothing. Arrays the manager returns (const pointers) stay valid until
 * the next call on the manager that returns an array, or its destruction. */
VKP_API vkp_status VKP_CALL vkp_block_manager_create(int32_t num_blocks, int32_t block_size,
                                            const vkp_block_manager_options* options, vkp_block_manager** out);
VKP_API void VKP_CALL vkp_block_manager_destroy(vkp_block_manager* manager);
VKP_API vkp_status VKP_CALL vkp_block_manager_block_size(const vkp_block_manager* manager, int32_t* out);

VKP_API vkp_status VKP_CALL vkp_block_manager_can_allocate(const vkp_block_manager* manager, const int32_t* prompt,
                                                  size_t prompt_len, vkp_admission* out);
/* Allocates the prompt's blocks, reusing prefix-cached ones; *cached_tokens (may be NULL)
 * receives how many leading tokens are already in the cache. */
VKP_API vkp_status VKP_CALL vkp_block_manager_add_sequence(vkp_block_manager* manager, uint64_t seq_id, const int32_t* prompt,
                                                  size_t prompt_len, int32_t* cached_tokens);
VKP_API vkp_status VKP_CALL vkp_block_manager_can_append(const vkp_block_manager* manager, uint64_t seq_id, vkp_bool32* out);

typedef struct vkp_append_result {
  uint32_t struct_size;
  vkp_bool32 has_copy; /* copy-on-write: run copy_blocks(copy) before writing the slot */
  int64_t slot;        /* for reshape_and_cache */
  vkp_block_copy copy;
} vkp_append_result;
VKP_API vkp_status VKP_CALL vkp_append_result_init_sized(vkp_append_result* result, uint32_t struct_size);
static inline vkp_status VKP_CALL vkp_append_result_init(vkp_append_result* result) {
  return vkp_append_result_init_sized(result, (uint32_t)sizeof(vkp_append_result));
}
VKP_API vkp_status VKP_CALL vkp_block_manager_append_token(vkp_block_manager* manager, uint64_t seq_id, int32_t token,
                                                  vkp_append_result* out);
VKP_API vkp_status VKP_CALL vkp_block_manager_fork(vkp_block_manager* manager, uint64_t parent_id, uint64_t child_id);
VKP_API vkp_status VKP_CALL vkp_block_manager_free_sequence(vkp_block_manager* manager, uint64_t seq_id);
/* Frees the sequence for recompute; *num_tokens (may be NULL) receives its token count. */
VKP_API vkp_status VKP_CALL vkp_block_manager_preempt(vkp_block_manager* manager, uint64_t seq_id, int32_t* num_tokens);

VKP_API vkp_status VKP_CALL vkp_block_manager_can_swap_out(const vkp_block_manager* manager, const uint64_t* seq_ids,
                                                  size_t num_seqs, vkp_bool32* out);
VKP_API vkp_status VKP_CALL vkp_block_manager_can_swap_in(const vkp_block_manager* manager, const uint64_t* seq_ids,
                                                 size_t num_seqs, vkp_admission* out);
/* Swaps sequences out (pairs: device block -> host block) or in (host -> device); *pairs is
 * owned by the manager (see above), for vkp_record_swap_blocks. */
VKP_API vkp_status VKP_CALL vkp_block_manager_swap_out(vkp_block_manager* manager, const uint64_t* seq_ids, size_t num_seqs,
                                              const vkp_block_copy** pairs, size_t* num_pairs);
VKP_API vkp_status VKP_CALL vkp_block_manager_swap_in(vkp_block_manager* manager, const uint64_t* seq_ids, size_t num_seqs,
                                             const vkp_block_copy** pairs, size_t* num_pairs);

VKP_API vkp_status VKP_CALL vkp_block_manager_contains(const vkp_block_manager* manager, uint64_t seq_id, vkp_bool32* out);
VKP_API vkp_status VKP_CALL vkp_block_manager_is_swapped(const vkp_block_manager* manager, uint64_t seq_id, vkp_bool32* out);
VKP_API vkp_status VKP_CALL vkp_block_manager_context_len(const vkp_block_manager* manager, uint64_t seq_id, int32_t* out);
/* The sequence's device blocks (width 0), or padded with block 0 to `width` columns; *table is
 * owned by the manager (see above). */
VKP_API vkp_status VKP_CALL vkp_block_manager_block_table(vkp_block_manager* manager, uint64_t seq_id, int32_t width,
                                                 const int32_t** table, size_t* count);
/* The host blocks of a swapped-out sequence; *table is owned by the manager. */
VKP_API vkp_status VKP_CALL vkp_block_manager_host_block_table(vkp_block_manager* manager, uint64_t seq_id,
                                                      const int32_t** table, size_t* count);
/* The decode arrays of num_seqs sequences at width M: block_tables [num_seqs * width]
 * row-major (padded with block 0) and context_lens [num_seqs], both caller-allocated. */
VKP_API vkp_status VKP_CALL vkp_block_manager_build_batch(const vkp_block_manager* manager, const uint64_t* seq_ids,
                                                 size_t num_seqs, int32_t width, int32_t* block_tables,
                                                 int32_t* context_lens);
/* Slots of tokens [first_token, first_token + count) into slots[count] (caller-allocated). */
VKP_API vkp_status VKP_CALL vkp_block_manager_slot_mapping(const vkp_block_manager* manager, uint64_t seq_id,
                                                  int32_t first_token, int32_t count, int64_t* slots);

/* Device blocks: in_use + free + cached == num_blocks. */
typedef struct vkp_block_usage {
  uint32_t struct_size;
  int32_t num_blocks;
  int32_t in_use;
  int32_t free;
  int32_t cached; /* held by no sequence, kept for prefix reuse */
  int32_t num_host_blocks;
  int32_t host_in_use;
} vkp_block_usage;
VKP_API vkp_status VKP_CALL vkp_block_usage_init_sized(vkp_block_usage* usage, uint32_t struct_size);
static inline vkp_status VKP_CALL vkp_block_usage_init(vkp_block_usage* usage) {
  return vkp_block_usage_init_sized(usage, (uint32_t)sizeof(vkp_block_usage));
}
VKP_API vkp_status VKP_CALL vkp_block_manager_usage(const vkp_block_manager* manager, vkp_block_usage* out);

typedef struct vkp_prefix_cache_stats {
  uint32_t struct_size;
  uint32_t reserved0; /* padding made explicit: written 0 */
  uint64_t queries;
  uint64_t queried_blocks;
  uint64_t hit_blocks;
  uint64_t queried_tokens;
  uint64_t hit_tokens;
} vkp_prefix_cache_stats;
VKP_API vkp_status VKP_CALL vkp_prefix_cache_stats_init_sized(vkp_prefix_cache_stats* stats, uint32_t struct_size);
static inline vkp_status VKP_CALL vkp_prefix_cache_stats_init(vkp_prefix_cache_stats* stats) {
  return vkp_prefix_cache_stats_init_sized(stats, (uint32_t)sizeof(vkp_prefix_cache_stats));
}
VKP_API vkp_status VKP_CALL vkp_block_manager_prefix_cache_stats(const vkp_block_manager* manager,
                                                        vkp_prefix_cache_stats* out);
/* Reference count of a device block (host = 0) or a host block (host = 1). */
VKP_API vkp_status VKP_CALL vkp_block_manager_ref_count(const vkp_block_manager* manager, vkp_bool32 host, int32_t block,
                                               int32_t* out);

#ifdef __cplusplus
} /* extern "C" */
#endif

#endif /* VKPAGED_VKPAGED_H */
