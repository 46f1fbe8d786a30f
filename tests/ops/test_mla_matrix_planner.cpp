// SPDX-License-Identifier: Apache-2.0
// The MLA planner's kernel choice (plan_mla_attention) on fabricated devices, without a GPU:
// the tensor-core kernel where the device lists a usable f16 product and its shared memory holds
// a tile, with the product, rows, value parts and key tile each device gets at DeepSeek's widths;
// the portable kernel elsewhere, and the reasons a forced matrix kernel is refused.
#include <gtest/gtest.h>

#include <iostream>
#include <string>
#include <vector>

#include "ops/mla_attention_planner.hpp"
#include "support/expect_error.hpp"
#include "support/fabricated_devices.hpp"
#include "support/mla_decode_shape.hpp"

namespace vkpaged::test {
namespace {

// DeepSeek's widths: Dk 576 = 512 latent + 64 rope, Dv 512; two requests over up to 32768
// positions, a step whose split can fill every device's compute units.
MlaShape deepseek_decode(uint32_t heads, DType query = DType::bf16, DType cache = DType::fp8_e4m3) {
  MlaShape m = mla_decode_shape(heads, 576, 512, query, cache);
  m.attention.max_blocks_per_seq = 2048;
  return m;
}

const int32_t kDecodeStarts[] = {0, 1, 2};

detail::AttentionChoice plan(const DeviceCapabilities& d, const MlaShape& m, AttentionKernel kernel = AttentionKernel::automatic) {
  MlaOptions o;
  o.kernel = kernel;
  return detail::plan_mla_attention(d, m, kDecodeStarts, o);
}

struct Expected {
  DeviceCapabilities device;
  AttentionKernel kernel;
  // the matrix kernel's choice (unchecked for the scalar kernel)
  uint32_t m = 0, n = 0, k = 0, rows = 0, value_parts = 0, key_tile = 0, workgroup = 0, resident = 0;
};

// Each device's kernel and tile for DeepSeek's decode at 16 heads (bf16 queries, an fp8 cache).
// The sizes follow from mla_matrix_shared_bytes (the queries in registers). 16 heads are one
// block of rows where the product's m is 16: such a step is bound by its loads, and takes the
// largest product and longest tile with which two workgroups share the device's shared memory
// per workgroup (half of the H200's 48 KiB: 16 staged rows beside scores in two slices, the
// 16x8x16 product's; the 16x16x16 product's four slices do not fit). lavapipe's and Intel's
// m = 8 make 16 heads two blocks: the longest tile one workgroup holds (lavapipe's 32 KiB: 16
// staged rows; 32 fp8 rows are 36 cache words per invocation of 128, within the staging's
// registers).
TEST(MlaMatrixPlanner, EachDeviceGetsItsKernelAndTile) {
  DeviceCapabilities only_16x8x16 = khr_only_16x8x16();  // the 16x8x16 product alone
  only_16x8x16.cooperative_matrix_khr_shapes = f16_products({{16, 8, 16}});
  const std::vector<Expected> expected{
      {h200(), AttentionKernel::scalar},
      {h200_with_khr(), AttentionKernel::matrix, 16, 8, 16, 16, 4, 16, 128, 2},
      {only_16x8x16, AttentionKernel::matrix, 16, 8, 16, 16, 4, 16, 128, 2},
      {lavapipe(), AttentionKernel::scalar},
      {lavapipe_with_cooperative_matrices(), AttentionKernel::matrix, 8, 8, 8, 16, 4, 16, 64, 1},
      {amd_rdna3(), AttentionKernel::matrix, 16, 16, 16, 16, 4, 16, 128, 2},
      {amd_rdna3(64), AttentionKernel::matrix, 16, 16, 16, 16, 4, 16, 256, 2},
      {intel_xe(), AttentionKernel::matrix, 8, 8, 16, 16, 4, 32, 128, 1},
      {minimal(), AttentionKernel::scalar},
  };
  for (const Expected& e : expected) {
    const auto c = plan(e.device, deepseek_decode(16));
    std::cout << "  " << e.device.name << ": " << (c.kernel == AttentionKernel::matrix ? "matrix" : "scalar") << " "
              << c.product.m << "x" << c.product.n << "x" << c.product.k << ", rows " << c.rows << ", value parts "
              << c.value_parts << ", key tile " << c.key_tile << ", wg " << c.workgroup << ", " << c.shared_bytes
              << " bytes shared, " << c.resident_workgroups << " resident\n";
    SCOPED_TRACE(e.device.name);
    ASSERT_EQ(c.kernel, e.kernel);
    EXPECT_LE(c.shared_bytes, e.device.max_shared_memory);
    if (e.kernel != AttentionKernel::matrix) continue;
    EXPECT_EQ(c.product.m, e.m);
    EXPECT_EQ(c.product.n, e.n);
    EXPECT_EQ(c.product.k, e.k);
    EXPECT_EQ(c.rows, e.rows);
    EXPECT_EQ(c.value_parts, e.value_parts);
    EXPECT_EQ(c.key_tile, e.key_tile);
    EXPECT_EQ(c.workgroup, e.workgroup);
    EXPECT_EQ(c.resident_workgroups, e.resident);
    EXPECT_EQ(c.shared_bytes, detail::mla_matrix_shared_bytes(c.rows, c.product, 576, c.key_tile, c.value_parts, c.workgroup));
    EXPECT_LE(c.shared_bytes * c.resident_workgroups, e.device.max_shared_memory);
    EXPECT_GT(detail::mla_matrix_shared_bytes(c.rows, c.product, 576, c.key_tile * 2, c.value_parts, c.workgroup),
              e.device.max_shared_memory / c.resident_workgroups)
        << "the key tile is the longest that fits";
  }
}

// One block of rows whose largest product's layout two workgroups cannot share takes a smaller
// product's where two can: on the H200 the 16x16x16 product needs 26520 bytes at 16 heads (four
// slices of scores), past half of 48 KiB, the 16x8x16 product 23448. The split then counts two
// workgroups per compute unit.
TEST(MlaMatrixPlanner, OneRowBlockTakesTheLayoutTwoWorkgroupsShare) {
  const DeviceCapabilities d = h200_with_khr();
  for (DType cache : {DType::bf16, DType::fp8_e4m3, DType::f16}) {
    const auto c = plan(d, deepseek_decode(16, cache == DType::f16 ? DType::f16 : DType::bf16, cache));
    SCOPED_TRACE(std::string(dtype_name(cache)));
    ASSERT_EQ(c.kernel, AttentionKernel::matrix);
    EXPECT_EQ(c.rows, 16u);
    EXPECT_EQ(c.resident_workgroups, 2u);
    EXPECT_LE(2 * c.shared_bytes, d.max_shared_memory);
    EXPECT_GT(2 * detail::mla_matrix_shared_bytes(16, MatrixProductShape{16, 16, 16}, 576, 16, 4, 128), d.max_shared_memory);
  }
  // A device with room for two of the largest product's: it keeps that product.
  DeviceCapabilities roomy = h200_with_khr();
  roomy.max_shared_memory = 65536;
  const auto r = plan(roomy, deepseek_decode(16, DType::bf16, DType::bf16));
  EXPECT_EQ(r.product.n, 16u);
  EXPECT_EQ(r.resident_workgroups, 2u);
  // More rows than a block (32 and 128 heads): the longest tile one workgroup holds, one resident.
  for (uint32_t heads : {32u, 128u}) {
    const auto c = plan(d, deepseek_decode(heads, DType::bf16, DType::bf16));
    EXPECT_EQ(c.product.n, 16u) << heads;
    EXPECT_EQ(c.resident_workgroups, 1u) << heads;
  }
  // A prefill's rows at 16 heads (8 tokens: 128 rows) fill several blocks: one resident.
  MlaShape prefill = deepseek_decode(16, DType::bf16, DType::bf16);
  prefill.attention.num_requests = 1;
  prefill.attention.num_query_tokens = 8;
  const int32_t starts[] = {0, 8};
  const auto p = detail::plan_mla_attention(d, prefill, starts, MlaOptions{});
  EXPECT_GT(p.rows, 16u);
  EXPECT_EQ(p.resident_workgroups, 1u);
}

// A step too small to fill the compute units one workgroup each gains nothing from a second
// resident one, and each workgroup of the two-workgroup layout alone is slower: it keeps the
// largest product's layout. On the H200 (132 SMs), one request over 4096 positions splits into
// at most 64 workgroups, 8 requests into 512, 32 requests forced into one pass 32.
TEST(MlaMatrixPlanner, AStepThatCannotFillTheDeviceKeepsTheLargestLayout) {
  const DeviceCapabilities d = h200_with_khr();
  struct Case {
    uint32_t requests;
    SplitMode split;
    uint32_t n, resident;
  };
  for (const Case& k : {Case{1, SplitMode::automatic, 16, 1}, Case{8, SplitMode::automatic, 8, 2},
                        Case{32, SplitMode::single_pass, 16, 1}, Case{32, SplitMode::automatic, 8, 2}}) {
    MlaShape m = mla_decode_shape(16, 576, 512, DType::bf16, DType::bf16);
    m.attention.num_requests = k.requests;
    m.attention.num_query_tokens = k.requests;
    m.attention.max_blocks_per_seq = 256;  // 4096 positions
    std::vector<int32_t> starts(k.requests + 1);
    for (uint32_t i = 0; i <= k.requests; ++i) starts[i] = int32_t(i);
    MlaOptions o;
    o.split = k.split;
    const auto c = detail::plan_mla_attention(d, m, starts, o);
    const std::string label = std::to_string(k.requests) + " requests, split " + std::to_string(int(k.split));
    ASSERT_EQ(c.kernel, AttentionKernel::matrix) << label;
    EXPECT_EQ(c.product.n, k.n) << label;
    EXPECT_EQ(c.resident_workgroups, k.resident) << label;
    EXPECT_EQ(c.key_tile, 16u) << label;
  }
}

// bf16 rows are twice fp8's words: 32 positions of DeepSeek's 576-wide rows are 36 cache words
// per invocation of 128 for fp8, the most the staging holds in registers, and 72 for bf16, so
// Intel's 16 heads (two blocks of 8 rows: one workgroup at a time) take tiles of 32 for fp8 and
// 16 for bf16 though its 64 KiB would hold 32 of either. The H200's 128 heads (two blocks of 16
// rows) keep tiles of 16: 32 do not fit its 48 KiB.
TEST(MlaMatrixPlanner, RowsTakeTheLongestTileTheStagingRegistersHold) {
  const DeviceCapabilities xe = intel_xe();
  const auto fp8 = plan(xe, deepseek_decode(16, DType::bf16, DType::fp8_e4m3));
  ASSERT_EQ(fp8.kernel, AttentionKernel::matrix);
  EXPECT_EQ(fp8.key_tile, 32u);
  EXPECT_EQ(fp8.workgroup, 128u);
  EXPECT_EQ(uint64_t(fp8.key_tile) * 576 / 4 / fp8.workgroup, 36u);
  const auto bf16 = plan(xe, deepseek_decode(16, DType::bf16, DType::bf16));
  ASSERT_EQ(bf16.kernel, AttentionKernel::matrix);
  EXPECT_EQ(bf16.key_tile, 16u);
  EXPECT_EQ(bf16.workgroup, 128u);
  EXPECT_EQ(uint64_t(bf16.key_tile) * 576 * 2 / 4 / bf16.workgroup, 36u);
  EXPECT_LE(detail::mla_matrix_shared_bytes(bf16.rows, bf16.product, 576, 32, bf16.value_parts, bf16.workgroup),
            xe.max_shared_memory)
      << "the staging's registers, not shared memory, keep bf16 at 16";
  const auto c128 = plan(h200_with_khr(), deepseek_decode(128, DType::bf16, DType::bf16));
  ASSERT_EQ(c128.kernel, AttentionKernel::matrix);
  EXPECT_EQ(c128.rows, 32u);
  EXPECT_EQ(c128.key_tile, 16u);
  EXPECT_GT(detail::mla_matrix_shared_bytes(c128.rows, c128.product, 576, 32, c128.value_parts, c128.workgroup),
            h200_with_khr().max_shared_memory);
}

// Every head count and dtype on every device with the kernel: the tile within the device's
// limits, the softmax's lanes whole (workgroup a multiple of the rows), every head in a group.
TEST(MlaMatrixPlanner, TilesStayWithinEveryDevicesLimits) {
  const std::vector<DeviceCapabilities> devices{h200_with_khr(), khr_only_16x16x16(), lavapipe_with_cooperative_matrices(),
                                                amd_rdna3(), amd_rdna3(64), intel_xe()};
  for (const auto& d : devices) {
    for (uint32_t heads : {1u, 16u, 20u, 32u, 64u, 128u}) {
      for (auto [query, cache] : {std::pair{DType::f16, DType::f16}, std::pair{DType::bf16, DType::bf16},
                                  std::pair{DType::bf16, DType::fp8_e4m3}}) {
        for (auto [dk, dv] : {std::pair{576u, 512u}, std::pair{80u, 64u}, std::pair{40u, 40u}}) {
          MlaShape m = deepseek_decode(heads, query, cache);
          m.attention.head_size = dk;
          m.value_head_size = dv;
          const auto c = plan(d, m);
          SCOPED_TRACE(d.name + " H " + std::to_string(heads) + " Dk " + std::to_string(dk) + " " + std::string(dtype_name(cache)));
          ASSERT_EQ(c.kernel, AttentionKernel::matrix);
          EXPECT_LE(c.shared_bytes, d.max_shared_memory);
          EXPECT_LE(c.workgroup, d.max_workgroup_invocations);
          EXPECT_EQ(c.workgroup, c.rows / c.product.m * c.value_parts * d.max_subgroup_size);
          EXPECT_EQ(c.workgroup % c.rows, 0u);
          EXPECT_EQ(c.rows % c.product.m, 0u);
          EXPECT_EQ(c.key_tile % c.product.n, 0u);
          EXPECT_EQ(c.key_tile % c.product.k, 0u);
          // The value parts' columns (the shader's DVP, a multiple of n) lie within the staged rows.
          const uint32_t part = ((dv + c.value_parts - 1) / c.value_parts + c.product.n - 1) / c.product.n * c.product.n;
          EXPECT_LE(c.value_parts * part, (dk + 15) / 16 * 16);
          EXPECT_LE(part, 128u) << "accumulators per subgroup";
          EXPECT_GE(c.heads_per_workgroup * c.groups_per_kv_head, heads);
          EXPECT_LT(c.heads_per_workgroup * (c.groups_per_kv_head - 1), heads) << "an idle group";
          EXPECT_GE(c.tokens_per_tile, 1u);
        }
      }
    }
  }
}

// What the matrix kernel does not take runs on the portable one (automatic), and asking for the
// matrix kernel there is refused naming why.
TEST(MlaMatrixPlanner, FallsBackToThePortableKernelOrRefuses) {
  const DeviceCapabilities khr = h200_with_khr();
  EXPECT_EQ(plan(khr, deepseek_decode(16, DType::f32, DType::f16)).kernel, AttentionKernel::scalar);
  EXPECT_EQ(plan(khr, deepseek_decode(16, DType::f16, DType::f32)).kernel, AttentionKernel::scalar);
  EXPECT_EQ(plan(khr, deepseek_decode(16), AttentionKernel::scalar).kernel, AttentionKernel::scalar);
  expect_refused([&] { plan(khr, deepseek_decode(16, DType::f32, DType::f16), AttentionKernel::matrix); },
                 "kernel: matrix: query: dtype f32", ErrorCode::unsupported);
  expect_refused([&] { plan(khr, deepseek_decode(16, DType::f16, DType::f32), AttentionKernel::matrix); },
                 "kernel: matrix: kv_dtype: f32", ErrorCode::unsupported);
  expect_refused([&] { plan(lavapipe(), deepseek_decode(16), AttentionKernel::matrix); },
                 "kernel: matrix: VK_KHR_cooperative_matrix is not enabled", ErrorCode::unsupported);
  // Cooperative matrices but too little shared memory for one block of rows' queries on their way
  // into registers (8 rows of 576 f16, 9.1 KiB) and for the shortest tile.
  DeviceCapabilities small = lavapipe_with_cooperative_matrices();
  small.max_shared_memory = 8192;
  EXPECT_EQ(plan(small, deepseek_decode(16)).kernel, AttentionKernel::scalar);
  expect_refused([&] { plan(small, deepseek_decode(16), AttentionKernel::matrix); },
                 "kernel: matrix: head_size: Dk = 576 needs more shared memory", ErrorCode::unsupported);
  // A device whose only f16 product the kernel cannot use.
  DeviceCapabilities odd = amd_rdna3();
  odd.cooperative_matrix_khr_shapes = f16_products({{64, 64, 64}});
  EXPECT_EQ(plan(odd, deepseek_decode(16)).kernel, AttentionKernel::scalar);
  expect_refused([&] { plan(odd, deepseek_decode(16), AttentionKernel::matrix); }, "lists no f16 x f16 + f32 product",
                 ErrorCode::unsupported);
  // Subgroups without arithmetic (the kernel's bf16 range takes subgroupMax).
  DeviceCapabilities no_reductions = lavapipe_with_cooperative_matrices();
  no_reductions.subgroup_arithmetic = false;
  EXPECT_EQ(plan(no_reductions, deepseek_decode(16)).kernel, AttentionKernel::scalar);
  expect_refused([&] { plan(no_reductions, deepseek_decode(16), AttentionKernel::matrix); },
                 "no subgroup arithmetic in compute shaders", ErrorCode::unsupported);
  // Subgroups without shuffles (the softmax rows' lanes exchange their maxima with them).
  DeviceCapabilities no_shuffles = lavapipe_with_cooperative_matrices();
  no_shuffles.subgroup_shuffle = false;
  EXPECT_EQ(plan(no_shuffles, deepseek_decode(16)).kernel, AttentionKernel::scalar);
  expect_refused([&] { plan(no_shuffles, deepseek_decode(16), AttentionKernel::matrix); },
                 "no subgroup shuffles in compute shaders", ErrorCode::unsupported);
  MlaOptions decode;
  decode.kernel = AttentionKernel::decode;
  expect_refused([&] { detail::plan_mla_attention(khr, deepseek_decode(16), kDecodeStarts, decode); }, "kernel: 1");
}

// More heads than a workgroup's rows: equal groups of them; more tokens: more row blocks.
TEST(MlaMatrixPlanner, HeadsAndTokensFillTheRowBlocks) {
  // 128 heads on the H200: two blocks of 16 rows (four do not fit: their scores, P and factors
  // beside 16 staged rows pass 48 KiB), so four groups of 32 heads.
  auto c = plan(h200_with_khr(), deepseek_decode(128));
  EXPECT_EQ(c.rows, 32u);
  EXPECT_EQ(c.groups_per_kv_head, 4u);
  EXPECT_EQ(c.heads_per_workgroup, 32u);
  c = plan(lavapipe_with_cooperative_matrices(), deepseek_decode(40));
  EXPECT_EQ(c.rows, 32u);
  EXPECT_EQ(c.groups_per_kv_head, 2u);
  EXPECT_EQ(c.heads_per_workgroup, 20u);
  c = plan(lavapipe_with_cooperative_matrices(), deepseek_decode(36));
  EXPECT_EQ(c.groups_per_kv_head, 2u);
  EXPECT_EQ(c.heads_per_workgroup, 18u) << "equal groups, not 32 and 4";
  // Small rows (Dk 80): 4 heads x 8 tokens take 2 blocks of 16 on AMD.
  MlaShape m = deepseek_decode(4, DType::f16, DType::f16);
  m.attention.head_size = 80;
  m.value_head_size = 64;
  m.attention.num_requests = 1;
  m.attention.num_query_tokens = 8;
  const int32_t starts[] = {0, 8};
  c = detail::plan_mla_attention(amd_rdna3(), m, starts, MlaOptions{});
  EXPECT_EQ(c.kernel, AttentionKernel::matrix);
  EXPECT_EQ(c.rows, 32u);
  EXPECT_EQ(c.tokens_per_tile, 8u);
  EXPECT_EQ(c.value_parts, 1u);
}

}  // namespace
}  // namespace vkpaged::test
