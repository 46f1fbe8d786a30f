// SPDX-License-Identifier: Apache-2.0
// prefix_block_hash (vkpaged/block_manager.hpp): XXH3 over a fixed little-endian serialization,
// so that a block's key is the same in every process, on every machine and in every version.
#include <array>
#include <cstddef>
#include <vector>

#include "vkpaged/block_manager.hpp"

// xxHash's functions compiled into this file: no link dependency for vkpaged or its users.
#define XXH_INLINE_ALL
#include <xxhash.h>

namespace vkpaged {

namespace {

void append_le(std::vector<unsigned char>& bytes, uint64_t value, size_t width) {
  for (size_t i = 0; i < width; ++i) bytes.push_back(static_cast<unsigned char>(value >> (8 * i)));
}

}  // namespace

uint64_t prefix_block_hash(uint64_t parent_hash, Span<const int32_t> tokens, uint64_t salt) {
  std::vector<unsigned char> bytes;
  bytes.reserve(16 + 4 * tokens.size());
  append_le(bytes, parent_hash, 8);
  for (const int32_t token : tokens) append_le(bytes, static_cast<uint32_t>(token), 4);
  append_le(bytes, salt, 8);
  return XXH3_64bits(bytes.data(), bytes.size());
}

}  // namespace vkpaged
