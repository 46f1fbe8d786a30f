// SPDX-License-Identifier: Apache-2.0
#pragma once
// KvCache shapes and device descriptions for the KvCache tests (sizing without a device, and on it).
#include <cstdint>

#include "vkpaged/context.hpp"
#include "vkpaged/kv_cache.hpp"

namespace vkpaged::test {

inline constexpr uint64_t kMiB = 1ull << 20;
inline constexpr uint64_t kGiB = 1ull << 30;

inline KvCacheShape shape_of(uint32_t layers, uint32_t kv_heads, uint32_t head_size, uint32_t block_size,
                             DType dtype) {
  KvCacheShape s;
  s.num_layers = layers;
  s.num_kv_heads = kv_heads;
  s.head_size = head_size;
  s.block_size = block_size;
  s.dtype = dtype;
  return s;
}

// A device as lavapipe reports it (128 MiB storage-buffer range), with `memory` bytes.
inline DeviceInfo fake_device(uint64_t memory, uint64_t range = 128 * kMiB) {
  DeviceInfo d;
  d.name = "test device";
  d.device_local_bytes = memory;
  d.max_storage_buffer_range = range;
  return d;
}

}  // namespace vkpaged::test
