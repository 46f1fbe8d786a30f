// SPDX-License-Identifier: Apache-2.0
#include "cache/prefix_cache.hpp"

#include <algorithm>

namespace vkpaged::cache {

PrefixCache::PrefixCache(int32_t num_blocks) : entries_(static_cast<size_t>(num_blocks)) {}

std::optional<int32_t> PrefixCache::find(uint64_t hash, uint64_t parent_hash,
                                         std::span<const int32_t> tokens) const {
  const auto found = block_of_hash_.find(hash);
  if (found == block_of_hash_.end()) return std::nullopt;
  const Entry& entry = *entries_[found->second];
  // Equal hashes of different content (a collision) must not share a block.
  if (entry.parent_hash != parent_hash || !std::ranges::equal(entry.tokens, tokens))
    return std::nullopt;
  return found->second;
}

void PrefixCache::insert(int32_t block, uint64_t hash, uint64_t parent_hash,
                         std::span<const int32_t> tokens) {
  if (!block_of_hash_.try_emplace(hash, block).second) return;
  entries_[block] = Entry{hash, parent_hash, {tokens.begin(), tokens.end()}};
}

void PrefixCache::evict(int32_t block) {
  block_of_hash_.erase(entries_[block]->hash);
  entries_[block].reset();
}

}  // namespace vkpaged::cache
