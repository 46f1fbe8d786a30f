// SPDX-License-Identifier: Apache-2.0
#pragma once
// How the cache operations that index blocks (reshape_and_cache, gather, the MLA cache write)
// reach a layer's pools: bound as storage buffers when every pool view fits the device's
// maxStorageBufferRange, else all through buffer device addresses (their `_address` shader
// variants, shaders/common/cache_pools.glsl, common/mla_reshape_and_cache.glsl), as the decode
// reads such caches. Copies (copy_blocks, swap_blocks) need neither: vkCmdCopyBuffer has no
// range limit.
#include <array>
#include <cstdint>
#include <span>

#include "common/shader_interface.h"
#include "vk/context_impl.hpp"

namespace vkpaged::detail {

// One pool view of a call: the argument's name (for errors), the bytes the view must hold and
// the bytes of one of its blocks.
struct PoolView {
  const char* name = "";
  const BufferView* view = nullptr;
  uint64_t pool_bytes = 0;
  uint64_t block_bytes = 0;
};

constexpr size_t kMaxPools = 2;  // key and value, or ckv and kpe

// The access of up to kMaxPools pools, in the order given.
struct PoolReach {
  bool address = false;  // the `_address` variant: addresses below, the pools' bindings get the dummy
  std::array<BoundView, kMaxPools> bound;  // descriptor variant
  std::array<shader::uvec2, kMaxPools> addresses{};
};

// Checks each view (present, at least its pool_bytes, 16-byte aligned) and picks one access for
// them all. Refused before anything is recorded: a view past the range on a context without
// buffer device addresses (unsupported, naming the view, its size and the limit), or, in the
// address variant, blocks of 2^32 bytes or more (unsupported, naming the view).
PoolReach pool_reach(const ContextImpl& impl, std::span<const PoolView> pools);

struct CachePoolAccess {
  bool address = false;  // the `_address` variant: addresses below, the pools' bindings get the dummy
  BoundView key, value;  // descriptor variant
  shader::uvec2 key_address{}, value_address{};
};

// pool_reach of a key and a value pool of the same size (reshape_and_cache, gather).
CachePoolAccess cache_pool_access(const ContextImpl& impl, const BufferView& key_cache, const BufferView& value_cache,
                                  uint64_t pool_bytes, uint64_t block_bytes);

}  // namespace vkpaged::detail
