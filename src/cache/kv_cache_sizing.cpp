// SPDX-License-Identifier: Apache-2.0
// KvCache's sizing: the shape checks, the bytes of a block, pool and cache, and the plan from a
// block count, a byte budget or a fraction of the device's memory. Pure functions of their
// arguments (no Vulkan calls), so the sanitizer build and the fuzzers run them too.
#include <fmt/format.h>

#include <algorithm>
#include <cmath>
#include <string>
#include <vector>

#include "cache/kv_cache_sizing.hpp"
#include "ops/block_size_rule.hpp"
#include "ops/cache_geometry.hpp"  // is_kv_layout
#include "vkpaged/dtype.hpp"

namespace vkpaged {

namespace detail {

void refuse_cache(ErrorCode code, const std::string& message) { throw Error(code, "KvCache: " + message); }

std::string mib(uint64_t bytes) { return fmt::format("{:.1f} MiB", double(bytes) / double(1 << 20)); }

// A pool is one allocation: past the device's maxMemoryAllocationSize it may fail or succeed by
// driver, so it is refused on every device alike.
void check_pool_allocation(const DeviceInfo& device, const char* what, const char* pool, const KvCacheSizing& z) {
  const uint64_t limit = device.max_memory_allocation_size;
  if (limit == 0 || z.pool_bytes <= limit) return;
  refuse_cache(ErrorCode::out_of_memory,
               fmt::format("{} {}: a layer's {} of {} blocks x {} bytes = {} bytes ({}) exceeds the device's "
                           "maxMemoryAllocationSize of {} bytes ({}), the most one allocation is promised on {}; "
                           "at most {} blocks fit one pool",
                           what, z.num_blocks, pool, z.num_blocks, z.block_bytes, z.pool_bytes, mib(z.pool_bytes),
                           limit, mib(limit), device.name, limit / z.block_bytes));
}

void check_pool_reach(const DeviceInfo& device, const char* what, const char* pool, const KvCacheSizing& z) {
  check_pool_allocation(device, what, pool, z);
  const uint64_t range = device.max_storage_buffer_range;
  if (z.pool_bytes <= range || device.buffer_device_address) return;
  refuse_cache(
      ErrorCode::unsupported,
      fmt::format("{} {}: a layer's {} of {} blocks x {} bytes = {} bytes ({}) exceeds the device's "
                  "maxStorageBufferRange of {} bytes ({}), and buffer device addresses, which reach larger "
                  "pools, are not available on {} (no bufferDeviceAddress, or an adopted device did not enable "
                  "it); at most {} blocks fit one pool",
                  what, z.num_blocks, pool, z.num_blocks, z.block_bytes, z.pool_bytes, mib(z.pool_bytes), range,
                  mib(range), device.name, range / z.block_bytes));
}

}  // namespace detail

namespace {

using detail::check_pool_reach;
using detail::kMaxCacheBlocks;
using detail::mib;
using detail::refuse_cache;

// a * b, refusing a product that does not fit 64 bits (absurd shapes or counts).
uint64_t checked_mul(uint64_t a, uint64_t b, const char* what) {
  uint64_t product = 0;
  if (__builtin_mul_overflow(a, b, &product))
    refuse_cache(ErrorCode::invalid_argument, fmt::format("{} overflows 64 bits ({} x {})", what, a, b));
  return product;
}

bool is_cache_dtype(DType t) { return is_float_dtype(t) || is_fp8_dtype(t); }

}  // namespace

// ---- sizing ----

void KvCache::validate(const KvCacheShape& s) {
  if (s.num_layers == 0) refuse_cache(ErrorCode::invalid_argument, "num_layers is 0");
  if (s.num_kv_heads == 0) refuse_cache(ErrorCode::invalid_argument, "num_kv_heads is 0");
  if (!detail::is_supported_block_size(s.block_size))
    refuse_cache(ErrorCode::invalid_argument,
                 fmt::format("block_size {} is not {} (the block sizes decode takes)", s.block_size, detail::kBlockSizeRule));
  if (!detail::is_kv_layout(s.layout))
    refuse_cache(ErrorCode::invalid_argument,
                 fmt::format("layout {} is not a cache layout (vllm, nhd, hnd)", uint32_t(s.layout)));
  if (!is_cache_dtype(s.dtype))
    refuse_cache(
        ErrorCode::invalid_argument,
        fmt::format("dtype {} is not a cache dtype (f32, f16, bf16, fp8_e4m3, fp8_e5m2)", dtype_name(s.dtype)));
  const uint32_t x = cache_pack_factor(s.dtype);
  if (s.head_size == 0 || s.head_size % x != 0)
    refuse_cache(ErrorCode::invalid_argument,
                 fmt::format("head size D = {} is not a positive multiple of x = {} for dtype {}", s.head_size, x,
                             dtype_name(s.dtype)));
  if (s.kind == KvCacheKind::key_value) {
    if (s.rope_head_size != 0)
      refuse_cache(ErrorCode::invalid_argument,
                   fmt::format("rope_head_size {} is for MLA caches: a key_value cache takes 0", s.rope_head_size));
    return;
  }
  if (s.kind != KvCacheKind::mla_one_pool && s.kind != KvCacheKind::mla_two_pools)
    refuse_cache(ErrorCode::invalid_argument,
                 fmt::format("kind {} is not key_value (0), mla_one_pool (1) or mla_two_pools (2)", uint32_t(s.kind)));
  // MLA: one shared kv head, rows [N, B, width] (nhd's with Hkv = 1), both parts written 16 bytes at a time.
  if (s.num_kv_heads != 1)
    refuse_cache(ErrorCode::invalid_argument,
                 fmt::format("num_kv_heads {} for an MLA cache: MLA has one shared kv head (Hkv = 1)", s.num_kv_heads));
  if (s.layout != KvLayout::nhd)
    refuse_cache(ErrorCode::invalid_argument,
                 fmt::format("layout {} for an MLA cache: its pools are rows [N, B, width], layout nhd",
                             kv_layout_name(s.layout)));
  if (s.rope_head_size == 0 || s.rope_head_size % x != 0)
    refuse_cache(ErrorCode::invalid_argument,
                 fmt::format("rope_head_size R = {} is not a positive multiple of x = {} for dtype {}",
                             s.rope_head_size, x, dtype_name(s.dtype)));
}

namespace {

uint64_t pool_block_bytes(const KvCacheShape& s, uint64_t width) {
  const uint64_t elements = checked_mul(checked_mul(s.num_kv_heads, width, "a block"), s.block_size, "a block");
  return checked_mul(elements, dtype_size(s.dtype), "a block");
}

// One block of the largest pool of a layer.
uint64_t block_bytes_of(const KvCacheShape& s) {
  if (s.kind == KvCacheKind::mla_one_pool) return pool_block_bytes(s, uint64_t(s.head_size) + s.rope_head_size);
  return pool_block_bytes(s, std::max(s.head_size, s.rope_head_size));
}

}  // namespace

namespace detail {

std::vector<uint64_t> layer_pool_block_bytes(const KvCacheShape& s) {
  switch (s.kind) {
    case KvCacheKind::mla_one_pool: return {pool_block_bytes(s, uint64_t(s.head_size) + s.rope_head_size)};
    case KvCacheKind::mla_two_pools: return {pool_block_bytes(s, s.head_size), pool_block_bytes(s, s.rope_head_size)};
    case KvCacheKind::key_value: break;
  }
  return {pool_block_bytes(s, s.head_size), pool_block_bytes(s, s.head_size)};
}

}  // namespace detail

uint64_t KvCache::bytes_per_block(const KvCacheShape& shape) {
  validate(shape);
  uint64_t layer = 0;
  for (uint64_t b : detail::layer_pool_block_bytes(shape)) {
    uint64_t sum = 0;
    if (__builtin_add_overflow(layer, b, &sum))  // two pools of 2^63 bytes each would wrap to 0
      refuse_cache(ErrorCode::invalid_argument, fmt::format("a block of a layer overflows 64 bits ({} + {})", layer, b));
    layer = sum;
  }
  return checked_mul(layer, shape.num_layers, "a block over every layer");
}

uint32_t KvCache::blocks_for_budget(const KvCacheShape& shape, uint64_t bytes) {
  const uint64_t blocks = bytes / bytes_per_block(shape);
  return uint32_t(std::min<uint64_t>(blocks, kMaxCacheBlocks));
}

KvCacheSizing KvCache::sizing(const KvCacheShape& shape, uint32_t num_blocks) {
  KvCacheSizing z;
  z.bytes_per_block = bytes_per_block(shape);
  z.block_bytes = block_bytes_of(shape);
  z.num_blocks = num_blocks;
  z.num_tokens = uint64_t(num_blocks) * shape.block_size;
  z.pool_bytes = checked_mul(z.block_bytes, num_blocks, "a pool");
  z.total_bytes = checked_mul(z.bytes_per_block, num_blocks, "the cache");
  return z;
}

uint32_t KvCache::max_blocks_per_pool(const KvCacheShape& shape, uint64_t max_storage_buffer_range) {
  validate(shape);
  return uint32_t(std::min<uint64_t>(max_storage_buffer_range / block_bytes_of(shape), kMaxCacheBlocks));
}

KvCacheSizing KvCache::plan(const DeviceInfo& device, const KvCacheShape& shape, const KvCacheOptions& o) {
  validate(shape);
  const int given = (o.num_blocks > 0) + (o.budget_bytes > 0) + (o.budget_fraction != 0.0);
  if (given == 0)
    refuse_cache(
        ErrorCode::invalid_argument,
        "no size given: set one of num_blocks, budget_bytes or budget_fraction (a cache of 0 blocks holds nothing)");
  if (given > 1)
    refuse_cache(ErrorCode::invalid_argument,
                 fmt::format("num_blocks {}, budget_bytes {} and budget_fraction {}: give only one", o.num_blocks,
                             o.budget_bytes, o.budget_fraction));
  const uint64_t per_block = bytes_per_block(shape);
  const uint64_t memory = device.device_local_bytes;

  uint32_t blocks = o.num_blocks;
  MemorySource fraction_of = MemorySource::none;
  uint64_t fraction_of_bytes = 0;
  if (o.budget_fraction != 0.0) {
    if (!(o.budget_fraction > 0.0 && o.budget_fraction <= 1.0))
      refuse_cache(ErrorCode::invalid_argument, fmt::format("budget_fraction {} is outside (0, 1]", o.budget_fraction));
    // Of what is free where the device says (VK_EXT_memory_budget), else of the heaps' size.
    fraction_of = device.memory_budget ? MemorySource::memory_budget : MemorySource::heap_size;
    fraction_of_bytes = device.memory_budget ? device.device_local_free_bytes : memory;
    const char* of = device.memory_budget ? "free device-local memory (VK_EXT_memory_budget)" : "device-local memory";
    if (fraction_of_bytes == 0)
      refuse_cache(device.memory_budget ? ErrorCode::out_of_memory : ErrorCode::unsupported,
                   fmt::format("budget_fraction {}: device {} reports no {}", o.budget_fraction, device.name, of));
    // All of it exactly when the fraction is 1 (double(2^64 - 1) rounds up past uint64_t); any
    // smaller fraction of it stays below 2^64.
    const uint64_t bytes = o.budget_fraction == 1.0
                               ? fraction_of_bytes
                               : uint64_t(std::floor(o.budget_fraction * double(fraction_of_bytes)));
    blocks = blocks_for_budget(shape, bytes);
    if (blocks == 0)
      refuse_cache(ErrorCode::invalid_argument,
                   fmt::format("budget_fraction {} of {} bytes of {} is {} bytes, which holds no block of {} bytes",
                               o.budget_fraction, fraction_of_bytes, of, bytes, per_block));
  } else if (o.budget_bytes > 0) {
    if (memory > 0 && o.budget_bytes > memory)
      refuse_cache(ErrorCode::out_of_memory,
                   fmt::format("budget of {} bytes ({}) is larger than the {} bytes ({}) of device-local memory of {}",
                               o.budget_bytes, mib(o.budget_bytes), memory, mib(memory), device.name));
    blocks = blocks_for_budget(shape, o.budget_bytes);
    if (blocks == 0)
      refuse_cache(ErrorCode::invalid_argument,
                   fmt::format("budget of {} bytes holds no block: one block costs {} bytes over {} layers",
                               o.budget_bytes, per_block, shape.num_layers));
  }
  if (blocks > kMaxCacheBlocks)
    refuse_cache(ErrorCode::invalid_argument,
                 fmt::format("num_blocks {} is above {} (block ids are int32)", blocks, kMaxCacheBlocks));

  KvCacheSizing z = sizing(shape, blocks);
  z.fraction_of = fraction_of;
  z.fraction_of_bytes = fraction_of_bytes;
  if (memory > 0 && z.total_bytes > memory)
    refuse_cache(ErrorCode::out_of_memory,
                 fmt::format("{} blocks need {} bytes ({}), more than the {} bytes ({}) of device-local memory of {}",
                             blocks, z.total_bytes, mib(z.total_bytes), memory, mib(memory), device.name));
  // MLA: the largest pool of a layer (z.block_bytes' pool); the MLA cache write reaches pools
  // past the range by address too.
  const bool mla = shape.kind != KvCacheKind::key_value;
  check_pool_reach(device, "num_blocks", mla ? "largest MLA pool" : "key or value pool", z);
  return z;
}

}  // namespace vkpaged
