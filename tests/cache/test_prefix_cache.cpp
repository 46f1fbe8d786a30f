// SPDX-License-Identifier: Apache-2.0
#include <gtest/gtest.h>

#include <numeric>
#include <vector>

#include "cache/prefix_cache.hpp"
#include "vkpaged/block_manager.hpp"

namespace vkpaged {
namespace {

std::vector<int32_t> iota_tokens(int32_t count, int32_t first = 100) {
  std::vector<int32_t> tokens(static_cast<size_t>(count));
  std::iota(tokens.begin(), tokens.end(), first);
  return tokens;
}

TEST(PrefixCaching, SecondSequenceReusesTheFullPromptBlocks) {
  BlockManager manager(8, 4, {.watermark = 0.0});
  EXPECT_EQ(manager.add_sequence(1, iota_tokens(10)), 0);
  EXPECT_EQ(manager.add_sequence(2, iota_tokens(10)), 8);
  EXPECT_EQ(manager.block_table(2), (std::vector<int32_t>{0, 1, 3}));
  EXPECT_EQ(manager.device_allocator().ref_count(0), 2);
  EXPECT_EQ(manager.device_allocator().ref_count(2), 1);  // partial blocks are never shared
  const PrefixCacheStats stats = manager.prefix_cache_stats();
  EXPECT_EQ(stats.queries, 2u);
  EXPECT_EQ(stats.queried_blocks, 4u);
  EXPECT_EQ(stats.hit_blocks, 2u);
  EXPECT_EQ(stats.queried_tokens, 20u);
  EXPECT_EQ(stats.hit_tokens, 8u);
}

TEST(PrefixCaching, ReuseStopsAtTheFirstDifferentBlock) {
  BlockManager manager(8, 2, {.watermark = 0.0});
  manager.add_sequence(1, std::vector<int32_t>{1, 2, 3, 4, 5, 6});
  EXPECT_EQ(manager.add_sequence(2, std::vector<int32_t>{1, 2, 9, 9, 5, 6}), 2);
  EXPECT_EQ(manager.block_table(2), (std::vector<int32_t>{0, 3, 4}));
}

TEST(PrefixCaching, BlocksFilledByAppendsAreCached) {
  BlockManager manager(8, 4, {.watermark = 0.0});
  manager.add_sequence(1, iota_tokens(3));
  manager.append_token(1, 103);
  EXPECT_EQ(manager.add_sequence(2, iota_tokens(5)), 4);
  EXPECT_EQ(manager.block_table(2)[0], manager.block_table(1)[0]);
}

TEST(PrefixCaching, FreedBlocksStayCachedUntilReused) {
  BlockManager manager(8, 4, {.watermark = 0.0});
  manager.add_sequence(1, iota_tokens(10));
  manager.free_sequence(1);
  EXPECT_EQ(manager.num_cached_blocks(), 2);
  EXPECT_EQ(manager.num_free_blocks(), 6);
  EXPECT_EQ(manager.add_sequence(2, iota_tokens(9)), 8);
  EXPECT_EQ(manager.block_table(2), (std::vector<int32_t>{0, 1, 2}));
  EXPECT_EQ(manager.num_cached_blocks(), 0);
}

TEST(PrefixCaching, EvictsOnlyWhenNoPlainBlockIsLeftLeastRecentlyUsedFirst) {
  BlockManager manager(4, 2, {.watermark = 0.0});
  manager.add_sequence(1, std::vector<int32_t>{1, 2, 3, 4});  // blocks 0, 1
  manager.free_sequence(1);
  manager.add_sequence(2, std::vector<int32_t>{5, 6, 7, 8});  // takes the plain blocks 2, 3
  EXPECT_EQ(manager.block_table(2), (std::vector<int32_t>{2, 3}));
  manager.free_sequence(2);
  EXPECT_EQ(manager.num_cached_blocks(), 4);
  // Sequence 1 was freed longest ago, its tail block first: block 1 goes.
  manager.add_sequence(3, std::vector<int32_t>{9});
  EXPECT_EQ(manager.block_table(3), (std::vector<int32_t>{1}));
  EXPECT_EQ(manager.num_cached_blocks(), 3);
  EXPECT_EQ(manager.add_sequence(4, std::vector<int32_t>{1, 2, 3, 4}), 2);
  EXPECT_EQ(manager.block_table(4)[0], 0);
}

TEST(PrefixCaching, CanAllocateCountsHitsOnBlocksInUseAsFree) {
  BlockManager manager(3, 2, {.watermark = 0.0});
  manager.add_sequence(1, iota_tokens(4));
  EXPECT_EQ(manager.can_allocate(iota_tokens(6)), AdmissionStatus::ok);
  EXPECT_EQ(manager.can_allocate(iota_tokens(6, 500)), AdmissionStatus::later);
}

TEST(PrefixCaching, DisabledNeverShares) {
  BlockManager manager(8, 4, {.watermark = 0.0, .enable_prefix_caching = false});
  manager.add_sequence(1, iota_tokens(8));
  EXPECT_EQ(manager.add_sequence(2, iota_tokens(8)), 0);
  EXPECT_EQ(manager.block_table(2), (std::vector<int32_t>{2, 3}));
  manager.free_sequence(1);
  EXPECT_EQ(manager.num_cached_blocks(), 0);
  EXPECT_EQ(manager.prefix_cache_stats().queries, 0u);
}

TEST(PrefixCaching, BlockHashDependsOnParentSaltAndEveryToken) {
  const std::vector<int32_t> tokens{1, 2, 3, 4, 5};
  const uint64_t base = prefix_block_hash(kRootBlockHash, tokens, 0);
  EXPECT_EQ(base, prefix_block_hash(kRootBlockHash, tokens, 0));
  EXPECT_NE(base, prefix_block_hash(kRootBlockHash + 1, tokens, 0));
  EXPECT_NE(base, prefix_block_hash(kRootBlockHash, tokens, 1));
  for (size_t i = 0; i < tokens.size(); ++i) {
    std::vector<int32_t> changed = tokens;
    changed[i] ^= 1 << 31;
    EXPECT_NE(base, prefix_block_hash(kRootBlockHash, changed, 0)) << "token " << i;
  }
  EXPECT_NE(base, prefix_block_hash(kRootBlockHash, Span<const int32_t>(tokens).first(4), 0));
}

// The keys are stable across processes and versions (block_manager.hpp): these values were
// computed once, independently of vkpaged, by writing the documented bytes with Python's
// struct.pack ('<Q' parent, '<i' per token, '<Q' salt) and hashing the file with xxhsum 0.8.1
// (`xxhsum -H3 file`, XXH3 64 bits); the second block's parent is the first's key.
TEST(PrefixCaching, BlockHashesAreXxh3OfTheDocumentedBytes) {
  const std::vector<int32_t> first{1, 2, 3, 4};
  const std::vector<int32_t> second{5, 6, 7, 8};
  EXPECT_EQ(prefix_block_hash(kRootBlockHash, first, 0), 0x6377a636f3177d17ull);
  EXPECT_EQ(prefix_block_hash(0x6377a636f3177d17ull, second, 0), 0xa0b5233453973823ull);
  const std::vector<int32_t> extremes{-1, 2147483647, 0, -2147483647 - 1};
  EXPECT_EQ(prefix_block_hash(kRootBlockHash, extremes, 0x0123456789abcdefull), 0x7d54e7cb81bc622aull);
  std::vector<int32_t> block16(16);
  for (int32_t i = 0; i < 16; ++i) block16[size_t(i)] = i;
  EXPECT_EQ(prefix_block_hash(kRootBlockHash, block16), 0x077511488f8fa52cull) << "salt 0 by default";
}

TEST(PrefixCache, HashCollisionIsAMiss) {
  cache::PrefixCache prefix_cache(4);
  const std::vector<int32_t> tokens{1, 2};
  prefix_cache.insert(3, 42, 7, tokens);
  EXPECT_EQ(prefix_cache.find(42, 7, tokens), 3);
  EXPECT_EQ(prefix_cache.find(42, 7, std::vector<int32_t>{1, 3}), std::nullopt);
  EXPECT_EQ(prefix_cache.find(42, 8, tokens), std::nullopt);
}

TEST(PrefixCache, DuplicateContentKeepsTheFirstBlock) {
  cache::PrefixCache prefix_cache(4);
  const std::vector<int32_t> tokens{1, 2};
  prefix_cache.insert(0, 42, 7, tokens);
  prefix_cache.insert(1, 42, 7, tokens);
  EXPECT_EQ(prefix_cache.find(42, 7, tokens), 0);
  EXPECT_FALSE(prefix_cache.contains(1));
  prefix_cache.evict(0);
  EXPECT_EQ(prefix_cache.find(42, 7, tokens), std::nullopt);
  EXPECT_EQ(prefix_cache.size(), 0);
}

}  // namespace
}  // namespace vkpaged
