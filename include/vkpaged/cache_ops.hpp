// SPDX-License-Identifier: Apache-2.0
#pragma once
// Operations on the paged KV cache (docs/contract.md, "Cache operations"). Each records one
// dispatch or one copy batch into the caller's command buffer, allocates nothing and never
// waits; arguments are checked before anything is recorded (vkpaged::Error otherwise, naming
// the argument and its value). The caller places the barriers around them: each entry says
// which stage it runs in.
//
// Cache views carry the cache dtype itself (f32, f16, bf16, fp8_e4m3, fp8_e5m2; copy and
// swap also take u8 for raw fp8 bytes) and the shapes of the layout the views struct names
// (KvLayout, kv_layout.hpp; docs/contract.md, "Other cache layouts"), the same for keys and
// values:
//   vllm (the default)  key [N, Hkv, D/x, B, x], value [N, Hkv, D, B], x = 16 / element bytes
//   nhd                 key and value [N, B, Hkv, D]
//   hnd                 key and value [N, Hkv, B, D]
// D is a multiple of x in every layout (the operators move 16 bytes at a time). Cache views
// must start 16-byte aligned.
//
// Pools larger than the device's maxStorageBufferRange: reshape_and_cache and gather then reach
// them through buffer device addresses (as decode does), which needs a context with buffer
// device addresses (Context on a device with bufferDeviceAddress, or ExternalDevice::
// buffer_device_address) and cache buffers created with VK_BUFFER_USAGE_SHADER_DEVICE_ADDRESS_BIT
// (Context::create_buffer and KvCache add it); otherwise they are refused (unsupported, naming
// the view and the limit). copy_blocks and swap_blocks copy with vkCmdCopyBuffer, which has no
// range limit.
#include <vulkan/vulkan.h>

#include <cstdint>

#include "vkpaged/block_manager.hpp"  // BlockCopy: the (src, dst) pairs the block manager hands out
#include "vkpaged/span.hpp"
#include "vkpaged/context.hpp"
#include "vkpaged/decode.hpp"  // kStatusBadBlockId, kStatusBadContextLen
#include "vkpaged/export.hpp"
#include "vkpaged/kv_layout.hpp"
#include "vkpaged/tensor.hpp"

namespace vkpaged {

// fp8 caches: element = decode(byte) * scale. Finite and > 0; ignored by other cache dtypes.
struct CacheScales {
  float k_scale = 1.0f;
  float v_scale = 1.0f;
};

// Bit of the optional status word that reshape_and_cache ORs in; gather uses decode.hpp's
// kStatusBadBlockId and kStatusBadContextLen.
constexpr uint32_t kStatusBadSlot = 4u;

// ---- reshape_and_cache: new tokens into their slots ----
// Reads key/value [T, Hkv, D] (f32, f16 or bf16, both the same) and slot_mapping [T] i64 (or
// i32); writes key_cache and value_cache (any cache dtype, both the same). Token i goes to
// block slot / B, offset slot % B; a negative slot is padding and is skipped. f32/f16/bf16
// caches store the value rounded to nearest even; fp8 caches store
// encode(value * (1 / scale)), rounded to nearest even and saturating at the format's max.
// (The reciprocal is taken once on the host because GPU division is not correctly rounded;
// the CPU reference does the same, so results are bit-exact.) Slots >= N * B met on the
// device are skipped and set kStatusBadSlot in `status`. Two tokens with the same slot in one
// call leave each element of it holding one of their two values (which one is not defined)
// and never touch other slots.
// Compute shader stage: reads key, value, slot_mapping; writes the caches; atomics on the
// value cache and on status.
struct ReshapeAndCacheViews {
  TensorView key;
  TensorView value;
  TensorView slot_mapping;
  TensorView key_cache;
  TensorView value_cache;
  BufferView status;  // optional [1] u32
  KvLayout layout = KvLayout::vllm;  // of key_cache and value_cache
};
VKPAGED_API void record_reshape_and_cache(Context& context, VkCommandBuffer cmd, const ReshapeAndCacheViews& views,
                                          const CacheScales& scales = {});

// ---- copy_blocks / swap_blocks: whole blocks, keys and values ----
// One layer's pools.
struct LayerCacheViews {
  TensorView key_cache;
  TensorView value_cache;
  KvLayout layout = KvLayout::vllm;  // copies move whole blocks, alike in every layout; the
                                     // shapes are checked against it
};
// Copies blocks within each layer (copy-on-write, forks): one vkCmdCopyBuffer per pool with a
// region per pair. Refused: src or dst outside [0, N); a dst that appears twice; a block that
// is both a source and a destination (the copies run in no defined order). A pair with
// src == dst is a no-op. Transfer stage.
VKPAGED_API void record_copy_blocks(Context& context, VkCommandBuffer cmd, Span<const LayerCacheViews> layers,
                                    Span<const BlockCopy> pairs);
// Moves blocks between two caches alike in everything but N (layout, dtype, Hkv, D, B;
// typically device-local and host-visible, either way): pairs index src's and dst's blocks
// respectively, src[l] goes to dst[l]. One vkCmdCopyBuffer per pool. Refused: ids outside
// [0, N) of their side, a dst that appears twice, layers whose layouts or blocks differ, src
// and dst views that overlap in one buffer. Transfer stage (add a
// transfer -> host barrier before reading a host-visible destination on the host).
VKPAGED_API void record_swap_blocks(Context& context, VkCommandBuffer cmd, Span<const LayerCacheViews> src,
                                    Span<const LayerCacheViews> dst, Span<const BlockCopy> pairs);

// ---- gather: paged to contiguous ----
// Sequence s owns rows [seq_starts[s], seq_starts[s + 1]) of key_out/value_out [T, Hkv, D]
// (f32, f16 or bf16): row seq_starts[s] + p holds its position p, read through
// block_tables[s][p / B] and dequantized (fp8: decode(byte) * scale; others converted with
// round to nearest even). block_tables [S, M] i32 or u32, seq_starts [S + 1] i32 or u32,
// non-decreasing (vLLM's cu_seq_lens). Rows outside [seq_starts[0], seq_starts[S]) are left
// as they are. On the device, a position >= M * B (kStatusBadContextLen) or a block id >= N
// (kStatusBadBlockId) is flagged in `status` and its row left as it is. Compute shader stage.
struct GatherViews {
  TensorView key_cache;
  TensorView value_cache;
  TensorView block_tables;
  TensorView seq_starts;
  TensorView key_out;
  TensorView value_out;
  BufferView status;  // optional [1] u32
  KvLayout layout = KvLayout::vllm;  // of key_cache and value_cache
};
VKPAGED_API void record_gather(Context& context, VkCommandBuffer cmd, const GatherViews& views,
                               const CacheScales& scales = {});

// ---- fp8 scale calibration ----
// Max |x| over a tensor (f32, f16 or bf16) into amax_out (one f32, 4-byte aligned), combined
// with atomicMax with what amax_out holds: the caller zeroes it first. A NaN in x gives NaN.
// A tensor of 16-bit elements with an odd count needs a view padded to a whole word.
// Compute shader stage.
VKPAGED_API void record_absmax(Context& context, VkCommandBuffer cmd, const TensorView& x, const BufferView& amax_out);
// scale = max(amax, 1e-12) / dtype_max(fp8_format): the k_scale / v_scale that maps amax to
// the format's max. Refused: a non-fp8 format, a negative, NaN or infinite amax.
VKPAGED_API float fp8_scale_from_amax(float amax, DType fp8_format);

}  // namespace vkpaged
