// SPDX-License-Identifier: Apache-2.0
#include "c_api/c_api_convert.hpp"

#include <fmt/format.h>

#include <cstddef>
#include <type_traits>
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

// A C enum's value as the caller stored it (any 32-bit pattern).
template <typename E>
int64_t value_of(E e) noexcept {
  return int64_t(std::underlying_type_t<E>(e));
}

SplitMode to_split(vkp_split_mode mode, const std::string& name) {
  switch (value_of(mode)) {
    case VKP_SPLIT_AUTOMATIC: return SplitMode::automatic;
    case VKP_SPLIT_SINGLE_PASS: return SplitMode::single_pass;
    case VKP_SPLIT_SPLIT: return SplitMode::split;
  }
  refuse(fmt::format("{}.split: {} is not a vkp_split_mode", name, value_of(mode)));
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
              int(VKP_KERNEL_SCALAR) == int(DecodeKernel::scalar) && int(VKP_KERNEL_MATRIX) == int(DecodeKernel::matrix) &&
              int(VKP_KERNEL_MATRIX_KHR) == int(DecodeKernel::matrix_khr));

DecodeKernel to_kernel(vkp_decode_kernel kernel, const std::string& name) {
  switch (value_of(kernel)) {
    case VKP_KERNEL_AUTOMATIC: return DecodeKernel::automatic;
    case VKP_KERNEL_SCALAR: return DecodeKernel::scalar;
    case VKP_KERNEL_MATRIX: return DecodeKernel::matrix;
    case VKP_KERNEL_MATRIX_KHR: return DecodeKernel::matrix_khr;
  }
  refuse(fmt::format("{}.kernel: {} is not a vkp_decode_kernel", name, value_of(kernel)));
}

static_assert(int(VKP_ORDER_AUTOMATIC) == int(DecodeOrder::automatic) && int(VKP_ORDER_GRID) == int(DecodeOrder::grid) &&
              int(VKP_ORDER_LONGEST_FIRST) == int(DecodeOrder::longest_first));

DecodeOrder to_order(vkp_decode_order order, const std::string& name) {
  switch (value_of(order)) {
    case VKP_ORDER_AUTOMATIC: return DecodeOrder::automatic;
    case VKP_ORDER_GRID: return DecodeOrder::grid;
    case VKP_ORDER_LONGEST_FIRST: return DecodeOrder::longest_first;
  }
  refuse(fmt::format("{}.order: {} is not a vkp_decode_order", name, value_of(order)));
}

static_assert(int(VKP_MERGE_REDUCE_PASS) == int(DecodeMerge::reduce_pass) &&
              int(VKP_MERGE_IN_DISPATCH) == int(DecodeMerge::in_dispatch));

DecodeMerge to_merge(vkp_decode_merge merge, const std::string& name) {
  switch (value_of(merge)) {
    case VKP_MERGE_REDUCE_PASS: return DecodeMerge::reduce_pass;
    case VKP_MERGE_IN_DISPATCH: return DecodeMerge::in_dispatch;
  }
  refuse(fmt::format("{}.merge: {} is not a vkp_decode_merge", name, value_of(merge)));
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
    case DecodeKernel::matrix_khr: return VKP_KERNEL_MATRIX_KHR;
    case DecodeKernel::automatic: return VKP_KERNEL_AUTOMATIC;
  }
  return VKP_KERNEL_AUTOMATIC;
}

static_assert(int(VKP_KV_LAYOUT_VLLM) == int(KvLayout::vllm) && int(VKP_KV_LAYOUT_NHD) == int(KvLayout::nhd) &&
              int(VKP_KV_LAYOUT_HND) == int(KvLayout::hnd));
static_assert(int(VKP_ROTARY_NEOX) == int(RotaryStyle::neox) && int(VKP_ROTARY_GPTJ) == int(RotaryStyle::gptj));
static_assert(int(VKP_LOG_DEBUG) == int(LogLevel::debug) && int(VKP_LOG_INFO) == int(LogLevel::info) &&
              int(VKP_LOG_WARNING) == int(LogLevel::warning) && int(VKP_LOG_ERROR) == int(LogLevel::error));
// The C values follow AttentionKernel's; a kernel added there gets the next C value and a case
// in both functions below (-Wswitch points at to_c).
static_assert(int(VKP_ATTENTION_KERNEL_AUTOMATIC) == int(AttentionKernel::automatic) &&
              int(VKP_ATTENTION_KERNEL_DECODE) == int(AttentionKernel::decode) &&
              int(VKP_ATTENTION_KERNEL_SCALAR) == int(AttentionKernel::scalar) &&
              int(VKP_ATTENTION_KERNEL_MATRIX) == int(AttentionKernel::matrix));

AttentionKernel to_attention_kernel(vkp_attention_kernel kernel, const std::string& name) {
  switch (value_of(kernel)) {
    case VKP_ATTENTION_KERNEL_AUTOMATIC: return AttentionKernel::automatic;
    case VKP_ATTENTION_KERNEL_DECODE: return AttentionKernel::decode;
    case VKP_ATTENTION_KERNEL_SCALAR: return AttentionKernel::scalar;
    case VKP_ATTENTION_KERNEL_MATRIX: return AttentionKernel::matrix;
  }
  refuse(fmt::format("{}.kernel: {} is not a vkp_attention_kernel", name, value_of(kernel)));
}

void copy_string(char* dst, size_t capacity, const std::string& src) noexcept {
  std::snprintf(dst, capacity, "%s", src.c_str());
}

}  // namespace

SplitMode split_mode_of(vkp_split_mode mode, const std::string& name) { return to_split(mode, name); }

// ---- defaults of the extensible inputs (vkp_<struct>_init) ----

template <>
vkp_context_options defaults_of<vkp_context_options>() {
  const ContextOptions d;
  vkp_context_options c;
  std::memset(&c, 0, sizeof(c));
  c.struct_size = sizeof(c);
  c.validation = to_c_bool(d.validation);
  c.disable_subgroup_arithmetic = to_c_bool(d.disable_subgroup_arithmetic);
  c.fence_timeout_ms = d.fence_timeout_ms;
  c.read_environment = to_c_bool(d.read_environment);
  return c;
}

template <>
vkp_external_device defaults_of<vkp_external_device>() {
  const ExternalDevice d;
  vkp_external_device c;
  std::memset(&c, 0, sizeof(c));
  c.struct_size = sizeof(c);
  c.queue_family = d.queue_family;
  c.queue_index = d.queue_index;
  c.fence_timeout_ms = d.fence_timeout_ms;
  return c;
}

template <>
vkp_decode_shape defaults_of<vkp_decode_shape>() {
  return to_c(DecodeShape{});
}

template <>
vkp_decode_options defaults_of<vkp_decode_options>() {
  return to_c(DecodeOptions{});
}

template <>
vkp_decode_params defaults_of<vkp_decode_params>() {
  return to_c(DecodeParams{});
}

template <>
vkp_attention_shape defaults_of<vkp_attention_shape>() {
  return to_c(AttentionShape{});
}

template <>
vkp_attention_options defaults_of<vkp_attention_options>() {
  return to_c(AttentionOptions{});
}

template <>
vkp_attention_inputs defaults_of<vkp_attention_inputs>() {
  const AttentionInputs d;
  vkp_attention_inputs in;
  std::memset(&in, 0, sizeof(in));
  in.struct_size = sizeof(in);
  in.cache_dtype = to_c(d.cache_dtype);
  in.kv_layout = to_c(d.kv_layout);
  in.sliding_window = d.sliding_window;
  return in;
}

template <>
vkp_decode_inputs defaults_of<vkp_decode_inputs>() {
  vkp_decode_inputs in;
  std::memset(&in, 0, sizeof(in));
  in.struct_size = sizeof(in);
  in.cache_dtype = to_c(DecodeInputs{}.cache_dtype);
  return in;
}

template <>
vkp_cache_scales defaults_of<vkp_cache_scales>() {
  const CacheScales d;
  return {sizeof(vkp_cache_scales), d.k_scale, d.v_scale};
}

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
  switch (value_of(layout)) {
    case VKP_KV_LAYOUT_VLLM: return KvLayout::vllm;
    case VKP_KV_LAYOUT_NHD: return KvLayout::nhd;
    case VKP_KV_LAYOUT_HND: return KvLayout::hnd;
  }
  refuse(fmt::format("{}: {} is not a vkp_kv_layout", name, value_of(layout)));
}

vkp_kv_layout to_c(KvLayout layout) noexcept { return vkp_kv_layout(layout); }

RotaryStyle to_rotary_style(vkp_rotary_style style, const std::string& name) {
  switch (value_of(style)) {
    case VKP_ROTARY_NEOX: return RotaryStyle::neox;
    case VKP_ROTARY_GPTJ: return RotaryStyle::gptj;
  }
  refuse(fmt::format("{}: {} is not a vkp_rotary_style", name, value_of(style)));
}

LogLevel to_log_level(vkp_log_level level, const std::string& name) {
  switch (value_of(level)) {
    case VKP_LOG_DEBUG: return LogLevel::debug;
    case VKP_LOG_INFO: return LogLevel::info;
    case VKP_LOG_WARNING: return LogLevel::warning;
    case VKP_LOG_ERROR: return LogLevel::error;
  }
  refuse(fmt::format("{}: {} is not a vkp_log_level", name, value_of(level)));
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

DecodeShape to_cpp(const vkp_decode_shape& s, const std::string& name) {
  DecodeShape d;
  d.num_seqs = s.num_seqs;
  d.num_heads = s.num_heads;
  d.num_kv_heads = s.num_kv_heads;
  d.head_size = s.head_size;
  d.block_size = s.block_size;
  d.num_blocks = s.num_blocks;
  d.max_blocks_per_seq = s.max_blocks_per_seq;
  d.max_context_len = s.max_context_len;
  d.query_dtype = to_dtype(s.query_dtype, name + ".query_dtype");
  d.cache_dtype = to_dtype(s.cache_dtype, name + ".cache_dtype");
  d.kv_layout = to_kv_layout(s.kv_layout, name + ".kv_layout");
  d.alibi = to_bool(s.alibi, name + ".alibi");
  d.softcap = to_bool(s.softcap, name + ".softcap");
  d.sinks = to_bool(s.sinks, name + ".sinks");
  d.lse = to_bool(s.lse, name + ".lse");
  d.csr_page_table = to_bool(s.csr_page_table, name + ".csr_page_table");
  return d;
}

vkp_decode_shape to_c(const DecodeShape& s) noexcept {
  vkp_decode_shape c{};
  c.struct_size = sizeof(c);
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
  c.kv_layout = to_c(s.kv_layout);
  c.alibi = to_c_bool(s.alibi);
  c.softcap = to_c_bool(s.softcap);
  c.sinks = to_c_bool(s.sinks);
  c.lse = to_c_bool(s.lse);
  c.csr_page_table = to_c_bool(s.csr_page_table);
  return c;
}

DecodeOptions to_cpp(const vkp_decode_options& o, const std::string& name) {
  DecodeOptions d;
  d.sliding_window = o.sliding_window;
  d.split = to_split(o.split, name);
  d.partition_tokens = o.partition_tokens;
  d.kernel = to_kernel(o.kernel, name);
  d.order = to_order(o.order, name);
  d.merge = to_merge(o.merge, name);
  return d;
}

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

vkp_decode_options to_c(const DecodeOptions& o) noexcept {
  vkp_decode_options c{};
  c.struct_size = sizeof(c);
  c.sliding_window = o.sliding_window;
  c.split = to_c(o.split);
  c.partition_tokens = o.partition_tokens;
  c.kernel = to_c(o.kernel);
  c.order = to_c(o.order);
  c.merge = o.merge == DecodeMerge::in_dispatch ? VKP_MERGE_IN_DISPATCH : VKP_MERGE_REDUCE_PASS;
  return c;
}

AttentionShape to_cpp(const vkp_attention_shape& s, const std::string& name) {
  AttentionShape a;
  a.num_requests = s.num_requests;
  a.num_query_tokens = s.num_query_tokens;
  a.num_heads = s.num_heads;
  a.num_kv_heads = s.num_kv_heads;
  a.head_size = s.head_size;
  a.block_size = s.block_size;
  a.num_blocks = s.num_blocks;
  a.max_blocks_per_seq = s.max_blocks_per_seq;
  a.max_context_len = s.max_context_len;
  a.query_dtype = to_dtype(s.query_dtype, name + ".query_dtype");
  a.cache_dtype = to_dtype(s.cache_dtype, name + ".cache_dtype");
  a.kv_layout = to_kv_layout(s.kv_layout, name + ".kv_layout");
  a.sliding_window = s.sliding_window;
  a.softcap = to_bool(s.softcap, name + ".softcap");
  a.alibi = to_bool(s.alibi, name + ".alibi");
  a.sinks = to_bool(s.sinks, name + ".sinks");
  a.lse = to_bool(s.lse, name + ".lse");
  a.tree_mask = to_bool(s.tree_mask, name + ".tree_mask");
  a.csr_page_table = to_bool(s.csr_page_table, name + ".csr_page_table");
  return a;
}

vkp_attention_shape to_c(const AttentionShape& s) noexcept {
  vkp_attention_shape c{};
  c.struct_size = sizeof(c);
  c.num_requests = s.num_requests;
  c.num_query_tokens = s.num_query_tokens;
  c.num_heads = s.num_heads;
  c.num_kv_heads = s.num_kv_heads;
  c.head_size = s.head_size;
  c.block_size = s.block_size;
  c.num_blocks = s.num_blocks;
  c.max_blocks_per_seq = s.max_blocks_per_seq;
  c.max_context_len = s.max_context_len;
  c.query_dtype = to_c(s.query_dtype);
  c.cache_dtype = to_c(s.cache_dtype);
  c.kv_layout = to_c(s.kv_layout);
  c.sliding_window = s.sliding_window;
  c.softcap = to_c_bool(s.softcap);
  c.alibi = to_c_bool(s.alibi);
  c.sinks = to_c_bool(s.sinks);
  c.lse = to_c_bool(s.lse);
  c.tree_mask = to_c_bool(s.tree_mask);
  c.csr_page_table = to_c_bool(s.csr_page_table);
  return c;
}

AttentionOptions to_cpp(const vkp_attention_options& o, const std::string& name) {
  AttentionOptions a;
  a.kernel = to_attention_kernel(o.kernel, name);
  a.split = to_split(o.split, name);
  a.partition_tokens = o.partition_tokens;
  return a;
}

vkp_attention_kernel to_c(AttentionKernel kernel) noexcept {
  switch (kernel) {
    case AttentionKernel::automatic: return VKP_ATTENTION_KERNEL_AUTOMATIC;
    case AttentionKernel::decode: return VKP_ATTENTION_KERNEL_DECODE;
    case AttentionKernel::scalar: return VKP_ATTENTION_KERNEL_SCALAR;
    case AttentionKernel::matrix: return VKP_ATTENTION_KERNEL_MATRIX;
  }
  return VKP_ATTENTION_KERNEL_AUTOMATIC;
}

vkp_attention_options to_c(const AttentionOptions& o) noexcept {
  vkp_attention_options c{};
  c.struct_size = sizeof(c);
  c.kernel = to_c(o.kernel);
  c.split = to_c(o.split);
  c.partition_tokens = o.partition_tokens;
  return c;
}

CacheScales to_cpp(const vkp_cache_scales* scales) {
  const vkp_cache_scales s = read_optional_struct(scales, "scales");
  return {s.k_scale, s.v_scale};
}

ReshapeAndCacheViews to_cpp(const vkp_reshape_and_cache_views* views) {
  const vkp_reshape_and_cache_views v = read_struct(views, "views");
  ReshapeAndCacheViews d;
  d.key = to_cpp(v.key, "key");
  d.value = to_cpp(v.value, "value");
  d.slot_mapping = to_cpp(v.slot_mapping, "slot_mapping");
  d.key_cache = to_cpp(v.key_cache, "key_cache");
  d.value_cache = to_cpp(v.value_cache, "value_cache");
  d.status = to_cpp(v.status);
  d.layout = to_kv_layout(v.layout, "views.layout");
  return d;
}

RotaryInputs to_cpp(const vkp_rotary_inputs* rotary) {
  const vkp_rotary_inputs r = read_struct(rotary, "rotary");
  RotaryInputs d;
  d.query = to_cpp(r.query, "rotary.query");
  d.positions = to_cpp(r.positions, "rotary.positions");
  d.cos_sin_cache = to_cpp(r.cos_sin_cache, "rotary.cos_sin_cache");
  d.style = to_rotary_style(r.style, "rotary.style");
  return d;
}

DecodeViews to_cpp(const vkp_decode_views& v) {
  DecodeViews d;
  d.query = to_cpp(v.query, "query");
  d.key_cache = to_cpp(v.key_cache, "key_cache");
  d.value_cache = to_cpp(v.value_cache, "value_cache");
  d.block_tables = to_cpp(v.block_tables, "block_tables");
  d.context_lens = to_cpp(v.context_lens, "context_lens");
  d.output = to_cpp(v.output, "output");
  d.alibi_slopes = to_cpp(v.alibi_slopes, "alibi_slopes");
  d.sinks = to_cpp(v.sinks, "sinks");
  d.lse = to_cpp(v.lse, "lse");
  d.scratch = to_cpp(v.scratch);
  d.status = to_cpp(v.status);
  d.order = to_cpp(v.order);
  d.merge_counters = to_cpp(v.merge_counters);
  d.kv_indptr = to_cpp(v.kv_indptr, "kv_indptr");
  d.kv_indices = to_cpp(v.kv_indices, "kv_indices");
  d.kv_last_page_len = to_cpp(v.kv_last_page_len, "kv_last_page_len");
  return d;
}

AttentionViews to_cpp(const vkp_attention_views& v) {
  AttentionViews a;
  a.query = to_cpp(v.query, "query");
  a.key_cache = to_cpp(v.key_cache, "key_cache");
  a.value_cache = to_cpp(v.value_cache, "value_cache");
  a.block_tables = to_cpp(v.block_tables, "block_tables");
  a.context_lens = to_cpp(v.context_lens, "context_lens");
  a.query_starts = to_cpp(v.query_starts, "query_starts");
  a.output = to_cpp(v.output, "output");
  a.lse = to_cpp(v.lse, "lse");
  a.tree_mask = to_cpp(v.tree_mask, "tree_mask");
  a.alibi_slopes = to_cpp(v.alibi_slopes, "alibi_slopes");
  a.sinks = to_cpp(v.sinks, "sinks");
  a.scratch = to_cpp(v.scratch);
  a.status = to_cpp(v.status);
  a.kv_indptr = to_cpp(v.kv_indptr, "kv_indptr");
  a.kv_indices = to_cpp(v.kv_indices, "kv_indices");
  a.kv_last_page_len = to_cpp(v.kv_last_page_len, "kv_last_page_len");
  return a;
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

namespace {

// The fields DeviceInfo and vkp_device_info share by name (all but the strings and the
// booleans), in either direction, so that a field added to both is copied both ways or neither.
template <class From, class To>
void copy_device_numbers(const From& i, To& o) noexcept {
  o.index = i.index;
  o.vendor_id = i.vendor_id;
  o.api_version = i.api_version;
  o.subgroup_size = i.subgroup_size;
  o.max_storage_buffer_range = i.max_storage_buffer_range;
  o.max_shared_memory = i.max_shared_memory;
  o.max_workgroup_invocations = i.max_workgroup_invocations;
  o.max_push_constants = i.max_push_constants;
  o.min_storage_buffer_offset_alignment = i.min_storage_buffer_offset_alignment;
  o.compute_units = i.compute_units;
  o.timestamp_period_ns = i.timestamp_period_ns;
  o.timestamp_valid_bits = i.timestamp_valid_bits;
  o.device_local_bytes = i.device_local_bytes;
  o.device_local_free_bytes = i.device_local_free_bytes;
  o.max_memory_allocation_size = i.max_memory_allocation_size;
}

// The booleans, by name: `convert` maps one field of `From` to `To`'s type.
template <class From, class To, class Convert>
void copy_device_flags(const From& i, To& o, Convert&& convert) {
  o.subgroup_arithmetic = convert(i.subgroup_arithmetic, "subgroup_arithmetic");
  o.storage_16bit = convert(i.storage_16bit, "storage_16bit");
  o.storage_8bit = convert(i.storage_8bit, "storage_8bit");
  o.shader_float16 = convert(i.shader_float16, "shader_float16");
  o.shader_int64 = convert(i.shader_int64, "shader_int64");
  o.buffer_device_address = convert(i.buffer_device_address, "buffer_device_address");
  o.push_descriptor = convert(i.push_descriptor, "push_descriptor");
  o.timestamps = convert(i.timestamps, "timestamps");
  o.compute_units_reported = convert(i.compute_units_reported, "compute_units_reported");
  o.subgroup_shuffle = convert(i.subgroup_shuffle, "subgroup_shuffle");
  o.memory_budget = convert(i.memory_budget, "memory_budget");
  o.cooperative_matrix = convert(i.cooperative_matrix, "cooperative_matrix");
  o.cooperative_matrix_khr = convert(i.cooperative_matrix_khr, "cooperative_matrix_khr");
  o.vulkan_memory_model = convert(i.vulkan_memory_model, "vulkan_memory_model");
  o.vulkan_memory_model_device_scope = convert(i.vulkan_memory_model_device_scope, "vulkan_memory_model_device_scope");
}

}  // namespace

vkp_device_info to_c(const DeviceInfo& i) noexcept {
  vkp_device_info o;
  std::memset(&o, 0, sizeof(o));
  o.struct_size = sizeof(o);
  copy_string(o.name, sizeof(o.name), i.name);
  copy_string(o.type, sizeof(o.type), i.type);
  copy_string(o.driver, sizeof(o.driver), i.driver);
  copy_device_numbers(i, o);
  copy_device_flags(i, o, [](bool b, const char*) { return to_c_bool(b); });
  return o;
}

DeviceInfo to_cpp(const vkp_device_info& i, const std::string& name) {
  DeviceInfo o;
  o.name = std::string(i.name, strnlen(i.name, sizeof(i.name)));
  o.type = std::string(i.type, strnlen(i.type, sizeof(i.type)));
  o.driver = std::string(i.driver, strnlen(i.driver, sizeof(i.driver)));
  copy_device_numbers(i, o);
  copy_device_flags(i, o, [&](vkp_bool32 b, const char* field) { return to_bool(b, name + "." + field); });
  return o;
}

vkp_cooperative_matrix_shape to_c(const CooperativeMatrixShape& m) noexcept {
  vkp_cooperative_matrix_shape c{};
  c.struct_size = sizeof(c);
  c.m = m.m;
  c.n = m.n;
  c.k = m.k;
  c.a_type = m.a_type;
  c.b_type = m.b_type;
  c.c_type = m.c_type;
  c.result_type = m.result_type;
  c.saturating_accumulation = to_c_bool(m.saturating_accumulation);
  c.scope = m.scope;
  return c;
}

}  // namespace vkpaged::c_api
