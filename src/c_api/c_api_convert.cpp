// SPDX-License-Identifier: Apache-2.0
#include "c_api/c_api_convert.hpp"

#include <fmt/format.h>

#include <cstddef>
#include <type_traits>
#include <cstdio>
#include <cstring>

#include "c_api/c_api_fields.hpp"
#include "c_api/c_api_mla.hpp"
#include "vkpaged/error.hpp"

namespace vkpaged::c_api {

namespace {

[[noreturn]] void refuse(const std::string& message) { throw Error(ErrorCode::invalid_argument, message); }

// Same numbering on both sides (see dtype.hpp and vkpaged.h).
static_assert(int(VKP_DTYPE_F32) == int(DType::f32) && int(VKP_DTYPE_BF16) == int(DType::bf16) &&
              int(VKP_DTYPE_FP8_E4M3) == int(DType::fp8_e4m3) && int(VKP_DTYPE_FP8_E5M2) == int(DType::fp8_e5m2) &&
              int(VKP_DTYPE_I32) == int(DType::i32) && int(VKP_DTYPE_U32) == int(DType::u32) &&
              int(VKP_DTYPE_I64) == int(DType::i64) && int(VKP_DTYPE_U8) == int(DType::u8));

// A C enum's value as the caller stored it (any 32-bit pattern).
template <typename E>
int64_t value_of(E e) noexcept {
  return int64_t(std::underlying_type_t<E>(e));
}

// The C enums number their values as their C++ twins do (pinned below), from 0 to `last`:
// a value in range converts as it is, any other is refused naming the field and the C type.
template <class Cpp, class C>
Cpp enum_to_cpp(C value, C last, const char* c_type, const std::string& name) {
  if (value_of(value) < 0 || value_of(value) > value_of(last))
    refuse(fmt::format("{}: {} is not a {}", name, value_of(value), c_type));
  return Cpp(value_of(value));
}

static_assert(int(VKP_SPLIT_AUTOMATIC) == int(SplitMode::automatic) &&
              int(VKP_SPLIT_SINGLE_PASS) == int(SplitMode::single_pass) && int(VKP_SPLIT_SPLIT) == int(SplitMode::split));
static_assert(int(VKP_KERNEL_AUTOMATIC) == int(DecodeKernel::automatic) &&
              int(VKP_KERNEL_SCALAR) == int(DecodeKernel::scalar) && int(VKP_KERNEL_MATRIX) == int(DecodeKernel::matrix) &&
              int(VKP_KERNEL_MATRIX_KHR) == int(DecodeKernel::matrix_khr));
static_assert(int(VKP_ORDER_AUTOMATIC) == int(DecodeOrder::automatic) && int(VKP_ORDER_GRID) == int(DecodeOrder::grid) &&
              int(VKP_ORDER_LONGEST_FIRST) == int(DecodeOrder::longest_first));
static_assert(int(VKP_MERGE_REDUCE_PASS) == int(DecodeMerge::reduce_pass) &&
              int(VKP_MERGE_IN_DISPATCH) == int(DecodeMerge::in_dispatch));
static_assert(int(VKP_KV_LAYOUT_VLLM) == int(KvLayout::vllm) && int(VKP_KV_LAYOUT_NHD) == int(KvLayout::nhd) &&
              int(VKP_KV_LAYOUT_HND) == int(KvLayout::hnd));
static_assert(int(VKP_ROTARY_NEOX) == int(RotaryStyle::neox) && int(VKP_ROTARY_GPTJ) == int(RotaryStyle::gptj));
static_assert(int(VKP_LOG_DEBUG) == int(LogLevel::debug) && int(VKP_LOG_INFO) == int(LogLevel::info) &&
              int(VKP_LOG_WARNING) == int(LogLevel::warning) && int(VKP_LOG_ERROR) == int(LogLevel::error));
// A kernel added to AttentionKernel gets the next C value, and `last` below moves to it.
static_assert(int(VKP_ATTENTION_KERNEL_AUTOMATIC) == int(AttentionKernel::automatic) &&
              int(VKP_ATTENTION_KERNEL_DECODE) == int(AttentionKernel::decode) &&
              int(VKP_ATTENTION_KERNEL_SCALAR) == int(AttentionKernel::scalar) &&
              int(VKP_ATTENTION_KERNEL_MATRIX) == int(AttentionKernel::matrix));
static_assert(int(MemorySource::none) == VKP_MEMORY_SOURCE_NONE && int(MemorySource::heap_size) == VKP_MEMORY_SOURCE_HEAP_SIZE &&
              int(MemorySource::memory_budget) == VKP_MEMORY_SOURCE_MEMORY_BUDGET);

SplitMode to_split(vkp_split_mode mode, const std::string& name) {
  return enum_to_cpp<SplitMode>(mode, VKP_SPLIT_SPLIT, "vkp_split_mode", name);
}
DecodeKernel to_kernel(vkp_decode_kernel kernel, const std::string& name) {
  return enum_to_cpp<DecodeKernel>(kernel, VKP_KERNEL_MATRIX_KHR, "vkp_decode_kernel", name);
}
DecodeOrder to_order(vkp_decode_order order, const std::string& name) {
  return enum_to_cpp<DecodeOrder>(order, VKP_ORDER_LONGEST_FIRST, "vkp_decode_order", name);
}
DecodeMerge to_merge(vkp_decode_merge merge, const std::string& name) {
  return enum_to_cpp<DecodeMerge>(merge, VKP_MERGE_IN_DISPATCH, "vkp_decode_merge", name);
}
AttentionKernel to_attention_kernel(vkp_attention_kernel kernel, const std::string& name) {
  return enum_to_cpp<AttentionKernel>(kernel, VKP_ATTENTION_KERNEL_MATRIX, "vkp_attention_kernel", name);
}

void copy_string(char* dst, size_t capacity, const std::string& src) noexcept {
  std::snprintf(dst, capacity, "%s", src.c_str());
}

}  // namespace

void check_count(size_t count, size_t element_bytes, const char* name) {
  if (count > size_t(PTRDIFF_MAX) / element_bytes)
    refuse(fmt::format("{}: a count of {} is more than any array holds (a negative count?)", name, count));
}

void check_not_negative(int64_t value, const char* name) {
  if (value < 0) refuse(fmt::format("{}: {} is negative", name, value));
}

DType to_dtype(vkp_dtype dtype, const std::string& name) {
  if (value_of(dtype) < VKP_DTYPE_F32 || value_of(dtype) > VKP_DTYPE_U8)
    refuse(fmt::format("{}: {} is not a vkp_dtype", name, value_of(dtype)));
  return DType(dtype);
}

vkp_dtype to_c(DType dtype) noexcept { return vkp_dtype(dtype); }

KvLayout to_kv_layout(vkp_kv_layout layout, const std::string& name) {
  return enum_to_cpp<KvLayout>(layout, VKP_KV_LAYOUT_HND, "vkp_kv_layout", name);
}

vkp_kv_layout to_c(KvLayout layout) noexcept { return vkp_kv_layout(layout); }
vkp_split_mode to_c(SplitMode mode) noexcept { return vkp_split_mode(mode); }
vkp_decode_kernel to_c(DecodeKernel kernel) noexcept { return vkp_decode_kernel(kernel); }
vkp_decode_order to_c(DecodeOrder order) noexcept { return vkp_decode_order(order); }
vkp_decode_merge to_c(DecodeMerge merge) noexcept { return vkp_decode_merge(merge); }
vkp_attention_kernel to_c(AttentionKernel kernel) noexcept { return vkp_attention_kernel(kernel); }
vkp_memory_source to_c(MemorySource source) noexcept { return vkp_memory_source(source); }

RotaryStyle to_rotary_style(vkp_rotary_style style, const std::string& name) {
  return enum_to_cpp<RotaryStyle>(style, VKP_ROTARY_GPTJ, "vkp_rotary_style", name);
}

LogLevel to_log_level(vkp_log_level level, const std::string& name) {
  return enum_to_cpp<LogLevel>(level, VKP_LOG_ERROR, "vkp_log_level", name);
}

HostTensor to_host_or_empty(const vkp_host_tensor* tensor, const std::string& name) {
  return tensor == nullptr ? HostTensor{} : to_host(*tensor, name);
}

Shape to_shape(const int64_t* dims, int32_t rank, const std::string& name) {
  if (rank < 0 || rank > kMaxRank) refuse(fmt::format("{}: rank {} is outside [0, {}]", name, rank, kMaxRank));
  if (rank > 0 && dims == nullptr) refuse(fmt::format("{}: shape is NULL for rank {}", name, rank));
  std::vector<int64_t> v(dims, dims + rank);
  for (int32_t i = 0; i < rank; ++i)
    if (v[size_t(i)] < 0) refuse(fmt::format("{}: shape[{}] is negative ({})", name, i, v[size_t(i)]));
  try {
    return Shape(v);
  } catch (const Error& e) {  // an element count past 2^63, named as the caller's argument
    refuse(fmt::format("{}: {}", name, e.what()));
  }
}

BufferView to_cpp(const vkp_buffer_view& view) noexcept { return {view.buffer, view.offset, view.size}; }
vkp_buffer_view to_c(const BufferView& view) noexcept { return {view.buffer, view.offset, view.size}; }

TensorView to_cpp(const vkp_tensor_view& view, const std::string& name) {
  TensorView t;
  if (view.memory.buffer == VK_NULL_HANDLE) return t;
  t.memory = to_cpp(view.memory);
  t.dtype = to_dtype(view.dtype, name);
  t.shape = to_shape(view.shape, view.rank, name);
  for (int32_t i = 0; i < view.rank; ++i) {
    if (view.strides[i] < 0) refuse(fmt::format("{}: strides[{}] is negative ({})", name, i, view.strides[i]));
    t.strides[size_t(i)] = view.strides[i];
  }
  return t;
}

vkp_tensor_view to_c(const TensorView& view) noexcept {
  vkp_tensor_view t{};
  t.memory = to_c(view.memory);
  t.dtype = to_c(view.dtype);
  t.rank = view.shape.rank();
  for (int i = 0; i < view.shape.rank(); ++i) {
    t.shape[i] = view.shape[i];
    t.strides[i] = view.strides[size_t(i)];
  }
  return t;
}

HostTensor to_host(const vkp_host_tensor& tensor, const std::string& name) {
  if (tensor.data == nullptr && tensor.rank == 0) return {};
  const DType dtype = to_dtype(tensor.dtype, name);
  const Shape shape = to_shape(tensor.shape, tensor.rank, name);
  // The element count must not overflow before HostTensor sizes its storage.
  size_t bytes = dtype_size(dtype);
  for (int i = 0; i < shape.rank(); ++i)
    if (__builtin_mul_overflow(bytes, size_t(shape[i]), &bytes) || bytes > size_t(PTRDIFF_MAX))
      refuse(fmt::format("{}: shape {} of {} is too large", name, shape.str(), dtype_name(dtype)));
  if (tensor.data == nullptr && bytes > 0) refuse(fmt::format("{}: data is NULL for shape {}", name, shape.str()));
  HostTensor h(dtype, shape);
  if (bytes > 0) std::memcpy(h.data(), tensor.data, bytes);
  return h;
}

void check_matches(const HostTensor& result, const vkp_host_tensor& tensor, const std::string& name) {
  const DType dtype = to_dtype(tensor.dtype, name);
  const Shape shape = to_shape(tensor.shape, tensor.rank, name);
  if (dtype != result.dtype() || !(shape == result.shape()))
    refuse(fmt::format("{}: {} {} given where the result is {} {}", name, dtype_name(dtype), shape.str(),
                       dtype_name(result.dtype()), result.shape().str()));
  if (tensor.data == nullptr && result.bytes() > 0) refuse(fmt::format("{}: data is NULL", name));
}

void copy_back(const HostTensor& result, vkp_host_tensor& tensor, const std::string& name) {
  check_matches(result, tensor, name);
  if (result.bytes() > 0) std::memcpy(tensor.data, result.data(), result.bytes());
}

// ---- One field: a C member to its C++ twin and back, by the two types ----
// (Outside the anonymous namespace, so that both its to_c overloads and the header's are seen.)

template <class C, class Cpp>
void field_to_cpp(const C& c, Cpp& d, const std::string& name) {
  if constexpr (std::is_same_v<C, Cpp>) d = c;
  else if constexpr (std::is_same_v<Cpp, bool>) d = to_bool(c, name);
  else if constexpr (std::is_same_v<Cpp, std::string> && std::is_array_v<C>) d.assign(c, strnlen(c, sizeof(c)));
  else if constexpr (std::is_same_v<Cpp, std::string>) d = c != nullptr ? c : "";  // a C string, NULL = ""
  else if constexpr (std::is_same_v<Cpp, DType>) d = to_dtype(c, name);
  else if constexpr (std::is_same_v<Cpp, KvLayout>) d = to_kv_layout(c, name);
  else if constexpr (std::is_same_v<Cpp, RotaryStyle>) d = to_rotary_style(c, name);
  else if constexpr (std::is_same_v<Cpp, SplitMode>) d = to_split(c, name);
  else if constexpr (std::is_same_v<Cpp, DecodeKernel>) d = to_kernel(c, name);
  else if constexpr (std::is_same_v<Cpp, DecodeOrder>) d = to_order(c, name);
  else if constexpr (std::is_same_v<Cpp, DecodeMerge>) d = to_merge(c, name);
  else if constexpr (std::is_same_v<Cpp, AttentionKernel>) d = to_attention_kernel(c, name);
  else if constexpr (std::is_same_v<Cpp, KvCacheKind>) d = to_kv_cache_kind(c, name);
  else if constexpr (std::is_same_v<Cpp, TensorView>) d = to_cpp(c, name);
  else if constexpr (std::is_same_v<Cpp, BufferView>) d = to_cpp(c);
  else if constexpr (std::is_same_v<Cpp, HostTensor>) d = to_host(c, name);
  else static_assert(sizeof(C) == 0, "a field type without a conversion: add it here");
}

template <class Cpp, class C>
void field_to_c(const Cpp& d, C& c) noexcept {
  if constexpr (std::is_same_v<C, Cpp>) c = d;
  else if constexpr (std::is_same_v<Cpp, bool>) c = to_c_bool(d);
  else if constexpr (std::is_same_v<Cpp, std::string>) copy_string(c, sizeof(c), d);
  else c = to_c(d);  // enums and views
}

// Each list of c_api_fields.hpp expanded: `name` prefixes the fields' names in errors.
#define VKP_FIELD_TO_CPP(f) field_to_cpp(c.f, d.f, name + "." #f);
#define VKP_FIELD_TO_C(f) field_to_c(d.f, c.f);
#define VKP_CONVERT_to_cpp(CType, CppType, LIST)                 \
  CppType to_cpp(const CType& c, const std::string& name) {      \
    CppType d;                                                   \
    LIST(VKP_FIELD_TO_CPP)                                       \
    return d;                                                    \
  }
#define VKP_CONVERT_to_c(CType, CppType, LIST) \
  CType to_c(const CppType& d) noexcept {      \
    CType c{};                                 \
    c.struct_size = sizeof(c);                 \
    LIST(VKP_FIELD_TO_C)                       \
    return c;                                  \
  }

#define VKP_CONVERT_both(CType, CppType, LIST) \
  VKP_CONVERT_to_cpp(CType, CppType, LIST)     \
  VKP_CONVERT_to_c(CType, CppType, LIST)
// ways (c_api_fields.hpp): to_cpp, to_c or both.
#define VKP_CONVERT(CType, CppType, LIST, ways) VKP_CONVERT_##ways(CType, CppType, LIST)
VKP_CONVERTED_STRUCTS(VKP_CONVERT)
#undef VKP_CONVERT
#undef VKP_CONVERT_both

// ---- defaults of the extensible inputs (vkp_<struct>_init) ----

// The structs whose defaults are their C++ twins'.
#define VKP_DEFAULTS_FROM_CPP(CType, CppType) \
  template <>                                 \
  CType defaults_of<CType>() {                \
    return to_c(CppType{});                   \
  }
VKP_DEFAULTS_FROM_CPP(vkp_decode_shape, DecodeShape)
VKP_DEFAULTS_FROM_CPP(vkp_decode_options, DecodeOptions)
VKP_DEFAULTS_FROM_CPP(vkp_decode_params, DecodeParams)
VKP_DEFAULTS_FROM_CPP(vkp_attention_shape, AttentionShape)
VKP_DEFAULTS_FROM_CPP(vkp_attention_options, AttentionOptions)
VKP_DEFAULTS_FROM_CPP(vkp_kv_cache_shape, KvCacheShape)
VKP_DEFAULTS_FROM_CPP(vkp_block_manager_options, BlockManagerOptions)
#undef VKP_DEFAULTS_FROM_CPP

// The structs whose twins hold what has no C default (a device name, host tensors, handles):
// the twin's defaults of the fields LIST names, zero for the rest (NULL, absent).
#define VKP_DEFAULTS_OF_FIELDS(CType, CppType, LIST) \
  template <>                                        \
  CType defaults_of<CType>() {                       \
    const CppType d{};                               \
    CType c = zeroed<CType>();                       \
    LIST(VKP_FIELD_TO_C)                             \
    return c;                                        \
  }
#define VKP_CONTEXT_OPTIONS_DEFAULTS(X) X(validation) X(disable_subgroup_arithmetic) X(fence_timeout_ms) X(read_environment)
#define VKP_EXTERNAL_DEVICE_DEFAULTS(X) X(queue_family) X(queue_index) X(fence_timeout_ms)
#define VKP_ATTENTION_INPUTS_DEFAULTS(X) X(cache_dtype) X(kv_layout) X(sliding_window)
#define VKP_DECODE_INPUTS_DEFAULTS(X) X(cache_dtype)
VKP_DEFAULTS_OF_FIELDS(vkp_context_options, ContextOptions, VKP_CONTEXT_OPTIONS_DEFAULTS)
VKP_DEFAULTS_OF_FIELDS(vkp_external_device, ExternalDevice, VKP_EXTERNAL_DEVICE_DEFAULTS)
VKP_DEFAULTS_OF_FIELDS(vkp_attention_inputs, AttentionInputs, VKP_ATTENTION_INPUTS_DEFAULTS)
VKP_DEFAULTS_OF_FIELDS(vkp_decode_inputs, DecodeInputs, VKP_DECODE_INPUTS_DEFAULTS)
VKP_DEFAULTS_OF_FIELDS(vkp_cache_scales, CacheScales, VKP_CACHE_SCALES_FIELDS)
#undef VKP_DEFAULTS_OF_FIELDS
#undef VKP_DECODE_INPUTS_DEFAULTS
#undef VKP_ATTENTION_INPUTS_DEFAULTS
#undef VKP_EXTERNAL_DEVICE_DEFAULTS
#undef VKP_CONTEXT_OPTIONS_DEFAULTS

#undef VKP_CONVERT_to_c
#undef VKP_CONVERT_to_cpp
#undef VKP_FIELD_TO_C
#undef VKP_FIELD_TO_CPP

DecodeInputs to_cpp(const vkp_decode_inputs* inputs) { return to_cpp(read_struct(inputs, "inputs"), "inputs"); }
AttentionInputs to_cpp(const vkp_attention_inputs* inputs) { return to_cpp(read_struct(inputs, "inputs"), "inputs"); }
CacheScales to_cpp(const vkp_cache_scales* scales) { return to_cpp(read_optional_struct(scales, "scales"), "scales"); }
ReshapeAndCacheViews to_cpp(const vkp_reshape_and_cache_views* views) { return to_cpp(read_struct(views, "views"), "views"); }
GatherViews to_cpp(const vkp_gather_views* views) { return to_cpp(read_struct(views, "views"), "views"); }
DecodeViews to_cpp(const vkp_decode_views* views) { return to_cpp(read_struct(views, "views"), "views"); }
AttentionViews to_cpp(const vkp_attention_views* views) { return to_cpp(read_struct(views, "views"), "views"); }
RotaryViews to_cpp(const vkp_rotary_views* views) { return to_cpp(read_struct(views, "views"), "views"); }
MergeViews to_cpp(const vkp_merge_views* views) { return to_cpp(read_struct(views, "views"), "views"); }
RotaryInputs to_cpp(const vkp_rotary_inputs* rotary) { return to_cpp(read_struct(rotary, "rotary"), "rotary"); }

DecodeParams to_params(const vkp_decode_params* params, const char* name) {
  const vkp_decode_params p = read_optional_struct(params, name);
  DecodeParams d;
  if (to_bool(p.has_scale, std::string(name) + ".has_scale")) d.scale = p.scale;
  d.softcap = p.softcap;
  d.k_scale = p.k_scale;
  d.v_scale = p.v_scale;
  return d;
}

vkp_decode_params to_c(const DecodeParams& p) noexcept {
  vkp_decode_params c{};
  c.struct_size = sizeof(c);
  c.has_scale = to_c_bool(p.scale.has_value());
  c.scale = p.scale.value_or(0.0f);
  c.softcap = p.softcap;
  c.k_scale = p.k_scale;
  c.v_scale = p.v_scale;
  return c;
}


std::vector<BlockCopy> to_pairs(const vkp_block_copy* pairs, size_t count) {
  std::vector<BlockCopy> v;
  const auto span = array_of(pairs, count, "pairs");
  v.reserve(count);
  for (const auto& p : span) v.push_back({p.src, p.dst});
  return v;
}

vkp_block_copy to_c(const BlockCopy& pair) noexcept { return {pair.src, pair.dst}; }

vkp_admission to_c(AdmissionStatus status) noexcept {
  switch (status) {
    case AdmissionStatus::ok: return VKP_ADMISSION_OK;
    case AdmissionStatus::later: return VKP_ADMISSION_LATER;
    default: return VKP_ADMISSION_NEVER;
  }
}

}  // namespace vkpaged::c_api
