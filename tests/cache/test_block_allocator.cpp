// SPDX-License-Identifier: Apache-2.0
#include <gtest/gtest.h>

#include <set>
#include <string>

#include "support/expect_error.hpp"
#include "vkpaged/block_manager.hpp"
#include "vkpaged/error.hpp"

namespace vkpaged {
namespace {

using test::error_of;

TEST(BlockAllocator, HandsOutEveryBlockOnceThenRunsOut) {
  BlockAllocator allocator(5);
  std::set<int32_t> handed_out;
  for (int i = 0; i < 5; ++i) handed_out.insert(allocator.allocate());
  EXPECT_EQ(handed_out, (std::set<int32_t>{0, 1, 2, 3, 4}));
  EXPECT_EQ(allocator.num_free(), 0);
  EXPECT_EQ(error_of([&] { allocator.allocate(); }, ErrorCode::out_of_memory),
            "allocate: all 5 blocks are in use");
}

TEST(BlockAllocator, BlockReturnsWhenItsCountReachesZero) {
  BlockAllocator allocator(2);
  const int32_t block = allocator.allocate();
  allocator.share(block);
  EXPECT_EQ(allocator.ref_count(block), 2);
  EXPECT_FALSE(allocator.free(block));
  EXPECT_FALSE(allocator.is_free(block));
  EXPECT_EQ(allocator.num_free(), 1);
  EXPECT_TRUE(allocator.free(block));
  EXPECT_TRUE(allocator.is_free(block));
  EXPECT_EQ(allocator.num_free(), 2);
}

TEST(BlockAllocator, FreeOrderDecidesWhichBlockIsReusedFirst) {
  BlockAllocator allocator(3);
  for (int i = 0; i < 3; ++i) allocator.allocate();
  allocator.free(0, FreeOrder::reuse_last);
  allocator.free(1, FreeOrder::reuse_first);
  allocator.free(2, FreeOrder::reuse_last);
  EXPECT_EQ(allocator.allocate(), 1);
  EXPECT_EQ(allocator.allocate(), 0);
  EXPECT_EQ(allocator.allocate(), 2);
}

TEST(BlockAllocator, ReclaimTakesAGivenFreeBlock) {
  BlockAllocator allocator(4);
  allocator.reclaim(2);
  EXPECT_EQ(allocator.ref_count(2), 1);
  EXPECT_EQ(allocator.num_free(), 3);
  EXPECT_EQ(allocator.allocate(), 0);
  EXPECT_EQ(allocator.allocate(), 1);
  EXPECT_EQ(allocator.allocate(), 3);
}

TEST(BlockAllocator, ZeroBlocksIsAnEmptyAllocator) {
  BlockAllocator allocator(0);
  EXPECT_EQ(allocator.num_free(), 0);
  EXPECT_EQ(error_of([&] { allocator.allocate(); }, ErrorCode::out_of_memory),
            "allocate: all 0 blocks are in use");
}

TEST(BlockAllocator, RefusesNegativeBlockCount) {
  EXPECT_EQ(error_of([] { BlockAllocator allocator(-1); }),
            "BlockAllocator: num_blocks -1 is negative");
}

TEST(BlockAllocator, RefusesDoubleFree) {
  BlockAllocator allocator(4);
  const int32_t block = allocator.allocate();
  allocator.free(block);
  EXPECT_EQ(error_of([&] { allocator.free(block); }),
            "free: block 0 is not allocated (double free?)");
  EXPECT_EQ(allocator.num_free(), 4);
}

TEST(BlockAllocator, RefusesFreeOfUnallocatedBlock) {
  BlockAllocator allocator(4);
  EXPECT_EQ(error_of([&] { allocator.free(3); }), "free: block 3 is not allocated (double free?)");
}

TEST(BlockAllocator, RefusesIdsOutOfRange) {
  BlockAllocator allocator(4);
  EXPECT_EQ(error_of([&] { allocator.free(4); }), "free: block 4 is out of range [0, 4)");
  EXPECT_EQ(error_of([&] { allocator.free(-1); }), "free: block -1 is out of range [0, 4)");
  EXPECT_EQ(error_of([&] { allocator.share(17); }), "share: block 17 is out of range [0, 4)");
  EXPECT_EQ(error_of([&] { allocator.reclaim(4); }), "reclaim: block 4 is out of range [0, 4)");
  EXPECT_EQ(error_of([&] { allocator.ref_count(9); }), "ref_count: block 9 is out of range [0, 4)");
}

TEST(BlockAllocator, RefusesSharingAFreeBlock) {
  BlockAllocator allocator(4);
  EXPECT_EQ(error_of([&] { allocator.share(1); }), "share: block 1 is not allocated");
}

TEST(BlockAllocator, RefusesReclaimingABlockInUse) {
  BlockAllocator allocator(4);
  const int32_t block = allocator.allocate();
  EXPECT_EQ(error_of([&] { allocator.reclaim(block); }),
            "reclaim: block 0 is not free (reference count 1)");
}

}  // namespace
}  // namespace vkpaged
