// The attention planner on fabricated devices (no GPU): which kernel family runs a batch, the
// workgroup rows, the split, the address path, and what it refuses. Fields, not strings.
#include <gtest/gtest.h>

#include <numeric>
#include <vector>

#include "ops/attention_planner.hpp"
#include "support/expect_error.hpp"

namespace vkpaged::test {
namespace {

using detail::AttentionChoice;
using detail::AttentionDeviceProperties;
using detail::plan_attention;

AttentionDeviceProperties h200() {
  AttentionDeviceProperties d;
  d.name = "NVIDIA H200";
  d.compute_units = 132;
  d.max_workgroup_invocations = 1024;
  d.max_shared_memory = 49152;
  d.max_storage_buffer_range = 4294967295ull;
  d.buffer_device_address = true;
  return d;
}

AttentionDeviceProperties lavapipe() {
  AttentionDeviceProperties d;
  d.name = "llvmpipe";
  d.compute_units = 2;
  d.max_workgroup_invocations = 1024;
  d.max_shared_memory = 32768;
  d.max_storage_buffer_range = 128ull << 20;
  d.buffer_device_address = true;
  return d;
}

// The least a Vulkan device may offer: 16 KiB of shared memory, 128 invocations.
AttentionDeviceProperties minimal() {
  AttentionDeviceProperties d;
  d.name = "minimal";
  d.compute_units = 8;
  d.max_workgroup_invocations = 128;
  d.max_shared_memory = 16384;
  d.max_storage_buffer_range = 128ull << 20;
  d.buffer_device_address = false;
  return d;
}

// S requests of q new tokens each, contexts up to `context` positions, H = 32 on 8 kv heads.
AttentionShape shape_of(uint32_t requests, uint32_t q, uint32_t context, uint32_t heads = 32, uint32_t kv_heads = 8,
                        uint32_t head_size = 128) {
  AttentionShape s;
  s.num_requests = requests;
  s.num_query_tokens = requests * q;
  s.num_heads = heads;
  s.num_kv_heads = kv_heads;
  s.head_size = head_size;
  s.block_size = 16;
  s.max_blocks_per_seq = (context + 15) / 16;
  s.num_blocks = requests * s.max_blocks_per_seq;
  s.max_context_len = context;
  return s;
}

std::vector<int32_t> uniform_starts(uint32_t requests, uint32_t q) {
  std::vector<int32_t> starts(requests + 1);
  for (uint32_t i = 0; i <= requests; ++i) starts[i] = int32_t(i * q);
  return starts;
}

AttentionChoice plan(const AttentionDeviceProperties& dev, const AttentionShape& s, const std::vector<int32_t>& starts,
                     const AttentionOptions& o = {}) {
  return plan_attention(dev, s, starts, o);
}

TEST(AttentionPlanner, SingleTokenBatchesGoToTheDecodeKernels) {
  AttentionShape s = shape_of(64, 1, 2048);
  EXPECT_EQ(plan(h200(), s, uniform_starts(64, 1)).kernel, AttentionKernel::decode);
  AttentionOptions scalar;
  scalar.kernel = AttentionKernel::scalar;
  EXPECT_EQ(plan(h200(), s, uniform_starts(64, 1), scalar).kernel, AttentionKernel::scalar);
  for (const KvLayout layout : {KvLayout::nhd, KvLayout::hnd}) {  // the scalar decode kernel reads every layout
    s.kv_layout = layout;
    EXPECT_EQ(plan(h200(), s, uniform_starts(64, 1)).kernel, AttentionKernel::decode);
  }
  s.kv_layout = KvLayout::vllm;
  s.tree_mask = true;  // a 1 x 1 mask may hide a token from itself
  EXPECT_EQ(plan(h200(), s, uniform_starts(64, 1)).kernel, AttentionKernel::scalar);
  AttentionOptions decode;
  decode.kernel = AttentionKernel::decode;
  expect_refused([&] { plan(h200(), shape_of(4, 2, 512), uniform_starts(4, 2), decode); }, "kernel: decode");
  // Head size 512 only on the decode kernels.
  EXPECT_EQ(plan(h200(), shape_of(8, 1, 512, 8, 8, 512), uniform_starts(8, 1)).kernel, AttentionKernel::decode);
  expect_refused([&] { plan(h200(), shape_of(8, 2, 512, 8, 8, 512), uniform_starts(8, 2)); }, "head_size: 512");
}

TEST(AttentionPlanner, RowsFollowTheRequestsAndTheSharedMemory) {
  // A long prefill with GQA groups of 4: 32 rows of 8 tokens x 4 heads where shared memory
  // allows (H200), 16 rows on lavapipe's 32 KiB, and one pass (enough workgroups).
  const AttentionShape prefill = shape_of(1, 4096, 4096);
  const auto big = plan(h200(), prefill, uniform_starts(1, 4096));
  EXPECT_EQ(big.kernel, AttentionKernel::scalar);
  EXPECT_EQ(big.rows, 32u);
  EXPECT_EQ(big.heads_per_workgroup, 4u);
  EXPECT_EQ(big.groups_per_kv_head, 1u);
  EXPECT_EQ(big.tokens_per_tile, 8u);
  EXPECT_EQ(big.row_parts, 1u);
  EXPECT_EQ(big.tile_slots, 4096u / 8 + 1);
  EXPECT_FALSE(big.split);
  EXPECT_LE(big.shared_bytes, 49152u);
  const auto small = plan(lavapipe(), prefill, uniform_starts(1, 4096));
  EXPECT_EQ(small.rows, 16u);
  EXPECT_EQ(small.tokens_per_tile, 4u);
  EXPECT_LE(small.shared_bytes, 32768u);
  // D = 256 on the least a device offers: 8 rows.
  const auto least = plan(minimal(), shape_of(1, 64, 64, 8, 8, 256), uniform_starts(1, 64));
  EXPECT_EQ(least.rows, 8u);
  EXPECT_LE(least.shared_bytes, 16384u);
  // Two tokens of a group of 4: 8 rows are enough.
  EXPECT_EQ(plan(h200(), shape_of(64, 2, 4096), uniform_starts(64, 2)).rows, 8u);
  // Small head sizes split the rows between invocations in the value phase.
  EXPECT_EQ(plan(h200(), shape_of(4, 16, 64, 8, 8, 32), uniform_starts(4, 16)).row_parts, 4u);
  EXPECT_EQ(plan(h200(), shape_of(4, 16, 64, 8, 8, 64), uniform_starts(4, 16)).row_parts, 2u);
}

TEST(AttentionPlanner, LargeGroupsAreSliced) {
  const auto c = plan(h200(), shape_of(2, 3, 100, 40, 1), uniform_starts(2, 3));
  EXPECT_EQ(c.rows, 32u);
  EXPECT_EQ(c.groups_per_kv_head, 2u);
  EXPECT_EQ(c.heads_per_workgroup, 20u);
  EXPECT_EQ(c.tokens_per_tile, 1u);
}

TEST(AttentionPlanner, FewQueriesOnLongContextsSplit) {
  // Speculative verification: 8 requests of 4 draft tokens at 4K on an H200: 64 workgroups in
  // one pass against 4 x 132 wanted, so partitions of 512 positions.
  const AttentionShape spec = shape_of(8, 4, 4096);
  const auto c = plan(h200(), spec, uniform_starts(8, 4));
  EXPECT_TRUE(c.split);
  EXPECT_EQ(c.partition_tokens, 512u);
  EXPECT_EQ(c.num_partitions, 8u);
  EXPECT_EQ(c.scratch_bytes, 4ull * 32 * 32 * 8 * (128 + 2));
  EXPECT_EQ(c.context_cap, 4096u);
  EXPECT_GT(c.merge_workgroup, 0u);
  // The same batch in one pass when asked, and with given partitions.
  AttentionOptions single;
  single.split = SplitMode::single_pass;
  EXPECT_FALSE(plan(h200(), spec, uniform_starts(8, 4), single).split);
  AttentionOptions given;
  given.partition_tokens = 1024;
  const auto g = plan(h200(), spec, uniform_starts(8, 4), given);
  EXPECT_TRUE(g.split);
  EXPECT_EQ(g.num_partitions, 4u);
  // Many requests fill the device: no split.
  EXPECT_FALSE(plan(h200(), shape_of(512, 4, 4096), uniform_starts(512, 4)).split);
  // Short contexts are not split.
  EXPECT_FALSE(plan(h200(), shape_of(1, 4, 200), uniform_starts(1, 4)).split);
}

TEST(AttentionPlanner, SplitsThatDoNotFitFallBackOrAreRefused) {
  // 60000 tokens of 32 heads and 8 partitions: scratch past lavapipe's 128 MiB.
  AttentionShape s = shape_of(1, 60000, 65536);
  AttentionOptions forced;
  forced.split = SplitMode::split;
  forced.partition_tokens = 8192;
  expect_refused([&] { plan(lavapipe(), s, uniform_starts(1, 60000), forced); }, ErrorCode::unsupported,
                 {"partition_tokens: 8 partitions of 8192"});
  // Automatic: a split whose scratch does not fit runs in one pass instead.
  AttentionDeviceProperties wide = h200();
  wide.compute_units = 10000;
  const AttentionShape spec = shape_of(8, 4, 4096);
  wide.max_storage_buffer_range = 1ull << 30;
  EXPECT_TRUE(plan(wide, spec, uniform_starts(8, 4)).split);
  wide.max_storage_buffer_range = 1ull << 20;
  EXPECT_FALSE(plan(wide, spec, uniform_starts(8, 4)).split);
  AttentionOptions odd;
  odd.partition_tokens = 300;
  expect_refused([&] { plan(h200(), shape_of(1, 4, 4096), uniform_starts(1, 4), odd); }, "partition_tokens: 300");
}

TEST(AttentionPlanner, PoolsPastTheStorageRangeAreReadByAddress) {
  AttentionShape s = shape_of(2, 8, 4096);
  s.num_blocks = 70000;  // 70000 blocks of 8 x 128 x 16 f16: 2.3 GB
  EXPECT_FALSE(plan(h200(), s, uniform_starts(2, 8)).address);
  EXPECT_TRUE(plan(lavapipe(), s, uniform_starts(2, 8)).address);
  expect_refused([&] { plan(minimal(), s, uniform_starts(2, 8)); }, ErrorCode::unsupported, {"num_blocks: a pool of 70000"});
}

TEST(AttentionPlanner, RefusesBadQueryStarts) {
  const AttentionShape s = shape_of(3, 4, 64);
  expect_refused([&] { plan(h200(), s, {0, 4, 8}); }, "query_starts: 3 entries, expected S + 1 = 4");
  expect_refused([&] { plan(h200(), s, {1, 4, 8, 12}); }, "query_starts[0]: 1 is not 0");
  expect_refused([&] { plan(h200(), s, {0, 4, 4, 12}); }, "query_starts[2]: 4 after query_starts[1] = 4");
  expect_refused([&] { plan(h200(), s, {0, 6, 2, 12}); }, "q_s = -4");
  expect_refused([&] { plan(h200(), s, {0, 4, 8, 11}); }, "query_starts[3]: 11 is not T");
  AttentionShape short_context = shape_of(1, 100, 64);  // 100 new tokens, contexts of at most 64
  expect_refused([&] { plan(h200(), short_context, {0, 100}); }, "q_s = 100 new tokens, more than the 64");
  AttentionShape masked = shape_of(1, 70000, 70000);
  masked.tree_mask = true;  // 70000^2 mask bytes
  expect_refused([&] { plan(h200(), masked, {0, 70000}); }, "tree_mask: the requests' q_s x q_s masks take 4900000000");
  AttentionShape too_few = shape_of(3, 4, 64);
  too_few.num_query_tokens = 2;
  expect_refused([&] { plan(h200(), too_few, {0, 1, 2, 2}); }, "num_query_tokens: T = 2 is less than S = 3");
}

TEST(AttentionPlanner, RefusesGridsNoDeviceLaunches) {
  // 600000 tokens in tiles of 8: past 65535 workgroups along one grid dimension.
  AttentionShape s = shape_of(1, 600000, 600000);
  expect_refused([&] { plan(h200(), s, uniform_starts(1, 600000)); }, ErrorCode::unsupported, {"num_query_tokens: T = 600000"});
}

TEST(AttentionPlanner, RefusesShapesTheContractRefuses) {
  AttentionShape s = shape_of(2, 2, 64);
  s.head_size = 100;
  expect_refused([&] { plan(h200(), s, uniform_starts(2, 2)); }, "head_size: 100");
  s = shape_of(2, 2, 64);
  s.block_size = 24;
  expect_refused([&] { plan(h200(), s, uniform_starts(2, 2)); }, "block_size: 24");
  s = shape_of(2, 2, 64);
  s.num_heads = 12;
  s.num_kv_heads = 5;
  expect_refused([&] { plan(h200(), s, uniform_starts(2, 2)); }, "num_heads: 12 is not a multiple of num_kv_heads 5");
  s = shape_of(2, 2, 64, 8, 8, 40);
  s.cache_dtype = DType::fp8_e4m3;  // x = 16
  expect_refused([&] { plan(h200(), s, uniform_starts(2, 2)); }, "head_size: D = 40 is not a multiple of x = 16");
  s = shape_of(2, 2, 64);
  s.kv_layout = KvLayout(7);
  expect_refused([&] { plan(h200(), s, uniform_starts(2, 2)); }, "kv_layout: 7");
}

}  // namespace
}  // namespace vkpaged::test
