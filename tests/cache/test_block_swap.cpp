// SPDX-License-Identifier: Apache-2.0
#include <gtest/gtest.h>

#include <numeric>
#include <vector>

#include "vkpaged/block_manager.hpp"
#include "vkpaged/error.hpp"

namespace vkpaged {
namespace {

std::vector<int32_t> iota_tokens(int32_t count, int32_t first = 100) {
  std::vector<int32_t> tokens(static_cast<size_t>(count));
  std::iota(tokens.begin(), tokens.end(), first);
  return tokens;
}

const BlockManagerOptions kSwapSpace{
    .watermark = 0.0, .enable_prefix_caching = false, .num_host_blocks = 4};

TEST(BlockSwap, SwapOutAndInMovesTheBlocks) {
  BlockManager manager(8, 4, kSwapSpace);
  manager.add_sequence(1, iota_tokens(6));
  EXPECT_TRUE(manager.can_swap_out(std::vector<uint64_t>{1}));
  EXPECT_EQ(manager.swap_out(1), (std::vector<BlockCopy>{{0, 0}, {1, 1}}));
  EXPECT_TRUE(manager.is_swapped(1));
  EXPECT_EQ(manager.host_block_table(1), (std::vector<int32_t>{0, 1}));
  EXPECT_EQ(manager.num_free_blocks(), 8);
  EXPECT_EQ(manager.usage().host_in_use, 2);

  manager.add_sequence(2, iota_tokens(1));  // takes device block 0, so swap-in lands elsewhere
  EXPECT_EQ(manager.can_swap_in(std::vector<uint64_t>{1}), AdmissionStatus::ok);
  EXPECT_EQ(manager.swap_in(1), (std::vector<BlockCopy>{{0, 1}, {1, 2}}));
  EXPECT_FALSE(manager.is_swapped(1));
  EXPECT_EQ(manager.block_table(1), (std::vector<int32_t>{1, 2}));
  EXPECT_EQ(manager.context_len(1), 6);
  EXPECT_EQ(manager.usage().host_in_use, 0);
  EXPECT_EQ(manager.append_token(1, 0).slot, 2 * 4 + 2);
}

TEST(BlockSwap, BlocksSharedWithinAGroupAreCopiedOnce) {
  BlockManager manager(8, 4, kSwapSpace);
  manager.add_sequence(1, iota_tokens(6));
  manager.fork(1, 2);
  manager.append_token(2, 0);  // copy-on-write: 2 owns block 2, shares block 0
  const std::vector<uint64_t> group{1, 2};
  EXPECT_EQ(manager.swap_out(group), (std::vector<BlockCopy>{{0, 0}, {1, 1}, {2, 2}}));
  EXPECT_EQ(manager.host_allocator().ref_count(0), 2);
  EXPECT_EQ(manager.host_block_table(2), (std::vector<int32_t>{0, 2}));

  const std::vector<BlockCopy> copies = manager.swap_in(group);
  ASSERT_EQ(copies.size(), 3u);
  const std::vector<int32_t> table_1 = manager.block_table(1);
  const std::vector<int32_t> table_2 = manager.block_table(2);
  EXPECT_EQ(table_1[0], table_2[0]);
  EXPECT_EQ(manager.device_allocator().ref_count(table_1[0]), 2);
  EXPECT_EQ(copies[0], (BlockCopy{0, table_1[0]}));
  EXPECT_EQ(copies[1], (BlockCopy{1, table_1[1]}));
  EXPECT_EQ(copies[2], (BlockCopy{2, table_2[1]}));
  EXPECT_EQ(manager.host_allocator().num_free(), 4);
}

TEST(BlockSwap, ABlockSwappedOutAloneStaysWithItsOtherHolder) {
  BlockManager manager(8, 4, kSwapSpace);
  manager.add_sequence(1, iota_tokens(6));
  manager.fork(1, 2);
  EXPECT_EQ(manager.swap_out(1), (std::vector<BlockCopy>{{0, 0}, {1, 1}}));
  EXPECT_EQ(manager.device_allocator().ref_count(1), 1);
  EXPECT_FALSE(manager.append_token(2, 0).copy.has_value());  // 2 is now the only holder
}

TEST(BlockSwap, ForkOfASwappedOutSequenceSharesItsHostBlocks) {
  BlockManager manager(8, 4, kSwapSpace);
  manager.add_sequence(1, iota_tokens(6));
  manager.swap_out(1);
  manager.fork(1, 2);
  EXPECT_TRUE(manager.is_swapped(2));
  EXPECT_EQ(manager.host_allocator().ref_count(1), 2);
  EXPECT_EQ(manager.swap_in(2).size(), 2u);
  EXPECT_EQ(manager.host_allocator().ref_count(1), 1);
}

TEST(BlockSwap, WithoutSwapSpaceOnlyEmptySequencesSwap) {
  BlockManager manager(8, 4, {.watermark = 0.0});
  manager.add_sequence(1, iota_tokens(1));
  manager.add_sequence(2, {});
  EXPECT_FALSE(manager.can_swap_out(std::vector<uint64_t>{1}));
  try {
    manager.swap_out(1);
    FAIL() << "swap_out without swap space succeeded";
  } catch (const Error& error) {
    EXPECT_EQ(error.code(), ErrorCode::out_of_memory);
    EXPECT_STREQ(error.what(), "swap_out: the sequences need 1 host blocks, 0 are free");
  }
  EXPECT_FALSE(manager.is_swapped(1));
  EXPECT_TRUE(manager.swap_out(2).empty());
  EXPECT_TRUE(manager.is_swapped(2));
}

TEST(BlockSwap, CanSwapInKeepsTheWatermarkFree) {
  BlockManager manager(10, 1,
                       {.watermark = 0.2, .enable_prefix_caching = false, .num_host_blocks = 10});
  manager.add_sequence(1, iota_tokens(5));
  manager.swap_out(1);
  manager.add_sequence(2, iota_tokens(4));
  const std::vector<uint64_t> ids{1};
  EXPECT_EQ(manager.can_swap_in(ids), AdmissionStatus::later);
  manager.free_sequence(2);
  EXPECT_EQ(manager.can_swap_in(ids), AdmissionStatus::ok);
}

TEST(BlockSwap, DeviceBlocksOfASwappedOutSequenceStayPrefixCached) {
  BlockManager manager(8, 4, {.watermark = 0.0, .num_host_blocks = 4});
  manager.add_sequence(1, iota_tokens(8));
  manager.swap_out(1);
  EXPECT_EQ(manager.num_cached_blocks(), 2);
  EXPECT_EQ(manager.add_sequence(2, iota_tokens(8)), 8);
}

}  // namespace
}  // namespace vkpaged
