// SPDX-License-Identifier: Apache-2.0
#include <gtest/gtest.h>

#include <cmath>
#include <limits>
#include <numeric>
#include <string>
#include <vector>

#include "ops/decode_validation.hpp"
#include "support/expect_error.hpp"
#include "vkpaged/block_manager.hpp"
#include "vkpaged/kv_cache.hpp"
#include "vkpaged/error.hpp"

namespace vkpaged {
namespace {

using test::error_of;

std::vector<int32_t> iota_tokens(int32_t count, int32_t first = 100) {
  std::vector<int32_t> tokens(static_cast<size_t>(count));
  std::iota(tokens.begin(), tokens.end(), first);
  return tokens;
}

const BlockManagerOptions kNoWatermark{.watermark = 0.0, .num_host_blocks = 8};

TEST(BlockManager, AddSequenceAllocatesTheBlocksOfThePrompt) {
  BlockManager manager(8, 4, kNoWatermark);
  EXPECT_EQ(manager.add_sequence(7, iota_tokens(10)), 0);
  EXPECT_EQ(manager.context_len(7), 10);
  EXPECT_EQ(manager.block_table(7), (std::vector<int32_t>{0, 1, 2}));
  EXPECT_EQ(manager.slot_mapping(7, 8, 2), (std::vector<int64_t>{8, 9}));
  EXPECT_EQ(manager.num_free_blocks(), 5);
}

TEST(BlockManager, AppendFillsTheLastBlockThenAllocatesOne) {
  BlockManager manager(8, 4, kNoWatermark);
  manager.add_sequence(1, iota_tokens(3));
  EXPECT_EQ(manager.append_token(1, 5).slot, 3);
  const AppendResult next = manager.append_token(1, 6);
  EXPECT_EQ(next.slot, 4);
  EXPECT_FALSE(next.copy.has_value());
  EXPECT_EQ(manager.block_table(1), (std::vector<int32_t>{0, 1}));
  EXPECT_EQ(manager.slot_mapping(1, 3, 2), (std::vector<int64_t>{3, 4}));
}

TEST(BlockManager, EmptySequenceGetsItsFirstBlockOnAppend) {
  BlockManager manager(8, 4, kNoWatermark);
  manager.add_sequence(1, {});
  EXPECT_TRUE(manager.block_table(1).empty());
  EXPECT_EQ(manager.append_token(1, 9).slot, 0);
  EXPECT_EQ(manager.context_len(1), 1);
}

TEST(BlockManager, ForkSharesBlocksAndAppendCopiesOnWrite) {
  BlockManager manager(8, 4, kNoWatermark);
  manager.add_sequence(1, iota_tokens(6));
  manager.fork(1, 2);
  EXPECT_EQ(manager.device_allocator().ref_count(0), 2);
  EXPECT_EQ(manager.device_allocator().ref_count(1), 2);

  const AppendResult child = manager.append_token(2, 50);
  ASSERT_TRUE(child.copy.has_value());
  EXPECT_EQ(*child.copy, (BlockCopy{1, 2}));
  EXPECT_EQ(child.slot, 2 * 4 + 2);
  EXPECT_EQ(manager.block_table(2), (std::vector<int32_t>{0, 2}));
  EXPECT_EQ(manager.block_table(1), (std::vector<int32_t>{0, 1}));
  EXPECT_EQ(manager.device_allocator().ref_count(1), 1);

  // The parent is now the only holder of its last block: it writes in place.
  const AppendResult parent = manager.append_token(1, 60);
  EXPECT_FALSE(parent.copy.has_value());
  EXPECT_EQ(parent.slot, 1 * 4 + 2);
}

TEST(BlockManager, ForkAtABlockBoundaryNeedsNoCopy) {
  BlockManager manager(8, 4, kNoWatermark);
  manager.add_sequence(1, iota_tokens(8));
  manager.fork(1, 2);
  const AppendResult child = manager.append_token(2, 50);
  EXPECT_FALSE(child.copy.has_value());
  EXPECT_EQ(manager.block_table(2), (std::vector<int32_t>{0, 1, 2}));
  EXPECT_EQ(manager.block_table(1), (std::vector<int32_t>{0, 1}));
}

TEST(BlockManager, FreeSequenceReturnsEveryBlock) {
  BlockManager manager(8, 4, {.watermark = 0.0, .enable_prefix_caching = false});
  manager.add_sequence(1, iota_tokens(9));
  manager.fork(1, 2);
  manager.append_token(2, 1);
  manager.free_sequence(1);  // the child keeps the two shared blocks and its copy
  EXPECT_EQ(manager.num_free_blocks(), 5);
  manager.free_sequence(2);
  EXPECT_EQ(manager.num_free_blocks(), 8);
  EXPECT_FALSE(manager.contains(1));
}

TEST(BlockManager, PreemptReturnsTheTokenCountAndFreesTheBlocks) {
  BlockManager manager(8, 4, {.watermark = 0.0, .enable_prefix_caching = false});
  manager.add_sequence(3, iota_tokens(5));
  manager.append_token(3, 1);
  EXPECT_EQ(manager.preempt(3), 6);
  EXPECT_FALSE(manager.contains(3));
  EXPECT_EQ(manager.num_free_blocks(), 8);
}

TEST(BlockManager, CanAllocateKeepsTheWatermarkFree) {
  BlockManager manager(100, 1, {.watermark = 0.1, .enable_prefix_caching = false});
  EXPECT_EQ(manager.can_allocate(iota_tokens(91)), AdmissionStatus::never);
  EXPECT_EQ(manager.can_allocate(iota_tokens(90)), AdmissionStatus::ok);
  manager.add_sequence(1, iota_tokens(50));
  EXPECT_EQ(manager.can_allocate(iota_tokens(41)), AdmissionStatus::later);
  EXPECT_EQ(manager.can_allocate(iota_tokens(40)), AdmissionStatus::ok);
}

TEST(BlockManager, OutOfBlocksIsRefusedAndChangesNothing) {
  BlockManager manager(2, 2, {.watermark = 0.0, .enable_prefix_caching = false});
  manager.add_sequence(1, iota_tokens(4));
  EXPECT_FALSE(manager.can_append(1));
  EXPECT_EQ(error_of([&] { manager.append_token(1, 0); }, ErrorCode::out_of_memory),
            "append_token: sequence 1 needs a block and none is free");
  EXPECT_EQ(manager.context_len(1), 4);
  EXPECT_EQ(manager.can_allocate(iota_tokens(1)), AdmissionStatus::later);
  EXPECT_EQ(error_of([&] { manager.add_sequence(2, iota_tokens(1)); }, ErrorCode::out_of_memory),
            "add_sequence: sequence 2 needs 1 free blocks, 0 are free");
  EXPECT_FALSE(manager.contains(2));
}

TEST(BlockManager, CopyOnWriteWithoutAFreeBlockIsRefused) {
  BlockManager manager(2, 4, {.watermark = 0.0, .enable_prefix_caching = false});
  manager.add_sequence(1, iota_tokens(6));
  manager.fork(1, 2);
  EXPECT_FALSE(manager.can_append(2));
  EXPECT_EQ(error_of([&] { manager.append_token(2, 0); }, ErrorCode::out_of_memory),
            "append_token: sequence 2 needs a block and none is free");
  EXPECT_EQ(manager.device_allocator().ref_count(1), 2);
}

TEST(BlockManager, BlockTablePadsToAWidth) {
  BlockManager manager(8, 4, kNoWatermark);
  manager.add_sequence(1, iota_tokens(5));
  EXPECT_EQ(manager.block_table(1, 4), (std::vector<int32_t>{0, 1, 0, 0}));
  EXPECT_EQ(error_of([&] { manager.block_table(1, 1); }),
            "block_table: width 1 is less than the 2 blocks of sequence 1");
}

TEST(BlockManager, BuildBatchLaysOutRowsOfWidthM) {
  BlockManager manager(8, 4, kNoWatermark);
  manager.add_sequence(1, iota_tokens(5, 0));
  manager.add_sequence(2, iota_tokens(9, 50));
  const std::vector<uint64_t> batch_ids{2, 1};
  const BatchArrays batch = manager.build_batch(batch_ids, 3);
  EXPECT_EQ(batch.block_tables, (std::vector<int32_t>{2, 3, 4, 0, 1, 0}));
  EXPECT_EQ(batch.context_lens, (std::vector<int32_t>{9, 5}));
}

TEST(BlockManager, UsageAddsUpToTheBlockCount) {
  BlockManager manager(8, 2, {.watermark = 0.0, .num_host_blocks = 3});
  manager.add_sequence(1, iota_tokens(4));
  manager.add_sequence(2, iota_tokens(3, 900));
  manager.free_sequence(1);
  const BlockUsage usage = manager.usage();
  EXPECT_EQ(usage.num_blocks, 8);
  EXPECT_EQ(usage.in_use, 2);
  EXPECT_EQ(usage.cached, 2);
  EXPECT_EQ(usage.free, 4);
  EXPECT_EQ(usage.num_host_blocks, 3);
  EXPECT_EQ(usage.host_in_use, 0);
}

TEST(BlockManager, RefusesBadConstruction) {
  EXPECT_EQ(error_of([] { BlockManager(0, 16); }), "BlockManager: num_blocks 0 must be positive");
  EXPECT_EQ(error_of([] { BlockManager(8, 0); }),
            "BlockManager: block_size 0 is not a power of two from 1 to 128 (the block sizes decode takes)");
  EXPECT_EQ(error_of([] { BlockManager(8, 16, {.watermark = 1.0}); }),
            "BlockManager: watermark 1 is outside [0, 1)");
  EXPECT_EQ(error_of([] { BlockManager(8, 16, {.watermark = std::nan("")}); }),
            "BlockManager: watermark nan is outside [0, 1)");
  EXPECT_EQ(error_of([] { BlockManager(8, 16, {.num_host_blocks = -2}); }),
            "BlockManager: num_host_blocks -2 is negative");
}

// The block sizes a BlockManager and a KvCache take are exactly those decode takes (powers of
// two from 1 to 128): before, both took any positive size (3, 24, 1000) that decode refuses.
TEST(BlockManager, TakesExactlyTheBlockSizesDecodeTakes) {
  for (int32_t b = -2; b <= 300; ++b) {
    DecodeShape shape;
    shape.num_heads = shape.num_kv_heads = 1;
    shape.head_size = 64;
    shape.num_blocks = 1;
    shape.block_size = uint32_t(b);
    bool decode_takes = true;
    try {
      detail::validate_decode_shape(shape);
    } catch (const Error&) {
      decode_takes = false;
    }
    bool manager_takes = true;
    try {
      BlockManager manager(4, b);
    } catch (const Error& e) {
      manager_takes = false;
      EXPECT_NE(std::string(e.what()).find("block_size " + std::to_string(b) + " is not a power of two from 1 to 128"),
                std::string::npos)
          << e.what();
    }
    EXPECT_EQ(manager_takes, decode_takes) << "block size " << b;
    EXPECT_EQ(decode_takes, b >= 1 && b <= 128 && (b & (b - 1)) == 0) << "block size " << b;
    if (b < 0) continue;
    KvCacheShape kv;
    kv.num_kv_heads = 2;
    kv.head_size = 64;
    kv.block_size = uint32_t(b);
    bool cache_takes = true;
    try {
      KvCache::validate(kv);
    } catch (const Error&) {
      cache_takes = false;
    }
    EXPECT_EQ(cache_takes, decode_takes) << "KvCache, block size " << b;
  }
}

TEST(BlockManager, RefusesUnknownSequences) {
  BlockManager manager(8, 4);
  const std::vector<uint64_t> ids{42};
  EXPECT_EQ(error_of([&] { manager.fork(42, 43); }), "fork: unknown sequence 42");
  EXPECT_EQ(error_of([&] { manager.append_token(42, 1); }), "append_token: unknown sequence 42");
  EXPECT_EQ(error_of([&] { manager.can_append(42); }), "can_append: unknown sequence 42");
  EXPECT_EQ(error_of([&] { manager.free_sequence(42); }), "free_sequence: unknown sequence 42");
  EXPECT_EQ(error_of([&] { manager.preempt(42); }), "preempt: unknown sequence 42");
  EXPECT_EQ(error_of([&] { manager.context_len(42); }), "context_len: unknown sequence 42");
  EXPECT_EQ(error_of([&] { manager.block_table(42); }), "block_table: unknown sequence 42");
  EXPECT_EQ(error_of([&] { manager.build_batch(ids, 4); }), "build_batch: unknown sequence 42");
  // Refused before the table is allocated: these rows at this width would take 64 GiB.
  const std::vector<uint64_t> many(8, 42);
  EXPECT_EQ(error_of([&] { manager.build_batch(many, std::numeric_limits<int32_t>::max()); }),
            "build_batch: unknown sequence 42");
  EXPECT_EQ(error_of([&] { manager.swap_out(42); }), "swap_out: unknown sequence 42");
  EXPECT_EQ(error_of([&] { manager.swap_in(42); }), "swap_in: unknown sequence 42");
}

TEST(BlockManager, RefusesIdsThatAlreadyExist) {
  BlockManager manager(8, 4);
  manager.add_sequence(1, iota_tokens(3));
  manager.add_sequence(2, iota_tokens(3));
  EXPECT_EQ(error_of([&] { manager.add_sequence(1, iota_tokens(3)); }),
            "add_sequence: sequence 1 already exists");
  EXPECT_EQ(error_of([&] { manager.fork(1, 2); }), "fork: child sequence 2 already exists");
  EXPECT_EQ(manager.device_allocator().ref_count(0), 1);
}

TEST(BlockManager, RefusesGpuArraysOfASwappedOutSequence) {
  BlockManager manager(8, 4, kNoWatermark);
  manager.add_sequence(1, iota_tokens(5));
  manager.swap_out(1);
  const std::vector<uint64_t> ids{1};
  EXPECT_EQ(error_of([&] { manager.append_token(1, 0); }),
            "append_token: sequence 1 is swapped out");
  EXPECT_FALSE(manager.can_append(1));
  EXPECT_EQ(error_of([&] { manager.block_table(1); }), "block_table: sequence 1 is swapped out");
  EXPECT_EQ(error_of([&] { manager.build_batch(ids, 4); }),
            "build_batch: sequence 1 is swapped out");
  EXPECT_EQ(error_of([&] { manager.slot_mapping(1, 0, 1); }),
            "slot_mapping: sequence 1 is swapped out");
  EXPECT_EQ(manager.context_len(1), 5);
}

TEST(BlockManager, RefusesSwapsOnTheWrongSide) {
  BlockManager manager(8, 4, kNoWatermark);
  manager.add_sequence(1, iota_tokens(5));
  manager.add_sequence(2, iota_tokens(5));
  const std::vector<uint64_t> twice{2, 2};
  EXPECT_EQ(error_of([&] { manager.swap_in(1); }), "swap_in: sequence 1 is not swapped out");
  EXPECT_EQ(error_of([&] { manager.host_block_table(1); }),
            "host_block_table: sequence 1 is not swapped out");
  EXPECT_EQ(error_of([&] { manager.swap_out(twice); }), "swap_out: sequence 2 is listed twice");
  manager.swap_out(1);
  EXPECT_EQ(error_of([&] { manager.swap_out(1); }), "swap_out: sequence 1 is already swapped out");
}

TEST(BlockManager, RefusesOutOfRangeOutputs) {
  BlockManager manager(8, 4, kNoWatermark);
  manager.add_sequence(1, iota_tokens(9));
  const std::vector<uint64_t> ids{1};
  EXPECT_EQ(error_of([&] { manager.slot_mapping(1, 8, 2); }),
            "slot_mapping: tokens [8, 10) are outside the 9 tokens of sequence 1");
  EXPECT_EQ(error_of([&] { manager.slot_mapping(1, -1, 1); }),
            "slot_mapping: tokens [-1, 0) are outside the 9 tokens of sequence 1");
  EXPECT_EQ(error_of([&] { manager.build_batch(ids, 2); }),
            "build_batch: sequence 1 has 3 blocks, more than width 2");
  EXPECT_EQ(error_of([&] { manager.build_batch(ids, 0); }),
            "build_batch: width 0 must be positive");
}

}  // namespace
}  // namespace vkpaged
