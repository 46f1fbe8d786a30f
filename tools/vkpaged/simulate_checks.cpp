// SPDX-License-Identifier: Apache-2.0
#include "simulate_checks.hpp"

#include <cstring>

namespace vkpaged::cli {

SimBlocks::SimBlocks(const KvCacheShape& s, uint64_t bytes_per_block, uint32_t n)
    : shape(s), block_bytes(bytes_per_block), count(n), bytes(size_t(2) * s.num_layers * n * bytes_per_block) {}

std::byte* SimBlocks::block(uint32_t layer, bool values, uint32_t i) {
  return bytes.data() + ((size_t(layer) * 2 + (values ? 1 : 0)) * count + i) * block_bytes;
}

const std::byte* SimBlocks::block(uint32_t layer, bool values, uint32_t i) const {
  return bytes.data() + ((size_t(layer) * 2 + (values ? 1 : 0)) * count + i) * block_bytes;
}

bool same_leading_slots(const KvCacheShape& s, bool values, const std::byte* a, const std::byte* b, uint32_t slots) {
  const size_t element = dtype_size(s.dtype);
  const KvBlockGeometry g{s.num_kv_heads, s.head_size, s.block_size, cache_pack_factor(s.dtype)};
  for (uint32_t h = 0; h < s.num_kv_heads; ++h)
    for (uint32_t d = 0; d < s.head_size; ++d)
      for (uint32_t o = 0; o < slots; ++o) {
        const uint64_t i = values ? g.value_offset(s.layout, h, d, o) : g.key_offset(s.layout, h, d, o);
        if (std::memcmp(a + i * element, b + i * element, element) != 0) return false;
      }
  return true;
}

bool same_block_slots(const SimBlocks& a, uint32_t i, const SimBlocks& b, uint32_t j, uint32_t slots) {
  for (uint32_t l = 0; l < a.shape.num_layers; ++l)
    for (const bool values : {false, true})
      if (!same_leading_slots(a.shape, values, a.block(l, values, i), b.block(l, values, j), slots)) return false;
  return true;
}

}  // namespace vkpaged::cli
