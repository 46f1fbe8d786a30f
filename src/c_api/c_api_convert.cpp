#include "c_api/c_api_convert.hpp"

#include <fmt/format.h>

#include <cstdio>
#include <cstring>

#include "vkpaged/error.hpp"

namespace vkpaged::c_api {

namespace {

[[noreturn]] void refuse(const std::string& message) { throw Error(ErrorCode::invalid_argument, message); }

// Same numbering on both sides (see dtype.hpp and vkpaged.h).
static_assert(int(VKP_DTYPE_F32) == int(DType::f32) && int(VKP_DTYPE_BF16) == int(DType::bf16) &&
              int(VKP_DTYPE_FP8_E4M3) == int(DType::fp8_e4m3) && int(VKP_DTYPE_FP8_E5M2) == int(DType::fp8_e5m2) &&
              int(VKP_DTYPE_I32) == int(DType::i32) && int(VKP_DTYPE_U32) == int(DType::u32) &&
              int(VKP_DTYPE_I64) == int(DType::i64) && int(VKP_DTYPE_U8) == int(DType::u8));

SplitMode to_split(vkp_split_mode mode) {
  switch (mode) {
    case VKP_SPLIT_AUTOMATIC: return SplitMode::automatic;
    case VKP_SPLIT_SINGLE_PASS: return SplitMode::single_pass;
    case VKP_SPLIT_SPLIT: return SplitMode::split;
  }
  refuse(fmt::format("options.split: {} is not a vkp_split_mode", int(mode)));
}

vkp_split_mode to_c(SplitMode mode) noexcept {
  switch (mode) {
    case SplitMode::single_pass: return VKP_SPLIT_SINGLE_PASS;
    case SplitMode::split: return VKP_SPLIT_SPLIT;
    default: return VKP_SPLIT_AUTOMATIC;
  }
}

// Same numbering on both sides (see decode.hpp and vkpaged.h).
static_assert(int(VKP_KERNEL_AUTOMATIC) == int(DecodeKernel::automatic) &&
              int(VKP_KERNEL_SCALAR) == int(DecodeKernel::scalar) && int(VKP_KERNEL_MATRIX) == int(DecodeKernel::matrix));

DecodeKernel to_kernel(vkp_decode_kernel kernel) {
  switch (kernel) {
    case VKP_KERNEL_AUTOMATIC: return DecodeKernel::automatic;
    case VKP_KERNEL_SCALAR: return DecodeKernel::scalar;
    case VKP_KERNEL_MATRIX: return DecodeKernel::matrix;
  }
  refuse(fmt::format("options.kernel: {} is not a vkp_decode_kernel", int(kernel)));
}

static_assert(int(VKP_ORDER_AUTOMATIC) == int(DecodeOrder::automatic) && int(VKP_ORDER_GRID) == int(DecodeOrder::grid) &&
              int(VKP_ORDER_LONGEST_FIRST) == int(DecodeOrder::longest_first));

DecodeOrder to_order(vkp_decode_order order) {
  switch (order) {
    case VKP_ORDER_AUTOMATIC: return DecodeOrder::automatic;
    case VKP_ORDER_GRID: return DecodeOrder::grid;
    case VKP_ORDER_LONGEST_FIRST: return DecodeOrder::longest_first;
  }
  refuse(fmt::format("options.order: {} is not a vkp_decode_order", int(order)));
}

static_assert(int(VKP_MERGE_REDUCE_PASS) == int(DecodeMerge::reduce_pass) &&
              int(VKP_MERGE_IN_DISPATCH) == int(DecodeMerge::in_dispatch));

DecodeMerge to_merge(vkp_decode_merge merge) {
  switch (merge) {
    case VKP_MERGE_REDUCE_PASS: return DecodeMerge::reduce_pass;
    case VKP_MERGE_IN_DISPATCH: return DecodeMerge::in_dispatch;
  }
  refuse(fmt::format("options.merge: {} is not a vkp_decode_merge", int(merge)));
}

vkp_decode_order to_c(DecodeOrder order) noexcept {
  switch (order) {
    case DecodeOrder::grid: return VKP_ORDER_GRID;
    case DecodeOrder::longest_first: return VKP_ORDER_LONGEST_FIRST;
    default: return VKP_ORDER_AUTOMATIC;
  }
}

vkp_decode_kernel to_c(DecodeKernel kernel) noexcept {
  switch (kernel) {
    case DecodeKernel::scalar: return VKP_KERNEL_SCALAR;
    case DecodeKernel::matrix: return VKP_KERNEL_MATRIX;
    default: return VKP_KERNEL_AUTOMATIC;
  }
}

void copy_string(char* dst, size_t capacity, const std::string& src) noexcept {
  std::snprintf(dst, capacity, "%s", src.c_str());
}

}  // namespace

DType to_dtype(vkp_dtype dtype, const char* name) {
  if (int(dtype) < int(VKP_DTYPE_F32) || int(dtype) > int(VKP_DTYPE_U8))
    refuse(fmt::format("{}: {} is not a vkp_dtype", name, int(dtype)));
  return DType(dtype);
}

vkp_dtype to_c(DType dtype) noexcept { return vkp_dtype(dtype); }

Shape to_shape(const int64_t* dims, int32_t rank, const char* name) {
  if (rank < 0 || rank > kMaxRank) refuse(fmt::format("{}: rank {} is outside [0, {}]", name, rank, kMaxRank));
  std::vector<int64_t> v(dims, dims + rank);
  for (int32_t i = 0; i < rank; ++i)
    if (v[size_t(i)] < 0) refuse(fmt::format("{}: shape[{}] is negative ({})", name, i, v[size_t(i)]));
  return Shape(v);
}

BufferView to_cpp(const vkp_buffer_view& view) noexcept { return {view.buffer, view.offset, view.size}; }
vkp_buffer_view to_c(const BufferView& view) noexcept { return {view.buffer, view.offset, view.size}; }

TensorView to_cpp(const vkp_tensor_view& view, const char* name) {
  TensorView t;
  if (view.memory.buffer == VK_NULL_HANDLE) return t;
  t.memory = to_cpp(view.memory);
  t.dtype = to_dtype(view.dtype, name);
  t.shape = to_shape(view.shape, view.rank, name);
  return t;
}

vkp_tensor_view to_c(const TensorView& view) noexcept {
  vkp_tensor_view t{};
  t.memory = to_c(view.memory);
  t.dtype = to_c(view.dtype);
  t.rank = view.shape.rank();
  for (int i = 0; i < view.shape.rank(); ++i) t.shape[i] = view.shape[i];
  return t;
}

HostTensor to_host(const vkp_host_tensor& tensor, const char* name) {
  if (tensor.data == nullptr && tensor.rank == 0) return {};
  const DType dtype = to_dtype(tensor.dtype, name);
  const Shape shape = to_shape(tensor.shape, tensor.rank, name);
  // The element count must not overflow before HostTensor sizes its storage.
  size_t bytes = dtype_size(dtype);
  for (int i = 0; i < shape.rank(); ++i)
    if (__builtin_mul_overflow(bytes, size_t(shape[i]), &bytes))
      refuse(fmt::format("{}: shape {} of {} is too large", name, shape.str(), dtype_name(dtype)));
  if (tensor.data == nullptr && bytes > 0) refuse(fmt::format("{}: data is NULL for shape {}", name, shape.str()));
  HostTensor h(dtype, shape);
  if (bytes > 0) std::memcpy(h.data(), tensor.data, bytes);
  return h;
}

void check_matches(const HostTensor& result, const vkp_host_tensor& tensor, const char* name) {
  const DType dtype = to_dtype(tensor.dtype, name);
  const Shape shape = to_shape(tensor.shape, tensor.rank, name);
  if (dtype != result.dtype() || !(shape == result.shape()))
    refuse(fmt::format("{}: {} {} given where the result is {} {}", name, dtype_name(dtype), shape.str(),
                       dtype_name(result.dtype()), result.shape().str()));
  if (tensor.data == nullptr && result.bytes() > 0) refuse(fmt::format("{}: data is NULL", name));
}

void copy_back(const HostTensor& result, vkp_host_tensor& tensor, const char* name) {
  check_matches(result, tensor, name);
  if (result.bytes() > 0) std::memcpy(tensor.data, result.data(), result.bytes());
}

DecodeShape to_cpp(const vkp_decode_shape& s) {
  DecodeShape d;
  d.num_seqs = s.num_seqs;
  d.num_heads = s.num_heads;
  d.num_kv_heads = s.num_kv_heads;
  d.head_size = s.head_size;
  d.block_size = s.block_size;
  d.num_blocks = s.num_blocks;
  d.max_blocks_per_seq = s.max_blocks_per_seq;
  d.max_context_len = s.max_context_len;
  d.query_dtype = to_dtype(s.query_dtype, "shape.query_dtype");
  d.cache_dtype = to_dtype(s.cache_dtype, "shape.cache_dtype");
  d.alibi = s.alibi;
  d.sinks = s.sinks;
  d.lse = s.lse;
  return d;
}

vkp_decode_shape to_c(const DecodeShape& s) noexcept {
  vkp_decode_shape c{};
  c.num_seqs = s.num_seqs;
  c.num_heads = s.num_heads;
  c.num_kv_heads = s.num_kv_heads;
  c.head_size = s.head_size;
  c.block_size = s.block_size;
  c.num_blocks = s.num_blocks;
  c.max_blocks_per_seq = s.max_blocks_per_seq;
  c.max_context_len = s.max_context_len;
  c.query_dtype = to_c(s.query_dtype);
  c.cache_dtype = to_c(s.cache_dtype);
  c.alibi = s.alibi;
  c.sinks = s.sinks;
  c.lse = s.lse;
  return c;
}

DecodeOptions to_cpp(const vkp_decode_options* o) {
  DecodeOptions d;
  if (o == nullptr) return d;
  d.sliding_window = o->sliding_window;
  d.split = to_split(o->split);
  d.partition_tokens = o->partition_tokens;
  d.kernel = to_kernel(o->kernel);
  d.order = to_order(o->order);
  d.merge = to_merge(o->merge);
  return d;
}

DecodeParams to_params(const vkp_decode_options* o) {
  DecodeParams d;
  if (o == nullptr) return d;
  if (o->has_scale) d.scale = o->scale;
  d.softcap = o->softcap;
  d.k_scale = o->k_scale;
  d.v_scale = o->v_scale;
  return d;
}

vkp_decode_options to_c(const DecodeOptions& o, const DecodeParams& p) noexcept {
  vkp_decode_options c{};
  c.has_scale = p.scale.has_value();
  c.scale = p.scale.value_or(0.0f);
  c.softcap = p.softcap;
  c.sliding_window = o.sliding_window;
  c.k_scale = p.k_scale;
  c.v_scale = p.v_scale;
  c.split = to_c(o.split);
  c.partition_tokens = o.partition_tokens;
  c.kernel = to_c(o.kernel);
  c.order = to_c(o.order);
  c.merge = o.merge == DecodeMerge::in_dispatch ? VKP_MERGE_IN_DISPATCH : VKP_MERGE_REDUCE_PASS;
  return c;
}

CacheScales to_cpp(const vkp_cache_scales* scales) noexcept {
  if (scales == nullptr) return {};
  return {scales->k_scale, scales->v_scale};
}

std::vector<BlockCopy> to_pairs(const vkp_block_copy* pairs, size_t count) {
  std::vector<BlockCopy> v;
  v.reserve(count);
  for (const auto& p : array_of(pairs, count, "pairs")) v.push_back({p.src, p.dst});
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

// The fields DeviceInfo and vkp_device_info share by name (all but the strings), in either
// direction, so that a field added to both is copied both ways or neither.
template <class From, class To>
void copy_device_numbers(const From& i, To& o) noexcept {
  o.index = i.index;
  o.vendor_id = i.vendor_id;
  o.api_version = i.api_version;
  o.subgroup_size = i.subgroup_size;
  o.subgroup_arithmetic = i.subgroup_arithmetic;
  o.storage_16bit = i.storage_16bit;
  o.storage_8bit = i.storage_8bit;
  o.shader_float16 = i.shader_float16;
  o.shader_int64 = i.shader_int64;
  o.buffer_device_address = i.buffer_device_address;
  o.push_descriptor = i.push_descriptor;
  o.timestamps = i.timestamps;
  o.max_storage_buffer_range = i.max_storage_buffer_range;
  o.max_shared_memory = i.max_shared_memory;
  o.max_workgroup_invocations = i.max_workgroup_invocations;
  o.max_push_constants = i.max_push_constants;
  o.min_storage_buffer_offset_alignment = i.min_storage_buffer_offset_alignment;
  o.compute_units = i.compute_units;
  o.compute_units_reported = i.compute_units_reported;
  o.timestamp_period_ns = i.timestamp_period_ns;
  o.timestamp_valid_bits = i.timestamp_valid_bits;
  o.device_local_bytes = i.device_local_bytes;
  o.subgroup_shuffle = i.subgroup_shuffle;
  o.memory_budget = i.memory_budget;
  o.device_local_free_bytes = i.device_local_free_bytes;
  o.max_memory_allocation_size = i.max_memory_allocation_size;
  o.cooperative_matrix = i.cooperative_matrix;
}

void fill_device_info(const DeviceInfo& i, vkp_device_info& o) noexcept {
  o = vkp_device_info{};
  copy_string(o.name, sizeof(o.name), i.name);
  copy_string(o.type, sizeof(o.type), i.type);
  copy_string(o.driver, sizeof(o.driver), i.driver);
  copy_device_numbers(i, o);
}

DeviceInfo to_cpp(const vkp_device_info& i) {
  DeviceInfo o;
  o.name = std::string(i.name, strnlen(i.name, sizeof(i.name)));
  o.type = std::string(i.type, strnlen(i.type, sizeof(i.type)));
  o.driver = std::string(i.driver, strnlen(i.driver, sizeof(i.driver)));
  copy_device_numbers(i, o);
  return o;
}

}  // namespace vkpaged::c_api
