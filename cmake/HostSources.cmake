# SPDX-License-Identifier: Apache-2.0
# The sources of vkpaged that run without a Vulkan device: dtype conversions, shapes and
# errors, the block manager and prefix cache, KvCache's sizing, the argument checks, the decode
# planner and the CPU references, and the CLI's .npy reader. The sanitizer build (vkpaged_host_tests in tests/CMakeLists.txt) and
# the fuzzers (fuzz/CMakeLists.txt) compile only these, so neither needs shaders or a device.
# A file added here must not call Vulkan (the headers are fine: views carry VkBuffer handles).
function(vkpaged_host_sources out_var root)
  set(files
    src/environment.cpp
    src/error.cpp
    src/dtype.cpp
    src/tensor.cpp
    src/cache/block_allocator.cpp
    src/cache/block_hash.cpp
    src/cache/block_manager.cpp
    src/cache/block_manager_state.cpp
    src/cache/block_swap.cpp
    src/cache/block_tables.cpp
    src/cache/kv_cache_sizing.cpp
    src/cache/prefix_cache.cpp
    src/ops/attention_matrix_planner.cpp
    src/ops/attention_planner.cpp
    src/ops/attention_problem.cpp
    src/ops/attention_validation.cpp
    src/ops/cache_geometry.cpp
    src/ops/decode_planner.cpp
    src/ops/decode_tuning.cpp
    src/ops/decode_validation.cpp
    src/ops/host_page_tables.cpp
    src/ops/mla_cache_checks.cpp
    src/ops/mla_attention_planner.cpp
    src/ops/mla_matrix_planner.cpp
    src/ops/mla_validation.cpp
    src/ops/pool_address_rule.cpp
    src/ops/scale_validation.cpp
    src/ops/rotary_checks.cpp
    src/ops/rotary_cos_sin_cache.cpp
    src/reference/attention_math.cpp
    src/reference/attention_reference.cpp
    src/reference/cache_reference.cpp
    src/reference/decode_reference.cpp
    src/reference/merge_reference.cpp
    src/reference/mla_cache_reference.cpp
    src/reference/mla_reference.cpp
    src/reference/rotary_reference.cpp
    src/vk/device_capabilities.cpp
    tools/vkpaged/atomic_file.cpp
    tools/vkpaged/npy.cpp)
  list(TRANSFORM files PREPEND ${root}/)
  set(${out_var} ${files} PARENT_SCOPE)
endfunction()
