// SPDX-License-Identifier: Apache-2.0
#pragma once
// Paged decode attention: one query token per sequence attends over its paged KV cache.
// The math, layouts and bad-input answers are those of docs/contract.md.
//
//   DecodePlan plan = DecodePlan::create(ctx, shape, options);   // host only, once per shape
//   record_decode(ctx, cmd, plan, views, params);                  // records, allocates nothing
//
// What shapes the code (the shape, its features and the options) is fixed by the plan; the
// per-call values (scale, soft-cap value, fp8 scales: DecodeParams) are given to each
// record_decode, as the cache operations take theirs, and may change between calls.
//
// record_decode reads query, caches, block tables, context lengths, ALiBi slopes and sinks,
// and writes output, LSE, scratch and status, all as storage buffers in the compute shader
// stage (VK_PIPELINE_STAGE_COMPUTE_SHADER_BIT, SHADER_READ / SHADER_WRITE). The caller places
// the barriers that make its inputs visible before and its outputs visible after.
#include <vulkan/vulkan.h>

#include <cstdint>
#include <optional>
#include <string>

#include "vkpaged/context.hpp"
#include "vkpaged/export.hpp"
#include "vkpaged/kv_layout.hpp"
#include "vkpaged/tensor.hpp"

namespace vkpaged {

enum class SplitMode {
  automatic,    // pick from the batch, heads, lengths and the device's compute units
  single_pass,  // one workgroup covers a whole context
  split,        // the context is split into partitions merged by a reduce pass
};

enum class DecodeKernel {
  automatic,   // the matrix kernel for GQA groups with an f16 or bf16 query and a 16-bit or
               // fp8 cache where it can run (measured faster on an H200 for GQA groups,
               // bench/experiments/matrix-kernel-history.md#the-rebuilt-kernel, and no faster
               // for MHA, bench/experiments/split-and-merge.md#mha32s-partitions-and-kernels),
               // else the scalar kernel
  scalar,      // the portable kernel (every device, dtype and shape)
  matrix,      // matrix units, through the best extension the device has: VK_NV_cooperative_matrix
               // where it can run the plan (NVIDIA), else VK_KHR_cooperative_matrix (any vendor
               // whose 16x8x16 f16 products, listed by the device, have the fragment layout the
               // kernel writes). f16 or bf16 query, f16, bf16 or fp8 cache (bf16 becomes f16 in
               // registers, rescaled where it does not fit), head_size a multiple of 32 (64 for
               // fp8), block_size a multiple of 8, caches within maxStorageBufferRange, 32-wide
               // subgroups, and a device whose fragment layout the kernel knows (checked once per
               // context by a small probe run on the context's queue); refused elsewhere
  matrix_khr,  // the matrix kernel through VK_KHR_cooperative_matrix even where NV's runs (to
               // compare the two, and to test the KHR path on NVIDIA): the same conditions, and a
               // Context with the extension enabled (not under a validation layer older than it);
               // refused elsewhere. The plan's kernel is then `matrix` (DecodePlan::describe says
               // which extension)
};

enum class DecodeOrder {
  automatic,      // grid order (longest first needs the list below, made once per step)
  grid,           // workgroups take (sequence, partition) items in grid order
  longest_first,  // for batches whose lengths vary: workgroups take the items from a list
                  // that record_decode_order writes from the lengths, longest first, so the
                  // longest start first and the short ones fill in at the end (on the matrix
                  // kernel, a full batch past 2048 tokens then takes 4 subgroups per workgroup).
                  // Measured on an H200: faster for GQA batches whose lengths are spread over
                  // [1, 1024] or [1, 4096]; slower for uniform batches (also through the matrix
                  // kernel's shared query words, which longest first takes) and on the scalar
                  // kernel (MHA) (bench/experiments/longest-first.md). At most 4096 items
                  // (sequences x partitions); refused past that
};

// Where a split decode merges its partitions.
enum class DecodeMerge {
  reduce_pass,  // a second dispatch after a barrier (the default: needs nothing more)
  in_dispatch,  // the matrix kernel's last workgroup of each head group merges them inside the
                // decode dispatch, with no second dispatch and no barrier, counting arrivals in
                // DecodeViews::merge_counters. Taken by plans that split on the matrix kernel into
                // at most 4096 floats of partial outputs per head group (partitions x heads per
                // workgroup x head size), where it measured faster on an H200, warm and cold
                // (bench/experiments/in-dispatch-merge.md#landed-counters-of-their-own-small-merges-only);
                // other plans merge as reduce_pass and need no counters
                // (plan.merge_counter_bytes() == 0).
};

// How the plan runs, beside the shape: fixed by DecodePlan::create (make another plan to change
// them; its pipelines come from the Context's cache, so that costs host work only).
struct DecodeOptions {
  uint32_t sliding_window = 0; // > 0: attend only the last W positions; 0 = off
  SplitMode split = SplitMode::automatic;
  uint32_t partition_tokens = 0;  // split: tokens per partition (multiple of 256); 0 = auto
  DecodeKernel kernel = DecodeKernel::automatic;
  DecodeOrder order = DecodeOrder::automatic;
  DecodeMerge merge = DecodeMerge::reduce_pass;
  // Diagnostics for kernel work: the matrix kernel also records, per subgroup, when it started,
  // staged the query, finished its first and last units of 32 tokens, and ended, in
  // DecodeViews::timeline (DecodePlan::timeline_bytes(); layout: decode_timeline below;
  // scripts/decode_timeline.py reads it). Needs a plan on the matrix kernel through
  // VK_NV_cooperative_matrix and a device with VK_KHR_shader_clock, VK_NV_shader_sm_builtins and
  // buffer device addresses (DeviceInfo::decode_timeline); refused otherwise.
  bool timeline = false;
};

// What shapes the work: validated by DecodePlan::create.
struct DecodeShape {
  uint32_t num_seqs = 0;
  uint32_t num_heads = 0;
  uint32_t num_kv_heads = 0;
  uint32_t head_size = 0;
  uint32_t block_size = 0;
  uint32_t num_blocks = 0;          // N: blocks in the cache
  uint32_t max_blocks_per_seq = 0;  // M: columns of the block table
  // Upper bound on every context length, used to size the split; 0 means M * B.
  uint32_t max_context_len = 0;
  DType query_dtype = DType::f16;  // query and output: f32, f16, bf16
  DType cache_dtype = DType::f16;  // f32, f16, bf16, fp8_e4m3, fp8_e5m2
  // The caches' layout (kv_layout.hpp): every layout on the scalar kernel; the matrix kernel
  // reads nhd and hnd with head_size a multiple of 64 (DecodeKernel::automatic takes the scalar
  // kernel where it cannot).
  KvLayout kv_layout = KvLayout::vllm;
  bool alibi = false;              // ALiBi slopes [H] f32 will be given
  bool softcap = false;            // a soft cap will be given (DecodeParams::softcap > 0)
  bool sinks = false;              // sink logits [H] f32 will be given
  bool lse = false;                // write log-sum-exp [S, H] f32
  // Page tables may come in FlashInfer's CSR form (DecodeViews::kv_indptr, kv_indices,
  // kv_last_page_len) in place of block_tables and context_lens: the plan's scratch then holds
  // their dense expansion (scratch_bytes() counts it). Such a plan takes either form per call.
  bool csr_page_table = false;
};

// Per-call values, given to each record_decode (and decode_attention): they may change between
// calls of one plan. Checked when recording (vkpaged::Error(invalid_argument) naming the field
// and the value), before anything is recorded.
struct DecodeParams {
  std::optional<float> scale;  // logit scale, finite and > 0; default 1/sqrt(head_size)
  // logit = c * tanh(logit / c) (Gemma 2): a finite c > 0 where the plan's shape.softcap is
  // true, 0 (off) where it is false; a value that contradicts the plan is refused.
  float softcap = 0.0f;
  // fp8 caches: key = decode(byte) * k_scale, value = decode(byte) * v_scale; other caches ignore
  // them. Each finite and > 0, and for fp8 small enough that the format's largest value times it
  // stays finite (docs/contract.md, "Scales").
  float k_scale = 1.0f;
  float v_scale = 1.0f;
};

namespace detail {
struct DecodePlanData;
}

class VKPAGED_API DecodePlan {
 public:
  // Validates the shape and options against the contract and the device, chooses the variant
  // and the split, and creates (or finds) the pipelines. Throws vkpaged::Error.
  static DecodePlan create(Context& context, const DecodeShape& shape, const DecodeOptions& options = {});

  DecodePlan(const DecodePlan&);
  DecodePlan& operator=(const DecodePlan&);
  DecodePlan(DecodePlan&&) noexcept;
  DecodePlan& operator=(DecodePlan&&) noexcept;
  ~DecodePlan();

  const DecodeShape& shape() const noexcept;
  const DecodeOptions& options() const noexcept;
  bool split() const noexcept;
  uint32_t num_partitions() const noexcept;   // 1 when single pass
  uint32_t partition_tokens() const noexcept; // 0 when single pass
  size_t scratch_bytes() const noexcept;      // size of DecodeViews::scratch; 0 when single pass without shape.csr_page_table
  bool longest_first() const noexcept;        // items run from record_decode_order's list (DecodeOrder)
  size_t order_bytes() const noexcept;        // size of DecodeViews::order; 0 unless longest_first()
  size_t timeline_bytes() const noexcept;     // size of DecodeViews::timeline; 0 without options.timeline
  size_t merge_counter_bytes() const noexcept; // size of DecodeViews::merge_counters; 0 unless merged in dispatch
  std::string describe() const;               // "split 64 x 512 tokens, 4 heads/workgroup, ..."

  const detail::DecodePlanData& data() const noexcept { return *data_; }

 private:
  explicit DecodePlan(std::unique_ptr<detail::DecodePlanData> data);
  std::unique_ptr<detail::DecodePlanData> data_;
};

// The buffers of one call, in the contract's layouts (see docs/contract.md).
struct DecodeViews {
  TensorView query;          // [S, H, D] query_dtype
  TensorView key_cache;      // cache_dtype; vllm [N, Hkv, D/x, B, x], nhd [N, B, Hkv, D], hnd [N, Hkv, B, D]
  TensorView value_cache;    // cache_dtype; vllm [N, Hkv, D, B], nhd and hnd as the key cache
  TensorView block_tables;   // [S, M] i32 or u32 (absent with the CSR form, below)
  TensorView context_lens;   // [S] i32 or u32 (absent with the CSR form, below)
  TensorView output;         // [S, H, D] query_dtype
  TensorView alibi_slopes;   // [H] f32, when shape.alibi
  TensorView sinks;          // [H] f32, when shape.sinks
  TensorView lse;            // [S, H] f32, when shape.lse
  BufferView scratch;        // plan.scratch_bytes() bytes, when that is not 0
  // plan.order_bytes() bytes, when plan.longest_first(): a list record_decode_order wrote for
  // this plan (from any lengths: every list it writes names each item once, so a list made
  // from other lengths costs time, never correctness).
  BufferView order;
  // Optional [1] u32: the shaders OR in kStatus* bits when they meet a block id >= N, a
  // context length > M * B or CSR page tables that break the contract in device memory (they
  // skip or clamp it and go on safely).
  BufferView status;
  // plan.timeline_bytes() bytes from a buffer created with VK_BUFFER_USAGE_SHADER_DEVICE_ADDRESS_BIT
  // (Context::create_buffer's are), when the plan was made with options.timeline.
  BufferView timeline;
  // plan.merge_counter_bytes() bytes, when the plan merges in the dispatch (DecodeMerge): zero
  // before the first decode that uses them (vkCmdFillBuffer), written by nothing but decodes,
  // each of which leaves them zero; decodes that share them (plans of any shape may) must not
  // overlap in time. Counters that are not zero can merge a sequence too early: where a decode
  // finds one past its count, it sets kStatusBadMergeCounters; below its count, nothing shows.
  BufferView merge_counters;
  // FlashInfer's CSR page tables, in place of block_tables and context_lens (docs/contract.md;
  // a plan made with shape.csr_page_table): request s holds the blocks
  // kv_indices[kv_indptr[s] .. kv_indptr[s + 1]) and its length is
  // (pages - 1) * B + kv_last_page_len[s] (0 without pages). record_decode expands them into
  // the scratch (one more dispatch and a barrier), then decodes as from a dense table.
  TensorView kv_indptr;         // [S + 1] i32 or u32
  TensorView kv_indices;        // [nnz] i32 or u32, any length: entries past kv_indptr[S] are not read
  TensorView kv_last_page_len;  // [S] i32 or u32
};

constexpr uint32_t kStatusBadBlockId = 1u;
constexpr uint32_t kStatusBadContextLen = 2u;
constexpr uint32_t kStatusBadOrder = 8u;  // DecodeViews::order names no item of the plan (never written?)
constexpr uint32_t kStatusBadMergeCounters = 16u;  // DecodeViews::merge_counters not zero, or shared by overlapping decodes
// CSR page tables in device memory that break the contract (kv_indptr not starting at 0,
// decreasing or past kv_indices, more than M pages, a last page length outside [1, B] or not 0
// without pages): clamped so that nothing is read or written outside a buffer.
constexpr uint32_t kStatusBadPageTable = 128u;

// Checks the params and the views against the plan (values, dtypes, shapes, sizes, alignment)
// and records the work.
VKPAGED_API void record_decode(Context& context, VkCommandBuffer cmd, const DecodePlan& plan, const DecodeViews& views,
                               const DecodeParams& params = {});

// DecodeOrder::longest_first: writes the plan's items, longest first by their tokens under
// `context_lens` ([S] i32 or u32), into `order` (plan.order_bytes() bytes). Record it when the
// lengths change (once per decode step) and place a compute-to-compute barrier before the
// decodes that read it; plans of one step that agree on S, partitions and sliding window (the
// layers of a model) share one list. Its reads and writes are storage buffers in the compute
// shader stage, as record_decode's.
VKPAGED_API void record_decode_order(Context& context, VkCommandBuffer cmd, const DecodePlan& plan,
                                     const TensorView& context_lens, const BufferView& order);

// DecodeOptions::timeline: each subgroup's record in DecodeViews::timeline is `words` u32 at
// (workgroup * subgroups per workgroup + subgroup) * words, workgroup = x + X (y + Y z) over the
// grid (kv-head groups, sequences, partitions): its SM, workgroup, subgroup, the units of 32
// tokens it walked, then five 64-bit nanosecond stamps (low word first) of a device-wide clock:
// start, query staged, first unit done, last unit done, end (output written). A workgroup with
// nothing to do (a partition past its sequence) gives units 0 and its start as the first four.
namespace decode_timeline {
constexpr uint32_t sm = 0, workgroup = 1, subgroup = 2, units = 3, stamps = 4, words = 14;
}  // namespace decode_timeline

// Host-side inputs for the convenience path, the CPU reference and the CLI.
struct DecodeInputs {
  HostTensor query;          // [S, H, D] f32, f16 or bf16
  HostTensor key_cache;      // in kv_layout (DecodeViews::key_cache)
  HostTensor value_cache;    // in kv_layout (DecodeViews::value_cache)
  HostTensor block_tables;   // [S, M] i32 or u32 (i64 accepted: values must fit); or the CSR form
  HostTensor context_lens;   // [S] i32 or u32 (i64 accepted)
  HostTensor alibi_slopes;   // optional [H] f32
  HostTensor sinks;          // optional [H] f32
  DType cache_dtype = DType::f16;  // how the cache bytes are to be read (u8 arrays for fp8)
  KvLayout kv_layout = KvLayout::vllm;  // of key_cache and value_cache
  // FlashInfer's CSR page tables in place of block_tables and context_lens (DecodeViews), i32,
  // u32 or i64: kv_indptr [S + 1], kv_indices [kv_indptr[S]], kv_last_page_len [S].
  HostTensor kv_indptr;
  HostTensor kv_indices;
  HostTensor kv_last_page_len;
  // With the CSR form, M (the plan's block-table columns; no request may hold more pages);
  // 0 = the most pages of any request (at least 1). With block_tables, 0 or its columns.
  uint32_t max_blocks_per_seq = 0;
};

struct DecodeResult {
  HostTensor output;  // [S, H, D] query dtype
  HostTensor lse;     // [S, H] f32 (when asked for)
  HostTensor timeline;  // [records, decode_timeline::words] u32, with DecodeOptions::timeline
};

// Derives the shape from host inputs and validates it (same checks as DecodePlan::create, plus
// block ids < N and lengths <= M * B, which the host can see here, and every rule of the CSR
// form; csr_page_table is whether the inputs have it); softcap is false (the inputs do not
// say). Throws vkpaged::Error.
VKPAGED_API DecodeShape decode_shape_of(const DecodeInputs& inputs, bool want_lse = false);

// Convenience: uploads, plans, runs and waits, downloads. The plan's shape is
// decode_shape_of(inputs, want_lse) with softcap = (params.softcap != 0). Throws vkpaged::Error.
VKPAGED_API DecodeResult decode_attention(Context& context, const DecodeInputs& inputs, const DecodeOptions& options = {},
                                          const DecodeParams& params = {}, bool want_lse = false);

}  // namespace vkpaged
