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

BucketPageTables::BucketPageTables(Context& ctx, uint32_t requests, const BucketLimits& limits,
                                   size_t tree_mask_bytes)
    : S_(requests), limits_(limits), tree_mask_bytes_(tree_mask_bytes) {
  auto host = [&](size_t bytes) { return ctx.create_buffer(bytes, MemoryKind::host_visible); };
  tables_ = host(size_t(S_) * limits.max_blocks_per_seq * 4);
  lens_ = host(size_t(S_) * 4);
  starts_ = host(size_t(S_ + 1) * 4);
  tree_mask_ = host(std::max<size_t>(4, (tree_mask_bytes + 3) / 4 * 4));
  status_ = host(4);
  std::memset(status_.mapped(), 0, 4);
}

void BucketPageTables::write(const BucketStep& step) {
  const uint32_t n = uint32_t(step.new_tokens.size()), M = limits_.max_blocks_per_seq;
  auto* t = static_cast<int32_t*>(tables_.mapped());
  auto* l = static_cast<int32_t*>(lens_.mapped());
  auto* st = static_cast<int32_t*>(starts_.mapped());
  st[0] = 0;
  for (uint32_t r = 0; r < S_; ++r) {
    l[r] = r < n ? int32_t(step.lens[r]) : 0;
    st[r + 1] = st[r] + (r < n ? int32_t(step.new_tokens[r]) : 0);
    for (uint32_t b = 0; b < M; ++b) t[r * M + b] = r < n ? step.tables[r * M + b] : 0;
  }
  if (!step.tree_mask.empty()) std::memcpy(tree_mask_.mapped(), step.tree_mask.data(), step.tree_mask.size());
}

TensorView BucketPageTables::block_tables() const {
  return tables_.tensor(DType::i32, Shape{S_, limits_.max_blocks_per_seq});
}
TensorView BucketPageTables::context_lens() const { return lens_.tensor(DType::i32, Shape{S_}); }
TensorView BucketPageTables::query_starts() const { return starts_.tensor(DType::i32, Shape{S_ + 1}); }

TensorView BucketPageTables::tree_mask() const {
  TensorView v = tree_mask_.tensor(DType::u8, Shape{int64_t(tree_mask_bytes_)});
  v.memory.size = (v.memory.size + 3) / 4 * 4;  // whole words
  return v;
}

uint32_t BucketPageTables::status_flags() const {
  uint32_t flags = 0;
  std::memcpy(&flags, status_.mapped(), 4);
  return flags;
}

}  // namespace vkpaged::test
