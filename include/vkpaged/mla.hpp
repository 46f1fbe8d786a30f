// SPDX-License-Identifier: Apache-2.0
#pragma once
// Multi-head latent attention (MLA: DeepSeek-V2/V3, Kimi K2), docs/contract.md "Multi-head
// latent attention": multi-query attention over one shared kv head whose key is Dk = Dv + R
// entries wide (the latent, then the rotary key part) and whose value is the key's first Dv
// entries. The cache comes in the two forms engines use:
//   one pool   [N, B, Dk]                      (vLLM's concat_and_cache_mla)
//   two pools  ckv [N, B, Dv] and kpe [N, B, R] (FlashInfer's ckv and kpe caches)
// Every row is a token's; a block is B rows. The CPU reference (reference.hpp,
// mla_attention) computes it; on the device, MlaPlan and record_mla_attention
// (mla_attention.hpp) do.
#include <cstdint>

#include "vkpaged/attention.hpp"
#include "vkpaged/export.hpp"
#include "vkpaged/tensor.hpp"

namespace vkpaged {

enum class MlaCacheForm : uint32_t {
  one_pool = 0,   // [N, B, Dk]: each row the latent followed by the rotary part
  two_pools = 1,  // ckv [N, B, Dv] and kpe [N, B, R]
};

// Host inputs of MLA attention (the CPU reference): AttentionInputs' request fields, with the
// cache in one of its two forms (give mla_cache, or ckv_cache and kpe_cache).
struct MlaInputs {
  HostTensor query;        // [T, H, Dk] f32, f16 or bf16 (absorbed q_nope, then q_pe)
  HostTensor mla_cache;    // one pool [N, B, Dk], or
  HostTensor ckv_cache;    // two pools: [N, B, Dv]
  HostTensor kpe_cache;    //            [N, B, R]
  uint32_t value_head_size = 0;  // Dv with one pool (the key's first Dv entries are the value); 0 with two
  HostTensor block_tables;   // [S, M] i32 or u32 (i64 accepted: values must fit)
  HostTensor context_lens;   // [S]
  HostTensor query_starts;   // [S + 1]
  HostTensor tree_mask;      // optional u8 [sum of q_s^2]
  HostTensor alibi_slopes;   // optional [H] f32
  HostTensor sinks;          // optional [H] f32
  DType cache_dtype = DType::f16;  // how the cache bytes are read (u8 arrays for fp8)
  uint32_t sliding_window = 0;
  HostTensor kv_indptr;         // FlashInfer's CSR page tables, as AttentionInputs'
  HostTensor kv_indices;
  HostTensor kv_last_page_len;
  uint32_t max_blocks_per_seq = 0;
};

// What shapes MLA attention: the multi-query shape with num_kv_heads 1, head_size Dk and
// kv_layout nhd (an MLA row is nhd's with Hkv = 1), plus the value width and the cache form.
struct MlaShape {
  AttentionShape attention;
  uint32_t value_head_size = 0;  // Dv; R = attention.head_size - Dv
  MlaCacheForm cache_form = MlaCacheForm::one_pool;
  uint32_t rope_head_size() const noexcept { return attention.head_size - value_head_size; }
};

// Derives the shape from host inputs and validates it: attention_shape_of's rules for the
// request fields (page tables in either form, query starts, context lengths, tree mask, ALiBi
// slopes, sinks) and the MLA ones (docs/contract.md): a query [T, H, Dk]; one pool [N, B, Dk]
// with 1 <= Dv <= Dk, or two pools of equal N and B whose widths add up to Dk; the cache
// dtype f32, f16, bf16 or fp8. The soft cap is on when params.softcap > 0. Throws
// vkpaged::Error naming the argument and the value.
VKPAGED_API MlaShape mla_shape_of(const MlaInputs& inputs, const AttentionParams& params = {},
                                  bool want_lse = false);

}  // namespace vkpaged
