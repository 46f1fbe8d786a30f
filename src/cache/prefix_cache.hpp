// SPDX-License-Identifier: Apache-2.0
#pragma once
// Index of full blocks by chain hash. It holds no reference counts: the block manager keeps
// cached blocks alive (in use, or free at the back of the free list) and evicts an entry when
// the allocator hands its block out again.
#include <cstdint>
#include <optional>
#include <span>
#include <unordered_map>
#include <vector>

namespace vkpaged::cache {

class PrefixCache {
 public:
  explicit PrefixCache(int32_t num_blocks);

  // The block recorded for this hash, if its parent hash and tokens are the same too.
  std::optional<int32_t> find(uint64_t hash, uint64_t parent_hash,
                              std::span<const int32_t> tokens) const;
  // Records a full block. A hash that is already recorded keeps its block: the new one is
  // a duplicate and is simply not cached.
  void insert(int32_t block, uint64_t hash, uint64_t parent_hash, std::span<const int32_t> tokens);
  bool contains(int32_t block) const { return entries_[block].has_value(); }
  void evict(int32_t block);
  int32_t size() const { return static_cast<int32_t>(block_of_hash_.size()); }

 private:
  struct Entry {
    uint64_t hash = 0;
    uint64_t parent_hash = 0;
    std::vector<int32_t> tokens;
  };
  std::unordered_map<uint64_t, int32_t> block_of_hash_;
  std::vector<std::optional<Entry>> entries_;  // indexed by block
};

}  // namespace vkpaged::cache
