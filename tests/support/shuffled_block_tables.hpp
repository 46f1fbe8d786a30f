// SPDX-License-Identifier: Apache-2.0
#pragma once
// Block tables over a shuffled cache, for tests that fill a cache and read it back through them.
#include <algorithm>
#include <cstdint>
#include <numeric>
#include <random>
#include <vector>

#include "vkpaged/tensor.hpp"

namespace vkpaged::test {

// Block tables [S, M] (i32) over `num_blocks` blocks shuffled by `seed`: request s's pages (of
// lens[s] tokens, `block_size` a page) take the next shuffled ids; unused entries name valid blocks.
inline HostTensor shuffled_block_tables(const std::vector<int32_t>& lens, uint32_t block_size, uint32_t M,
                                        uint32_t num_blocks, uint32_t seed) {
  std::vector<int32_t> ids(num_blocks);
  std::iota(ids.begin(), ids.end(), 0);
  std::shuffle(ids.begin(), ids.end(), std::mt19937(seed));
  HostTensor t(DType::i32, Shape{int64_t(lens.size()), M});
  size_t next = 0;
  for (size_t s = 0; s < lens.size(); ++s)
    for (uint32_t j = 0; j < M; ++j)
      t.as<int32_t>()[s * M + j] = j * block_size < uint32_t(lens[s]) ? ids[next++ % num_blocks] : ids[0];
  return t;
}

}  // namespace vkpaged::test
