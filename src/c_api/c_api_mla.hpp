// SPDX-License-Identifier: Apache-2.0
#pragma once
// C API conversions of the MLA structs (vkpaged.h, "multi-head latent attention (MLA)
// caches" and "on the device"), shared by c_api_mla.cpp, c_api_mla_attention.cpp and
// c_api_kv_cache.cpp.
#include <string>

#include "vkpaged/kv_cache.hpp"
#include "vkpaged/mla_attention.hpp"
#include "vkpaged/mla_cache_ops.hpp"
#include "vkpaged/vkpaged.h"

namespace vkpaged::c_api {

KvCacheKind to_kv_cache_kind(vkp_kv_cache_kind kind, const std::string& name);
vkp_kv_cache_kind to_c(KvCacheKind kind) noexcept;
// `rope` read as a struct (not NULL here: the callers pass NULL on as "no rope").
MlaRopeViews to_cpp(const vkp_mla_rope_views* rope);
vkp_mla_cache_views to_c(const MlaCacheViews& views, vkp_mla_cache_views blank) noexcept;
// The views of one MLA call, each named after its field.
MlaViews to_cpp(const vkp_mla_views& views);
MlaViews to_cpp(const vkp_mla_views* views);  // read (struct_size), then as above
// A KvCache write's new tokens, read (struct_size) and converted, each view named after its field.
NewTokens to_cpp(const vkp_new_tokens* tokens);
MlaNewTokens to_cpp(const vkp_mla_new_tokens* tokens);
// The MlaShape of vkp_mla_plan_create's arguments (shape read: struct_size; cache_form checked).
MlaShape to_mla_shape(const vkp_attention_shape* shape, uint32_t value_head_size, vkp_mla_cache_form cache_form);

}  // namespace vkpaged::c_api
