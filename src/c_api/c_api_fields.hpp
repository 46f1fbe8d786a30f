// SPDX-License-Identifier: Apache-2.0
#pragma once
// One field list per public C struct that has a C++ twin: the fields the two carry under the
// same name, in the C struct's declaration order (struct_size and reserved words aside). The
// conversions both ways (c_api_convert.cpp) expand these lists, and test_c_api_abi.cpp holds each
// list against the struct's rows of the ABI table, so a new field is one line here, its row in
// tests/c_api/abi_table.inc and, for a C type no field had before, a field converter
// (c_api_convert.cpp, "One field"); a new struct is a list and a row of the tables at the end.
// DecodeParams, whose optional scale is two C fields, is converted by hand.

#define VKP_DECODE_SHAPE_FIELDS(X)                                                                               \
  X(num_seqs) X(num_heads) X(num_kv_heads) X(head_size) X(block_size) X(num_blocks) X(max_blocks_per_seq)        \
  X(max_context_len) X(query_dtype) X(cache_dtype) X(kv_layout) X(alibi) X(softcap) X(sinks) X(lse)             \
  X(csr_page_table)

#define VKP_DECODE_OPTIONS_FIELDS(X) X(sliding_window) X(split) X(partition_tokens) X(kernel) X(order) X(merge)

#define VKP_ATTENTION_SHAPE_FIELDS(X)                                                                            \
  X(num_requests) X(num_query_tokens) X(num_heads) X(num_kv_heads) X(head_size) X(block_size) X(num_blocks)     \
  X(max_blocks_per_seq) X(max_context_len) X(query_dtype) X(cache_dtype) X(kv_layout) X(sliding_window)         \
  X(softcap) X(alibi) X(sinks) X(lse) X(tree_mask) X(csr_page_table)

#define VKP_ATTENTION_OPTIONS_FIELDS(X) X(kernel) X(split) X(partition_tokens)

#define VKP_DECODE_VIEWS_FIELDS(X)                                                                               \
  X(query) X(key_cache) X(value_cache) X(block_tables) X(context_lens) X(output) X(alibi_slopes) X(sinks) X(lse) \
  X(scratch) X(status) X(order) X(merge_counters) X(kv_indptr) X(kv_indices) X(kv_last_page_len)

#define VKP_ATTENTION_VIEWS_FIELDS(X)                                                                            \
  X(query) X(key_cache) X(value_cache) X(block_tables) X(context_lens) X(query_starts) X(output) X(lse)          \
  X(tree_mask) X(alibi_slopes) X(sinks) X(scratch) X(status) X(kv_indptr) X(kv_indices) X(kv_last_page_len)

#define VKP_DECODE_INPUTS_FIELDS(X)                                                                             \
  X(cache_dtype) X(query) X(key_cache) X(value_cache) X(block_tables) X(context_lens) X(alibi_slopes) X(sinks)   \
  X(kv_indptr) X(kv_indices) X(kv_last_page_len) X(max_blocks_per_seq)

#define VKP_ATTENTION_INPUTS_FIELDS(X)                                                                          \
  X(cache_dtype) X(query) X(key_cache) X(value_cache) X(block_tables) X(context_lens) X(query_starts)           \
  X(tree_mask) X(alibi_slopes) X(sinks) X(kv_layout) X(sliding_window) X(kv_indptr) X(kv_indices)               \
  X(kv_last_page_len) X(max_blocks_per_seq)

#define VKP_CACHE_SCALES_FIELDS(X) X(k_scale) X(v_scale)

#define VKP_RESHAPE_AND_CACHE_VIEWS_FIELDS(X) \
  X(layout) X(key) X(value) X(slot_mapping) X(key_cache) X(value_cache) X(status)

#define VKP_GATHER_VIEWS_FIELDS(X) \
  X(layout) X(key_cache) X(value_cache) X(block_tables) X(seq_starts) X(key_out) X(value_out) X(status)

#define VKP_LAYER_CACHE_VIEWS_FIELDS(X) X(layout) X(key_cache) X(value_cache)

#define VKP_ROTARY_VIEWS_FIELDS(X) X(style) X(query) X(key) X(positions) X(cos_sin_cache) X(status)

#define VKP_ROTARY_INPUTS_FIELDS(X) X(style) X(query) X(positions) X(cos_sin_cache)

#define VKP_MERGE_VIEWS_FIELDS(X) X(output_a) X(lse_a) X(output_b) X(lse_b) X(output) X(lse)

#define VKP_COOPERATIVE_MATRIX_SHAPE_FIELDS(X) \
  X(m) X(n) X(k) X(a_type) X(b_type) X(c_type) X(result_type) X(saturating_accumulation) X(scope)

#define VKP_DEVICE_INFO_FIELDS(X)                                                                                \
  X(index) X(name) X(type) X(driver) X(vendor_id) X(api_version) X(subgroup_size) X(subgroup_arithmetic)         \
  X(storage_16bit) X(storage_8bit) X(shader_float16) X(shader_int64) X(buffer_device_address) X(push_descriptor) \
  X(timestamps) X(max_shared_memory) X(max_storage_buffer_range) X(max_workgroup_invocations)                   \
  X(max_push_constants) X(min_storage_buffer_offset_alignment) X(compute_units) X(compute_units_reported)        \
  X(timestamp_valid_bits) X(timestamp_period_ns) X(device_local_bytes) X(subgroup_shuffle) X(memory_budget)     \
  X(device_local_free_bytes) X(cooperative_matrix) X(cooperative_matrix_khr) X(max_memory_allocation_size)      \
  X(vulkan_memory_model) X(vulkan_memory_model_device_scope)

#define VKP_CONTEXT_OPTIONS_FIELDS(X) X(validation) X(device) X(disable_subgroup_arithmetic) X(fence_timeout_ms) X(read_environment)

#define VKP_EXTERNAL_DEVICE_FIELDS(X)                                                                           \
  X(queue_family) X(instance) X(physical_device) X(device) X(get_instance_proc_addr) X(queue_index)             \
  X(buffer_device_address) X(cooperative_matrix) X(vulkan_memory_model) X(vulkan_memory_model_device_scope)     \
  X(cooperative_matrix_khr) X(fence_timeout_ms)

#define VKP_KV_CACHE_SHAPE_FIELDS(X) \
  X(num_layers) X(num_kv_heads) X(head_size) X(block_size) X(dtype) X(layout) X(kind) X(rope_head_size)

#define VKP_KV_CACHE_OPTIONS_FIELDS(X) X(num_blocks) X(budget_bytes) X(budget_fraction) X(num_host_blocks)

#define VKP_KV_CACHE_SIZING_FIELDS(X) \
  X(num_blocks) X(num_tokens) X(block_bytes) X(bytes_per_block) X(pool_bytes) X(total_bytes) X(fraction_of) X(fraction_of_bytes)

#define VKP_BLOCK_MANAGER_OPTIONS_FIELDS(X) X(enable_prefix_caching) X(watermark) X(hash_salt) X(num_host_blocks)

#define VKP_MLA_OPTIONS_FIELDS(X) X(split) X(partition_tokens) X(kernel)

// Every list above with its C struct, for the ABI test: X(c_struct, LIST).
#define VKP_FIELD_LISTS(X)                                                                                      \
  X(vkp_decode_shape, VKP_DECODE_SHAPE_FIELDS)                                                                 \
  X(vkp_decode_options, VKP_DECODE_OPTIONS_FIELDS)                                                             \
  X(vkp_attention_shape, VKP_ATTENTION_SHAPE_FIELDS)                                                           \
  X(vkp_attention_options, VKP_ATTENTION_OPTIONS_FIELDS)                                                       \
  X(vkp_decode_views, VKP_DECODE_VIEWS_FIELDS)                                                                 \
  X(vkp_attention_views, VKP_ATTENTION_VIEWS_FIELDS)                                                           \
  X(vkp_decode_inputs, VKP_DECODE_INPUTS_FIELDS)                                                               \
  X(vkp_attention_inputs, VKP_ATTENTION_INPUTS_FIELDS)                                                         \
  X(vkp_cache_scales, VKP_CACHE_SCALES_FIELDS)                                                                 \
  X(vkp_reshape_and_cache_views, VKP_RESHAPE_AND_CACHE_VIEWS_FIELDS)                                           \
  X(vkp_gather_views, VKP_GATHER_VIEWS_FIELDS)                                                                 \
  X(vkp_layer_cache_views, VKP_LAYER_CACHE_VIEWS_FIELDS)                                                       \
  X(vkp_rotary_views, VKP_ROTARY_VIEWS_FIELDS)                                                                 \
  X(vkp_rotary_inputs, VKP_ROTARY_INPUTS_FIELDS)                                                               \
  X(vkp_merge_views, VKP_MERGE_VIEWS_FIELDS)                                                                   \
  X(vkp_cooperative_matrix_shape, VKP_COOPERATIVE_MATRIX_SHAPE_FIELDS)                                         \
  X(vkp_device_info, VKP_DEVICE_INFO_FIELDS)                                                                   \
  X(vkp_context_options, VKP_CONTEXT_OPTIONS_FIELDS)                                                           \
  X(vkp_external_device, VKP_EXTERNAL_DEVICE_FIELDS)                                                           \
  X(vkp_kv_cache_shape, VKP_KV_CACHE_SHAPE_FIELDS)                                                             \
  X(vkp_kv_cache_options, VKP_KV_CACHE_OPTIONS_FIELDS)                                                         \
  X(vkp_kv_cache_sizing, VKP_KV_CACHE_SIZING_FIELDS)                                                           \
  X(vkp_block_manager_options, VKP_BLOCK_MANAGER_OPTIONS_FIELDS)                                               \
  X(vkp_mla_options, VKP_MLA_OPTIONS_FIELDS)

// Their conversions, X(C struct, C++ type, LIST, ways): ways is to_cpp (an input), to_c (an
// output) or both. c_api_convert.hpp declares them from this table, c_api_convert.cpp defines them.
#define VKP_CONVERTED_STRUCTS(X)                                                                      \
  X(vkp_decode_shape, DecodeShape, VKP_DECODE_SHAPE_FIELDS, both)                                     \
  X(vkp_decode_options, DecodeOptions, VKP_DECODE_OPTIONS_FIELDS, both)                               \
  X(vkp_attention_shape, AttentionShape, VKP_ATTENTION_SHAPE_FIELDS, both)                            \
  X(vkp_attention_options, AttentionOptions, VKP_ATTENTION_OPTIONS_FIELDS, both)                      \
  X(vkp_decode_views, DecodeViews, VKP_DECODE_VIEWS_FIELDS, to_cpp)                                   \
  X(vkp_attention_views, AttentionViews, VKP_ATTENTION_VIEWS_FIELDS, to_cpp)                          \
  X(vkp_decode_inputs, DecodeInputs, VKP_DECODE_INPUTS_FIELDS, to_cpp)                                \
  X(vkp_attention_inputs, AttentionInputs, VKP_ATTENTION_INPUTS_FIELDS, to_cpp)                       \
  X(vkp_cache_scales, CacheScales, VKP_CACHE_SCALES_FIELDS, to_cpp)                                   \
  X(vkp_reshape_and_cache_views, ReshapeAndCacheViews, VKP_RESHAPE_AND_CACHE_VIEWS_FIELDS, to_cpp)    \
  X(vkp_gather_views, GatherViews, VKP_GATHER_VIEWS_FIELDS, to_cpp)                                   \
  X(vkp_layer_cache_views, LayerCacheViews, VKP_LAYER_CACHE_VIEWS_FIELDS, both)                       \
  X(vkp_rotary_views, RotaryViews, VKP_ROTARY_VIEWS_FIELDS, to_cpp)                                   \
  X(vkp_rotary_inputs, RotaryInputs, VKP_ROTARY_INPUTS_FIELDS, to_cpp)                                \
  X(vkp_merge_views, MergeViews, VKP_MERGE_VIEWS_FIELDS, to_cpp)                                      \
  X(vkp_cooperative_matrix_shape, CooperativeMatrixShape, VKP_COOPERATIVE_MATRIX_SHAPE_FIELDS, to_c)  \
  X(vkp_device_info, DeviceInfo, VKP_DEVICE_INFO_FIELDS, both)                                        \
  X(vkp_context_options, ContextOptions, VKP_CONTEXT_OPTIONS_FIELDS, to_cpp)                          \
  X(vkp_external_device, ExternalDevice, VKP_EXTERNAL_DEVICE_FIELDS, to_cpp)                          \
  X(vkp_kv_cache_shape, KvCacheShape, VKP_KV_CACHE_SHAPE_FIELDS, both)                                \
  X(vkp_kv_cache_options, KvCacheOptions, VKP_KV_CACHE_OPTIONS_FIELDS, to_cpp)                        \
  X(vkp_kv_cache_sizing, KvCacheSizing, VKP_KV_CACHE_SIZING_FIELDS, to_c)                             \
  X(vkp_block_manager_options, BlockManagerOptions, VKP_BLOCK_MANAGER_OPTIONS_FIELDS, both)           \
  X(vkp_mla_options, MlaOptions, VKP_MLA_OPTIONS_FIELDS, to_cpp)
