// SPDX-License-Identifier: Apache-2.0
#pragma once
// The decode planner: from what a device offers, the shape, the options and the tuning knobs
// to every choice a DecodePlan makes (kernel, workgroup shape, split, order, merge, buffer
// sizes). Pure: no Vulkan calls, no environment, no globals, so that its choices are tested on
// fabricated devices without a GPU (tests/ops/test_decode_planner.cpp). It plans the decode
// family of the attention problem: the plans of a batch the attention planner gives to the decode
// kernels (a DecodePlan's, or an AttentionPlan's of single tokens) call plan_decode through
// plan_decode_family (ops/attention_problem.hpp) with the device's properties from their Context.
#include <cstddef>
#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "ops/decode_tuning.hpp"
#include "vk/device_capabilities.hpp"
#include "vkpaged/context.hpp"
#include "vkpaged/decode.hpp"

namespace vkpaged::detail {

// The shader module a plan's decode dispatch runs: one per row of shaders/decode_variants.def,
// which says what each is compiled with.
enum class DecodeModule {
#define VKP_DECODE_SCALAR_VARIANT(name, ...) name,
#define VKP_DECODE_MATRIX_VARIANT(name, ...) name,
#include "decode_variants.def"
#undef VKP_DECODE_SCALAR_VARIANT
#undef VKP_DECODE_MATRIX_VARIANT
};

// The module of the table with these switches (shaders/decode_variants.def's columns).
DecodeModule decode_scalar_module(bool subgroup, bool address, bool f16_math);
DecodeModule decode_matrix_module(bool khr, bool token_major, bool head_slices, bool timeline, bool e4m3_nan);

// Every choice of a plan: what the pipelines are specialised for, the grid and the buffers.
struct DecodeChoice {
  DecodeKernel kernel = DecodeKernel::scalar;  // scalar or matrix, never automatic nor matrix_khr
  bool khr = false;  // the matrix kernel through VK_KHR_cooperative_matrix (else VK_NV_cooperative_matrix)
  DecodeModule module = DecodeModule::scalar;
  bool address = false;  // the caches are read by device address (a pool past the storage-buffer range)
  // The workgroup: `workgroup` invocations (on the matrix kernel `subgroups` of 32) over
  // `heads_per_workgroup` query heads of one kv head, `groups_per_kv_head` workgroups per kv head.
  uint32_t workgroup = 256;
  uint32_t subgroups = 0;  // matrix kernel: subgroups per workgroup; 0 on the scalar kernel
  // Matrix kernel: slices of 8 heads per workgroup (DecodeTuning::slices), each taken by
  // subgroups / head_slices subgroups that read the same keys and values; 1 without them.
  uint32_t head_slices = 1;
  uint32_t heads_per_workgroup = 1;
  uint32_t groups_per_kv_head = 1;
  uint32_t lanes_per_row = 0;    // scalar kernel: lanes per dim row in the value phase; 0 on the matrix kernel
  // Scalar kernel on the nhd and hnd layouts: dims per value load along a token's row; 0 elsewhere.
  uint32_t value_dims = 0;
  // Scalar kernel variants (decode_kernel.glsl's header; VKPAGED_DECODE_TUNE's fp8conv and
  // f16math, where they apply); false by default and on the matrix kernel.
  bool fp8_pairs = false;   // fp8 caches: f16 pairs from alternate bytes, E4M3's NaN by a probe
  bool f16_keys = false;    // key products in packed f16
  bool f16_values = false;  // value products in packed f16
  uint32_t value_loads = 1;  // value loads issued together per invocation (1: one at a time); 0 on the matrix kernel
  bool subgroup_reduce = false;  // scalar kernel: subgroup arithmetic (else shared memory); false on the matrix kernel
  // The matrix kernel's switches (false on the scalar kernel, except query_registers, which
  // both specialise on as the tuning says).
  bool early_values = false;     // a unit's value loads issued with its key loads
  bool pipeline = false;         // the next unit's loads issued before this unit's products
  bool share_query = false;      // the subgroups' outputs reuse the query's shared words
  bool query_registers = true;   // the query's fragments kept in registers
  // The split: partitions of `partition_tokens` merged by a reduce pass, or in the dispatch.
  bool split = false;
  uint32_t num_partitions = 1;
  uint32_t partition_tokens = 0;
  size_t scratch_bytes = 0;
  bool merge_in_dispatch = false;  // DecodeMerge::in_dispatch taken
  size_t merge_counter_bytes = 0;
  uint32_t reduce_workgroup = 0;   // the reduce pass's invocations; 0 without one
  bool longest_first = false;      // DecodeOrder::longest_first: items from record_decode_order's list
  size_t order_bytes = 0;
  size_t timeline_bytes = 0;       // DecodeOptions::timeline
  uint32_t features = 0;           // FEATURE_* bits (shader_interface.h)

  bool operator==(const DecodeChoice&) const = default;
};

// Which kernel a plan takes and why not the matrix kernel (kernel_choice below).
struct DecodeKernelChoice {
  bool matrix = false;         // the matrix kernel runs the plan
  bool khr = false;            // ... through VK_KHR_cooperative_matrix
  bool address = false;        // the caches are read by device address
  std::string matrix_refusal;  // why the matrix kernel cannot run it, where it was wanted ("" otherwise)
  // The matrix kernel is wanted and nothing but a fragment layout not probed yet decides
  // whether (or through which extension) it runs: the caller probes that layout (NV's, or
  // KHR's where NV cannot run it) and chooses again.
  bool needs_fragment_layout = false;
  bool needs_khr_fragment_layout = false;
};

// Checks the shape and options (vkpaged::Error naming the field) and chooses the kernel: the
// matrix kernel for DecodeKernel::matrix (through VK_NV_cooperative_matrix where it can run,
// else VK_KHR_cooperative_matrix) and matrix_khr (KHR only), and for automatic on GQA groups
// where it can run (DecodeTuning::matrix); refuses DecodeKernel::matrix and matrix_khr where
// they cannot run, and pools past the storage-buffer range without buffer device addresses.
DecodeKernelChoice choose_decode_kernel(const DeviceCapabilities& device, const DecodeShape& shape,
                                        const DecodeOptions& options, const DecodeTuning& tuning);

// Why the matrix kernel cannot run `shape` on `device` (caches read by address or not) through
// VK_NV_cooperative_matrix (khr false) or VK_KHR_cooperative_matrix (true), or "". An unprobed
// fragment layout is a refusal here (choose_decode_kernel asks for the probe instead).
std::string matrix_kernel_refusal(const DeviceCapabilities& device, const DecodeShape& shape, bool address,
                                  bool khr = false);

// The two kernel families' plans, for a shape and options choose_decode_kernel accepted for them.
DecodeChoice plan_scalar_decode(const DeviceCapabilities& device, const DecodeShape& shape,
                                const DecodeOptions& options, const DecodeTuning& tuning, bool address);
DecodeChoice plan_matrix_decode(const DeviceCapabilities& device, const DecodeShape& shape,
                                const DecodeOptions& options, const DecodeTuning& tuning, bool khr = false);

// The whole plan: checks, the kernel, its family's plan, and the limits every device has
// (grid, scratch within the storage-buffer range). Throws vkpaged::Error: invalid_argument for
// a bad shape or options, unsupported for what this device cannot run.
DecodeChoice plan_decode(const DeviceCapabilities& device, const DecodeShape& shape, const DecodeOptions& options,
                         const DecodeTuning& tuning);

}  // namespace vkpaged::detail
