// SPDX-License-Identifier: Apache-2.0
#pragma once
// The C++ enums as Python strings ("f16", "nhd", "neox", "auto", ...): each parse names the
// argument and the accepted values when it refuses one, as the library's own messages do.
#include <optional>
#include <string>
#include <string_view>

#include "vkpaged/attention.hpp"
#include "vkpaged/block_manager.hpp"
#include "vkpaged/decode.hpp"
#include "vkpaged/dtype.hpp"
#include "vkpaged/kv_cache.hpp"
#include "vkpaged/kv_layout.hpp"
#include "vkpaged/mla.hpp"
#include "vkpaged/rotary.hpp"

namespace vkpaged::python {

DType parse_dtype_arg(std::string_view argument, std::string_view name);
KvLayout parse_layout_arg(std::string_view argument, std::string_view name);
RotaryStyle parse_rotary_style_arg(std::string_view argument, std::string_view name);
SplitMode parse_split_arg(std::string_view argument, std::string_view name);
DecodeKernel parse_decode_kernel_arg(std::string_view argument, std::string_view name);
AttentionKernel parse_attention_kernel_arg(std::string_view argument, std::string_view name);
DecodeOrder parse_decode_order_arg(std::string_view argument, std::string_view name);
DecodeMerge parse_decode_merge_arg(std::string_view argument, std::string_view name);
KvCacheKind parse_kv_cache_kind_arg(std::string_view argument, std::string_view name);
MlaCacheForm parse_mla_cache_form_arg(std::string_view argument, std::string_view name);

std::string name_of(DType dtype);
std::string name_of(KvLayout layout);
std::string name_of(RotaryStyle style);
std::string name_of(SplitMode split);
std::string name_of(DecodeKernel kernel);
std::string name_of(AttentionKernel kernel);
std::string name_of(DecodeOrder order);
std::string name_of(DecodeMerge merge);
std::string name_of(AdmissionStatus status);
std::string name_of(MemorySource source);
std::string name_of(KvCacheKind kind);
std::string name_of(MlaCacheForm form);

}  // namespace vkpaged::python
