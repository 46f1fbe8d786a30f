// SPDX-License-Identifier: Apache-2.0
// `vkpaged bench --suite mla` (bench_mla.cpp) without a device: its cases, the bytes and FLOPs
// each is measured by, and which cases a device's limits leave out (lavapipe's 128 MiB storage
// buffers, NVIDIA's 4 GiB ones). The suite itself runs in test_cli.cpp (mla-quick).
#include <gtest/gtest.h>

#include <set>
#include <string>
#include <vector>

#include "bench.hpp"
#include "vkpaged/error.hpp"

namespace vkpaged::cli {
namespace {

constexpr uint64_t MiB = uint64_t(1) << 20, GB = 1000000000;

DeviceInfo device(uint64_t range, uint64_t memory, uint64_t allocation = 0) {
  DeviceInfo d;
  d.name = "test device";
  d.max_storage_buffer_range = range;
  d.device_local_bytes = memory;
  d.max_memory_allocation_size = allocation;
  return d;
}

std::vector<std::string> unfit_names(const std::vector<MlaBenchCase>& cases, const DeviceInfo& dev) {
  std::vector<std::string> names;
  for (const auto& c : cases)
    if (!mla_case_unfit(c, dev).empty()) names.push_back(c.name);
  return names;
}

TEST(BenchMla, SuiteHoldsEveryCaseOfTheIssueOnce) {
  const auto cases = mla_bench_cases("mla");
  ASSERT_EQ(cases.size(), 32u);  // 4 request counts x 2 contexts x 2 head counts x 2 dtypes
  std::set<std::string> names;
  std::set<std::tuple<uint32_t, uint32_t, uint32_t, DType>> shapes;
  for (const auto& c : cases) {
    names.insert(c.name);
    shapes.insert({c.requests, c.context, c.heads, c.cache_dtype});
    EXPECT_TRUE(c.requests == 1 || c.requests == 8 || c.requests == 32 || c.requests == 128) << c.name;
    EXPECT_TRUE(c.context == 4096 || c.context == 32768) << c.name;
    EXPECT_TRUE(c.heads == 16 || c.heads == 128) << c.name;
    EXPECT_TRUE(c.cache_dtype == DType::bf16 || c.cache_dtype == DType::fp8_e4m3) << c.name;
  }
  EXPECT_EQ(names.size(), cases.size()) << "a name twice";
  EXPECT_EQ(shapes.size(), cases.size()) << "a shape twice";
  EXPECT_EQ(cases.front().name, "r1-4k-h16-bf16");
  EXPECT_EQ(cases.back().name, "r128-32k-h128-fp8_e4m3");
  EXPECT_EQ(mla_bench_cases("mla-quick").size(), 4u);
  EXPECT_TRUE(is_mla_suite("mla") && is_mla_suite("mla-quick") && !is_mla_suite("prefill"));
  EXPECT_THROW(mla_bench_cases("mla-fast"), Error);
}

// Bytes: every row of every request read once (576 entries of the cache dtype); FLOPs:
// 2 x H x (576 + 512) per cached token per request; the pool holds whole blocks of 64.
TEST(BenchMla, BytesAndFlopsAreTheAbsorbedShapes) {
  const MlaBenchCase bf16{"a", 8, 4096, 128, DType::bf16};
  const MlaCaseBytes b = mla_case_bytes(bf16);
  EXPECT_EQ(b.cache_read, 8ull * 4096 * 576 * 2);
  EXPECT_EQ(b.blocks, 8ull * 4096 / 64);
  EXPECT_EQ(b.pool, b.cache_read);
  EXPECT_DOUBLE_EQ(b.flops, 2.0 * 128 * (576 + 512) * 4096 * 8);
  EXPECT_EQ(b.query, 8ull * 128 * 576 * 2);
  EXPECT_EQ(b.output, 8ull * 128 * 512 * 2);
  const MlaCaseBytes e4m3 = mla_case_bytes({"b", 3, 200, 16, DType::fp8_e4m3});
  EXPECT_EQ(e4m3.cache_read, 3ull * 200 * 576);
  EXPECT_EQ(e4m3.blocks, 3ull * 4);  // 200 rows: four blocks of 64, the last one 8 rows
  EXPECT_EQ(e4m3.pool, 3ull * 4 * 64 * 576);
}

// Target 14's suite: the prefill suite's shapes (one 4096-token prefill, 8 of 2048, 4 chunks of
// 512 after 8192 cached) with 16 and 128 heads, bf16 and fp8; every case's new tokens the last of
// its context.
TEST(BenchMla, PrefillSuiteHoldsEachShapeOncePerHeadsAndDtype) {
  const auto cases = mla_bench_cases("mla-prefill");
  ASSERT_EQ(cases.size(), 12u);
  std::set<std::string> names;
  for (const auto& c : cases) {
    names.insert(c.name);
    EXPECT_GT(c.new_tokens, 1u) << c.name;
    EXPECT_LE(c.new_tokens, c.context) << c.name;
    EXPECT_TRUE(c.heads == 16 || c.heads == 128) << c.name;
  }
  EXPECT_EQ(names.size(), cases.size()) << "a name twice";
  EXPECT_EQ(cases.front().name, "p4k-h16-bf16");
  EXPECT_EQ(cases[2].name, "chunk4x512+8k-h16-bf16");
  EXPECT_EQ(cases[2].requests, 4u);
  EXPECT_EQ(cases[2].new_tokens, 512u);
  EXPECT_EQ(cases[2].context, 8704u);
  EXPECT_EQ(cases.back().name, "chunk4x512+8k-h128-fp8_e4m3");
  EXPECT_EQ(mla_bench_cases("mla-prefill-quick").size(), 3u);
  // The residency suite: 256 decode requests of 16 heads, one workgroup each in one pass.
  const auto resident = mla_bench_cases("mla-resident");
  ASSERT_EQ(resident.size(), 2u);
  EXPECT_TRUE(is_mla_suite("mla-resident"));
  for (const auto& c : resident) {
    EXPECT_EQ(c.requests, 256u) << c.name;
    EXPECT_EQ(c.heads, 16u) << c.name;
    EXPECT_EQ(c.new_tokens, 1u) << c.name;
  }
  EXPECT_EQ(resident.front().name, "r256-4k-h16-bf16");
  EXPECT_EQ(resident.back().name, "r256-4k-h16-fp8_e4m3");
  EXPECT_TRUE(is_mla_suite("mla-prefill") && is_mla_suite("mla-prefill-quick"));
  for (const auto& c : mla_bench_cases("mla")) EXPECT_EQ(c.new_tokens, 1u) << c.name;
}

// Many new tokens: FLOPs count each query token's keys (causal: new token j of q sees L - q + j + 1),
// the bytes every row once; queries and outputs one row per new token.
TEST(BenchMla, PrefillFlopsCountTheKeysEachNewTokenSees) {
  MlaBenchCase chunk{"c", 4, 8704, 128, DType::bf16};
  chunk.new_tokens = 512;
  const MlaCaseBytes b = mla_case_bytes(chunk);
  double seen = 0;
  for (uint32_t j = 0; j < 512; ++j) seen += 8704 - 512 + j + 1;
  EXPECT_DOUBLE_EQ(b.flops, 2.0 * 128 * (576 + 512) * seen * 4);
  EXPECT_EQ(b.cache_read, 4ull * 8704 * 576 * 2);
  EXPECT_EQ(b.query, 4ull * 512 * 128 * 576 * 2);
  EXPECT_EQ(b.output, 4ull * 512 * 128 * 512 * 2);
  chunk.new_tokens = chunk.context;  // a whole prefill: L (L + 1) / 2 pairs
  EXPECT_DOUBLE_EQ(mla_case_bytes(chunk).flops, 2.0 * 128 * (576 + 512) * (8704.0 * 8705 / 2) * 4);
}

TEST(BenchMla, CasesPastTheDevicesLimitsAreSkippedNamingTheLimit) {
  const auto cases = mla_bench_cases("mla");
  // lavapipe: storage buffers of at most 128 MiB: bf16 pools up to 113 MB, fp8 up to 75 MB.
  const DeviceInfo lavapipe = device(128 * MiB, 16 * GB);
  EXPECT_EQ(unfit_names(cases, lavapipe),
            (std::vector<std::string>{"r32-4k-h16-bf16", "r128-4k-h16-bf16", "r8-32k-h16-bf16", "r32-32k-h16-bf16",
                                      "r128-32k-h16-bf16", "r32-4k-h128-bf16", "r128-4k-h128-bf16", "r8-32k-h128-bf16",
                                      "r32-32k-h128-bf16", "r128-32k-h128-bf16", "r128-4k-h16-fp8_e4m3",
                                      "r8-32k-h16-fp8_e4m3", "r32-32k-h16-fp8_e4m3", "r128-32k-h16-fp8_e4m3",
                                      "r128-4k-h128-fp8_e4m3", "r8-32k-h128-fp8_e4m3", "r32-32k-h128-fp8_e4m3",
                                      "r128-32k-h128-fp8_e4m3"}));
  const std::string why = mla_case_unfit(cases[1], lavapipe);  // r8-4k-h16-bf16: 37.7 MB, fits
  EXPECT_EQ(why, "");
  EXPECT_EQ(mla_case_unfit({"x", 32, 4096, 16, DType::bf16}, lavapipe),
            "the pool of 150 MB exceeds maxStorageBufferRange (134 MB), and the device has no buffer device "
            "addresses");
  // With buffer device addresses a pool past the range is read by address: lavapipe then fits them all.
  DeviceInfo lavapipe_addresses = lavapipe;
  lavapipe_addresses.buffer_device_address = true;
  EXPECT_EQ(unfit_names(cases, lavapipe_addresses), std::vector<std::string>{});
  // An H200's range and memory (4 GiB - 1, 141 GB) with allocations of up to 16 GiB (the H200's
  // own limit, 4 GiB - 2 MiB, after): without device addresses only the bf16 pool of
  // 128 x 32768 rows (4.8 GB) is past the range; with them nothing.
  DeviceInfo h200 = device(0xffffffffull, 150 * GB, 0xffffffffull * 4);
  EXPECT_EQ(unfit_names(cases, h200), (std::vector<std::string>{"r128-32k-h16-bf16", "r128-32k-h128-bf16"}));
  h200.buffer_device_address = true;
  EXPECT_EQ(unfit_names(cases, h200), std::vector<std::string>{});
  // The H200 as it reports itself: one allocation of 4 GiB - 2 MiB at most, so that pool is
  // still refused, naming that limit.
  h200.max_memory_allocation_size = (uint64_t(4) << 30) - (uint64_t(2) << 20);
  EXPECT_EQ(unfit_names(cases, h200), (std::vector<std::string>{"r128-32k-h16-bf16", "r128-32k-h128-bf16"}));
  EXPECT_EQ(mla_case_unfit({"x", 128, 32768, 16, DType::bf16}, h200),
            "the pool of 4831 MB exceeds maxMemoryAllocationSize (4292 MB)");
  // One allocation's limit and the memory count too.
  EXPECT_EQ(mla_case_unfit({"x", 8, 32768, 16, DType::bf16}, device(0xffffffffull, 150 * GB, 200 * MiB)),
            "the pool of 301 MB exceeds maxMemoryAllocationSize (209 MB)");
  EXPECT_EQ(mla_case_unfit({"x", 8, 32768, 16, DType::bf16}, device(0xffffffffull, 500 * MiB)),
            "302 MB of buffers exceed half the device's local memory (524 MB)");
}

}  // namespace
}  // namespace vkpaged::cli
