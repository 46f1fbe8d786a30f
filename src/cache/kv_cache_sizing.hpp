// SPDX-License-Identifier: Apache-2.0
#pragma once
// What KvCache's sizing (kv_cache_sizing.cpp, no Vulkan calls: the sanitizer build and the
// fuzzers compile it) shares with the constructor that allocates (kv_cache.cpp).
#include <cstdint>
#include <limits>
#include <string>

#include "vkpaged/error.hpp"
#include "vkpaged/kv_cache.hpp"

namespace vkpaged::detail {

constexpr uint32_t kMaxCacheBlocks = uint32_t(std::numeric_limits<int32_t>::max());  // block ids are int32

// Throws Error(code, "KvCache: " + message).
[[noreturn]] void refuse_cache(ErrorCode code, const std::string& message);

// "12.5 MiB"
std::string mib(uint64_t bytes);

// A pool past maxStorageBufferRange cannot be one descriptor: it is reached by device address,
// which the device must offer (the constructor passes whether its context enabled it). `what`
// names the size argument ("num_blocks", "num_host_blocks").
void check_pool_reach(const DeviceInfo& device, const char* what, const char* pool, const KvCacheSizing& z);

}  // namespace vkpaged::detail
