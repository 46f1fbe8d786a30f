// SPDX-License-Identifier: Apache-2.0
// The MLA attention planner (plan_mla_attention) on fabricated devices, without a GPU: the heads
// tiled into workgroups within each device's shared memory and the register budget, and the
// split's scratch sized for Dv-wide value sums.
#include <gtest/gtest.h>

#include <string>
#include <vector>

#include "ops/mla_attention_planner.hpp"
#include "support/expect_error.hpp"
#include "support/fabricated_devices.hpp"
#include "support/mla_decode_shape.hpp"

namespace vkpaged::test {
namespace {

MlaShape decode_shape(uint32_t heads, uint32_t dk, uint32_t dv, DType cache) {
  return mla_decode_shape(heads, dk, dv, DType::bf16, cache);
}

TEST(MlaAttentionPlanner, TilesTheHeadsWithinEveryDevicesSharedMemory) {
  const std::vector<DeviceCapabilities> devices{h200(), lavapipe(), amd_rdna3(), intel_xe(), minimal()};
  const int32_t starts[] = {0, 1, 2};
  for (const auto& dev : devices) {
    for (DType cache : {DType::f32, DType::bf16, DType::fp8_e4m3}) {
      for (uint32_t heads : {1u, 3u, 16u, 128u}) {
        for (auto [dk, dv] : {std::pair{576u, 512u}, std::pair{80u, 64u}}) {
          const MlaShape m = decode_shape(heads, dk, dv, cache);
          MlaOptions scalar;  // the portable kernel's tiles (test_mla_matrix_planner.cpp: the matrix kernel's)
          scalar.kernel = AttentionKernel::scalar;
          const auto c = detail::plan_mla_attention(dev, m, starts, scalar);
          EXPECT_EQ(c.kernel, AttentionKernel::scalar);
          const std::string label = dev.name + " " + std::string(dtype_name(cache)) + " H " + std::to_string(heads) + " Dk " +
                                    std::to_string(dk);
          EXPECT_LE(c.shared_bytes, dev.max_shared_memory) << label;
          EXPECT_EQ(c.shared_bytes, detail::mla_attention_shared_bytes(c.rows, c.key_tile, dk, cache, c.workgroup))
              << label;
          EXPECT_GE(c.heads_per_workgroup * c.groups_per_kv_head, heads) << label;
          EXPECT_LT((c.heads_per_workgroup) * (c.groups_per_kv_head - 1), heads) << label << ": an idle group";
          EXPECT_GE(c.tokens_per_tile, 1u) << label;
          EXPECT_EQ(c.workgroup % c.key_tile, 0u) << label;
          EXPECT_EQ(c.workgroup % c.rows, 0u) << label;
          // The value sums an invocation keeps: rows / row parts times its dims.
          EXPECT_LE(c.rows / c.row_parts * ((dv + c.workgroup / c.row_parts - 1) / (c.workgroup / c.row_parts)), 64u)
              << label;
        }
      }
    }
  }
}

// DeepSeek's 128 heads at Dk 576 on lavapipe's 32 KiB: several workgroups along the heads, each
// a tile of them, the staged key tile shrunk to fit.
TEST(MlaAttentionPlanner, DeepSeekHeadsOnLavapipe) {
  const int32_t starts[] = {0, 1, 2};
  const auto c = detail::plan_mla_attention(lavapipe(), decode_shape(128, 576, 512, DType::bf16), starts, MlaOptions{});
  EXPECT_GE(c.groups_per_kv_head, 8u);
  EXPECT_LE(c.rows, 16u);
  EXPECT_EQ(c.tokens_per_tile, 1u);
  EXPECT_LT(c.key_tile, 32u);
  EXPECT_LE(c.shared_bytes, 32768u);
}

TEST(MlaAttentionPlanner, SplitScratchHoldsValueWidthSums) {
  const int32_t starts[] = {0, 1, 2};
  MlaOptions o;
  o.split = SplitMode::split;
  o.partition_tokens = 256;
  const MlaShape m = decode_shape(16, 576, 512, DType::f16);
  const auto c = detail::plan_mla_attention(h200(), m, starts, o);
  ASSERT_TRUE(c.split);
  EXPECT_EQ(c.num_partitions, 4u);  // M * B = 1024 positions
  EXPECT_EQ(c.scratch_bytes, size_t(4) * 2 * 16 * 4 * (512 + 2));
}

TEST(MlaAttentionPlanner, SplitsBalanceWavesAgainstTiles) {
  // Requests of one token over 4096 positions, 16 heads, on an H200 (132 compute units): the
  // partitions (multiples of 64) with the fewest waves x (tiles + 5). The tensor-core kernel takes
  // the 16 heads in one workgroup (tiles of 16) of a layout two share a compute unit with, so a
  // wave is 264 workgroups: one request takes 64 partitions of 64 (4 tiles; 32 positions would be
  // finer than the quantum), 8 requests 32 of 128 (256 workgroups of 8 tiles: one wave), 32
  // requests 8 of 512 (256 of 32 tiles), 128 requests 2 of 2048. The portable kernel takes them
  // in two workgroups of 8 rows, one per compute unit at a time: 64, 512 and 2048.
  struct Case {
    AttentionKernel kernel;
    uint32_t groups, requests, tokens;  // tokens 0: one pass
  };
  for (const Case& k : {Case{AttentionKernel::matrix, 1, 1, 64}, Case{AttentionKernel::matrix, 1, 8, 128},
                        Case{AttentionKernel::matrix, 1, 32, 512}, Case{AttentionKernel::matrix, 1, 128, 2048},
                        Case{AttentionKernel::scalar, 2, 1, 64}, Case{AttentionKernel::scalar, 2, 8, 512},
                        Case{AttentionKernel::scalar, 2, 32, 2048}}) {
    MlaOptions o;
    o.kernel = k.kernel;
    MlaShape m = decode_shape(16, 576, 512, DType::bf16);
    m.attention.num_requests = k.requests;
    m.attention.num_query_tokens = k.requests;
    m.attention.max_blocks_per_seq = 256;
    m.attention.num_blocks = 256 * k.requests;
    std::vector<int32_t> starts(k.requests + 1);
    for (uint32_t i = 0; i <= k.requests; ++i) starts[i] = int32_t(i);
    const auto c = detail::plan_mla_attention(h200_with_khr(), m, starts, o);
    const std::string label = "kernel " + std::to_string(uint32_t(k.kernel)) + ", " + std::to_string(k.requests) + " requests";
    EXPECT_EQ(c.groups_per_kv_head, k.groups) << label;
    EXPECT_EQ(c.split, k.tokens != 0) << label;
    EXPECT_EQ(c.partition_tokens, k.tokens) << label;
    const uint32_t partitions = k.tokens ? 4096u / k.tokens : 1u;
    EXPECT_EQ(c.num_partitions, partitions) << label;
    EXPECT_EQ(c.scratch_bytes, k.tokens ? size_t(4) * k.requests * 16 * partitions * (512 + 2) : 0u) << label;
  }
  // The H100's workgroups of 32 rows for 128 heads (4 per request, tiles of 16) and one request:
  // 32 partitions of 128, one wave of 128 workgroups (partitions of 64: two waves of 4 tiles).
  const detail::SplitPolicy mla{.quantum = 64, .key_tile = 16};
  EXPECT_EQ(detail::balanced_partition_tokens(4, 4096, 132, mla), 128u);
  // Two resident per compute unit: twice the workgroups in a wave, so half the partition
  // (128 requests: one pass in one wave of one per unit is 261 tile-times; two partitions of 2048
  // in one wave of two per unit are 133).
  const detail::SplitPolicy two{.quantum = 64, .key_tile = 16, .resident_workgroups = 2};
  EXPECT_EQ(detail::balanced_partition_tokens(4, 4096, 132, two), 64u);
  EXPECT_EQ(detail::balanced_partition_tokens(128, 4096, 132, mla), 0u);
  EXPECT_EQ(detail::balanced_partition_tokens(128, 4096, 132, two), 2048u);
  // Partitions of 64 at the least, whatever the device's size.
  EXPECT_EQ(detail::balanced_partition_tokens(1, 4096, 10000, mla), 64u);
  // No split where one pass already fills the device in one wave or a short context gains nothing.
  EXPECT_EQ(detail::balanced_partition_tokens(132, 4096, 132, mla), 0u);
  EXPECT_EQ(detail::balanced_partition_tokens(1, 64, 132, mla), 0u);
  // Given partitions: multiples of 64.
  const int32_t starts[] = {0, 1, 2};
  MlaOptions given;
  given.partition_tokens = 192;
  const auto g = detail::plan_mla_attention(h200(), decode_shape(16, 576, 512, DType::bf16), starts, given);
  EXPECT_TRUE(g.split);
  EXPECT_EQ(g.num_partitions, 6u);  // M * B = 1024 positions
  given.partition_tokens = 100;
  expect_refused([&] { detail::plan_mla_attention(h200(), decode_shape(16, 576, 512, DType::bf16), starts, given); },
                 "partition_tokens: 100 is not a multiple of 64");
}

// A pool past maxStorageBufferRange (with the slack a view's offset adds) is read by device
// address, on either kernel; without buffer device addresses it is refused, naming the pool.
TEST(MlaAttentionPlanner, PoolsPastTheStorageRangeAreReadByAddress) {
  const int32_t starts[] = {0, 1, 2};
  MlaShape m = decode_shape(16, 576, 512, DType::f32);
  m.attention.num_blocks = 1 << 12;  // 4096 * 16 rows of 576 f32: 150 MiB, past lavapipe's 128 MiB
  DeviceCapabilities dev = lavapipe();
  ASSERT_TRUE(dev.buffer_device_address);
  EXPECT_TRUE(detail::plan_mla_attention(dev, m, starts, MlaOptions{}).address);
  m.attention.num_blocks = 1 << 11;  // 75 MiB
  EXPECT_FALSE(detail::plan_mla_attention(dev, m, starts, MlaOptions{}).address);
  // Exactly the range (4096 * 16 rows of 512 f32): a view's offset may carry its binding past it.
  MlaShape exact = decode_shape(16, 512, 448, DType::f32);
  exact.attention.num_blocks = 1 << 12;
  EXPECT_TRUE(detail::plan_mla_attention(dev, exact, starts, MlaOptions{}).address);
  exact.attention.num_blocks = (1 << 12) - 1;
  EXPECT_FALSE(detail::plan_mla_attention(dev, exact, starts, MlaOptions{}).address);
  // Two pools: ckv past the range, kpe (64 wide) not; both read by address.
  m.attention.num_blocks = 1 << 12;
  m.cache_form = MlaCacheForm::two_pools;
  EXPECT_TRUE(detail::plan_mla_attention(dev, m, starts, MlaOptions{}).address);
  dev.buffer_device_address = false;
  expect_refused([&] { detail::plan_mla_attention(dev, m, starts, MlaOptions{}); },
                 "num_blocks: ckv_cache of 4096 blocks is 134217728 bytes, past the device's maxStorageBufferRange",
                 ErrorCode::unsupported);
  m.cache_form = MlaCacheForm::one_pool;
  expect_refused([&] { detail::plan_mla_attention(dev, m, starts, MlaOptions{}); }, "num_blocks: mla_cache of 4096",
                 ErrorCode::unsupported);
  // The tensor-core kernel on an H200: 128 requests of 32768 bf16 rows (4.8 GB) by address.
  MlaShape big = decode_shape(16, 576, 512, DType::bf16);
  big.attention.num_blocks = 128 * 32768 / 16;
  const auto c = detail::plan_mla_attention(h200_with_khr(), big, starts, MlaOptions{});
  EXPECT_EQ(c.kernel, AttentionKernel::matrix);
  EXPECT_TRUE(c.address);
}

}  // namespace
}  // namespace vkpaged::test
