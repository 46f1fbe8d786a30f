// SPDX-License-Identifier: Apache-2.0
#pragma once
// Conversions between the C structs of vkpaged.h and the C++ types, checking what C cannot:
// enum values in range, booleans 0 or 1, ranks and dimensions, NULL data, counts. Errors name
// the argument. Extensible structs arrive here already read (c_api_structs.hpp).
#include <cstdint>
#include <span>
#include <string>
#include <vector>

#include "c_api/c_api_fields.hpp"
#include "c_api/c_api_structs.hpp"
#include "vkpaged/attention.hpp"
#include "vkpaged/block_manager.hpp"
#include "vkpaged/cache_ops.hpp"
#include "vkpaged/context.hpp"
#include "vkpaged/decode.hpp"
#include "vkpaged/error.hpp"
#include "vkpaged/kv_cache.hpp"
#include "vkpaged/kv_layout.hpp"
#include "vkpaged/log.hpp"
#include "vkpaged/merge.hpp"
#include "vkpaged/mla_attention.hpp"
#include "vkpaged/rotary.hpp"
#include "vkpaged/tensor.hpp"
#include "vkpaged/vkpaged.h"

namespace vkpaged::c_api {

DType to_dtype(vkp_dtype dtype, const std::string& name);
vkp_dtype to_c(DType dtype) noexcept;
// Enums passed by value or held in a struct: "<name>: <value> is not a vkp_<enum>" otherwise.
KvLayout to_kv_layout(vkp_kv_layout layout, const std::string& name);
vkp_kv_layout to_c(KvLayout layout) noexcept;
RotaryStyle to_rotary_style(vkp_rotary_style style, const std::string& name);
LogLevel to_log_level(vkp_log_level level, const std::string& name);
Shape to_shape(const int64_t* dims, int32_t rank, const std::string& name);

BufferView to_cpp(const vkp_buffer_view& view) noexcept;
vkp_buffer_view to_c(const BufferView& view) noexcept;
// An absent view (VK_NULL_HANDLE) converts to an empty TensorView whatever its other fields.
TensorView to_cpp(const vkp_tensor_view& view, const std::string& name);
vkp_tensor_view to_c(const TensorView& view) noexcept;

// Copies host data into a HostTensor; an absent tensor (data NULL, rank 0) gives an empty one.
HostTensor to_host(const vkp_host_tensor& tensor, const std::string& name);
// Refuses a caller's output tensor whose dtype or shape differs from the result's.
void check_matches(const HostTensor& result, const vkp_host_tensor& tensor, const std::string& name);
// Copies a result back into the caller's tensor, after check_matches.
void copy_back(const HostTensor& result, vkp_host_tensor& tensor, const std::string& name);

// The per-call values of decode and attention (AttentionParams is DecodeParams); NULL = defaults.
DecodeParams to_params(const vkp_decode_params* params, const char* name = "params");
// A vkp_split_mode checked ("<name>.split: 7 is not a vkp_split_mode").
vkp_decode_params to_c(const DecodeParams& params) noexcept;
CacheScales to_cpp(const vkp_cache_scales* scales);  // NULL = 1, 1
// The host path's inputs, read and converted ("inputs.query").
DecodeInputs to_cpp(const vkp_decode_inputs* inputs);
AttentionInputs to_cpp(const vkp_attention_inputs* inputs);
// An operator's views struct, read (struct_size) and converted, every view and field named
// ("views.key", "rotary.style").
ReshapeAndCacheViews to_cpp(const vkp_reshape_and_cache_views* views);
GatherViews to_cpp(const vkp_gather_views* views);
RotaryInputs to_cpp(const vkp_rotary_inputs* rotary);
RotaryViews to_cpp(const vkp_rotary_views* views);
DecodeViews to_cpp(const vkp_decode_views* views);
AttentionViews to_cpp(const vkp_attention_views* views);
MergeViews to_cpp(const vkp_merge_views* views);
// Structs already read, converted field by field as c_api_fields.hpp lists them (its table
// VKP_CONVERTED_STRUCTS); `name` prefixes each field's name in errors.
#define VKP_DECLARE_to_cpp(CType, CppType) CppType to_cpp(const CType& value, const std::string& name);
#define VKP_DECLARE_to_c(CType, CppType) CType to_c(const CppType& value) noexcept;
#define VKP_DECLARE_both(CType, CppType) VKP_DECLARE_to_cpp(CType, CppType) VKP_DECLARE_to_c(CType, CppType)
#define VKP_DECLARE_CONVERSIONS(CType, CppType, LIST, ways) VKP_DECLARE_##ways(CType, CppType)
VKP_CONVERTED_STRUCTS(VKP_DECLARE_CONVERSIONS)
#undef VKP_DECLARE_CONVERSIONS
#undef VKP_DECLARE_both
#undef VKP_DECLARE_to_c
#undef VKP_DECLARE_to_cpp

vkp_attention_kernel to_c(AttentionKernel kernel) noexcept;

// A nullable host tensor argument the call reads and may write: NULL and absent give an empty one.
HostTensor to_host_or_empty(const vkp_host_tensor* tensor, const std::string& name);

std::vector<BlockCopy> to_pairs(const vkp_block_copy* pairs, size_t count);
vkp_block_copy to_c(const BlockCopy& pair) noexcept;
vkp_admission to_c(AdmissionStatus status) noexcept;

// A caller's count of T: refused when no array of T could be that long (a negative number
// passed as size_t lands here).
void check_count(size_t count, size_t element_bytes, const char* name);

// The span of a C array, refusing NULL with a non-zero count and impossible counts.
template <typename T>
std::span<const T> array_of(const T* data, size_t count, const char* name) {
  check_count(count, sizeof(T), name);
  if (data == nullptr && count > 0)
    throw Error(ErrorCode::invalid_argument, std::string(name) + " is NULL with a count of " + std::to_string(count));
  return {data, count};
}

// A signed count or index the caller passed, refused when negative.
void check_not_negative(int64_t value, const char* name);

}  // namespace vkpaged::c_api
