// SPDX-License-Identifier: Apache-2.0
// vkp_<struct>_init_sized of every extensible struct (the structs of c_api_structs.hpp's
// VKP_STRUCT_ABI lines, in their order): the defaults (defaults_of) for the caller's
// struct_size, which must be a size a release had.
#include "c_api/c_api_guard.hpp"
#include "c_api/c_api_structs.hpp"
#include "vkpaged/vkpaged.h"

using namespace vkpaged::c_api;

#define VKP_INIT_SIZED(type)                                                               \
  VKP_API vkp_status VKP_CALL type##_init_sized(type* value, uint32_t struct_size) { \
    return init_struct(#type "_init_sized", value, struct_size);                           \
  }

extern "C" {

VKP_INIT_SIZED(vkp_device_info)
VKP_INIT_SIZED(vkp_cooperative_matrix_shape)
VKP_INIT_SIZED(vkp_context_options)
VKP_INIT_SIZED(vkp_external_device)
VKP_INIT_SIZED(vkp_vulkan_handles)
VKP_INIT_SIZED(vkp_decode_shape)
VKP_INIT_SIZED(vkp_decode_options)
VKP_INIT_SIZED(vkp_decode_params)
VKP_INIT_SIZED(vkp_decode_plan_info)
VKP_INIT_SIZED(vkp_decode_views)
VKP_INIT_SIZED(vkp_decode_inputs)
VKP_INIT_SIZED(vkp_attention_shape)
VKP_INIT_SIZED(vkp_attention_options)
VKP_INIT_SIZED(vkp_attention_plan_info)
VKP_INIT_SIZED(vkp_attention_views)
VKP_INIT_SIZED(vkp_attention_inputs)
VKP_INIT_SIZED(vkp_cache_scales)
VKP_INIT_SIZED(vkp_reshape_and_cache_views)
VKP_INIT_SIZED(vkp_layer_cache_views)
VKP_INIT_SIZED(vkp_gather_views)
VKP_INIT_SIZED(vkp_rotary_views)
VKP_INIT_SIZED(vkp_rotary_inputs)
VKP_INIT_SIZED(vkp_bandwidth)
VKP_INIT_SIZED(vkp_merge_views)
VKP_INIT_SIZED(vkp_kv_cache_shape)
VKP_INIT_SIZED(vkp_kv_cache_options)
VKP_INIT_SIZED(vkp_kv_cache_sizing)
VKP_INIT_SIZED(vkp_kv_cache_info)
VKP_INIT_SIZED(vkp_new_tokens)
VKP_INIT_SIZED(vkp_block_manager_options)
VKP_INIT_SIZED(vkp_append_result)
VKP_INIT_SIZED(vkp_block_usage)
VKP_INIT_SIZED(vkp_prefix_cache_stats)
VKP_INIT_SIZED(vkp_cache_write_kind)
VKP_INIT_SIZED(vkp_prepare_report)

}  // extern "C"
