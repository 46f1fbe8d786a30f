// SPDX-License-Identifier: Apache-2.0
#include "support/bucket_step.hpp"

#include <algorithm>

namespace vkpaged::test {

uint32_t BucketStep::tokens() const {
  uint32_t t = 0;
  for (uint32_t q : new_tokens) t += q;
  return t;
}

BucketStep random_bucket_step(std::mt19937& rng, const BucketLimits& limits, uint32_t requests, uint32_t tokens,
                              uint32_t max_query, bool tree_mask) {
  const uint32_t B = limits.block_size;
  const uint32_t edges[] = {1, B - 1, B, B + 1};
  BucketStep s;
  uint32_t left = tokens;
  for (uint32_t r = 0; r < requests; ++r) {
    const uint32_t most = std::min(max_query, left - (requests - r - 1));
    const uint32_t q = r + 1 == requests ? most : std::uniform_int_distribution<uint32_t>(1, most)(rng);
    left -= q;
    s.new_tokens.push_back(q);
    uint32_t len = std::uniform_int_distribution<uint32_t>(q, limits.max_context)(rng);
    if (r == 0) len = limits.max_context;
    else if (r <= 4) len = std::max(q, edges[r - 1]);
    s.lens.push_back(len);
    for (uint32_t b = 0; b < limits.max_blocks_per_seq; ++b)
      s.tables.push_back(int32_t(std::uniform_int_distribution<uint32_t>(0, limits.num_blocks - 1)(rng)));
    for (uint32_t j = 0; tree_mask && j < q; ++j)
      for (uint32_t k = 0; k < q; ++k) s.tree_mask.push_back(k == j || (k < j && rng() % 2 == 0) ? 1 : 0);
  }
  return s;
}

void write_bucket_step(const BucketStep& step, uint32_t S, const BucketLimits& limits, const BucketArrays& arrays) {
  const uint32_t n = uint32_t(step.new_tokens.size()), M = limits.max_blocks_per_seq;
  auto* t = static_cast<int32_t*>(arrays.tables->mapped());
  auto* l = static_cast<int32_t*>(arrays.lens->mapped());
  auto* st = static_cast<int32_t*>(arrays.starts->mapped());
  st[0] = 0;
  for (uint32_t r = 0; r < S; ++r) {
    l[r] = r < n ? int32_t(step.lens[r]) : 0;
    st[r + 1] = st[r] + (r < n ? int32_t(step.new_tokens[r]) : 0);
    for (uint32_t b = 0; b < M; ++b) t[r * M + b] = r < n ? step.tables[r * M + b] : 0;
  }
  if (!step.tree_mask.empty()) std::memcpy(arrays.tree_mask->mapped(), step.tree_mask.data(), step.tree_mask.size());
}

}  // namespace vkpaged::test
