// SPDX-License-Identifier: Apache-2.0
#include "cache/block_hash.hpp"

namespace vkpaged::cache {
namespace {

// SplitMix64's finalizer: a bijection whose every output bit depends on every input bit.
uint64_t mix(uint64_t x) {
  x ^= x >> 30;
  x *= 0xbf58476d1ce4e5b9ull;
  x ^= x >> 27;
  x *= 0x94d049bb133111ebull;
  x ^= x >> 31;
  return x;
}

}  // namespace

uint64_t hash_block(uint64_t parent_hash, uint64_t salt, std::span<const int32_t> tokens) {
  uint64_t hash = mix(parent_hash);
  hash = mix(hash ^ salt);
  hash = mix(hash ^ tokens.size());
  // Two tokens per round: one 64-bit word, half the multiplications.
  size_t i = 0;
  for (; i + 1 < tokens.size(); i += 2) {
    const uint64_t word =
        static_cast<uint32_t>(tokens[i]) | (uint64_t{static_cast<uint32_t>(tokens[i + 1])} << 32);
    hash = mix(hash ^ word);
  }
  if (i < tokens.size()) hash = mix(hash ^ static_cast<uint32_t>(tokens[i]));
  return hash;
}

}  // namespace vkpaged::cache
