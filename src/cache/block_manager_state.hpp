// SPDX-License-Identifier: Apache-2.0
#pragma once
// State of a BlockManager and the bookkeeping every operation shares: finding sequences,
// taking and releasing device blocks in step with the prefix cache, prefix lookups.
#include <cstdint>
#include <span>
#include <string_view>
#include <unordered_map>
#include <vector>

#include "cache/prefix_cache.hpp"
#include "vkpaged/block_manager.hpp"

namespace vkpaged {

namespace cache {

struct Sequence {
  std::vector<int32_t> blocks;  // device ids, or host ids while swapped out
  std::vector<int32_t> tokens;
  std::vector<uint64_t> full_block_hashes;  // chain hash of each full block (prefix caching)
  bool swapped = false;
};

// The leading full blocks of a prompt found in the prefix cache.
struct PrefixMatch {
  std::vector<uint64_t> hashes;  // of every full block of the prompt
  std::vector<int32_t> hit_blocks;
  int32_t cached_hits = 0;  // hits on unreferenced blocks: they leave the free list too
};

}  // namespace cache

struct BlockManager::Impl {
  Impl(int32_t num_blocks, int32_t block_size, const BlockManagerOptions& options);

  cache::Sequence& find(std::string_view operation, uint64_t seq_id);
  const cache::Sequence& find(std::string_view operation, uint64_t seq_id) const;
  cache::Sequence& find_on_device(std::string_view operation, uint64_t seq_id);
  const cache::Sequence& find_on_device(std::string_view operation, uint64_t seq_id) const;
  int64_t blocks_for(int64_t num_tokens) const {
    return (num_tokens + block_size - 1) / block_size;
  }
  AdmissionStatus admission(int64_t blocks_held, int64_t blocks_taken) const;
  // Checks a swap group (known, listed once, on the expected side); counts its distinct blocks.
  int64_t blocks_to_swap(std::string_view operation, std::span<const uint64_t> seq_ids,
                         bool swapped) const;
  // Moves a swap group's tables to the host (swap out) or back to the device (swap in).
  std::vector<BlockCopy> swap(std::string_view operation, std::span<const uint64_t> seq_ids, bool to_host);

  cache::PrefixMatch match_prefix(std::span<const int32_t> prompt) const;
  void acquire_cached(int32_t block);
  int32_t take_device_block();  // evicts the block from the prefix cache if it was there
  void release_device_block(int32_t block);
  void release_blocks(const cache::Sequence& seq);
  void cache_full_block(const cache::Sequence& seq, size_t index);
  uint64_t parent_hash(const cache::Sequence& seq, size_t index) const;

  int32_t block_size;
  int32_t watermark_blocks;
  bool prefix_caching;
  uint64_t hash_salt;
  BlockAllocator device;
  BlockAllocator host;
  cache::PrefixCache prefix_cache;
  int32_t num_cached = 0;  // prefix-cached blocks no sequence holds
  PrefixCacheStats stats;
  std::unordered_map<uint64_t, cache::Sequence> sequences;
};

}  // namespace vkpaged
