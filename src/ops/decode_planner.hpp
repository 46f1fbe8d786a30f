// SPDX-License-Identifier: Apache-2.0
#pragma once
// The decode planner: from what a device offers, the shape, the options and the tuning knobs
// to every choice a DecodePlan makes (kernel, workgroup shape, split, order, merge, buffer
// sizes). Pure: no Vulkan calls, no environment, no globals, so that its choices are tested on
// fabricated devices without a GPU (tests/ops/test_decode_planner.cpp). DecodePlan::create
// (ops/decode.cpp) fills the device's properties from its Context, calls plan_decode and
// creates the pipelines the choice names.
#include <cstddef>
#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "ops/decode_tuning.hpp"
#include "vkpaged/context.hpp"
#include "vkpaged/decode.hpp"

namespace vkpaged::detail {

// What planning reads off a device, and nothing else.
struct DecodeDeviceProperties {
  std::string name;                       // for messages
  uint32_t compute_units = 1;             // SMs / CUs, or an estimate: sizes the split
  uint32_t subgroup_size = 0;
  bool subgroup_arithmetic = false;       // the scalar kernel reduces with subgroup operations (else shared memory)
  uint32_t max_workgroup_invocations = 0;
  uint32_t max_shared_memory = 0;         // bytes per workgroup
  uint64_t max_storage_buffer_range = 0;  // a pool past it is read by device address
  bool buffer_device_address = false;     // enabled on the context
  // VK_NV_cooperative_matrix enabled with what the matrix kernel needs (16x8x16 f16 products,
  // f16 storage and arithmetic, subgroup shuffles and votes).
  bool cooperative_matrix = false;
  // Whether the device's matrix fragments keep their elements where the matrix kernel writes
  // them (shaders/fragment_layout.comp, probed once per context): std::nullopt until probed,
  // "" where they do, else what differs. See DecodeKernelChoice::needs_fragment_layout.
  std::optional<std::string> fragment_layout_mismatch;
  // VK_KHR_cooperative_matrix enabled with what its kernels need (computeFullSubgroups, the
  // memory model, f16 arithmetic and 16-bit storage) and the KHR matrix kernel's modules built;
  // where not, why not (cooperative_matrix_khr_absent).
  bool cooperative_matrix_khr = false;
  std::string cooperative_matrix_khr_absent;
  uint32_t max_subgroup_size = 0;  // full-subgroup (KHR) dispatches are a multiple of it wide
  std::vector<CooperativeMatrixShape> cooperative_matrix_khr_shapes;  // the products KHR lists
  // Whether the KHR 16x8x16 fragments have the layout the matrix kernel writes
  // (shaders/fragment_layout_16x8x16_khr.comp): as fragment_layout_mismatch, for KHR. See
  // DecodeKernelChoice::needs_khr_fragment_layout.
  std::optional<std::string> khr_fragment_layout_mismatch;
  bool decode_timeline = false;  // DeviceInfo::decode_timeline's features are enabled
  bool shader_float16 = false;   // shaderFloat16 enabled: the scalar kernel's packed-f16 variants can run
};

// The shader module a plan's decode dispatch runs.
enum class DecodeModule {
  scalar,            // decode.comp: shared-memory reductions
  scalar_subgroup,   // decode_subgroup.comp
  address,           // decode_address.comp: caches read by device address
  address_subgroup,  // decode_address_subgroup.comp
  scalar_f16,        // decode_f16.comp: packed f16 variants (DECODE_SCALAR_F16_*)
  scalar_subgroup_f16,  // decode_subgroup_f16.comp
  matrix,            // decode_coopmat.comp
  matrix_e4m3,       // decode_coopmat_e4m3.comp: with the E4M3 NaN search
  matrix_timeline,   // decode_coopmat_timeline.comp: DecodeOptions::timeline
  matrix_khr,        // decode_coopmat_khr.comp: the matrix kernel on VK_KHR_cooperative_matrix
  matrix_e4m3_khr,   // decode_coopmat_e4m3_khr.comp
  // The matrix kernel on token-major caches (KvLayout nhd and hnd, DECODE_SC_KV_LAYOUT):
  matrix_token_major,           // decode_coopmat_token_major.comp
  matrix_token_major_e4m3,      // decode_coopmat_token_major_e4m3.comp
  matrix_token_major_khr,       // decode_coopmat_token_major_khr.comp
  matrix_token_major_e4m3_khr,  // decode_coopmat_token_major_e4m3_khr.comp
  // The matrix kernel with head slices (DecodeChoice::head_slices > 1; the vllm layout):
  matrix_slices,           // decode_coopmat_slices.comp
  matrix_slices_e4m3,      // decode_coopmat_slices_e4m3.comp
  matrix_slices_khr,       // decode_coopmat_slices_khr.comp
  matrix_slices_e4m3_khr,  // decode_coopmat_slices_e4m3_khr.comp
};

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
  uint32_t features = 0;           // DECODE_FEATURE_* bits
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
DecodeKernelChoice choose_decode_kernel(const DecodeDeviceProperties& device, const DecodeShape& shape,
                                        const DecodeOptions& options, const DecodeTuning& tuning);

// Why the matrix kernel cannot run `shape` on `device` (caches read by address or not) through
// VK_NV_cooperative_matrix (khr false) or VK_KHR_cooperative_matrix (true), or "". An unprobed
// fragment layout is a refusal here (choose_decode_kernel asks for the probe instead).
std::string matrix_kernel_refusal(const DecodeDeviceProperties& device, const DecodeShape& shape, bool address,
                                  bool khr = false);

// Whether `shapes` lists the m x n x k product with f16 A and B, f32 C and result, at subgroup
// scope, without saturation (what the KHR matrix kernel and the layout probes use).
bool lists_f16_product(const std::vector<CooperativeMatrixShape>& shapes, uint32_t m, uint32_t n, uint32_t k);

// The two kernel families' plans, for a shape and options choose_decode_kernel accepted for them.
DecodeChoice plan_scalar_decode(const DecodeDeviceProperties& device, const DecodeShape& shape,
                                const DecodeOptions& options, const DecodeTuning& tuning, bool address);
DecodeChoice plan_matrix_decode(const DecodeDeviceProperties& device, const DecodeShape& shape,
                                const DecodeOptions& options, const DecodeTuning& tuning, bool khr = false);

// The whole plan: checks, the kernel, its family's plan, and the limits every device has
// (grid, scratch within the storage-buffer range). Throws vkpaged::Error: invalid_argument for
// a bad shape or options, unsupported for what this device cannot run.
DecodeChoice plan_decode(const DecodeDeviceProperties& device, const DecodeShape& shape, const DecodeOptions& options,
                         const DecodeTuning& tuning);

}  // namespace vkpaged::detail
