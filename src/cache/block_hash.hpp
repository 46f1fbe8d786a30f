// SPDX-License-Identifier: Apache-2.0
#pragma once
// Chain hash of full blocks for prefix caching: a block's hash covers its tokens and, through
// the parent hash, every token before it, so equal hashes mean equal prefixes (up to
// collisions, which the prefix cache rules out by comparing tokens).
#include <cstdint>
#include <span>

namespace vkpaged::cache {

// Parent hash of a sequence's first block.
inline constexpr uint64_t kRootBlockHash = 0x6a09e667f3bcc908ull;

uint64_t hash_block(uint64_t parent_hash, uint64_t salt, std::span<const int32_t> tokens);

}  // namespace vkpaged::cache
