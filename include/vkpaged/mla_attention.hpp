// SPDX-License-Identifier: Apache-2.0
#pragma once
// Multi-head latent attention on the device (docs/contract.md, "Multi-head latent attention"):
// the multi-query attention operator's structure (attention.hpp) over the MLA cache, one pool
// [N, B, Dk] or ckv [N, B, Dv] + kpe [N, B, R], with the value the key's first Dv entries.
//
//   MlaPlan plan = MlaPlan::create(ctx, shape, query_starts);  // host, once per step
//   record_mla_attention(ctx, cmd, plan, views, params);       // records, allocates no GPU memory
//
// or, for a bucket of steps recorded once and replayed, MlaPlan::create_bucket(ctx, shape,
// max_query_tokens) (Context::prepare builds its pipelines ahead: PipelineSet::mla).
//
// Every request form of record_attention (decode, chunks after a cached prefix, speculative
// tokens with tree masks), window, soft cap, ALiBi, sinks, LSE, fp8 scales, CSR page tables and
// the split over the key positions (merged by partition_merge.comp, Dv wide) run on a portable
// kernel (shaders/mla_attention.comp, every device and dtype) and on a tensor-core kernel
// (shaders/mla_attention_matrix_khr.comp: VK_KHR_cooperative_matrix with an f16 product, f16 and
// bf16 queries over f16, bf16 and fp8 caches), which MlaOptions::kernel chooses between.
// record_mla_attention reads and writes its views as
// storage buffers in the compute shader stage; the caller places the barriers, as for
// record_attention.
#include <vulkan/vulkan.h>

#include <cstdint>
#include <memory>
#include <string>

#include "vkpaged/attention.hpp"
#include "vkpaged/context.hpp"
#include "vkpaged/export.hpp"
#include "vkpaged/mla.hpp"
#include "vkpaged/span.hpp"
#include "vkpaged/tensor.hpp"

namespace vkpaged {

// How an MLA plan may run. Nothing here changes the results beyond the contract's tolerances.
struct MlaOptions {
  SplitMode split = SplitMode::automatic;  // split the key positions into partitions merged after
  uint32_t partition_tokens = 0;           // split: key positions per partition (multiple of 64); 0 = auto
  // automatic: the tensor-core kernel where it can run the shape, else the portable one; scalar:
  // the portable kernel; matrix: the tensor-core kernel, refused (unsupported, naming why) where
  // it cannot run; decode is refused (MLA has no decode kernels).
  AttentionKernel kernel = AttentionKernel::automatic;
};

namespace detail {
struct MlaPlanData;
}

class VKPAGED_API MlaPlan {
 public:
  // Validates the shape (the multi-query rules with Hkv 1 and the nhd row, plus the kernel's:
  // Dk a multiple of 8 up to 576, Dv a multiple of 8 up to min(Dk, 512), R = Dk - Dv >= 8 with
  // two pools; a pool past maxStorageBufferRange needs buffer device addresses: both kernels then
  // read the pools by address), the query starts ([S + 1] on the host, as
  // AttentionPlan::create's) and the options, chooses the kernel, rows, key tile and split, and
  // creates (or finds) the pipelines. Throws vkpaged::Error naming the argument and the value
  // (unsupported, "kernel: matrix: ...", where options.kernel asks for a kernel that cannot run).
  static MlaPlan create(Context& context, const MlaShape& shape, Span<const int32_t> query_starts,
                        const MlaOptions& options = {});
  // A plan for a bucket of steps, recorded once and replayed, as AttentionPlan::create_bucket's
  // (docs/integration.md, "Replaying a recorded step"): shape.attention's S, T and
  // max_context_len are the bucket's most requests, most new tokens and longest context (0 =
  // M * B), max_query_tokens its longest request's new tokens (0 = T). A step of the bucket fills
  // the plan's S and T with padding (requests of no new tokens and context length 0 after its
  // own); rows past its tokens are unspecified. The kernel, rows, split, scratch and tree-mask
  // size are chosen for the bucket's worst step, and every length, block table and query start
  // is read on the device. Throws as create, naming max_query_tokens where it exceeds T or the
  // longest context.
  static MlaPlan create_bucket(Context& context, const MlaShape& shape, uint32_t max_query_tokens,
                               const MlaOptions& options = {});
  // The scratch a bucket's plan needs (what create_bucket would make scratch_bytes()), without a
  // plan or a pipeline, so that an engine allocates it once.
  static size_t max_scratch_bytes(Context& context, const MlaShape& shape, uint32_t max_query_tokens,
                                  const MlaOptions& options = {});

  MlaPlan(const MlaPlan&);
  MlaPlan& operator=(const MlaPlan&);
  MlaPlan(MlaPlan&&) noexcept;
  MlaPlan& operator=(MlaPlan&&) noexcept;
  ~MlaPlan();

  const MlaShape& shape() const noexcept;
  const MlaOptions& options() const noexcept;
  bool bucket() const noexcept;                // made by create_bucket
  uint32_t max_query_tokens() const noexcept;  // the longest request's q_s (a bucket's: its bound)
  size_t tree_mask_bytes() const noexcept;  // sum of q_s^2 with a tree mask (a bucket's: the most its steps' masks take), else 0
  bool split() const noexcept;
  AttentionKernel kernel() const noexcept;     // scalar or matrix: the kernel that runs it
  uint32_t num_partitions() const noexcept;  // 1 when not split
  size_t scratch_bytes() const noexcept;     // size of MlaViews::scratch; 0 when not split, without CSR tables
  std::string describe() const;

  const detail::MlaPlanData& data() const noexcept { return *data_; }

 private:
  explicit MlaPlan(std::unique_ptr<detail::MlaPlanData> data);
  std::unique_ptr<detail::MlaPlanData> data_;
};

// The buffers of one call: AttentionViews' request fields, the MLA cache in the plan's form.
struct MlaViews {
  TensorView query;         // [T, H, Dk] query_dtype
  TensorView mla_cache;     // one pool [N, B, Dk] (cache dtype; u8 for fp8), or
  TensorView ckv_cache;     // two pools: [N, B, Dv]
  TensorView kpe_cache;     //            [N, B, R]
  TensorView block_tables;  // [S, M] i32 or u32 (absent with the CSR form)
  TensorView context_lens;  // [S] i32 or u32
  TensorView query_starts;  // [S + 1] i32 or u32: the plan's values
  TensorView output;        // [T, H, Dv] query_dtype
  TensorView lse;           // [T, H] f32, when shape.attention.lse
  TensorView tree_mask;     // u8 [plan.tree_mask_bytes()], whole 32-bit words (as AttentionViews')
  TensorView alibi_slopes;  // [H] f32, when shape.attention.alibi
  TensorView sinks;         // [H] f32, when shape.attention.sinks
  BufferView scratch;       // plan.scratch_bytes() bytes, when that is not 0
  BufferView status;        // optional [1] u32: kStatus* bits, as AttentionViews::status
  TensorView kv_indptr;     // FlashInfer's CSR page tables (shape.attention.csr_page_table)
  TensorView kv_indices;
  TensorView kv_last_page_len;
};

// Checks the params and the views against the plan and records the work. The default scale is
// 1 / sqrt(Dk).
VKPAGED_API void record_mla_attention(Context& context, VkCommandBuffer cmd, const MlaPlan& plan,
                                      const MlaViews& views, const AttentionParams& params = {});

// Convenience: validates (mla_shape_of), uploads, plans, runs and waits, downloads. The output
// is [T, H, Dv] in the query's dtype. Throws vkpaged::Error; an internal error when the shader
// flags a value the host checks passed.
VKPAGED_API AttentionResult mla_attention(Context& context, const MlaInputs& inputs, const AttentionParams& params = {},
                                          const MlaOptions& options = {}, bool want_lse = false);

}  // namespace vkpaged
