// SPDX-License-Identifier: Apache-2.0
#pragma once
// What KvCache's sizing (kv_cache_sizing.cpp, no Vulkan calls: the sanitizer build and the
// fuzzers compile it) shares with the constructor that allocates (kv_cache.cpp).
#include <cstdint>
#include <limits>
#include <string>
#include <vector>

#include "vkpaged/error.hpp"
#include "vkpaged/kv_cache.hpp"

namespace vkpaged::detail {

constexpr uint32_t kMaxCacheBlocks = uint32_t(std::numeric_limits<int32_t>::max());  // block ids are int32

// Throws Error(code, "KvCache: " + message).
[[noreturn]] void refuse_cache(ErrorCode code, const std::string& message);

// "12.5 MiB"
std::string mib(uint64_t bytes);

// A pool is one allocation: past maxMemoryAllocationSize it is refused (out_of_memory, naming
// `what` and `pool` as check_pool_reach does), on every device alike.
void check_pool_allocation(const DeviceInfo& device, const char* what, const char* pool, const KvCacheSizing& z);

// A pool past maxStorageBufferRange cannot be one descriptor: it is reached by device address,
// which the device must offer (the constructor passes whether its context enabled it); the
// key and value pools and the MLA pools alike (z.pool_bytes: the largest MLA pool). `what`
// names the size argument ("num_blocks", "num_host_blocks"), `pool` the pool. Checks the
// allocation (check_pool_allocation) first.
void check_pool_reach(const DeviceInfo& device, const char* what, const char* pool, const KvCacheSizing& z);

// Bytes of one block of each pool of a layer, in allocation order: key and value, the one MLA
// pool, or ckv and kpe. The shape is validated.
std::vector<uint64_t> layer_pool_block_bytes(const KvCacheShape& shape);

}  // namespace vkpaged::detail
