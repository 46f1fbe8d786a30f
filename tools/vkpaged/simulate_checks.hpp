// SPDX-License-Identifier: Apache-2.0
#pragma once
// What the simulation checks besides decode outputs, on blocks read back from the GPU: a
// sequence swapped out and back in holds exactly the bytes it held before, and a
// copy-on-write copy changes nothing another holder of the block sees (the shared leading
// slots keep their bytes in the source, and the copy has them too).
#include <cstddef>
#include <cstdint>
#include <vector>

#include "vkpaged/kv_cache.hpp"

namespace vkpaged::cli {

// The bytes of `count` device blocks in every layer of a cache: layer by layer, the keys of
// each block, then their values.
struct SimBlocks {
  KvCacheShape shape;
  uint64_t block_bytes = 0;  // one block of one pool
  uint32_t count = 0;
  std::vector<std::byte> bytes;

  SimBlocks() = default;
  SimBlocks(const KvCacheShape& shape, uint64_t block_bytes, uint32_t count);
  std::byte* block(uint32_t layer, bool values, uint32_t i);
  const std::byte* block(uint32_t layer, bool values, uint32_t i) const;
};

// Whether two blocks of one pool hold the same bytes in their slots [0, slots): every element
// (head, dim, slot) of those slots, wherever the cache's layout (shape.layout) puts it.
bool same_leading_slots(const KvCacheShape& shape, bool values, const std::byte* a, const std::byte* b,
                        uint32_t slots);

// Block i of `a` against block j of `b`, keys and values of every layer, in their slots
// [0, slots) (slots = block size: the whole block).
bool same_block_slots(const SimBlocks& a, uint32_t i, const SimBlocks& b, uint32_t j, uint32_t slots);

}  // namespace vkpaged::cli
