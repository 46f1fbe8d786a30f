// SPDX-License-Identifier: Apache-2.0
#pragma once
// The attention planner: from what a device offers, the shape, the step's query starts and the
// options to every choice an AttentionPlan makes (kernel family, workgroup rows, split, buffer
// sizes). Pure: no Vulkan calls and no environment, so that its choices are tested on fabricated
// devices without a GPU (tests/ops/test_attention_planner.cpp). The plans of the problem
// (AttentionPlan::create, and DecodePlan::create for a decode batch: ops/attention_plan.hpp's
// plan_attention_problem) fill the device's properties from their Context, call
// plan_attention_rows and create what the choice names. The matrix kernel's family is planned in
// attention_matrix_planner.cpp.
#include <cstddef>
#include <cstdint>
#include <functional>
#include <optional>
#include <span>
#include <string>
#include <vector>

#include "ops/attention_validation.hpp"
#include "vk/device_capabilities.hpp"
#include "vkpaged/attention.hpp"

namespace vkpaged::detail {

// The workgroup of the scalar attention and MLA kernels: 128 invocations, what every Vulkan device
// offers (maxComputeWorkGroupInvocations >= 128). The attention kernel stages one key position
// per invocation in its score phase.
inline constexpr uint32_t kScalarAttentionWorkgroup = 128;

// Every choice of a plan on the attention kernel (shaders/attention*.comp).
struct AttentionChoice {
  AttentionKernel kernel = AttentionKernel::scalar;  // decode, scalar or matrix, never automatic
  bool bucket = false;  // planned for a bucket of steps (plan_attention_bucket)
  uint32_t max_query_tokens = 0;
  size_t tree_mask_bytes = 0;
  // The rest describes the attention kernels (a decode plan makes its own choices).
  bool address = false;             // caches read by device address (a pool past the storage-buffer range)
  uint32_t workgroup = 128;         // invocations (scalar: also the key positions per tile)
  uint32_t rows = 16;               // (query token, head) rows per workgroup
  uint32_t heads_per_workgroup = 1; // query heads of one kv head per workgroup
  uint32_t groups_per_kv_head = 1;  // workgroups per kv head along the heads
  uint32_t tokens_per_tile = 1;     // rows / heads_per_workgroup
  uint32_t row_parts = 1;           // value phase: invocations side by side over the rows
  uint32_t tile_slots = 0;          // grid y: T / tokens_per_tile + S
  size_t shared_bytes = 0;
  bool split = false;
  uint32_t num_partitions = 1;
  uint32_t partition_tokens = 0;
  size_t scratch_bytes = 0;
  uint32_t context_cap = 0;         // device lengths above it are clamped and flagged
  uint32_t merge_workgroup = 0;     // the merge pass's invocations; 0 without one
  // The matrix kernel: the product shape, rows / m subgroups computing a block of m rows each,
  // key positions per tile, and whether the query's fragments stay in registers (else they are
  // loaded from shared memory for every tile).
  MatrixProductShape product;
  uint32_t key_tile = 0;
  bool query_registers = false;
  bool workgroup_sync = false;  // DeviceCapabilities::workgroup_sync
  // The MLA matrix kernel: subgroups side by side over the value dims per block of m rows.
  uint32_t value_parts = 1;
  // Workgroups of this plan one compute unit is expected to run at once (by their shared
  // memory: the MLA matrix kernel's one-block layout that two share); the automatic split
  // counts its waves by it.
  uint32_t resident_workgroups = 1;
};

// The longest context the plan is sized for: max_context_len, or M x B where it is 0.
uint32_t longest_context(const AttentionShape& shape);

// Whether the decode kernels take this batch (every q_s = 1, no tree mask; any layout).
bool decode_kernels_take(const AttentionShape& shape, bool single_tokens);

// Shared memory of the scalar kernel for `rows` rows (attention_kernel.glsl's declarations).
size_t attention_shared_bytes(uint32_t rows, uint32_t head_size, uint32_t workgroup);

// The matrix kernel's shared memory (attention_matrix_khr.comp's declarations).
size_t attention_matrix_shared_bytes(uint32_t rows, const MatrixProductShape& product, uint32_t head_size,
                                     uint32_t key_tile, KvLayout layout, bool query_registers, uint32_t workgroup);

// The f16 product the KHR matrix kernels take on this device: the largest listed with M of 8, 16
// or 32 and N and K of 8 or 16 (std::nullopt: none).
std::optional<MatrixProductShape> choose_matrix_product(const DeviceCapabilities& device);
// Every usable f16 product of the device (as choose_matrix_product's), largest first: the first
// is choose_matrix_product's.
std::vector<MatrixProductShape> usable_matrix_products(const DeviceCapabilities& device);
// Why the KHR matrix kernels find nothing to run on this device's products ("" where
// choose_matrix_product finds one, its subgroups fit a workgroup and have arithmetic).
std::string matrix_product_refusal(const DeviceCapabilities& device);

// Why a KHR matrix kernel (named `kernel` in the message: "the matrix kernel") cannot take the
// shape's dtypes on this device: a device without the KHR kernels, a query that is not f16 or
// bf16, an f32 cache ("" where none of these holds).
std::string matrix_dtype_refusal(const DeviceCapabilities& device, const AttentionShape& shape, const char* kernel);

// The tiles of a matrix kernel's workgroup: row blocks of the product's m rows, key positions per
// tile, invocations and shared memory bytes.
struct MatrixTileFit {
  uint32_t row_blocks = 0;
  uint32_t key_tile = 0;
  uint32_t workgroup = 0;
  size_t shared_bytes = 0;
};
// The most row blocks the rows want (up to max_row_blocks), then the longest of key_tiles (those
// that are multiples of the product's n and k), whose workgroup (workgroup_of(row_blocks)) and
// shared memory (shared_bytes_of(row_blocks, key_tile, workgroup)) the device holds; fewer row
// blocks where none does. std::nullopt: not even one block fits.
std::optional<MatrixTileFit> fit_matrix_tiles(const DeviceCapabilities& device, const MatrixProductShape& product,
                                              uint64_t wanted_rows, uint32_t max_row_blocks,
                                              std::span<const uint32_t> key_tiles,
                                              const std::function<uint64_t(uint32_t)>& workgroup_of,
                                              const std::function<size_t(uint32_t, uint32_t, uint32_t)>& shared_bytes_of);
// A matrix kernel's fit as the choice's fields (kernel, product, tiles, workgroup), the `group`
// query heads of a kv head sliced as on the scalar kernel, one row part.
void take_matrix_tiles(AttentionChoice& choice, const DeviceCapabilities& device, const MatrixProductShape& product,
                       const MatrixTileFit& fit, uint32_t group);

// The `group` query heads of a kv head over the chosen rows: a group larger than the rows is
// sliced into equal parts (groups_per_kv_head, heads_per_workgroup, tokens_per_tile).
void slice_heads(AttentionChoice& choice, uint32_t group);
// The scalar kernels' value phase: rows split between invocations while the `value_width` dims
// leave invocations idle (row_parts).
void choose_row_parts(AttentionChoice& choice, uint32_t value_width);

// Why the matrix kernel cannot run this shape on this device ("" where it can).
std::string matrix_attention_refusal(const DeviceCapabilities& device, const AttentionShape& shape);

// The matrix kernel's rows, tiles and product for a shape it takes (matrix_attention_refusal
// gave ""): fills the kernel's fields of `choice` (its max_query_tokens set).
void plan_matrix_attention(AttentionChoice& choice, const DeviceCapabilities& device, const AttentionShape& shape);

// Whether a plan runs on the matrix kernel: where `requested` is matrix (unsupported, "kernel:
// matrix: " and the refusal, where `refusal` says why it cannot) or automatic and it can.
bool take_matrix_kernel(AttentionKernel requested, const std::function<std::string()>& refusal);

// The grid's tile slots (T / tokens_per_tile + S), refused (unsupported) past the 65535
// workgroups every device launches along one dimension.
void choose_tile_slots(AttentionChoice& choice, const AttentionShape& shape);

// Split partitions hold a multiple of this many key positions (AttentionOptions' and
// DecodeOptions' partition_tokens).
inline constexpr uint32_t kPartitionQuantum = 256;
// The options' split fields: partition_tokens a multiple of `quantum`, not given with single_pass.
void validate_split_options(const AttentionOptions& options, uint32_t quantum);

// How choose_attention_split sizes a split's partitions.
struct SplitPolicy {
  uint32_t quantum = kPartitionQuantum;  // partitions hold a multiple of this many key positions
  // 0: the automatic split fills the device (kWorkgroupsPerComputeUnit workgroups per compute
  // unit; the multi-query kernels). Else the key positions a workgroup walks per tile, and the
  // automatic partitions balance waves of resident_workgroups per compute unit against the tiles
  // each walks (balanced_partition_tokens; MLA).
  uint32_t key_tile = 0;
  // With key_tile: the workgroups one compute unit runs at once (AttentionChoice::resident_workgroups).
  uint32_t resident_workgroups = 1;
};

// The automatic partition of a balanced split: a grid of `workgroups` one-pass workgroups over
// `max_len` positions in P partitions runs in ceil(workgroups x P / (compute_units x
// policy.resident_workgroups)) waves, each
// as long as a workgroup's key tiles plus kSplitFixedTiles (what it pays once: its queries, its
// outputs, its share of the merge). Returns the multiple of policy.quantum with the fewest
// waves x (tiles + kSplitFixedTiles), or 0 where one pass takes no longer.
inline constexpr uint32_t kSplitFixedTiles = 5;
uint32_t balanced_partition_tokens(uint64_t workgroups, uint32_t max_len, uint32_t compute_units,
                                   const SplitPolicy& policy);

// The split of the key positions into partitions (split, num_partitions, partition_tokens,
// scratch_bytes, context_cap, merge_workgroup), once the rows are chosen (tokens_per_tile,
// groups_per_kv_head). The scratch holds value sums value_head_size wide (the head size; MLA's
// Dv). `starts` empty: a bucket, whose full steps (T tokens, every request at least one tile)
// size the split.
void choose_attention_split(AttentionChoice& choice, const DeviceCapabilities& device, const AttentionShape& shape,
                            uint32_t value_head_size, std::span<const int32_t> query_starts,
                            const AttentionOptions& options, const SplitPolicy& policy);

// What the host knows of a problem's query rows when it is planned: a step's query starts
// (AttentionPlan::create), a bucket's longest request (create_bucket), or single tokens by
// construction (a decode batch, T = S without a tree mask: DecodePlan::create, which needs no
// query starts).
struct QueryRows {
  enum class Kind { step, bucket, single_tokens };
  Kind kind = Kind::single_tokens;
  std::span<const int32_t> starts;  // step: [S + 1]
  uint32_t max_query_tokens = 0;    // bucket: its longest request's new tokens (0 = T)
  static QueryRows step(std::span<const int32_t> starts) { return {Kind::step, starts, 0}; }
  static QueryRows bucket(uint32_t max_query_tokens) { return {Kind::bucket, {}, max_query_tokens}; }
  static QueryRows single_tokens() { return {}; }
  bool bucket() const noexcept { return kind == Kind::bucket; }
};

// What the rows tell the planner (the longest request, single tokens, the tree masks' bytes): a
// step's query starts checked (validate_query_starts), a bucket's worst step (its longest request
// at most T and the longest context, the tree masks of T tokens in requests of that length), or
// single tokens. Throws invalid_argument naming the field.
QueryStartsSummary summarize_query_rows(const AttentionShape& shape, const QueryRows& rows);

// The attention problem's planner: checks the shape, the rows and the options (vkpaged::Error
// naming the field) and chooses the kernel family: the decode kernels for a batch of single
// tokens they take (their own choices are the decode planner's, ops/attention_problem.hpp's
// plan_decode_family), else the attention kernels, whose every choice it makes. Throws
// invalid_argument for what the contract refuses, unsupported for what this device cannot run
// (the error names the argument and the limit).
AttentionChoice plan_attention_rows(const DeviceCapabilities& device, const AttentionShape& shape,
                                    const QueryRows& rows, const AttentionOptions& options);

// plan_attention_rows for a step's query starts.
AttentionChoice plan_attention(const DeviceCapabilities& device, const AttentionShape& shape,
                               std::span<const int32_t> query_starts, const AttentionOptions& options);

// plan_attention_rows for a bucket of steps (AttentionPlan::create_bucket): S, T and max_context_len are its
// maxima and max_query_tokens its longest request (0 = T). What the query starts would tell is
// sized for the bucket's worst step: the rows for max_query_tokens, the tree masks for T tokens
// in requests of max_query_tokens, the split for a full step (T tokens, every request at least
// one tile). The decode kernels where max_query_tokens = 1 and T = S.
AttentionChoice plan_attention_bucket(const DeviceCapabilities& device, const AttentionShape& shape,
                                      uint32_t max_query_tokens, const AttentionOptions& options);

}  // namespace vkpaged::detail
