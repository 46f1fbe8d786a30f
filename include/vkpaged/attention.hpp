// SPDX-License-Identifier: Apache-2.0
#pragma once
// Attention over the paged cache for a whole engine step: each request brings one or more new
// query tokens (decode, speculative verification, prefill chunks after a cached prefix, whole
// prompts), all in one recorded operator. The math, layouts and bad-input answers are those of
// docs/contract.md, "Multi-query attention"; decode is its case of one token per request.
//
//   AttentionPlan plan = AttentionPlan::create(ctx, shape, query_starts);  // host, once per step
//   record_attention(ctx, cmd, plan, views, params);                       // records, allocates no GPU memory
//
// The plan takes the step's query_starts on the host: it checks them, chooses the kernel family
// and the work split, and sizes the scratch. A batch of single tokens runs on the decode kernels
// (DecodePlan, so an engine's decode steps keep their speed); any other batch on the attention
// kernels, whose work the plan sizes from the request lengths.
//
// Replay: a plan made for a bucket (AttentionPlan::create_bucket: most requests, most new tokens,
// longest context, longest request) serves every step inside it, so that an engine records a
// step once and replays the command buffer, rewriting only the device arrays between
// submissions (docs/integration.md, "Replaying a recorded step", says what a step may change).
//
// record_attention reads query, caches, block tables, context lengths, query starts, tree
// mask, ALiBi slopes and sinks, and writes output, LSE, scratch and status, all as storage
// buffers in the compute shader stage (VK_PIPELINE_STAGE_COMPUTE_SHADER_BIT, SHADER_READ /
// SHADER_WRITE). The caller places the barriers that make its inputs visible before and its
// outputs visible after.
//
// Names: "attention", not "prefill" (decode and speculative steps run through it too) nor
// "multi-query" (which also names a model with one kv head).
#include <vulkan/vulkan.h>

#include <cstdint>
#include <memory>
#include <optional>
#include <string>

#include "vkpaged/span.hpp"
#include "vkpaged/context.hpp"
#include "vkpaged/decode.hpp"
#include "vkpaged/export.hpp"
#include "vkpaged/kv_layout.hpp"
#include "vkpaged/tensor.hpp"

namespace vkpaged {

// Which kernel family runs a plan.
enum class AttentionKernel {
  automatic,  // decode kernels for a batch of single tokens they can take (any layout, no tree
              // mask), else the matrix kernel where it can run, else the scalar kernel
  decode,     // DecodePlan's kernels: every q_s = 1, no tree mask; refused elsewhere
  scalar,     // the portable attention kernel (every device, dtype, layout and feature), whatever the batch
  matrix,     // the tensor-core attention kernel (VK_KHR_cooperative_matrix with f16 products): f16 and
              // bf16 queries, f16, bf16 and fp8 caches, pools within maxStorageBufferRange, every
              // layout and feature; refused (naming why) where it cannot run
};

// What shapes the work (specialization constants, grid, scratch): validated by AttentionPlan::create.
struct AttentionShape {
  uint32_t num_requests = 0;        // S
  uint32_t num_query_tokens = 0;    // T = sum of q_s
  uint32_t num_heads = 0;           // H
  uint32_t num_kv_heads = 0;        // Hkv
  uint32_t head_size = 0;           // D: a multiple of 8 from 32 to 256 (512 on the decode kernels)
  uint32_t block_size = 0;          // B: a power of two from 1 to 128
  uint32_t num_blocks = 0;          // N: blocks in the cache
  uint32_t max_blocks_per_seq = 0;  // M: columns of the block table
  // Upper bound on every context length, used to size the split; 0 means M * B.
  uint32_t max_context_len = 0;
  DType query_dtype = DType::f16;  // query and output: f32, f16, bf16
  DType cache_dtype = DType::f16;  // f32, f16, bf16, fp8_e4m3, fp8_e5m2
  KvLayout kv_layout = KvLayout::vllm;
  uint32_t sliding_window = 0;  // W > 0: a query at p attends [max(0, p - W + 1), p]; 0 = off
  bool softcap = false;    // a soft cap will be given (AttentionParams::softcap > 0)
  bool alibi = false;      // ALiBi slopes [H] f32 will be given
  bool sinks = false;      // sink logits [H] f32 will be given
  bool lse = false;        // write log-sum-exp [T, H] f32
  bool tree_mask = false;  // tree masks (AttentionViews::tree_mask) will be given
  // Page tables may come in FlashInfer's CSR form (AttentionViews::kv_indptr, kv_indices,
  // kv_last_page_len): the plan's scratch then holds their dense expansion (scratch_bytes()
  // counts it). Such a plan takes either form per call.
  bool csr_page_table = false;
};

// How the plan may run. Nothing here changes the results beyond the contract's tolerances.
struct AttentionOptions {
  AttentionKernel kernel = AttentionKernel::automatic;
  SplitMode split = SplitMode::automatic;  // split the key positions into partitions merged after
  uint32_t partition_tokens = 0;           // split: key positions per partition (multiple of 256); 0 = auto
};

// Per-call values, passed when recording (one plan serves every layer of a step).
// The per-call values of one call (scale, soft cap, fp8 scales): the same as decode's.
using AttentionParams = DecodeParams;

namespace detail {
struct AttentionPlanData;
}

class VKPAGED_API AttentionPlan {
 public:
  // Validates the shape, the query starts ([S + 1] on the host, the values the device will
  // hold: query_starts[0] = 0, each q_s >= 1, query_starts[S] = T) and the options against the
  // contract and the device, chooses the kernel and the split, and creates (or finds) the
  // pipelines. Throws vkpaged::Error naming the argument.
  static AttentionPlan create(Context& context, const AttentionShape& shape, Span<const int32_t> query_starts,
                              const AttentionOptions& options = {});
  // A plan for a bucket of steps, which every step inside it may run, recorded once and replayed:
  // shape's S, T and max_context_len are the bucket's most requests, most new tokens and longest
  // context (0 = M * B), max_query_tokens its longest request's new tokens (0 = T; 1 with T = S:
  // decode steps, which run on the decode kernels). A step of the bucket has at most S requests
  // of at most max_query_tokens new tokens each, T in all, and contexts of at most
  // max_context_len; it fills the plan's S and T with padding: its own requests first, then
  // requests of no new tokens (query starts that stay at the step's token count) and context
  // length 0. Rows past the step's tokens are the engine's padding: their outputs are unspecified.
  // What shapes the work (rows, split, scratch, tree-mask size) is sized for the whole bucket, and
  // every length, block table and query start is read on the device. Throws as create, naming
  // max_query_tokens where it exceeds T or the longest context.
  static AttentionPlan create_bucket(Context& context, const AttentionShape& shape, uint32_t max_query_tokens,
                                     const AttentionOptions& options = {});
  // The scratch a bucket's plan needs (what create_bucket would make scratch_bytes()), the most
  // any step of the bucket uses: an engine allocates it once, before any plan or step. Makes no
  // plan and builds no pipeline (a decode bucket that could take the matrix kernel runs its
  // fragment-layout probe, as create_bucket would).
  static size_t max_scratch_bytes(Context& context, const AttentionShape& shape, uint32_t max_query_tokens,
                                  const AttentionOptions& options = {});

  AttentionPlan(const AttentionPlan&);
  AttentionPlan& operator=(const AttentionPlan&);
  AttentionPlan(AttentionPlan&&) noexcept;
  AttentionPlan& operator=(AttentionPlan&&) noexcept;
  ~AttentionPlan();

  const AttentionShape& shape() const noexcept;
  const AttentionOptions& options() const noexcept;
  AttentionKernel kernel() const noexcept;     // decode, scalar or matrix: the family that runs it
  bool bucket() const noexcept;                // made by create_bucket
  uint32_t max_query_tokens() const noexcept;  // the longest request's q_s (a bucket's: its bound)
  // sum of q_s^2 (a bucket's: the most its steps' masks take): AttentionViews::tree_mask's size; 0 without
  size_t tree_mask_bytes() const noexcept;
  bool split() const noexcept;
  uint32_t num_partitions() const noexcept;    // 1 when not split
  size_t scratch_bytes() const noexcept;       // size of AttentionViews::scratch; 0 when not split, without csr_page_table
  std::string describe() const;

  const detail::AttentionPlanData& data() const noexcept { return *data_; }

 private:
  explicit AttentionPlan(std::unique_ptr<detail::AttentionPlanData> data);
  std::unique_ptr<detail::AttentionPlanData> data_;
};

// The buffers of one call. Cache shapes by layout (x = 16 / element bytes):
//   vllm: key [N, Hkv, D/x, B, x], value [N, Hkv, D, B];  nhd: [N, B, Hkv, D];  hnd: [N, Hkv, B, D].
struct AttentionViews {
  TensorView query;          // [T, H, D] query_dtype
  TensorView key_cache;      // cache_dtype (u8 for fp8)
  TensorView value_cache;
  TensorView block_tables;   // [S, M] i32 or u32 (absent with the CSR form, below)
  TensorView context_lens;   // [S] i32 or u32: L_s >= q_s, the new tokens' keys and values included
  TensorView query_starts;   // [S + 1] i32 or u32: the plan's values
  TensorView output;         // [T, H, D] query_dtype
  TensorView lse;            // [T, H] f32, when shape.lse
  // u8 [plan.tree_mask_bytes()], when shape.tree_mask: the requests' q_s x q_s matrices one after
  // another, row j (new token j) by row, 1 where token j sees token j'. The view's buffer range
  // covers whole 32-bit words (its size rounded up to 4 bytes).
  TensorView tree_mask;
  TensorView alibi_slopes;   // [H] f32, when shape.alibi
  TensorView sinks;          // [H] f32, when shape.sinks
  BufferView scratch;        // plan.scratch_bytes() bytes, when that is not 0
  // Optional [1] u32: the shaders OR in kStatus* bits when they meet a block id >= N, a
  // context length > M * B or below its request's q_s, query starts that fall or pass T, or CSR
  // page tables that break the contract in device memory (they skip or clamp what is wrong and go
  // on safely). Two equal query starts are a request of no new tokens, which writes nothing (a
  // bucket's padding request).
  BufferView status;
  // FlashInfer's CSR page tables in place of block_tables and context_lens, as DecodeViews'
  // (a plan made with shape.csr_page_table): expanded into the scratch, then attended as a
  // dense table would be.
  TensorView kv_indptr;         // [S + 1] i32 or u32
  TensorView kv_indices;        // [nnz] i32 or u32, any length: entries past kv_indptr[S] are not read
  TensorView kv_last_page_len;  // [S] i32 or u32
};

constexpr uint32_t kStatusBadQueryStarts = 32u;

// Checks the params and the views against the plan (dtypes, shapes, sizes, alignment) and
// records the work.
VKPAGED_API void record_attention(Context& context, VkCommandBuffer cmd, const AttentionPlan& plan,
                                  const AttentionViews& views, const AttentionParams& params = {});

// Host-side inputs for the convenience path, the CPU reference and the CLI.
struct AttentionInputs {
  HostTensor query;          // [T, H, D] f32, f16 or bf16
  HostTensor key_cache;      // in kv_layout
  HostTensor value_cache;
  HostTensor block_tables;   // [S, M] i32 or u32 (i64 accepted: values must fit)
  HostTensor context_lens;   // [S] i32 or u32 (i64 accepted)
  HostTensor query_starts;   // [S + 1] i32 or u32 (i64 accepted)
  HostTensor tree_mask;      // optional u8 [sum of q_s^2]
  HostTensor alibi_slopes;   // optional [H] f32
  HostTensor sinks;          // optional [H] f32
  DType cache_dtype = DType::f16;  // how the cache bytes are to be read (u8 arrays for fp8)
  KvLayout kv_layout = KvLayout::vllm;
  uint32_t sliding_window = 0;
  // FlashInfer's CSR page tables in place of block_tables and context_lens, as DecodeInputs'.
  HostTensor kv_indptr;         // [S + 1]
  HostTensor kv_indices;        // [kv_indptr[S]]
  HostTensor kv_last_page_len;  // [S]
  uint32_t max_blocks_per_seq = 0;  // CSR: M (0 = the most pages of any request); else 0 or block_tables' columns
};

struct AttentionResult {
  HostTensor output;  // [T, H, D] query dtype
  HostTensor lse;     // [T, H] f32 (when asked for)
};

// Derives the shape from host inputs and validates it (the checks of AttentionPlan::create,
// plus what the host sees here: block ids < N, q_s <= context lengths <= M * B, a tree mask of
// 0/1 bytes, every rule of the CSR form). The soft cap is on when params.softcap > 0;
// csr_page_table is whether the inputs have the CSR form. Throws vkpaged::Error.
VKPAGED_API AttentionShape attention_shape_of(const AttentionInputs& inputs, const AttentionParams& params = {},
                                              bool want_lse = false);

// Convenience: uploads, plans, runs and waits, downloads. Throws vkpaged::Error; an internal
// error when the shaders flag a value the host checks passed.
VKPAGED_API AttentionResult batch_attention(Context& context, const AttentionInputs& inputs,
                                            const AttentionParams& params = {}, const AttentionOptions& options = {},
                                            bool want_lse = false);

}  // namespace vkpaged
