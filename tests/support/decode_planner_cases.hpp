// SPDX-License-Identifier: Apache-2.0
#pragma once
// vkpaged bench's shapes for the decode planner's tests, which run without a GPU
// (tests/ops/test_decode_planner*.cpp) on the devices of support/fabricated_devices.hpp, and the
// fields a plan is expected to have.
#include <gtest/gtest.h>

#include <map>
#include <string>
#include <vector>

#include "ops/decode_planner.hpp"
#include "support/fabricated_devices.hpp"

namespace vkpaged::test {

using detail::DecodeChoice;
using detail::DecodeModule;
using detail::DecodeTuning;
using detail::plan_decode;
using Kernel = DecodeKernel;

// ---- shapes ----

// A case of vkpaged bench's suites, shaped as `vkpaged bench` shapes it (command_bench.cpp):
// a pool of exactly the blocks the lengths use, M columns for the context, max_context_len the
// longest length. Ragged cases' lengths are drawn from [1, context] by the bench's generator
// (std::mt19937(1234)); their longest length and block count are written here as it draws them.
struct BenchCase {
  uint32_t batch, context, heads, kv_heads, head_size, block_size = 16;
  DType query = DType::f16, cache = DType::f16;
  uint32_t ragged_max = 0, ragged_blocks = 0;  // ragged: the longest length and the blocks used
};

inline DecodeShape shape_of(const BenchCase& c) {
  DecodeShape s;
  s.num_seqs = c.batch;
  s.num_heads = c.heads;
  s.num_kv_heads = c.kv_heads;
  s.head_size = c.head_size;
  s.block_size = c.block_size;
  s.max_blocks_per_seq = (c.context + c.block_size - 1) / c.block_size;
  s.num_blocks = c.ragged_max ? c.ragged_blocks : c.batch * s.max_blocks_per_seq;
  s.max_context_len = c.ragged_max ? c.ragged_max : c.context;
  s.query_dtype = c.query;
  s.cache_dtype = c.cache;
  return s;
}

inline const std::map<std::string, BenchCase>& bench_cases() {
  static const std::map<std::string, BenchCase> cases = [] {
    std::map<std::string, BenchCase> m;
    // standard (docs/performance-targets.md) and ragged
    m["long1"] = {1, 32768, 32, 8, 128};
    m["mid8"] = {8, 4096, 32, 8, 128};
    m["batch64"] = {64, 4096, 32, 8, 128};
    m["batch256"] = {256, 1024, 32, 8, 128};
    m["mha32"] = {32, 8192, 32, 32, 128};
    m["gqa8x"] = {16, 2048, 64, 8, 128};
    m["d64"] = {4, 16384, 32, 8, 64};
    m["batch64-ragged"] = {64, 4096, 32, 8, 128, 16, DType::f16, DType::f16, 4044, 8449};
    m["batch256-ragged"] = {256, 1024, 32, 8, 128, 16, DType::f16, DType::f16, 1019, 8512};
    m["mha32-ragged"] = {32, 8192, 32, 32, 128, 16, DType::f16, DType::f16, 7850, 8195};
    // dtypes
    const std::pair<DType, DType> pairs[] = {{DType::f32, DType::f32},
                                             {DType::f16, DType::f16},
                                             {DType::bf16, DType::bf16},
                                             {DType::f16, DType::fp8_e4m3},
                                             {DType::f16, DType::fp8_e5m2}};
    for (const auto& [q, c] : pairs) {
      const std::string suffix = std::string("-") + std::string(dtype_name(q)) + "-" + std::string(dtype_name(c));
      m["batch64" + suffix] = {64, 4096, 32, 8, 128, 16, q, c};
      m["batch256" + suffix] = {256, 1024, 32, 8, 128, 16, q, c};
    }
    // blocks
    for (uint32_t b : {8u, 16u, 32u, 64u, 128u}) m["batch64-b" + std::to_string(b)] = {64, 4096, 32, 8, 128, b};
    // long
    m["1x32k"] = {1, 32768, 32, 8, 128};
    m["1x128k"] = {1, 131072, 32, 8, 128};
    m["1x256k"] = {1, 262144, 32, 8, 128};
    m["2x128k"] = {2, 131072, 32, 8, 128};
    m["4x64k"] = {4, 65536, 32, 8, 128};
    m["4x256k"] = {4, 262144, 32, 8, 128};
    // lengths: the same 1 GB of KV from 16 x 16384 to 1024 x 256 tokens
    for (uint32_t b = 16; b <= 1024; b *= 2) m["b" + std::to_string(b) + "x" + std::to_string(262144 / b)] = {b, 262144 / b, 32, 8, 128};
    // quick (lavapipe's)
    m["q-long"] = {1, 4096, 8, 2, 128};
    m["q-batch"] = {16, 512, 8, 2, 128};
    m["q-mha"] = {8, 512, 8, 8, 64};
    m["q-ragged"] = {16, 1024, 8, 2, 128, 16, DType::f16, DType::f16, 882, 578};
    return m;
  }();
  return cases;
}

inline DecodeShape bench_shape(const std::string& name) { return shape_of(bench_cases().at(name)); }

// A shape for planning: blocks of 16 tokens, a table and pool just long enough.
inline DecodeShape planner_shape(uint32_t seqs, uint32_t heads, uint32_t kv_heads, uint32_t head_size, uint32_t len,
                       DType query = DType::f16, DType cache = DType::f16) {
  DecodeShape s;
  s.num_seqs = seqs;
  s.num_heads = heads;
  s.num_kv_heads = kv_heads;
  s.head_size = head_size;
  s.block_size = 16;
  s.max_blocks_per_seq = (len + 15) / 16;
  s.num_blocks = s.max_blocks_per_seq;
  s.max_context_len = len;
  s.query_dtype = query;
  s.cache_dtype = cache;
  return s;
}

inline DecodeOptions longest_first() {
  DecodeOptions o;
  o.order = DecodeOrder::longest_first;
  return o;
}
inline DecodeOptions merged_in_dispatch() {
  DecodeOptions o;
  o.merge = DecodeMerge::in_dispatch;
  return o;
}

// ---- expected plans ----

struct Want {
  Kernel kernel;
  DecodeModule module;  // the shader module: scalar or matrix, subgroup reductions, caches by address, E4M3
  bool split;
  uint32_t partitions, partition_tokens;
  uint32_t subgroups;  // per workgroup on the matrix kernel; 0 on the scalar kernel
  uint32_t workgroup;
  uint32_t heads_per_workgroup, groups_per_kv_head;
  uint32_t lanes_per_row;  // the scalar kernel's; 0 on the matrix kernel
  uint64_t scratch_bytes;
  uint32_t switches = 0;  // kEarlyValues | kPipeline | kShareQuery | kLongestFirst | kMerge
};
inline constexpr uint32_t kEarlyValues = 1, kPipeline = 2, kShareQuery = 4, kLongestFirst = 8, kMerge = 16;

inline void expect_plan(const DecodeChoice& c, const Want& w, const DecodeShape& s) {
  EXPECT_EQ(c.kernel, w.kernel);
  EXPECT_EQ(c.module, w.module);
  EXPECT_EQ(c.address, w.module == DecodeModule::address || w.module == DecodeModule::address_subgroup);
  EXPECT_EQ(c.subgroup_reduce, w.module == DecodeModule::scalar_subgroup || w.module == DecodeModule::address_subgroup);
  EXPECT_EQ(c.split, w.split);
  EXPECT_EQ(c.num_partitions, w.partitions);
  EXPECT_EQ(c.partition_tokens, w.partition_tokens);
  EXPECT_EQ(c.subgroups, w.subgroups);
  EXPECT_EQ(c.workgroup, w.workgroup);
  EXPECT_EQ(c.heads_per_workgroup, w.heads_per_workgroup);
  EXPECT_EQ(c.groups_per_kv_head, w.groups_per_kv_head);
  EXPECT_EQ(c.lanes_per_row, w.lanes_per_row);
  EXPECT_EQ(c.scratch_bytes, w.scratch_bytes);
  const bool longest = w.switches & kLongestFirst, merge = w.switches & kMerge;
  EXPECT_EQ(c.early_values, bool(w.switches & kEarlyValues));
  EXPECT_EQ(c.pipeline, bool(w.switches & kPipeline));
  EXPECT_EQ(c.share_query, bool(w.switches & kShareQuery));
  EXPECT_EQ(c.longest_first, longest);
  EXPECT_EQ(c.merge_in_dispatch, merge);
  // What follows from the fields above, as the recording and the pipelines read it.
  EXPECT_EQ(c.order_bytes, longest ? 4ull * s.num_seqs * w.partitions : 0u);
  EXPECT_EQ(c.merge_counter_bytes, merge ? 4ull * s.num_seqs * s.num_heads : 0u);
  EXPECT_EQ(c.reduce_workgroup, w.split && !merge ? 256u : 0u);
  EXPECT_EQ(c.timeline_bytes, 0u);
  if (w.kernel == Kernel::matrix) EXPECT_EQ(c.workgroup, 32 * w.subgroups);
  if (w.split) EXPECT_GE(uint64_t(w.partitions) * w.partition_tokens, s.max_context_len);
  EXPECT_EQ(w.scratch_bytes, w.split ? 4ull * s.num_seqs * s.num_heads * w.partitions * (s.head_size + 2) : 0u);
}

struct Row {
  const char* name;  // a bench case
  DecodeOptions options;
  Want want;
};

inline void expect_rows(const DeviceCapabilities& device, const std::vector<Row>& rows) {
  for (const Row& r : rows) {
    SCOPED_TRACE(::testing::Message() << device.name << ", " << r.name << ", order " << int(r.options.order) << ", merge "
                                      << int(r.options.merge));
    const DecodeShape s = bench_shape(r.name);
    expect_plan(plan_decode(device, s, r.options, DecodeTuning{}), r.want, s);
  }
}

}  // namespace vkpaged::test
