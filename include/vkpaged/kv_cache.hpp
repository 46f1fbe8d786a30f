// SPDX-License-Identifier: Apache-2.0
#pragma once
// The KV cache itself: for L layers, a key pool and a value pool per layer in device memory,
// in the layout chosen at creation (KvLayout, docs/contract.md's "Layouts" and "Other cache
// layouts": vllm, the default, key [N, Hkv, D/x, B, x] and value [N, Hkv, D, B]; nhd
// [N, B, Hkv, D]; hnd [N, Hkv, B, D]; a block costs the same in each), and optionally a
// host-visible pool of the same layout for swapping. Sized by a block count or by a memory
// budget; every limit is checked before anything is allocated.
//
//   KvCacheShape shape{.num_layers = 32, .num_kv_heads = 8, .head_size = 128, .block_size = 16};
//   KvCacheSizing s = KvCache::plan(ctx.device_info(), shape, {.budget_fraction = 0.9});  // no allocation
//   KvCache cache(ctx, shape, {.budget_fraction = 0.9, .num_host_blocks = 512});
//   cache.record_reshape_and_cache(cmd, l, {.key = k, .value = v, .slot_mapping = slots}, rotary);
//   AttentionPlan plan = AttentionPlan::create(ctx, cache.attention_shape({.num_requests = 8,
//       .num_query_tokens = 300, .num_heads = 32, .max_blocks_per_seq = 64}), query_starts);
//   cache.record_attention(cmd, l, plan, {.query = q, .block_tables = bt, .context_lens = cl,
//                                         .query_starts = qs, .output = out});  // the pools: the cache's
//   cache.record_copy_blocks(cmd, copy_on_write_pairs);  // every layer, one copy batch
//
// An MLA cache (multi-head latent attention, mla.hpp) holds per layer one pool [N, B, Dv + R]
// or two, ckv [N, B, Dv] and kpe [N, B, R], in place of the key and value pools:
//   KvCacheShape mla{.num_layers = 61, .num_kv_heads = 1, .head_size = 512, .block_size = 64,
//                    .layout = KvLayout::nhd, .kind = KvCacheKind::mla_one_pool, .rope_head_size = 64};
//   cache.record_mla_reshape_and_cache(cmd, l, {.kv_c = c, .k_pe = pe, .slot_mapping = slots}, scale, &rope);
//   MlaPlan plan = MlaPlan::create(ctx, cache.mla_shape({.num_requests = 8, .num_query_tokens = 8,
//       .num_heads = 128, .max_blocks_per_seq = 64}), query_starts);
//   cache.record_mla_attention(cmd, l, plan, {.query = q, .block_tables = bt, .context_lens = cl,
//                                             .query_starts = qs, .output = out});  // the pools: the cache's
//
// The block ids are a BlockManager's (block_manager.hpp): its num_blocks is num_blocks() and
// its num_host_blocks is num_host_blocks().
#include <vulkan/vulkan.h>

#include <cstdint>
#include <memory>

#include "vkpaged/span.hpp"
#include "vkpaged/attention.hpp"
#include "vkpaged/block_manager.hpp"
#include "vkpaged/cache_ops.hpp"
#include "vkpaged/context.hpp"
#include "vkpaged/decode.hpp"
#include "vkpaged/export.hpp"
#include "vkpaged/kv_layout.hpp"
#include "vkpaged/mla.hpp"
#include "vkpaged/mla_attention.hpp"
#include "vkpaged/mla_cache_ops.hpp"
#include "vkpaged/rotary.hpp"
#include "vkpaged/tensor.hpp"

namespace vkpaged {

// What a layer's pools hold.
enum class KvCacheKind : uint32_t {
  key_value = 0,      // a key pool and a value pool, in `layout`
  mla_one_pool = 1,   // MLA: one pool [N, B, Dv + R], each row the latent then the rotary part
  mla_two_pools = 2,  // MLA: ckv [N, B, Dv] and kpe [N, B, R] (FlashInfer's)
};

// What one cache holds per block. Every layer has the same pools.
struct KvCacheShape {
  uint32_t num_layers = 1;
  uint32_t num_kv_heads = 0;  // Hkv (MLA: 1)
  uint32_t head_size = 0;     // D, a multiple of x = 16 / element bytes (MLA: Dv, the latent)
  uint32_t block_size = 16;   // B, tokens per block
  DType dtype = DType::f16;   // f32, f16, bf16, fp8_e4m3, fp8_e5m2
  KvLayout layout = KvLayout::vllm;  // of every pool, keys and values alike (MLA: nhd, rows [N, B, width])
  KvCacheKind kind = KvCacheKind::key_value;
  uint32_t rope_head_size = 0;  // MLA: R, a positive multiple of x; 0 for key_value
};

// One layer's new MLA tokens for KvCache::record_mla_reshape_and_cache (MlaReshapeAndCacheViews
// without the pools, which the cache supplies).
struct MlaNewTokens {
  TensorView kv_c;          // [T, Dv] f32, f16 or bf16
  TensorView k_pe;          // [T, R] of kv_c's dtype
  TensorView slot_mapping;  // [T] i64 or i32; negative = padding
  BufferView status;        // optional [1] u32 (kStatusBadSlot, kStatusBadPosition)
};

// One layer's new tokens for KvCache::record_reshape_and_cache (ReshapeAndCacheViews without
// the pools, which the cache supplies).
struct NewTokens {
  TensorView key;           // [T, Hkv, D] f32, f16 or bf16
  TensorView value;         // [T, Hkv, D] of key's dtype
  TensorView slot_mapping;  // [T] i64 or i32; negative = padding
  BufferView status;        // optional [1] u32 (kStatusBadSlot, kStatusBadPosition)
};

// What a budget_fraction was taken of.
enum class MemorySource {
  none,           // the size was a block count or a byte budget
  heap_size,      // DeviceInfo::device_local_bytes: the device-local heaps' size
  memory_budget,  // DeviceInfo::device_local_free_bytes: free memory by VK_EXT_memory_budget
};

// What a number of blocks holds and costs (device pools; the host pool has the same per-block
// figures).
struct KvCacheSizing {
  uint32_t num_blocks = 0;
  uint64_t num_tokens = 0;       // num_blocks * block_size
  // One block of one pool (the keys, or the values, of one layer; MLA: of the layer's largest
  // pool, the one pool or ckv).
  uint64_t block_bytes = 0;
  uint64_t bytes_per_block = 0;  // one block of every pool: 2 * num_layers * block_bytes (MLA: of its pools)
  uint64_t pool_bytes = 0;       // one pool: num_blocks * block_bytes (MLA: the largest)
  uint64_t total_bytes = 0;      // every pool: num_blocks * bytes_per_block
  // budget_fraction only: which memory the fraction was of, and its bytes.
  MemorySource fraction_of = MemorySource::none;
  uint64_t fraction_of_bytes = 0;
};

// How many device blocks: give exactly one of num_blocks, budget_bytes, budget_fraction.
struct KvCacheOptions {
  uint32_t num_blocks = 0;       // exactly this many, or
  uint64_t budget_bytes = 0;     // as many as fit this many bytes (all layers, keys and values), or
  double budget_fraction = 0.0;  // as many as fit this fraction, in (0, 1], of the free device-local
                                 // memory (VK_EXT_memory_budget), else of the device-local heaps' size
  uint32_t num_host_blocks = 0;  // blocks of the host-visible swap pool; 0 = none
};

class VKPAGED_API KvCache {
 public:
  // ---- sizing, without a device or an allocation (vkpaged::Error for a bad shape) ----
  // Checks the shape: layers, heads and block size > 0, a cache dtype, D a multiple of x; MLA:
  // Hkv 1, layout nhd, R a positive multiple of x (rope_head_size 0 otherwise).
  static void validate(const KvCacheShape& shape);
  // Bytes one block costs over every layer, keys and values.
  static uint64_t bytes_per_block(const KvCacheShape& shape);
  // Blocks that fit `bytes` (rounded down; 0 when not even one fits).
  static uint32_t blocks_for_budget(const KvCacheShape& shape, uint64_t bytes);
  static KvCacheSizing sizing(const KvCacheShape& shape, uint32_t num_blocks);
  // Most blocks one pool of a device with this maxStorageBufferRange can hold as one storage
  // buffer descriptor. Larger pools need buffer device addresses (see the constructor).
  static uint32_t max_blocks_per_pool(const KvCacheShape& shape, uint64_t max_storage_buffer_range);
  // What the constructor would allocate on `device`: resolves the options to a block count and
  // applies every device check (throws as the constructor does). budget_fraction is taken of
  // device.device_local_free_bytes where device.memory_budget, else of device_local_bytes; the
  // result says which (fraction_of). The host pool's memory heap is checked only by the
  // constructor, which sees the device's heaps.
  static KvCacheSizing plan(const DeviceInfo& device, const KvCacheShape& shape, const KvCacheOptions& options);

  // Checks everything first, then allocates 2 * num_layers device buffers (and as many
  // host-visible ones). A budget_fraction is taken of the free memory queried now
  // (VK_EXT_memory_budget), else of the heaps' size. Pools larger than the device's
  // maxStorageBufferRange are allowed where the context has buffer device addresses: decode,
  // attention, reshape_and_cache and gather (MLA's too) then reach them by address, copies need
  // nothing. Refused
  // (vkpaged::Error, nothing allocated): a bad shape (invalid_argument); no block count or
  // budget, or one that holds no block (invalid_argument); a budget or block count over the
  // device-local memory or the host-visible heap (out_of_memory); a pool over
  // maxStorageBufferRange on a context without buffer device addresses (unsupported, naming
  // num_blocks or num_host_blocks and the limit). An allocation that fails part-way frees what
  // it had allocated before the Error leaves. The pools' contents start undefined. The cache
  // keeps a reference to `context`, which must outlive it.
  KvCache(Context& context, const KvCacheShape& shape, const KvCacheOptions& options);
  ~KvCache();
  KvCache(KvCache&&) noexcept;
  KvCache& operator=(KvCache&&) noexcept;
  KvCache(const KvCache&) = delete;
  KvCache& operator=(const KvCache&) = delete;

  const KvCacheShape& shape() const noexcept;
  uint32_t num_blocks() const noexcept;
  uint32_t num_host_blocks() const noexcept;
  uint64_t num_tokens() const noexcept;          // num_blocks * block_size
  const KvCacheSizing& sizing() const noexcept;  // of the device pools
  uint64_t host_bytes() const noexcept;          // of every host pool together

  // Layer `layer`'s pools as the operators take them, dtype and layout the cache's (pass
  // shape().layout with them, or use the per-layer helpers below). Host views have
  // N = num_host_blocks() and exist only when there is a host pool. A layer out of range, or
  // a host view without a host pool, is refused (invalid_argument), and so is any of them on an
  // MLA cache (mla_cache below).
  TensorView key_cache(uint32_t layer) const;
  TensorView value_cache(uint32_t layer) const;
  TensorView host_key_cache(uint32_t layer) const;
  TensorView host_value_cache(uint32_t layer) const;
  // The device pools of every layer, and the host pools (empty without a host pool), for
  // record_copy_blocks and record_swap_blocks; empty for an MLA cache.
  Span<const LayerCacheViews> layers() const noexcept;
  Span<const LayerCacheViews> host_layers() const noexcept;
  // An MLA cache's pools of layer `layer` (mla_cache, or ckv_cache and kpe_cache), device or
  // host; refused (invalid_argument) on a key_value cache, for a layer out of range, or a host
  // view without a host pool.
  MlaCacheViews mla_cache(uint32_t layer) const;
  MlaCacheViews host_mla_cache(uint32_t layer) const;

  // Whole blocks, keys and values (MLA: every pool), in every layer: one vkCmdCopyBuffer per pool, the checks
  // of record_copy_blocks / record_swap_blocks first. Transfer stage; the caller places the
  // barriers (and a transfer -> host one before reading a host pool on the CPU).
  void record_copy_blocks(VkCommandBuffer cmd, Span<const BlockCopy> pairs) const;
  // (device block, host block) pairs, as BlockManager::swap_out returns them.
  void record_swap_out(VkCommandBuffer cmd, Span<const BlockCopy> pairs) const;
  // (host block, device block) pairs, as BlockManager::swap_in returns them.
  void record_swap_in(VkCommandBuffer cmd, Span<const BlockCopy> pairs) const;

  // ---- one layer's operators, from the cache's own geometry ----
  // record_reshape_and_cache into layer `layer`'s pools (the cache's layout). A layer out of
  // range, or an MLA cache, is refused (invalid_argument) before anything is recorded. Compute
  // shader stage.
  void record_reshape_and_cache(VkCommandBuffer cmd, uint32_t layer, const NewTokens& tokens,
                                const CacheScales& scales = {}) const;
  // The same with the keys rotated on their way in (and the queries in place):
  // record_reshape_and_cache_rotary (rotary.hpp) into layer `layer`'s pools.
  void record_reshape_and_cache(VkCommandBuffer cmd, uint32_t layer, const NewTokens& tokens,
                                const RotaryInputs& rotary, const CacheScales& scales = {}) const;

  // record_mla_reshape_and_cache (mla_cache_ops.hpp) into layer `layer`'s MLA pools, k_pe
  // rotated on its way in when `rope` is given. Refused (invalid_argument) before anything is
  // recorded: a key_value cache, a layer out of range. Compute shader stage.
  void record_mla_reshape_and_cache(VkCommandBuffer cmd, uint32_t layer, const MlaNewTokens& tokens,
                                    float scale = 1.0f, const MlaRopeViews* rope = nullptr) const;

  // A DecodeShape for this cache: `batch`'s fields for what the batch brings (num_seqs,
  // num_heads, max_blocks_per_seq, max_context_len, query_dtype, alibi, sinks, lse), and the
  // cache's for what it knows (num_kv_heads, head_size, block_size, num_blocks, cache_dtype,
  // kv_layout), whatever `batch` held there. Checks nothing: DecodePlan::create does.
  DecodeShape decode_shape(const DecodeShape& batch) const noexcept;
  // The same for multi-query attention (attention.hpp): `batch` brings num_requests,
  // num_query_tokens, num_heads, max_blocks_per_seq, max_context_len, query_dtype,
  // sliding_window and the feature flags; the cache num_kv_heads, head_size, block_size,
  // num_blocks, cache_dtype and kv_layout. Checks nothing: AttentionPlan::create does.
  AttentionShape attention_shape(const AttentionShape& batch) const noexcept;

  // record_decode / record_attention over layer `layer`'s pools: the caller gives every view
  // but the pools (query, block tables, context lengths, query starts, output, scratch, ...)
  // and leaves key_cache and value_cache empty; the cache fills them in. Refused
  // (invalid_argument) before anything is recorded: a layer out of range, a pool view given,
  // a plan whose shape is not of this cache (num_kv_heads, head_size, block_size, num_blocks,
  // cache_dtype or kv_layout differ: make it from decode_shape / attention_shape), an MLA cache
  // (record_mla_attention reads its pools); then
  // record_decode / record_attention check the rest. Compute shader stage, as those.
  void record_decode(VkCommandBuffer cmd, uint32_t layer, const DecodePlan& plan, const DecodeViews& views,
                     const DecodeParams& params = {}) const;
  void record_attention(VkCommandBuffer cmd, uint32_t layer, const AttentionPlan& plan, const AttentionViews& views,
                        const AttentionParams& params = {}) const;

  // An MlaShape for this MLA cache (mla_attention.hpp): `batch`'s fields for what the batch
  // brings (as attention_shape: num_requests, num_query_tokens, num_heads, max_blocks_per_seq,
  // max_context_len, query_dtype, sliding_window and the feature flags), the cache's for what it
  // knows: num_kv_heads 1, head_size Dk = Dv + R, block_size, num_blocks, cache_dtype,
  // kv_layout nhd, value_head_size Dv and the cache form of its kind. Refused (invalid_argument)
  // on a key_value cache; checks nothing else: MlaPlan::create does.
  MlaShape mla_shape(const AttentionShape& batch) const;
  // record_mla_attention (mla_attention.hpp) over layer `layer`'s MLA pools: the caller gives
  // every view but the pools (query, page tables, query starts, output, scratch, ...) and leaves
  // mla_cache, ckv_cache and kpe_cache empty; the cache fills in its form's. Refused
  // (invalid_argument) before anything is recorded: a key_value cache, a layer out of range, a
  // pool view given, a plan whose shape is not of this cache (num_kv_heads, head_size,
  // block_size, num_blocks, cache_dtype, kv_layout, value_head_size or cache_form differ: make it
  // from mla_shape); then record_mla_attention checks the rest. Compute shader stage, as that.
  void record_mla_attention(VkCommandBuffer cmd, uint32_t layer, const MlaPlan& plan, const MlaViews& views,
                            const AttentionParams& params = {}) const;

 private:
  struct Impl;
  std::unique_ptr<Impl> impl_;
};

}  // namespace vkpaged
