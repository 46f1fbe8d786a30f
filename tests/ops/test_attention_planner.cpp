// SPDX-License-Identifier: Apache-2.0
// The attention planner on fabricated devices (no GPU): which kernel family runs a batch, the
// workgroup rows, the split, the address path, the matrix kernel's product and tiles, and what
// it refuses. Fields, not strings.
#include <fmt/format.h>
#include <gtest/gtest.h>

#include <algorithm>
#include <numeric>
#include <vector>

#include "ops/attention_planner.hpp"
#include "support/expect_error.hpp"
#include "support/fabricated_devices.hpp"

namespace vkpaged::test {
namespace {

using detail::AttentionChoice;
using detail::plan_attention;

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

AttentionChoice plan(const DeviceCapabilities& dev, const AttentionShape& s, const std::vector<int32_t>& starts,
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
  DeviceCapabilities wide = h200();
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

// ---- the matrix kernel ----

AttentionOptions matrix_kernel(SplitMode split = SplitMode::automatic) {
  AttentionOptions o;
  o.kernel = AttentionKernel::matrix;
  o.split = split;
  return o;
}

TEST(AttentionPlanner, AutomaticTakesTheMatrixKernelWhereItRuns) {
  const AttentionShape prefill = shape_of(1, 4096, 4096);
  EXPECT_EQ(plan(h200_with_khr(), prefill, uniform_starts(1, 4096)).kernel, AttentionKernel::matrix);
  EXPECT_EQ(plan(h200(), prefill, uniform_starts(1, 4096)).kernel, AttentionKernel::scalar);  // no KHR
  AttentionShape f32 = prefill;
  f32.query_dtype = DType::f32;
  EXPECT_EQ(plan(h200_with_khr(), f32, uniform_starts(1, 4096)).kernel, AttentionKernel::scalar);
  // Decode batches stay on the decode kernels; forced, the scalar kernel stays forced.
  EXPECT_EQ(plan(h200_with_khr(), shape_of(64, 1, 4096), uniform_starts(64, 1)).kernel, AttentionKernel::decode);
  AttentionOptions scalar;
  scalar.kernel = AttentionKernel::scalar;
  EXPECT_EQ(plan(h200_with_khr(), prefill, uniform_starts(1, 4096), scalar).kernel, AttentionKernel::scalar);
  // A decode batch forced onto the matrix kernel runs there.
  EXPECT_EQ(plan(h200_with_khr(), shape_of(64, 1, 4096), uniform_starts(64, 1), matrix_kernel()).kernel,
            AttentionKernel::matrix);
}

TEST(AttentionPlanner, MatrixTilesFollowTheDeviceAndTheRequests) {
  // A long prefill, D 128: the 16x16x16 product, 64 rows (16 tokens x 4 heads) in 4 subgroups,
  // key tiles of 32 (64 do not fit 48 KiB), the query in registers, one pass.
  const auto p4k = plan(h200_with_khr(), shape_of(1, 4096, 4096), uniform_starts(1, 4096));
  EXPECT_EQ(p4k.product.m, 16u);
  EXPECT_EQ(p4k.product.n, 16u);
  EXPECT_EQ(p4k.product.k, 16u);
  EXPECT_EQ(p4k.rows, 64u);
  EXPECT_EQ(p4k.heads_per_workgroup, 4u);
  EXPECT_EQ(p4k.tokens_per_tile, 16u);
  EXPECT_EQ(p4k.key_tile, 32u);
  EXPECT_TRUE(p4k.query_registers);
  EXPECT_EQ(p4k.workgroup, 128u);
  EXPECT_EQ(p4k.tile_slots, 4096u / 16 + 1);
  EXPECT_FALSE(p4k.split);
  EXPECT_LE(p4k.shared_bytes, 49152u);
  EXPECT_EQ(p4k.shared_bytes, detail::attention_matrix_shared_bytes(64, p4k.product, 128, 32, KvLayout::vllm, true, 128));
  EXPECT_GT(detail::attention_matrix_shared_bytes(64, p4k.product, 128, 64, KvLayout::vllm, true, 128), 49152u);
  // D 256: the query in shared memory, 32 rows and key tiles of 16 fit.
  const auto d256 = plan(h200_with_khr(), shape_of(1, 4096, 4096, 16, 8, 256), uniform_starts(1, 4096));
  EXPECT_FALSE(d256.query_registers);
  EXPECT_EQ(d256.rows, 32u);
  EXPECT_EQ(d256.key_tile, 16u);
  EXPECT_LE(d256.shared_bytes, 49152u);
  // Speculative verification (4 tokens x a group of 4): one row block, longer key tiles, a
  // workgroup of 128 invocations to stage them.
  const auto spec = plan(h200_with_khr(), shape_of(64, 4, 4096), uniform_starts(64, 4));
  EXPECT_EQ(spec.kernel, AttentionKernel::matrix);
  EXPECT_EQ(spec.rows, 16u);
  EXPECT_EQ(spec.tokens_per_tile, 4u);
  EXPECT_EQ(spec.key_tile, 64u);
  EXPECT_EQ(spec.workgroup, 128u);
  EXPECT_FALSE(spec.split);  // 512 workgroups fill the device
  // Fewer requests split, with the portable kernel's partitions and scratch.
  const auto few = plan(h200_with_khr(), shape_of(8, 4, 4096), uniform_starts(8, 4));
  EXPECT_TRUE(few.split);
  EXPECT_EQ(few.partition_tokens % few.key_tile, 0u);
  EXPECT_EQ(few.scratch_bytes, 4ull * 32 * 32 * few.num_partitions * (128 + 2));
  // MQA groups past 64 heads are sliced.
  const auto mqa = plan(h200_with_khr(), shape_of(2, 3, 100, 80, 1), uniform_starts(2, 3));
  EXPECT_EQ(mqa.rows, 64u);
  EXPECT_EQ(mqa.groups_per_kv_head, 2u);
  EXPECT_EQ(mqa.heads_per_workgroup, 40u);
  EXPECT_EQ(mqa.tokens_per_tile, 1u);
  // A device listing only 16x8 products, with 64-wide subgroups (AMD-like): n = 8, and
  // workgroups of whole subgroups.
  DeviceCapabilities wide = h200_with_khr();
  wide.max_subgroup_size = 64;
  wide.cooperative_matrix_khr_shapes = f16_products({{16, 8, 8}, {16, 8, 16}, {32, 32, 8}});  // 32x32x8: n past 16, not usable
  const auto w = plan(wide, shape_of(1, 4096, 4096), uniform_starts(1, 4096));
  EXPECT_EQ(w.product.n, 8u);
  EXPECT_EQ(w.product.k, 16u);
  EXPECT_EQ(w.workgroup % 64, 0u);
  EXPECT_EQ(w.workgroup, 4u * 64);
  // The least shared memory Vulkan allows: one row block of short tiles.
  DeviceCapabilities small = h200_with_khr();
  small.max_shared_memory = 16384;
  small.max_workgroup_invocations = 128;
  const auto least = plan(small, shape_of(1, 512, 512), uniform_starts(1, 512));
  EXPECT_EQ(least.rows, 16u);
  EXPECT_EQ(least.key_tile, 16u);
  EXPECT_LE(least.shared_bytes, 16384u);
}

// Every vendor's list of f16 x f16 + f32 products as its driver reports it: the matrix kernel
// takes one the device listed, its workgroups are whole subgroups of the device's width, and what
// it plans fits the device, for prefill, speculative and decode-sized requests and every head
// size. No tile shape is assumed to be NVIDIA's.
TEST(AttentionPlanner, MatrixKernelPlansEveryVendorsTileList) {
  for (const DeviceCapabilities& d : {h200_with_khr(), amd_rdna3(32), amd_rdna3(64), intel_xe(),
                                      lavapipe_with_cooperative_matrices()}) {
    const std::vector<MatrixProductShape> products = d.f16_products();
    for (uint32_t head_size : {64u, 128u, 256u})
      for (uint32_t q : {4096u, 4u, 1u}) {
        // Pools within lavapipe's 128 MiB storage-buffer range, read through one descriptor.
        const uint32_t requests = q == 4096 ? 1 : 16, context = q == 4096 ? 4096 : 1024;
        SCOPED_TRACE(fmt::format("{}, D {}, {} x {} new tokens", d.name, head_size, requests, q));
        const auto c =
            plan(d, shape_of(requests, q, context, 32, 8, head_size), uniform_starts(requests, q), matrix_kernel());
        EXPECT_EQ(c.kernel, AttentionKernel::matrix);
        EXPECT_NE(std::find_if(products.begin(), products.end(),
                               [&](const MatrixProductShape& p) {
                                 return p.m == c.product.m && p.n == c.product.n && p.k == c.product.k;
                               }),
                  products.end());
        EXPECT_EQ(c.workgroup % d.max_subgroup_size, 0u);
        EXPECT_EQ(c.rows % c.product.m, 0u);
        EXPECT_EQ(c.key_tile % c.product.n, 0u);
        EXPECT_EQ(c.key_tile % c.product.k, 0u);
        EXPECT_LE(c.shared_bytes, d.max_shared_memory);
        EXPECT_EQ(c.shared_bytes, detail::attention_matrix_shared_bytes(c.rows, c.product, head_size, c.key_tile,
                                                                        KvLayout::vllm, c.query_registers, c.workgroup));
      }
  }
}

TEST(AttentionPlanner, MatrixKernelOnDevicesWhoseSubgroupBarriersSyncTheWorkgroup) {
  // Mesa 26's lavapipe: 8x8x8 products, subgroups of 8, control barriers that wait for the whole
  // workgroup. The workgroup holds just the computing subgroups.
  DeviceCapabilities d = lavapipe();
  d.khr_matrix_refusal = "";
  d.max_subgroup_size = 8;
  d.cooperative_matrix_khr_shapes = f16_products({{8, 8, 8}});
  d.workgroup_sync = true;
  const auto c = plan(d, shape_of(1, 256, 256, 8, 2, 64), uniform_starts(1, 256));
  EXPECT_EQ(c.kernel, AttentionKernel::matrix);
  EXPECT_EQ(c.product.m, 8u);
  EXPECT_EQ(c.rows, 32u);
  EXPECT_EQ(c.workgroup, 32u);
  EXPECT_TRUE(c.workgroup_sync);
  EXPECT_EQ(c.key_tile, 32u);
  EXPECT_LE(c.shared_bytes, 32768u);
  d.workgroup_sync = false;
  EXPECT_EQ(plan(d, shape_of(1, 256, 256, 8, 2, 64), uniform_starts(1, 256)).workgroup, 128u);
}

TEST(AttentionPlanner, MatrixKernelRefusalsNameWhy) {
  const AttentionShape s = shape_of(2, 8, 512);
  const auto starts = uniform_starts(2, 8);
  DeviceCapabilities no_khr = h200();
  no_khr.khr_matrix_refusal = "device X has no VK_KHR_cooperative_matrix in compute shaders";
  expect_refused([&] { plan(no_khr, s, starts, matrix_kernel()); }, ErrorCode::unsupported,
                 {"kernel: matrix: device X has no VK_KHR_cooperative_matrix"});
  AttentionShape f32 = s;
  f32.query_dtype = DType::f32;
  expect_refused([&] { plan(h200_with_khr(), f32, starts, matrix_kernel()); }, ErrorCode::unsupported,
                 {"kernel: matrix: query: dtype f32"});
  AttentionShape f32_cache = s;
  f32_cache.cache_dtype = DType::f32;
  expect_refused([&] { plan(h200_with_khr(), f32_cache, starts, matrix_kernel()); }, ErrorCode::unsupported,
                 {"kernel: matrix: kv_dtype: f32"});
  DeviceCapabilities short_range = h200_with_khr();
  short_range.max_storage_buffer_range = 1u << 20;  // pools read by address: scalar only
  expect_refused([&] { plan(short_range, s, starts, matrix_kernel()); }, ErrorCode::unsupported,
                 {"kernel: matrix: num_blocks: a pool of"});
  EXPECT_EQ(plan(short_range, s, starts).kernel, AttentionKernel::scalar);
  EXPECT_TRUE(plan(short_range, s, starts).address);
  DeviceCapabilities odd = h200_with_khr();
  odd.cooperative_matrix_khr_shapes = f16_products({{32, 32, 8}});
  expect_refused([&] { plan(odd, s, starts, matrix_kernel()); }, ErrorCode::unsupported,
                 {"kernel: matrix: device NVIDIA H200 lists no f16 x f16 + f32 product", "[32x32x8]"});
  DeviceCapabilities no_reductions = h200_with_khr();
  no_reductions.subgroup_arithmetic = false;  // the kernels' bf16 range needs subgroupMax
  expect_refused([&] { plan(no_reductions, s, starts, matrix_kernel()); }, ErrorCode::unsupported,
                 {"kernel: matrix: device NVIDIA H200: no subgroup arithmetic"});
  EXPECT_EQ(plan(no_reductions, s, starts).kernel, AttentionKernel::scalar);
  DeviceCapabilities tiny = h200_with_khr();
  tiny.max_shared_memory = 8192;
  expect_refused([&] { plan(tiny, shape_of(2, 8, 512, 8, 8, 256), starts, matrix_kernel()); }, ErrorCode::unsupported,
                 {"kernel: matrix: head_size: 256 needs", "more than device NVIDIA H200 has (8192)"});
  // Head sizes that are multiples of 8 but not of 16 run (padded with zero dims).
  EXPECT_EQ(plan(h200_with_khr(), shape_of(2, 8, 512, 8, 8, 40), starts, matrix_kernel()).kernel, AttentionKernel::matrix);
}

}  // namespace
}  // namespace vkpaged::test

namespace vkpaged::test {
namespace {

// A bucket is planned for its largest step: the decode kernels only for decode steps (one token
// row per request), the rows for its longest request, the grid for T tokens and S requests, the
// split for a full step, the same choice as the plan of a full step's query starts.
TEST(AttentionPlanner, BucketsPlanForTheirLargestStep) {
  using detail::plan_attention_bucket;
  const AttentionChoice decode = plan_attention_bucket(h200(), shape_of(64, 1, 4096), 1, {});
  EXPECT_EQ(decode.kernel, AttentionKernel::decode);
  EXPECT_TRUE(decode.bucket);
  AttentionShape fewer_tokens = shape_of(64, 1, 4096);
  fewer_tokens.num_query_tokens = 32;
  fewer_tokens.num_requests = 32;
  AttentionShape padded = fewer_tokens;
  padded.num_requests = 16;  // T > S with one token at most: requests of no token pad, on the attention kernels
  padded.num_query_tokens = 32;
  EXPECT_EQ(plan_attention_bucket(h200(), fewer_tokens, 1, {}).kernel, AttentionKernel::decode);
  EXPECT_EQ(plan_attention_bucket(h200(), padded, 1, {}).kernel, AttentionKernel::scalar);

  // Chunks of up to 64 among 8 requests, 512 tokens: as a full step of 8 x 64.
  const AttentionShape mixed = shape_of(8, 64, 2048);
  const AttentionChoice bucket = plan_attention_bucket(lavapipe(), mixed, 64, {});
  const AttentionChoice full = plan_attention(lavapipe(), mixed, uniform_starts(8, 64), {});
  EXPECT_EQ(bucket.kernel, AttentionKernel::scalar);
  EXPECT_EQ(bucket.rows, full.rows);
  EXPECT_EQ(bucket.tile_slots, full.tile_slots);
  EXPECT_EQ(bucket.split, full.split);
  EXPECT_EQ(bucket.scratch_bytes, full.scratch_bytes);
  EXPECT_EQ(bucket.context_cap, full.context_cap);
  EXPECT_EQ(bucket.max_query_tokens, 64u);
  // Few tokens on long contexts split, as a step of them would.
  const AttentionChoice verify = plan_attention_bucket(h200(), shape_of(4, 8, 16384), 8, {});
  EXPECT_TRUE(verify.split);
  EXPECT_GE(uint64_t(verify.num_partitions) * verify.partition_tokens, 16384u);
  EXPECT_EQ(verify.scratch_bytes, 4ull * 32 * 32 * verify.num_partitions * (128 + 2));

  expect_refused([&] { plan_attention_bucket(h200(), shape_of(1, 64, 2048), 65, {}); },
                 "max_query_tokens: 65 exceeds T = num_query_tokens = 64");
}

}  // namespace
}  // namespace vkpaged::test
