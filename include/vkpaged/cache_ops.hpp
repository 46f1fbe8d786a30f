#pragma once
// Operations on the paged KV cache (docs/contract.md, "Cache operations"). Each records one
// dispatch or one copy batch into the caller's command buffer, allocates nothing and never
// waits; arguments are checked before anything is recorded (vkpaged::Error otherwise).
//
// Cache views use the cache dtype itself (f32, f16, bf16, fp8_e4m3, fp8_e5m2) and the
// contract's layouts: key [N, Hkv, D/x, B, x], value [N, Hkv, D, B].
#include <vulkan/vulkan.h>

#include <cstdint>
#include <span>

#include "vkpaged/context.hpp"
#include "vkpaged/export.hpp"
#include "vkpaged/tensor.hpp"

namespace vkpaged {

// ---- reshape_and_cache: new tokens into their slots ----
// Reads key/value [T, Hkv, D] (f32, f16 or bf16) and slot_mapping [T] i64 (or i32); writes the
// caches (compute shader stage). Token i goes to block slot / B, offset slot % B; a negative
// slot is padding and is skipped. fp8 caches store encode(value / scale), round to nearest
// even, saturating. Slots >= N * B met on the device are skipped and flag kStatusBadSlot.
struct ReshapeAndCacheViews {
  TensorView key;
  TensorView value;
  TensorView slot_mapping;
  TensorView key_cache;
  TensorView value_cache;
  BufferView status;  // optional [1] u32
};
struct CacheScales {
  float k_scale = 1.0f;
  float v_scale = 1.0f;
};
constexpr uint32_t kStatusBadSlot = 4u;
VKPAGED_API void record_reshape_and_cache(Context& context, VkCommandBuffer cmd, const ReshapeAndCacheViews& views,
                                          const CacheScales& scales = {});

// ---- copy_blocks / swap_blocks: whole blocks, keys and values ----
struct BlockCopy {
  uint32_t src = 0;
  uint32_t dst = 0;
};
// One layer's pools. For swap_blocks, one side lives in host-visible memory.
struct LayerCacheViews {
  TensorView key_cache;
  TensorView value_cache;
};
// Copies blocks within each layer (copy-on-write, forks). Transfer stage; one vkCmdCopyBuffer
// per pool with a region per pair. src and dst < N; a dst may not appear twice.
VKPAGED_API void record_copy_blocks(Context& context, VkCommandBuffer cmd, std::span<const LayerCacheViews> layers,
                                    std::span<const BlockCopy> pairs);
// Moves blocks between two caches of the same layout (device <-> host-visible, either way):
// pairs index src's and dst's blocks respectively. Transfer stage.
VKPAGED_API void record_swap_blocks(Context& context, VkCommandBuffer cmd, std::span<const LayerCacheViews> src,
                                    std::span<const LayerCacheViews> dst, std::span<const BlockCopy> pairs);

// ---- gather: paged to contiguous ----
// For each sequence s, positions [0, seq_lens[s]) go to rows [starts[s], starts[s] + seq_lens[s])
// of key_out/value_out [T, Hkv, D] (f32, f16 or bf16), dequantized (fp8 * scale).
// block_tables [S, M] i32, seq_starts [S + 1] i32 (seq_starts[S] = T; lengths are the
// differences). Compute shader stage.
struct GatherViews {
  TensorView key_cache;
  TensorView value_cache;
  TensorView block_tables;
  TensorView seq_starts;
  TensorView key_out;
  TensorView value_out;
  BufferView status;  // optional [1] u32
};
VKPAGED_API void record_gather(Context& context, VkCommandBuffer cmd, const GatherViews& views,
                               const CacheScales& scales = {});

// ---- fp8 scale calibration ----
// Writes max |x| over a tensor (f32, f16 or bf16) into amax_out (one f32; the caller zeroes it
// first). scale = amax / dtype_max(fp8 format), see fp8_scale_from_amax.
VKPAGED_API void record_absmax(Context& context, VkCommandBuffer cmd, const TensorView& x, const BufferView& amax_out);
VKPAGED_API float fp8_scale_from_amax(float amax, DType fp8_format);

}  // namespace vkpaged
