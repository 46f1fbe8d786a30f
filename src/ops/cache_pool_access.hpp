// SPDX-License-Identifier: Apache-2.0
#pragma once
// How reshape_and_cache and gather reach one layer's key and value pools: bound as storage
// buffers when both views fit the device's maxStorageBufferRange, else through buffer device
// addresses (their `_address` shader variants, shaders/common/cache_pools.glsl), as the decode
// reads such caches. Copies (copy_blocks, swap_blocks) need neither: vkCmdCopyBuffer has no
// range limit.
#include <cstdint>

#include "common/shader_interface.h"
#include "vk/context_impl.hpp"

namespace vkpaged::detail {

struct CachePoolAccess {
  bool address = false;  // the `_address` variant: addresses below, the pools' bindings get the dummy
  BoundView key, value;  // descriptor variant
  shader::uvec2 key_address{}, value_address{};
};

// Checks both pool views (present, at least `pool_bytes`, 16-byte aligned) and picks the
// access. Refused before anything is recorded: a view past the range on a context without
// buffer device addresses, or blocks of 2^32 bytes or more in the address variant
// (unsupported, naming the view, its size and the limit).
CachePoolAccess cache_pool_access(const ContextImpl& impl, const BufferView& key_cache, const BufferView& value_cache,
                                  uint64_t pool_bytes, uint64_t block_bytes);

}  // namespace vkpaged::detail
