// SPDX-License-Identifier: Apache-2.0
// The decode planner's rules (ops/decode_planner.hpp) at their edges, on fabricated devices and
// without a GPU: the matrix kernel's switches by dtype, its one pass on more subgroups, its
// partitions and subgroups, the in-dispatch merge, longest first, the scalar kernel's splits and
// workgroups, caches by device address, the choice of kernel and its refusals, the fragment
// layout, the timeline, the limits, the feature bits and the knobs of VKPAGED_DECODE_TUNE.
// test_decode_planner_suites.cpp pins the plans of vkpaged bench's suites.
#include <gtest/gtest.h>

#include <bit>
#include <string>
#include <vector>

#include "support/decode_planner_cases.hpp"
#include "vkpaged/error.hpp"

namespace vkpaged::test {
namespace {

DecodeChoice plan(const DeviceCapabilities& d, const DecodeShape& s, const DecodeOptions& o = {},
                  const DecodeTuning& t = {}) {
  return plan_decode(d, s, o, t);
}

DecodeTuning tuned(const char* text) { return detail::parse_decode_tuning(text); }

// Runs `f`, expects vkpaged::Error of `code` whose message holds every one of `mentions`.
template <typename F>
void expect_error(F&& f, ErrorCode code, const std::vector<std::string>& mentions) {
  try {
    f();
    ADD_FAILURE() << "accepted";
  } catch (const Error& e) {
    EXPECT_EQ(e.code(), code) << e.what();
    for (const auto& m : mentions) EXPECT_NE(std::string(e.what()).find(m), std::string::npos) << "'" << m << "' not in: " << e.what();
  }
}

DecodeOptions kernel_option(Kernel k) {
  DecodeOptions o;
  o.kernel = k;
  return o;
}

// The matrix kernel's switches by cache dtype: values with keys for every converted cache
// (bf16, fp8), the next unit ahead for fp8, the E4M3 module with its NaN search; outputs over
// the query's words where workgroups come and go (contexts up to 512 tokens, longest first),
// never for E4M3.
TEST(DecodePlannerH200, MatrixSwitchesByDtype) {
  struct Case {
    DType query, cache;
    bool early_values, pipeline;
    DecodeModule module;
  };
  for (const Case& c : {Case{DType::f16, DType::f16, false, false, DecodeModule::matrix},
                        Case{DType::bf16, DType::bf16, true, false, DecodeModule::matrix},
                        Case{DType::bf16, DType::f16, false, false, DecodeModule::matrix},
                        Case{DType::f16, DType::bf16, true, false, DecodeModule::matrix},
                        Case{DType::f16, DType::fp8_e4m3, true, true, DecodeModule::matrix_e4m3},
                        Case{DType::bf16, DType::fp8_e4m3, true, true, DecodeModule::matrix_e4m3},
                        Case{DType::f16, DType::fp8_e5m2, true, true, DecodeModule::matrix}}) {
    SCOPED_TRACE(std::string(dtype_name(c.query)) + " query, " + std::string(dtype_name(c.cache)) + " cache");
    const DecodeChoice batch = plan(h200(), planner_shape(64, 32, 8, 128, 4096, c.query, c.cache));
    EXPECT_EQ(batch.kernel, Kernel::matrix);
    EXPECT_EQ(batch.early_values, c.early_values);
    EXPECT_EQ(batch.pipeline, c.pipeline);
    EXPECT_EQ(batch.module, c.module);
    EXPECT_TRUE(batch.query_registers);
    EXPECT_FALSE(batch.share_query);  // 4096 tokens in grid order
    const bool e4m3 = c.cache == DType::fp8_e4m3;
    EXPECT_EQ(plan(h200(), planner_shape(256, 32, 8, 128, 512, c.query, c.cache)).share_query, !e4m3);
    EXPECT_FALSE(plan(h200(), planner_shape(256, 32, 8, 128, 513, c.query, c.cache)).share_query);
    EXPECT_EQ(plan(h200(), planner_shape(64, 32, 8, 128, 4096, c.query, c.cache), longest_first()).share_query, !e4m3);
  }
  // The timeline's module records whatever the cache.
  DecodeOptions timeline;
  timeline.timeline = true;
  EXPECT_EQ(plan(h200(), planner_shape(64, 32, 8, 128, 4096, DType::f16, DType::fp8_e4m3), timeline).module,
            DecodeModule::matrix_timeline);
}

// A small batch runs in one pass on 4 or 8 subgroups per workgroup when that gives at least 7
// subgroups per compute unit (924 on 132) and each subgroup 8 units of 32 tokens.
TEST(DecodePlannerH200, SmallBatchesRunInOnePassOnMoreSubgroups) {
  DecodeShape s = planner_shape(17, 32, 8, 128, 16384);  // 136 workgroups: 544 subgroups on 4, 1088 on 8
  DecodeChoice c = plan(h200(), s);
  EXPECT_FALSE(c.split);
  EXPECT_EQ(c.subgroups, 8u);
  s.max_context_len = 2047;  // under 8 units for each of 8 subgroups: split
  c = plan(h200(), s);
  EXPECT_TRUE(c.split);
  EXPECT_EQ(c.partition_tokens, 1024u);
  EXPECT_EQ(c.subgroups, 4u);
  s.max_context_len = 2048;
  c = plan(h200(), s);
  EXPECT_FALSE(c.split);
  EXPECT_EQ(c.subgroups, 8u);
  s = planner_shape(29, 32, 8, 128, 8192);  // 232 workgroups: 928 subgroups on 4
  c = plan(h200(), s);
  EXPECT_FALSE(c.split);
  EXPECT_EQ(c.subgroups, 4u);
  s.max_context_len = 1023;  // under 8 units for each of 4, and one partition of 1024 covers it
  c = plan(h200(), s);
  EXPECT_FALSE(c.split);
  EXPECT_EQ(c.subgroups, 4u);
  s = planner_shape(28, 32, 8, 128, 8192);  // 224 workgroups: 896 subgroups on 4, 1792 on 8
  c = plan(h200(), s);
  EXPECT_FALSE(c.split);
  EXPECT_EQ(c.subgroups, 8u);
  // Where 8 subgroups do not fit the shared memory, a batch that needs them splits.
  DeviceCapabilities small = h200();
  small.max_shared_memory = 32768;
  c = plan(small, planner_shape(17, 32, 8, 128, 16384));
  EXPECT_TRUE(c.split);
  EXPECT_EQ(c.subgroups, 4u);
  // Only with the measured workgroups per compute unit (DecodeTuning::units): with 8 per unit,
  // the general rule's 8 partitions.
  c = plan(h200(), planner_shape(17, 32, 8, 128, 16384), {}, tuned("units=8"));
  EXPECT_TRUE(c.split);
  EXPECT_EQ(c.partition_tokens, 2048u);
  EXPECT_EQ(c.num_partitions, 8u);
  // A full batch is no small one.
  EXPECT_EQ(plan(h200(), planner_shape(66, 32, 8, 128, 16384)).subgroups, 2u);
  EXPECT_FALSE(plan(h200(), planner_shape(66, 32, 8, 128, 16384)).split);
}

// A small batch on the matrix kernel splits into partitions of 1024 to 8192 tokens that bring
// its workgroups up to about 4 per compute unit, 512 below 4096 tokens where the batch leaves
// most compute units idle; a full batch does not split.
TEST(DecodePlannerH200, MatrixPartitions) {
  struct Case {
    uint32_t seqs, len, tokens, partitions;
  };
  // 8 kv heads: up to 4 sequences leave most of 132 compute units idle (4 workgroups each wanted).
  for (const Case& c : {Case{1, 2048, 512, 4}, Case{1, 4095, 512, 8}, Case{4, 4095, 512, 8}, Case{8, 4095, 1024, 4},
                        Case{1, 4096, 1024, 4}, Case{1, 8192, 1024, 8}, Case{1, 32768, 1024, 32}, Case{1, 65536, 1024, 64},
                        Case{1, 131072, 2048, 64}, Case{1, 262144, 4096, 64}, Case{4, 262144, 8192, 32},
                        Case{1, 1000000, 8192, 123}}) {
    SCOPED_TRACE(::testing::Message() << c.seqs << " x " << c.len);
    const DecodeChoice p = plan(h200(), planner_shape(c.seqs, 32, 8, 128, c.len));
    EXPECT_EQ(p.kernel, Kernel::matrix);
    EXPECT_TRUE(p.split);
    EXPECT_EQ(p.partition_tokens, c.tokens);
    EXPECT_EQ(p.num_partitions, c.partitions);
    EXPECT_EQ(p.subgroups, c.tokens >= 1024 ? 4u : 2u);
  }
  // A partition as long as the context is one pass: on 4 subgroups for a small batch.
  DecodeChoice p = plan(h200(), planner_shape(1, 32, 8, 128, 512));
  EXPECT_FALSE(p.split);
  EXPECT_EQ(p.subgroups, 4u);
  p = plan(h200(), planner_shape(1, 32, 8, 128, 513));
  EXPECT_TRUE(p.split);
  EXPECT_EQ(p.partition_tokens, 512u);
  p = plan(h200(), planner_shape(16, 32, 8, 128, 1024));  // 128 workgroups: not idle enough for 512
  EXPECT_FALSE(p.split);
  EXPECT_EQ(p.subgroups, 4u);
  p = plan(h200(), planner_shape(16, 32, 8, 128, 1025));
  EXPECT_TRUE(p.split);
  EXPECT_EQ(p.partition_tokens, 1024u);
  // Other workgroups per compute unit (DecodeTuning::units) take the general rule: partitions
  // of any multiple of 256.
  p = plan(h200(), planner_shape(1, 32, 8, 128, 32768), {}, tuned("units=8"));
  EXPECT_TRUE(p.split);
  EXPECT_EQ(p.partition_tokens, 256u);
  EXPECT_EQ(p.num_partitions, 128u);
  // A full batch in one pass: 2 subgroups.
  p = plan(h200(), planner_shape(64, 32, 8, 128, 32768));
  EXPECT_FALSE(p.split);
  EXPECT_EQ(p.subgroups, 2u);
}

// Subgroups per workgroup: 2 for large batches and 512-token partitions, 4 for 1024 tokens
// or more and small batches in one pass, 4 for a full batch longest first past 2048 tokens;
// DecodeTuning::subgroups overrides them, halved until they fit.
TEST(DecodePlannerH200, MatrixSubgroups) {
  EXPECT_EQ(plan(h200(), planner_shape(64, 32, 8, 128, 2048), longest_first()).subgroups, 2u);
  EXPECT_EQ(plan(h200(), planner_shape(64, 32, 8, 128, 2049), longest_first()).subgroups, 4u);
  EXPECT_EQ(plan(h200(), planner_shape(64, 32, 8, 128, 2049)).subgroups, 2u);
  DecodeTuning order = tuned("order=1");  // automatic order longest first
  const DecodeChoice automatic = plan(h200(), planner_shape(64, 32, 8, 128, 4096), {}, order);
  EXPECT_TRUE(automatic.longest_first);
  EXPECT_EQ(automatic.subgroups, 4u);
  EXPECT_TRUE(automatic.share_query);
  DecodeOptions grid;
  grid.order = DecodeOrder::grid;
  EXPECT_FALSE(plan(h200(), planner_shape(64, 32, 8, 128, 4096), grid, order).longest_first);
  DecodeOptions forced;
  forced.split = SplitMode::split;
  forced.partition_tokens = 512;
  EXPECT_EQ(plan(h200(), planner_shape(64, 32, 8, 128, 4096), forced).subgroups, 2u);
  forced.partition_tokens = 1024;
  EXPECT_EQ(plan(h200(), planner_shape(64, 32, 8, 128, 4096), forced).subgroups, 4u);
  EXPECT_EQ(plan(h200(), planner_shape(64, 32, 8, 128, 4096), {}, tuned("subgroups=3")).subgroups, 3u);
  EXPECT_EQ(plan(h200(), planner_shape(64, 32, 8, 128, 4096), {}, tuned("subgroups=3")).workgroup, 96u);
  // 32 subgroups: 1024 invocations, but 8 subgroups' outputs are what 48 KiB holds at D = 128.
  EXPECT_EQ(plan(h200(), planner_shape(64, 32, 8, 128, 4096), {}, tuned("subgroups=32")).subgroups, 8u);
  EXPECT_EQ(plan(h200(), planner_shape(64, 32, 8, 256, 4096), {}, tuned("subgroups=32")).subgroups, 4u);
  DeviceCapabilities narrow = h200();
  narrow.max_workgroup_invocations = 64;
  EXPECT_EQ(plan(narrow, planner_shape(64, 32, 8, 128, 4096), longest_first()).subgroups, 2u);
}

// DecodeMerge::in_dispatch is taken by matrix plans that split into at most 4096 floats of
// partial outputs per head group (partitions x heads per workgroup x head size).
TEST(DecodePlannerH200, MergeInDispatchUpTo4096Floats) {
  DecodeOptions o = merged_in_dispatch();
  o.split = SplitMode::split;
  o.partition_tokens = 256;
  DecodeChoice c = plan(h200(), planner_shape(8, 8, 2, 128, 2048), o);  // 8 x 4 x 128
  EXPECT_TRUE(c.merge_in_dispatch);
  EXPECT_EQ(c.merge_counter_bytes, 4u * 8 * 8);
  EXPECT_EQ(c.reduce_workgroup, 0u);
  c = plan(h200(), planner_shape(8, 8, 2, 128, 2049), o);  // 9 partitions
  EXPECT_FALSE(c.merge_in_dispatch);
  EXPECT_EQ(c.merge_counter_bytes, 0u);
  EXPECT_EQ(c.reduce_workgroup, 256u);
  EXPECT_TRUE(plan(h200(), planner_shape(8, 16, 1, 64, 2048), o).merge_in_dispatch);  // 8 x 8 x 64
  EXPECT_TRUE(plan(h200(), planner_shape(8, 4, 1, 256, 1024), o).merge_in_dispatch);  // 4 x 4 x 256
  EXPECT_FALSE(plan(h200(), planner_shape(8, 4, 1, 256, 1025), o).merge_in_dispatch);
  // Never on the scalar kernel, nor without a split.
  DecodeOptions scalar = o;
  scalar.kernel = Kernel::scalar;
  c = plan(h200(), planner_shape(8, 8, 2, 128, 2048), scalar);
  EXPECT_TRUE(c.split);
  EXPECT_FALSE(c.merge_in_dispatch);
  EXPECT_EQ(c.reduce_workgroup, 256u);
  EXPECT_FALSE(plan(h200(), planner_shape(64, 32, 8, 128, 4096), merged_in_dispatch()).merge_in_dispatch);
  // The reduce pass takes at most the device's invocations.
  DeviceCapabilities narrow = lavapipe();
  narrow.max_workgroup_invocations = 128;
  EXPECT_EQ(plan(narrow, planner_shape(1, 2, 2, 64, 4096)).reduce_workgroup, 128u);
}

// Longest first lists every (sequence, partition) item, at most 4096.
TEST(DecodePlannerH200, LongestFirstLists) {
  DecodeChoice c = plan(h200(), planner_shape(4096, 4, 2, 64, 64), longest_first());
  EXPECT_TRUE(c.longest_first);
  EXPECT_EQ(c.order_bytes, 4u * 4096);
  expect_error([] { plan(h200(), planner_shape(4097, 4, 2, 64, 64), longest_first()); }, ErrorCode::unsupported,
               {"order: longest_first lists at most 4096 items", "4097 x 1 = 4097"});
  DecodeOptions o = longest_first();
  o.split = SplitMode::split;
  o.partition_tokens = 256;
  expect_error([&] { plan(lavapipe(), planner_shape(1025, 4, 2, 64, 1024), o); }, ErrorCode::unsupported, {"1025 x 4 = 4100"});
  c = plan(lavapipe(), planner_shape(1024, 4, 2, 64, 1024), o);
  EXPECT_EQ(c.order_bytes, 4u * 4096);
  EXPECT_EQ(c.kernel, Kernel::scalar);
}

// The scalar kernel splits a full batch past 4096 tokens into at most 8 partitions of 1024
// tokens or more (so that the longest sequences do not run on alone), unless that scratch
// would not fit one descriptor.
TEST(DecodePlannerScalar, LongContextsOfFullBatchesSplit) {
  for (const auto& device : {h200(), lavapipe(), subgroups_of_64(), subgroups_of_16()}) {
    SCOPED_TRACE(device.name);
    DecodeShape s = planner_shape(64, 32, 32, 128, 65536);
    s.max_context_len = 4096;
    EXPECT_FALSE(plan(device, s).split);
    s.max_context_len = 4097;
    DecodeChoice c = plan(device, s);
    EXPECT_TRUE(c.split);
    EXPECT_EQ(c.partition_tokens, 1024u);
    EXPECT_EQ(c.num_partitions, 5u);
    s.max_context_len = 8192;
    c = plan(device, s);
    EXPECT_EQ(c.partition_tokens, 1024u);
    EXPECT_EQ(c.num_partitions, 8u);
    s.max_context_len = 8193;
    c = plan(device, s);
    EXPECT_EQ(c.partition_tokens, 1280u);
    EXPECT_EQ(c.num_partitions, 7u);
    s.max_context_len = 65536 - 100;
    c = plan(device, s);
    EXPECT_EQ(c.partition_tokens, 8192u);
    EXPECT_EQ(c.num_partitions, 8u);
    DecodeOptions one_pass;
    one_pass.split = SplitMode::single_pass;
    EXPECT_FALSE(plan(device, s, one_pass).split);
  }
  // 1024 x 32 heads x 8 partitions x 258 words: 270 MB of scratch, past lavapipe's 128 MiB.
  DecodeShape big = planner_shape(1024, 32, 32, 256, 8192);
  EXPECT_FALSE(plan(lavapipe(), big).split);
  EXPECT_TRUE(plan(h200(), big).split);
  // The matrix kernel does not: a full GQA batch of 8K tokens runs in one pass.
  EXPECT_FALSE(plan(h200(), planner_shape(64, 32, 8, 128, 8192)).split);
}

// A small batch on the scalar kernel splits into partitions (a multiple of 256) that bring its
// workgroups up to DecodeTuning::units per compute unit.
TEST(DecodePlannerScalar, SmallBatchesSplit) {
  // lavapipe: 2 compute units want 8 workgroups; 1 sequence of 2 kv heads has 2: 4 partitions.
  DecodeChoice c = plan(lavapipe(), planner_shape(1, 2, 2, 64, 4096));
  EXPECT_TRUE(c.split);
  EXPECT_EQ(c.partition_tokens, 1024u);
  EXPECT_EQ(c.num_partitions, 4u);
  EXPECT_FALSE(plan(lavapipe(), planner_shape(1, 4, 4, 64, 4096)).split);  // 4 workgroups: half of 8
  EXPECT_FALSE(plan(lavapipe(), planner_shape(1, 2, 2, 64, 256)).split);   // one partition covers it
  c = plan(subgroups_of_64(), planner_shape(1, 4, 4, 64, 4096));  // 240 wanted: 60 partitions, at least 256 tokens
  EXPECT_EQ(c.partition_tokens, 256u);
  EXPECT_EQ(c.num_partitions, 16u);
  c = plan(lavapipe(), planner_shape(1, 2, 2, 64, 4096), {}, tuned("units=1"));  // 2 wanted: 2 are half or more
  EXPECT_FALSE(c.split);
  // Forced: the given partitions, else a quarter of the context in multiples of 256.
  DecodeOptions forced;
  forced.split = SplitMode::split;
  c = plan(lavapipe(), planner_shape(64, 4, 4, 64, 3000), forced);
  EXPECT_EQ(c.partition_tokens, 768u);
  EXPECT_EQ(c.num_partitions, 4u);
  forced.partition_tokens = 4096;
  c = plan(lavapipe(), planner_shape(64, 4, 4, 64, 3000), forced);
  EXPECT_TRUE(c.split);
  EXPECT_EQ(c.num_partitions, 1u);
  DecodeOptions tokens;
  tokens.partition_tokens = 1024;
  EXPECT_TRUE(plan(lavapipe(), planner_shape(64, 4, 4, 64, 3000), tokens).split);
  tokens.partition_tokens = 3072;
  EXPECT_FALSE(plan(lavapipe(), planner_shape(64, 4, 4, 64, 3000), tokens).split);
  // Nothing to cover: no split, whatever is asked.
  DecodeShape empty = planner_shape(1, 4, 4, 64, 0);
  empty.num_blocks = 1;
  EXPECT_FALSE(plan(lavapipe(), empty, forced).split);
}

// The scalar kernel's workgroup: at most 4 heads of a group (sliced over workgroups), 256
// invocations (fewer where the shared memory asks, not below 128), lanes per value row from the
// block's 16-byte loads, subgroup reductions where the device has subgroup arithmetic.
TEST(DecodePlannerScalar, Workgroups) {
  struct Case {
    uint32_t heads, kv_heads, head_size, block_size;
    DType dtype;
    uint32_t heads_per_workgroup, groups, lanes;
  };
  for (const Case& c : {Case{32, 32, 128, 16, DType::f16, 1, 1, 2}, Case{32, 8, 128, 16, DType::f16, 4, 1, 2},
                        Case{64, 8, 128, 16, DType::f16, 4, 2, 2}, Case{12, 1, 64, 16, DType::f16, 4, 3, 4},
                        Case{3, 1, 64, 16, DType::f16, 3, 1, 4}, Case{8, 8, 64, 16, DType::f16, 1, 1, 4},
                        Case{32, 8, 128, 16, DType::f32, 4, 1, 4}, Case{32, 8, 128, 128, DType::f16, 4, 1, 16},
                        Case{32, 8, 128, 8, DType::f16, 4, 1, 2}, Case{32, 8, 128, 1, DType::f16, 4, 1, 2},
                        Case{32, 8, 256, 2, DType::f32, 4, 1, 1}, Case{4, 4, 512, 16, DType::fp8_e5m2, 1, 1, 1}}) {
    SCOPED_TRACE(::testing::Message() << c.heads << "/" << c.kv_heads << " D " << c.head_size << " B " << c.block_size
                                      << " " << dtype_name(c.dtype));
    DecodeShape s = planner_shape(256, c.heads, c.kv_heads, c.head_size, 1024, c.dtype == DType::f32 ? DType::f32 : DType::f16,
                               c.dtype);
    s.block_size = c.block_size;
    s.max_blocks_per_seq = s.num_blocks = 1024 / c.block_size;
    for (const auto& device : {h200(), lavapipe(), subgroups_of_64(), subgroups_of_16()}) {
      const DecodeChoice p = plan(device, s, kernel_option(Kernel::scalar));
      EXPECT_EQ(p.kernel, Kernel::scalar);
      EXPECT_EQ(p.workgroup, 256u);
      EXPECT_EQ(p.subgroups, 0u);
      EXPECT_EQ(p.heads_per_workgroup, c.heads_per_workgroup);
      EXPECT_EQ(p.groups_per_kv_head, c.groups);
      EXPECT_EQ(p.lanes_per_row, c.lanes);
      EXPECT_TRUE(p.subgroup_reduce);
      EXPECT_EQ(p.module, DecodeModule::scalar_subgroup);
      EXPECT_FALSE(p.early_values || p.pipeline || p.share_query);
    }
  }
  // Without subgroup arithmetic: shared-memory reductions. A small shared memory halves the
  // workgroup (not below 128), then slices the group.
  DeviceCapabilities plain = lavapipe();
  plain.subgroup_arithmetic = false;
  plain.max_shared_memory = 16384;
  DecodeChoice p = plan(plain, planner_shape(256, 32, 8, 512, 1024));
  EXPECT_FALSE(p.subgroup_reduce);
  EXPECT_EQ(p.module, DecodeModule::scalar);
  EXPECT_EQ(p.workgroup, 128u);
  EXPECT_EQ(p.heads_per_workgroup, 4u);  // 4 x (512 + 256) + 8 words
  plain.max_shared_memory = 8192;
  p = plan(plain, planner_shape(256, 32, 8, 512, 1024));
  EXPECT_EQ(p.workgroup, 128u);
  EXPECT_EQ(p.heads_per_workgroup, 2u);
  EXPECT_EQ(p.groups_per_kv_head, 2u);
  plain.max_shared_memory = 2048;
  expect_error([&] { plan(plain, planner_shape(256, 32, 8, 512, 1024)); }, ErrorCode::unsupported,
               {"head_size 512 with block_size 16", "llvmpipe"});
  DeviceCapabilities few = lavapipe();
  few.max_workgroup_invocations = 64;
  DecodeShape b128 = planner_shape(256, 4, 4, 64, 1024);
  b128.block_size = 128;
  b128.max_blocks_per_seq = b128.num_blocks = 8;
  expect_error([&] { plan(few, b128); }, ErrorCode::unsupported, {"block_size 128"});
  // The knobs: heads, workgroup, lanes (a power of two that the workgroup's loads allow).
  EXPECT_EQ(plan(h200(), planner_shape(256, 64, 8, 128, 1024), kernel_option(Kernel::scalar), tuned("heads=8")).heads_per_workgroup, 8u);
  EXPECT_EQ(plan(h200(), planner_shape(256, 64, 8, 128, 1024), kernel_option(Kernel::scalar), tuned("heads=2")).groups_per_kv_head, 4u);
  EXPECT_EQ(plan(h200(), planner_shape(256, 32, 8, 128, 1024), kernel_option(Kernel::scalar), tuned("heads=8")).heads_per_workgroup, 4u);
  EXPECT_EQ(plan(h200(), planner_shape(256, 32, 8, 128, 1024), kernel_option(Kernel::scalar), tuned("workgroup=128")).workgroup, 128u);
  EXPECT_EQ(plan(h200(), planner_shape(256, 32, 8, 128, 1024), kernel_option(Kernel::scalar), tuned("lanes=8")).lanes_per_row, 8u);
  EXPECT_EQ(plan(h200(), planner_shape(256, 32, 8, 128, 1024), kernel_option(Kernel::scalar), tuned("lanes=32")).lanes_per_row, 32u);
  // 64 lanes are more than the workgroup's 32 loads of 8 f16 take: the knob is not taken.
  EXPECT_EQ(plan(h200(), planner_shape(256, 32, 8, 128, 1024), kernel_option(Kernel::scalar), tuned("lanes=64")).lanes_per_row, 2u);
  expect_error([&] { plan(h200(), planner_shape(256, 32, 8, 128, 1024), {}, tuned("workgroup=512")); },
               ErrorCode::invalid_argument, {"VKPAGED_DECODE_TUNE"});
}

// Pools past the storage-buffer range are read by device address on the scalar kernel (the
// matrix kernel reads none that way), and refused without buffer device addresses.
TEST(DecodePlanner, CachesPastTheStorageBufferRange) {
  DecodeShape s = planner_shape(64, 32, 8, 128, 4096);  // 8 MiB per 1024 blocks: 256 MiB pools
  s.num_blocks = 64 * 256;
  DecodeChoice c = plan(lavapipe(), s);
  EXPECT_TRUE(c.address);
  EXPECT_EQ(c.module, DecodeModule::address_subgroup);
  s.num_blocks = (128u << 20) / (8 * 128 * 16 * 2) - 1;  // the pool and 256 bytes within 128 MiB
  EXPECT_FALSE(plan(lavapipe(), s).address);
  s.num_blocks += 1;
  EXPECT_TRUE(plan(lavapipe(), s).address);
  DeviceCapabilities plain = lavapipe();
  plain.subgroup_arithmetic = false;
  EXPECT_EQ(plan(plain, s).module, DecodeModule::address);
  plain.buffer_device_address = false;
  expect_error([&] { plan(plain, s); }, ErrorCode::unsupported,
               {"num_blocks: a pool of 4096 blocks is 134217728 bytes", "maxStorageBufferRange of 134217728",
                "no buffer device address"});
  // On the H200: past 4 GiB, automatic falls back to the scalar kernel, and the matrix kernel is refused.
  DecodeShape huge = planner_shape(64, 32, 8, 128, 4096);
  huge.num_blocks = 1u << 16;  // 2^16 x 8 x 128 x 16 x 2 bytes: 2 GiB
  EXPECT_EQ(plan(h200(), huge).kernel, Kernel::matrix);
  huge.num_blocks = 1u << 17;
  c = plan(h200(), huge);
  EXPECT_EQ(c.kernel, Kernel::scalar);
  EXPECT_TRUE(c.address);
  expect_error([&] { plan(h200(), huge, kernel_option(Kernel::matrix)); }, ErrorCode::unsupported,
               {"kernel: matrix: num_blocks: the caches are past maxStorageBufferRange"});
}

// Automatic takes the matrix kernel for GQA groups where it can run (DecodeTuning::matrix), the
// scalar kernel elsewhere; DecodeKernel::matrix is refused, naming why, where it cannot run.
TEST(DecodePlanner, KernelChoice) {
  const DecodeShape gqa = planner_shape(8, 32, 8, 128, 4096);
  const DecodeShape mha = planner_shape(8, 32, 32, 128, 4096);
  EXPECT_EQ(plan(h200(), gqa).kernel, Kernel::matrix);
  EXPECT_EQ(plan(h200(), mha).kernel, Kernel::scalar);
  EXPECT_EQ(plan(h200(), mha, kernel_option(Kernel::matrix)).kernel, Kernel::matrix);  // MHA runs, one head per group
  EXPECT_EQ(plan(h200(), gqa, kernel_option(Kernel::scalar)).kernel, Kernel::scalar);
  EXPECT_EQ(plan(h200(), gqa, {}, tuned("matrix=0")).kernel, Kernel::scalar);
  EXPECT_EQ(plan(h200(), gqa, kernel_option(Kernel::matrix), tuned("matrix=0")).kernel, Kernel::matrix);
  for (const auto& device : {lavapipe(), subgroups_of_64(), subgroups_of_16()}) {
    EXPECT_EQ(plan(device, gqa).kernel, Kernel::scalar);
    expect_error([&] { plan(device, gqa, kernel_option(Kernel::matrix)); }, ErrorCode::unsupported,
                 {"kernel: matrix: device " + device.name + " has no VK_NV_cooperative_matrix"});
  }
  DeviceCapabilities wide = h200();
  wide.subgroup_size = 64;
  EXPECT_EQ(plan(wide, gqa).kernel, Kernel::scalar);
  expect_error([&] { plan(wide, gqa, kernel_option(Kernel::matrix)); }, ErrorCode::unsupported,
               {"kernel: matrix: device NVIDIA H200 has subgroups of 64"});
  struct Refused {
    DType query, cache;
    uint32_t head_size, block_size;
    const char* why;
  };
  for (const Refused& r : {Refused{DType::f32, DType::f32, 128, 16, "query_dtype f32 and cache_dtype f32"},
                           Refused{DType::f32, DType::f16, 128, 16, "query_dtype f32 and cache_dtype f16"},
                           Refused{DType::f16, DType::f32, 128, 16, "query_dtype f16 and cache_dtype f32"},
                           Refused{DType::f16, DType::f16, 80, 16, "head_size: 80 is not a multiple of 32 (cache_dtype f16)"},
                           Refused{DType::f16, DType::fp8_e5m2, 96, 16, "head_size: 96 is not a multiple of 64"},
                           Refused{DType::f16, DType::f16, 128, 4, "block_size: 4 is not a multiple of 8"}}) {
    SCOPED_TRACE(r.why);
    DecodeShape s = planner_shape(8, 32, 8, r.head_size, 4096, r.query, r.cache);
    s.block_size = r.block_size;
    s.max_blocks_per_seq = s.num_blocks = 4096 / r.block_size;
    EXPECT_EQ(plan(h200(), s).kernel, Kernel::scalar);
    expect_error([&] { plan(h200(), s, kernel_option(Kernel::matrix)); }, ErrorCode::unsupported,
                 {std::string("kernel: matrix: ") + r.why});
  }
  DeviceCapabilities tiny = h200();
  tiny.max_shared_memory = 4096;
  expect_error([&] { plan(tiny, gqa, kernel_option(Kernel::matrix)); }, ErrorCode::unsupported,
               {"head_size: 128 needs more shared memory than device NVIDIA H200 has"});
}

// The nhd and hnd layouts on the scalar kernel: the plan keeps the vllm plan's split and
// workgroup and reads values in loads of 8 bytes along a token's row (VKPAGED_DECODE_TUNE's
// vbytes: 4, 8 or 16).
TEST(DecodePlanner, CacheLayouts) {
  for (const KvLayout layout : {KvLayout::nhd, KvLayout::hnd}) {
    SCOPED_TRACE(kv_layout_name(layout));
    for (const char* name : {"long1", "mid8", "batch64", "gqa8x", "d64", "mha32"}) {
      SCOPED_TRACE(name);
      DecodeShape s = bench_shape(name);
      DecodeOptions scalar = kernel_option(Kernel::scalar);
      const DecodeChoice vllm = plan(h200(), s, scalar);
      s.kv_layout = layout;
      const DecodeChoice c = plan(h200(), s, scalar);
      EXPECT_EQ(c.kernel, Kernel::scalar);
      EXPECT_EQ(c.module, DecodeModule::scalar_subgroup);
      EXPECT_EQ(c.split, vllm.split);
      EXPECT_EQ(c.num_partitions, vllm.num_partitions);
      EXPECT_EQ(c.workgroup, vllm.workgroup);
      EXPECT_EQ(c.heads_per_workgroup, vllm.heads_per_workgroup);
      EXPECT_EQ(c.value_dims, 4u);  // 8 bytes of f16
      EXPECT_EQ(vllm.value_dims, 0u);
    }
    struct Dims {
      DType cache;
      const char* tune;
      uint32_t dims;
    };
    for (const Dims& d : {Dims{DType::f32, "", 2}, Dims{DType::f16, "", 4}, Dims{DType::bf16, "", 4},
                          Dims{DType::fp8_e4m3, "", 8}, Dims{DType::fp8_e5m2, "", 8}, Dims{DType::f16, "vbytes=4", 2},
                          Dims{DType::f16, "vbytes=16", 8}, Dims{DType::fp8_e5m2, "vbytes=16", 16},
                          Dims{DType::f32, "vbytes=4", 1}}) {
      SCOPED_TRACE(std::string(dtype_name(d.cache)) + " " + d.tune);
      DecodeShape s = planner_shape(64, 32, 8, 128, 4096, is_fp8_dtype(d.cache) ? DType::f16 : d.cache, d.cache);
      s.kv_layout = layout;
      EXPECT_EQ(plan(lavapipe(), s, {}, tuned(d.tune)).value_dims, d.dims);
    }
  }
}

// The scalar kernel's variants (VKPAGED_DECODE_TUNE's fp8conv, f16math, vloads) where they apply:
// fp8 pairs for fp8 caches on every device and layout; packed f16 for an f16 query and cache on
// a device with shaderFloat16 and caches read by binding (the f16 modules), values on the vllm
// layout with blocks of 8 tokens or more; none by default, and the matrix kernel's plans carry none.
TEST(DecodePlanner, ScalarVariants) {
  const DecodeOptions scalar = kernel_option(Kernel::scalar);
  const DecodeShape f16 = planner_shape(64, 32, 8, 128, 4096);
  const DecodeShape e4m3 = planner_shape(64, 32, 8, 128, 4096, DType::f16, DType::fp8_e4m3);
  for (const auto& device : {h200(), lavapipe(), subgroups_of_64(), subgroups_of_16()}) {
    SCOPED_TRACE(device.name);
    for (const DecodeShape& s : {f16, e4m3}) {
      const DecodeChoice c = plan(device, s, scalar);
      EXPECT_FALSE(c.fp8_pairs || c.f16_keys || c.f16_values);
    }
    const DecodeChoice pairs = plan(device, e4m3, scalar, tuned("fp8conv=1"));
    EXPECT_TRUE(pairs.fp8_pairs);
    EXPECT_FALSE(pairs.f16_keys || pairs.f16_values);
    EXPECT_EQ(pairs.module, device.subgroup_arithmetic ? DecodeModule::scalar_subgroup : DecodeModule::scalar);
    EXPECT_FALSE(plan(device, f16, scalar, tuned("fp8conv=1")).fp8_pairs);
    const DecodeChoice both = plan(device, f16, scalar, tuned("f16math=3"));
    EXPECT_EQ(both.f16_keys, device.shader_float16);
    EXPECT_EQ(both.f16_values, device.shader_float16);
    EXPECT_EQ(both.module, device.shader_float16 ? DecodeModule::scalar_subgroup_f16 : DecodeModule::scalar_subgroup);
  }
  const DecodeChoice keys = plan(h200(), f16, scalar, tuned("f16math=1"));
  EXPECT_TRUE(keys.f16_keys);
  EXPECT_FALSE(keys.f16_values);
  const DecodeChoice values = plan(h200(), f16, scalar, tuned("f16math=2"));
  EXPECT_FALSE(values.f16_keys);
  EXPECT_TRUE(values.f16_values);
  DeviceCapabilities shared_reduce = lavapipe();
  shared_reduce.subgroup_arithmetic = false;
  EXPECT_EQ(plan(shared_reduce, f16, scalar, tuned("f16math=1")).module, DecodeModule::scalar_f16);
  // Where packed f16 does not apply: other dtypes, values on nhd and hnd or blocks under 8
  // tokens, caches read by device address.
  for (const DecodeShape& s : {planner_shape(64, 32, 8, 128, 4096, DType::bf16, DType::bf16),
                               planner_shape(64, 32, 8, 128, 4096, DType::f32, DType::f16), e4m3}) {
    const DecodeChoice c = plan(h200(), s, scalar, tuned("f16math=3"));
    EXPECT_FALSE(c.f16_keys || c.f16_values) << dtype_name(s.query_dtype) << " " << dtype_name(s.cache_dtype);
  }
  DecodeShape nhd = f16;
  nhd.kv_layout = KvLayout::nhd;
  const DecodeChoice on_nhd = plan(h200(), nhd, scalar, tuned("f16math=3"));
  EXPECT_TRUE(on_nhd.f16_keys);
  EXPECT_FALSE(on_nhd.f16_values);
  DecodeShape small_blocks = f16;
  small_blocks.block_size = 4;
  small_blocks.max_blocks_per_seq = small_blocks.num_blocks = 1024;
  EXPECT_FALSE(plan(h200(), small_blocks, scalar, tuned("f16math=3")).f16_values);
  DeviceCapabilities small_range = lavapipe();
  small_range.max_storage_buffer_range = 1u << 20;  // the pool is read by address
  const DecodeChoice by_address = plan(small_range, f16, {}, tuned("f16math=3,fp8conv=1"));
  EXPECT_TRUE(by_address.address);
  EXPECT_FALSE(by_address.f16_keys || by_address.f16_values);
  EXPECT_EQ(by_address.module, DecodeModule::address_subgroup);
  EXPECT_TRUE(plan(small_range, planner_shape(64, 32, 8, 128, 4096, DType::f16, DType::fp8_e5m2), {},
                   tuned("fp8conv=1")).fp8_pairs);
  // Value loads issued together: 1 by default, the knob's count on every device and layout.
  EXPECT_EQ(plan(h200(), f16, scalar).value_loads, 1u);
  EXPECT_EQ(plan(lavapipe(), nhd, {}, tuned("vloads=4")).value_loads, 4u);
  EXPECT_EQ(plan(small_range, f16, {}, tuned("vloads=8")).value_loads, 8u);
  // The matrix kernel's plans carry no scalar variant.
  const DecodeChoice matrix = plan(h200(), f16, {}, tuned("f16math=3,fp8conv=1,vloads=4"));
  EXPECT_EQ(matrix.kernel, Kernel::matrix);
  EXPECT_FALSE(matrix.fp8_pairs || matrix.f16_keys || matrix.f16_values);
  EXPECT_EQ(matrix.value_loads, 0u);
}

// The matrix kernel's fragment layout decides last: a device whose layout differs falls back
// (automatic) or refuses (matrix), naming the difference; before the probe, the choice says
// whether the probe is needed, and planning without it is refused.
TEST(DecodePlanner, FragmentLayout) {
  const DecodeShape gqa = planner_shape(8, 32, 8, 128, 4096);
  DeviceCapabilities other = h200();
  other.fragment_layout_mismatch = "fragment A [16 x 16]: lane 0 holds element codes 1 0";
  EXPECT_EQ(plan(other, gqa).kernel, Kernel::scalar);
  expect_error([&] { plan(other, gqa, kernel_option(Kernel::matrix)); }, ErrorCode::unsupported,
               {"kernel: matrix: device NVIDIA H200: fragment A [16 x 16]: lane 0 holds"});
  DeviceCapabilities unknown = h200();
  unknown.fragment_layout_mismatch.reset();
  EXPECT_TRUE(detail::choose_decode_kernel(unknown, gqa, {}, {}).needs_fragment_layout);
  EXPECT_TRUE(detail::choose_decode_kernel(unknown, gqa, kernel_option(Kernel::matrix), {}).needs_fragment_layout);
  EXPECT_FALSE(detail::choose_decode_kernel(unknown, gqa, kernel_option(Kernel::scalar), {}).needs_fragment_layout);
  EXPECT_FALSE(detail::choose_decode_kernel(unknown, planner_shape(8, 32, 32, 128, 4096), {}, {}).needs_fragment_layout);
  EXPECT_FALSE(detail::choose_decode_kernel(unknown, planner_shape(8, 32, 8, 128, 4096, DType::f32, DType::f32), {}, {})
                   .needs_fragment_layout);
  EXPECT_FALSE(detail::choose_decode_kernel(unknown, gqa, {}, tuned("matrix=0")).needs_fragment_layout);
  DeviceCapabilities no_matrix = lavapipe();
  no_matrix.fragment_layout_mismatch.reset();
  EXPECT_FALSE(detail::choose_decode_kernel(no_matrix, gqa, {}, {}).needs_fragment_layout);
  EXPECT_EQ(plan(no_matrix, gqa).kernel, Kernel::scalar);
  expect_error([&] { plan(unknown, gqa); }, ErrorCode::internal, {"fragment layout must be probed"});
  // A refusal that comes before the layout is given without probing.
  expect_error([&] { detail::choose_decode_kernel(unknown, planner_shape(8, 32, 8, 80, 4096), kernel_option(Kernel::matrix), {}); },
               ErrorCode::unsupported, {"kernel: matrix: head_size: 80"});
}

// ---- the matrix kernel through VK_KHR_cooperative_matrix ----

// Automatic and matrix take NV where it runs the plan; matrix_khr takes KHR there, with the
// same plan (only the module differs), the E4M3 module's twin for E4M3 caches.
TEST(DecodePlannerKhr, NvAndKhrOnAnH200) {
  const DeviceCapabilities d = h200_with_khr();
  for (const char* name : {"long1", "mid8", "batch64", "batch256", "mha32", "gqa8x", "d64", "batch64-bf16-bf16",
                           "batch64-f16-fp8_e4m3", "batch256-f16-fp8_e5m2", "batch64-b32"}) {
    SCOPED_TRACE(name);
    const DecodeShape s = bench_shape(name);
    const DecodeChoice nv = plan(d, s, kernel_option(Kernel::matrix));
    EXPECT_FALSE(nv.khr);
    EXPECT_EQ(plan(d, s).khr, false);
    const DecodeChoice khr = plan(d, s, kernel_option(Kernel::matrix_khr));
    EXPECT_EQ(khr.kernel, Kernel::matrix);
    EXPECT_TRUE(khr.khr);
    EXPECT_EQ(khr.module, s.cache_dtype == DType::fp8_e4m3 ? DecodeModule::matrix_e4m3_khr : DecodeModule::matrix_khr);
    EXPECT_EQ(nv.module, s.cache_dtype == DType::fp8_e4m3 ? DecodeModule::matrix_e4m3 : DecodeModule::matrix);
    // Everything else as the NV plan.
    EXPECT_EQ(khr.split, nv.split);
    EXPECT_EQ(khr.num_partitions, nv.num_partitions);
    EXPECT_EQ(khr.subgroups, nv.subgroups);
    EXPECT_EQ(khr.workgroup, nv.workgroup);
    EXPECT_EQ(khr.heads_per_workgroup, nv.heads_per_workgroup);
    EXPECT_EQ(khr.early_values, nv.early_values);
    EXPECT_EQ(khr.pipeline, nv.pipeline);
    EXPECT_EQ(khr.share_query, nv.share_query);
    EXPECT_EQ(khr.features, nv.features);
    EXPECT_EQ(khr.scratch_bytes, nv.scratch_bytes);
  }
  // The timeline is the NV module's.
  DecodeOptions o = kernel_option(Kernel::matrix_khr);
  o.timeline = true;
  expect_error([&] { plan(d, planner_shape(64, 32, 8, 128, 4096), o); }, ErrorCode::unsupported,
               {"timeline: the matrix kernel records one through VK_NV_cooperative_matrix only"});
  o.kernel = Kernel::matrix;
  EXPECT_EQ(plan(d, planner_shape(64, 32, 8, 128, 4096), o).module, DecodeModule::matrix_timeline);
}

// The H200 as measured: its KHR B fragment is not the NV kernel's, so matrix_khr is refused
// naming it, and automatic and matrix take NV as before.
TEST(DecodePlannerKhr, TheH200sKhrFragmentsRefuseMatrixKhrAndKeepNv) {
  const DeviceCapabilities d = h200_as_measured();
  const DecodeShape s = bench_shape("gqa8x");
  EXPECT_FALSE(plan(d, s).khr);
  EXPECT_EQ(plan(d, s).kernel, Kernel::matrix);
  EXPECT_FALSE(plan(d, s, kernel_option(Kernel::matrix)).khr);
  expect_error([&] { plan(d, s, kernel_option(Kernel::matrix_khr)); }, ErrorCode::unsupported,
               {"kernel: matrix_khr: device NVIDIA H200: VK_KHR_cooperative_matrix's 16x8x16 fragments: fragment B "
                "[16 x 8]: lane 0 component 1 holds element code 8"});
}

// A device with KHR 16x8x16 products in the NV kernel's layout and no NV extension: automatic
// and matrix run the matrix kernel through KHR.
TEST(DecodePlannerKhr, KhrWhereNvIsAbsent) {
  const DeviceCapabilities d = khr_only_16x8x16();
  const DecodeShape gqa = planner_shape(8, 32, 8, 128, 4096);
  for (const Kernel k : {Kernel::automatic, Kernel::matrix, Kernel::matrix_khr}) {
    const DecodeChoice c = plan(d, gqa, kernel_option(k));
    EXPECT_EQ(c.kernel, Kernel::matrix) << int(k);
    EXPECT_TRUE(c.khr) << int(k);
    EXPECT_EQ(c.module, DecodeModule::matrix_khr);
  }
  EXPECT_EQ(plan(d, planner_shape(8, 32, 32, 128, 4096)).kernel, Kernel::scalar);  // MHA: automatic stays scalar
  EXPECT_EQ(plan(d, gqa, kernel_option(Kernel::scalar)).kernel, Kernel::scalar);
  // Shapes the kernel refuses, refused the same way.
  expect_error([&] { plan(d, planner_shape(8, 32, 8, 80, 4096), kernel_option(Kernel::matrix)); }, ErrorCode::unsupported,
               {"kernel: matrix: device KHR 16x8x16 has no VK_NV_cooperative_matrix",
                "; and on VK_KHR_cooperative_matrix: head_size: 80 is not a multiple of 32"});
  expect_error([&] { plan(d, planner_shape(8, 32, 8, 80, 4096), kernel_option(Kernel::matrix_khr)); },
               ErrorCode::unsupported, {"kernel: matrix_khr: head_size: 80 is not a multiple of 32"});
  DecodeOptions timeline;
  timeline.timeline = true;
  expect_error([&] { plan(d, gqa, timeline); }, ErrorCode::unsupported, {"timeline: the matrix kernel records one through"});
  // Subgroups that may be wider than 32 (a full-subgroup dispatch is a multiple of the widest).
  DeviceCapabilities wide = d;
  wide.max_subgroup_size = 64;
  EXPECT_EQ(plan(wide, gqa).kernel, Kernel::scalar);
  expect_error([&] { plan(wide, gqa, kernel_option(Kernel::matrix_khr)); }, ErrorCode::unsupported,
               {"kernel: matrix_khr: device KHR 16x8x16 has subgroups of up to 64"});
}

// KHR 16x16x16 products only: not the kernel's tile, so the scalar kernel runs, and both matrix
// kernels are refused, saying so; the layout is never probed.
TEST(DecodePlannerKhr, Only16x16x16IsRefused) {
  const DeviceCapabilities d = khr_only_16x16x16();
  const DecodeShape gqa = planner_shape(8, 32, 8, 128, 4096);
  const detail::DecodeKernelChoice k = detail::choose_decode_kernel(d, gqa, {}, {});
  EXPECT_FALSE(k.matrix);
  EXPECT_FALSE(k.needs_khr_fragment_layout);
  EXPECT_FALSE(k.needs_fragment_layout);
  EXPECT_NE(k.matrix_refusal.find("does not list the 16x8x16 product"), std::string::npos) << k.matrix_refusal;
  EXPECT_EQ(plan(d, gqa).kernel, Kernel::scalar);
  expect_error([&] { plan(d, gqa, kernel_option(Kernel::matrix_khr)); }, ErrorCode::unsupported,
               {"kernel: matrix_khr: device KHR 16x16x16 does not list the 16x8x16 product with f16 A and B"});
  expect_error([&] { plan(d, gqa, kernel_option(Kernel::matrix)); }, ErrorCode::unsupported,
               {"kernel: matrix: device KHR 16x16x16 has no VK_NV_cooperative_matrix", "does not list the 16x8x16"});
}

// NV only (the Context left KHR off, e.g. under an old validation layer): matrix_khr is refused
// with the Context's reason; automatic and matrix take NV.
TEST(DecodePlannerKhr, NvOnly) {
  DeviceCapabilities d = h200();
  d.khr_matrix_refusal = "the Khronos validation layer 1.3.239 predates VK_KHR_cooperative_matrix";
  const DecodeShape gqa = planner_shape(8, 32, 8, 128, 4096);
  EXPECT_FALSE(plan(d, gqa).khr);
  EXPECT_FALSE(plan(d, gqa, kernel_option(Kernel::matrix)).khr);
  expect_error([&] { plan(d, gqa, kernel_option(Kernel::matrix_khr)); }, ErrorCode::unsupported,
               {"kernel: matrix_khr: device NVIDIA H200: the Khronos validation layer 1.3.239 predates"});
  // A device without the extension says so in the same place.
  EXPECT_FALSE(plan(lavapipe(), gqa).khr);
  expect_error([&] { plan(lavapipe(), gqa, kernel_option(Kernel::matrix_khr)); }, ErrorCode::unsupported,
               {"kernel: matrix_khr: device llvmpipe: VK_KHR_cooperative_matrix is not enabled"});
}

// The KHR layout is probed only for the extension that would run the plan, and decides last:
// a different layout falls back to the scalar kernel (automatic) or is refused, naming it.
TEST(DecodePlannerKhr, FragmentLayout) {
  const DecodeShape gqa = planner_shape(8, 32, 8, 128, 4096);
  DeviceCapabilities unknown = khr_only_16x8x16();
  unknown.khr_fragment_layout_mismatch.reset();
  detail::DecodeKernelChoice k = detail::choose_decode_kernel(unknown, gqa, {}, {});
  EXPECT_TRUE(k.needs_khr_fragment_layout);
  EXPECT_FALSE(k.needs_fragment_layout);
  expect_error([&] { plan(unknown, gqa); }, ErrorCode::internal, {"khr_fragment_layout_mismatch"});
  EXPECT_FALSE(detail::choose_decode_kernel(unknown, planner_shape(8, 32, 32, 128, 4096), {}, {}).needs_khr_fragment_layout);
  // On an H200 with both, automatic and matrix need NV's layout only; matrix_khr KHR's only.
  DeviceCapabilities both = h200_with_khr();
  both.fragment_layout_mismatch.reset();
  both.khr_fragment_layout_mismatch.reset();
  k = detail::choose_decode_kernel(both, gqa, {}, {});
  EXPECT_TRUE(k.needs_fragment_layout);
  EXPECT_FALSE(k.needs_khr_fragment_layout);
  k = detail::choose_decode_kernel(both, gqa, kernel_option(Kernel::matrix_khr), {});
  EXPECT_FALSE(k.needs_fragment_layout);
  EXPECT_TRUE(k.needs_khr_fragment_layout);
  // NV's layout differs (probed): KHR's is asked for next.
  both.fragment_layout_mismatch = "fragment A [16 x 16]: lane 0 holds element codes 1 0";
  k = detail::choose_decode_kernel(both, gqa, {}, {});
  EXPECT_TRUE(k.needs_khr_fragment_layout);
  both.khr_fragment_layout_mismatch = "";
  EXPECT_TRUE(plan(both, gqa).khr);
  // KHR's differs too: the scalar kernel, or both reasons.
  DeviceCapabilities other = khr_only_16x8x16();
  other.khr_fragment_layout_mismatch = "fragment B [16 x 8]: lane 1 component 0 holds element code 9";
  EXPECT_EQ(plan(other, gqa).kernel, Kernel::scalar);
  expect_error([&] { plan(other, gqa, kernel_option(Kernel::matrix_khr)); }, ErrorCode::unsupported,
               {"kernel: matrix_khr: device KHR 16x8x16: VK_KHR_cooperative_matrix's 16x8x16 fragments: fragment B "
                "[16 x 8]: lane 1 component 0 holds element code 9"});
}

// ---- head slices (DecodeTuning::slices) ----

// Off by default (groups above 8 heads run in workgroups of 8 that each read the group's keys
// and values); with slices=1 a group of up to 32 heads runs in one workgroup of slices of 8
// heads, each slice's subgroups walking the same units, as many as the shared memory holds.
TEST(DecodePlannerH200, HeadSlices) {
  const DecodeTuning on = tuned("slices=1");
  const DecodeShape mqa = planner_shape(128, 32, 1, 128, 2048);  // MQA, 134 MB of KV
  DecodeChoice c = plan(h200(), mqa);
  EXPECT_EQ(c.head_slices, 1u);
  EXPECT_EQ(c.heads_per_workgroup, 8u);
  EXPECT_EQ(c.groups_per_kv_head, 4u);
  EXPECT_EQ(c.module, DecodeModule::matrix);
  c = plan(h200(), mqa, {}, on);
  EXPECT_EQ(c.head_slices, 4u);
  EXPECT_EQ(c.heads_per_workgroup, 32u);
  EXPECT_EQ(c.groups_per_kv_head, 1u);
  EXPECT_EQ(c.module, DecodeModule::matrix_slices);
  // 128 workgroups: a split of 2 x 1024 tokens, and 2 subgroups per slice (4 do not fit 48 KiB).
  EXPECT_TRUE(c.split);
  EXPECT_EQ(c.num_partitions, 2u);
  EXPECT_EQ(c.partition_tokens, 1024u);
  EXPECT_EQ(c.subgroups, 8u);
  EXPECT_EQ(c.workgroup, 256u);
  struct Group {
    uint32_t heads, kv_heads, slices, heads_per_workgroup, groups_per_kv_head;
  };
  for (const Group& g : {Group{16, 1, 2, 16, 1}, Group{12, 1, 2, 12, 1}, Group{40, 1, 3, 20, 2},
                         Group{64, 2, 4, 32, 1}, Group{128, 1, 4, 32, 4}, Group{8, 1, 1, 8, 1}, Group{32, 32, 1, 1, 1}}) {
    SCOPED_TRACE(::testing::Message() << g.heads << " heads on " << g.kv_heads);
    c = plan(h200(), planner_shape(64, g.heads, g.kv_heads, 128, 4096), {}, on);
    if (g.kv_heads == g.heads) c = plan(h200(), planner_shape(64, g.heads, g.kv_heads, 128, 4096), kernel_option(Kernel::matrix), on);
    EXPECT_EQ(c.kernel, Kernel::matrix);
    EXPECT_EQ(c.head_slices, g.slices);
    EXPECT_EQ(c.heads_per_workgroup, g.heads_per_workgroup);
    EXPECT_EQ(c.groups_per_kv_head, g.groups_per_kv_head);
    EXPECT_EQ(c.subgroups % c.head_slices, 0u);
    EXPECT_EQ(c.workgroup, 32u * c.subgroups);
    EXPECT_EQ(c.module, g.slices > 1 ? DecodeModule::matrix_slices : DecodeModule::matrix);
  }
  // Every module has its twin; the token-major layouts and the timeline keep workgroups of 8.
  EXPECT_EQ(plan(h200(), planner_shape(64, 32, 2, 128, 4096, DType::f16, DType::fp8_e4m3), {}, on).module,
            DecodeModule::matrix_slices_e4m3);
  EXPECT_EQ(plan(h200_with_khr(), planner_shape(64, 32, 2, 128, 4096), kernel_option(Kernel::matrix_khr), on).module,
            DecodeModule::matrix_slices_khr);
  EXPECT_EQ(plan(h200_with_khr(), planner_shape(64, 32, 2, 128, 4096, DType::bf16, DType::fp8_e4m3),
                 kernel_option(Kernel::matrix_khr), on)
                .module,
            DecodeModule::matrix_slices_e4m3_khr);
  DecodeShape nhd = mqa;
  nhd.kv_layout = KvLayout::nhd;
  EXPECT_EQ(plan(h200(), nhd, {}, on).head_slices, 1u);
  DecodeOptions timeline;
  timeline.timeline = true;
  EXPECT_EQ(plan(h200(), mqa, timeline, on).head_slices, 1u);
  // Fewer slices where the shared memory holds fewer heads' rows (D = 256: 3 of 8 heads).
  c = plan(h200(), planner_shape(64, 32, 1, 256, 4096), {}, on);
  EXPECT_EQ(c.head_slices, 2u);
  EXPECT_EQ(c.heads_per_workgroup, 16u);
  EXPECT_EQ(c.groups_per_kv_head, 2u);
  DeviceCapabilities small = h200();
  small.max_shared_memory = 16384;  // 2 slices (one subgroup each: 12.4 KiB), not 3
  EXPECT_EQ(plan(small, mqa, {}, on).head_slices, 2u);
  small.max_shared_memory = 12288;
  EXPECT_EQ(plan(small, mqa, {}, on).head_slices, 1u);
  expect_error([] { tuned("slices=2"); }, ErrorCode::invalid_argument, {"slices", "0 to 1"});
}

// ---- cache layouts ----

// nhd and hnd run on the matrix kernel's token-major modules (NV and KHR, E4M3's own), with the
// vllm plan's every other choice, the layout its specialization; head sizes must be multiples
// of 64 there.
TEST(DecodePlanner, TokenMajorLayoutsOnTheMatrixKernel) {
  const DeviceCapabilities d = h200_with_khr();
  for (const KvLayout layout : {KvLayout::nhd, KvLayout::hnd}) {
    SCOPED_TRACE(std::string(kv_layout_name(layout)));
    for (const char* name : {"long1", "mid8", "batch64", "batch256", "gqa8x", "d64", "batch64-bf16-bf16",
                             "batch64-f16-fp8_e4m3", "batch256-f16-fp8_e5m2", "batch64-ragged"}) {
      SCOPED_TRACE(name);
      const DecodeShape vllm = bench_shape(name);
      DecodeShape s = vllm;
      s.kv_layout = layout;
      const bool e4m3 = s.cache_dtype == DType::fp8_e4m3;
      const DecodeChoice a = plan(d, vllm), c = plan(d, s);
      EXPECT_EQ(c.kernel, Kernel::matrix);
      EXPECT_FALSE(c.khr);
      EXPECT_EQ(c.module, e4m3 ? DecodeModule::matrix_token_major_e4m3 : DecodeModule::matrix_token_major);
      EXPECT_EQ(plan(d, s, kernel_option(Kernel::matrix_khr)).module,
                e4m3 ? DecodeModule::matrix_token_major_e4m3_khr : DecodeModule::matrix_token_major_khr);
      EXPECT_EQ(c.split, a.split);
      EXPECT_EQ(c.num_partitions, a.num_partitions);
      EXPECT_EQ(c.subgroups, a.subgroups);
      EXPECT_EQ(c.heads_per_workgroup, a.heads_per_workgroup);
      EXPECT_EQ(c.early_values, a.early_values);
      EXPECT_EQ(c.pipeline, a.pipeline);
      EXPECT_EQ(c.share_query, a.share_query);
      EXPECT_EQ(c.features, a.features);
    }
    // MHA runs there when asked for; automatic takes the scalar kernel, as on the vllm layout.
    DecodeShape mha = bench_shape("mha32");
    mha.kv_layout = layout;
    EXPECT_EQ(plan(d, mha, kernel_option(Kernel::matrix)).module, DecodeModule::matrix_token_major);
    EXPECT_EQ(plan(d, mha).kernel, Kernel::scalar);
    // Head sizes of 32 (mod 64) are the vllm layout's only: automatic falls back to the scalar kernel.
    DecodeShape d96 = planner_shape(8, 32, 8, 96, 4096);
    EXPECT_EQ(plan(d, d96).kernel, Kernel::matrix);
    d96.kv_layout = layout;
    expect_error([&] { plan(d, d96, kernel_option(Kernel::matrix)); }, ErrorCode::unsupported,
                 {std::string("kernel: matrix: head_size: 96 is not a multiple of 64 (kv_layout ") +
                  std::string(kv_layout_name(layout)) + ")"});
    EXPECT_EQ(plan(d, d96).kernel, Kernel::scalar);
    // No timeline there, and no matrix units on lavapipe.
    DecodeOptions timeline;
    timeline.timeline = true;
    DecodeShape gqa = planner_shape(64, 32, 8, 128, 4096);
    gqa.kv_layout = layout;
    expect_error([&] { plan(d, gqa, timeline); }, ErrorCode::unsupported, {"timeline: the matrix kernel records one on the vllm layout only"});
    EXPECT_EQ(plan(lavapipe(), gqa).kernel, Kernel::scalar);
  }
}

// DecodeOptions::timeline: the matrix kernel's record per subgroup, on devices that have its
// features; refused elsewhere.
TEST(DecodePlanner, Timeline) {
  DecodeOptions o;
  o.timeline = true;
  DecodeChoice c = plan(h200(), planner_shape(64, 32, 8, 128, 4096), o);
  EXPECT_EQ(c.module, DecodeModule::matrix_timeline);
  EXPECT_EQ(c.timeline_bytes, 8u * 1 * 64 * 1 * 2 * 14 * 4);
  o.split = SplitMode::split;
  o.partition_tokens = 1024;
  c = plan(h200(), planner_shape(4, 64, 8, 128, 4096), o);
  EXPECT_EQ(c.timeline_bytes, 8u * 1 * 4 * 4 * 4 * 14 * 4);
  expect_error([&] { plan(h200(), planner_shape(64, 32, 32, 128, 4096), o); }, ErrorCode::unsupported,
               {"timeline: only the matrix kernel records one", "(kernel: scalar, or an MHA shape)"});
  expect_error([&] { plan(lavapipe(), planner_shape(64, 32, 8, 128, 4096), o); }, ErrorCode::unsupported,
               {"timeline: only the matrix kernel", "has no VK_NV_cooperative_matrix"});
  DeviceCapabilities no_clock = h200();
  no_clock.decode_timeline = false;
  expect_error([&] { plan(no_clock, planner_shape(64, 32, 8, 128, 4096), o); }, ErrorCode::unsupported,
               {"timeline: device NVIDIA H200 lacks VK_KHR_shader_clock"});
  EXPECT_EQ(plan(h200(), planner_shape(64, 32, 8, 128, 4096)).timeline_bytes, 0u);
}

// What no device launches or binds is refused before anything is made: a grid past 65535
// sequences, past 65535 partitions, a scratch past the storage-buffer range. And the shape's
// and options' own checks.
TEST(DecodePlanner, Limits) {
  expect_error([] { plan(h200(), planner_shape(65536, 4, 4, 64, 16)); }, ErrorCode::unsupported,
               {"num_seqs: 65536 sequences exceed the 65535 workgroups"});
  EXPECT_NO_THROW(plan(h200(), planner_shape(65535, 4, 4, 64, 16)));
  DecodeOptions o;
  o.split = SplitMode::split;
  o.partition_tokens = 256;
  DecodeShape s = planner_shape(1, 4, 4, 64, 65536 * 256);
  expect_error([&] { plan(h200(), s, o); }, ErrorCode::unsupported, {"partition_tokens: 65536 partitions of 256 tokens"});
  s = planner_shape(64, 32, 32, 256, 65536);
  expect_error([&] { plan(lavapipe(), s, o); }, ErrorCode::unsupported,
               {"partition_tokens: 256 partitions of 256 tokens need 541065216 bytes of scratch", "134217728"});
  DecodeShape bad = planner_shape(1, 4, 4, 60, 16);
  expect_error([&] { plan(h200(), bad); }, ErrorCode::invalid_argument, {"head_size: 60 is not supported"});
  o.partition_tokens = 100;
  expect_error([&] { plan(h200(), planner_shape(1, 4, 4, 64, 16), o); }, ErrorCode::invalid_argument, {"partition_tokens: 100"});
}

// Each feature the shape and options ask for sets its own specialization bit, as do the
// split, the list and the in-dispatch merge the plan takes.
TEST(DecodePlanner, FeatureBits) {
  const DecodeShape base = planner_shape(256, 8, 2, 128, 2048);  // a full batch: one pass
  DecodeOptions grid;
  grid.order = DecodeOrder::grid;
  const uint32_t none = plan(h200(), base, grid).features;
  EXPECT_EQ(none, 0u);
  std::vector<uint32_t> bits;
  auto add = [&](const DecodeShape& s, const DecodeOptions& o) {
    const uint32_t f = plan(h200(), s, o).features;
    EXPECT_EQ(std::popcount(f), 1) << f;
    for (uint32_t b : bits) EXPECT_NE(f, b);
    bits.push_back(f);
  };
  DecodeShape s = base;
  s.alibi = true;
  add(s, grid);
  s = base;
  s.softcap = true;
  add(s, grid);
  s = base;
  s.sinks = true;
  add(s, grid);
  s = base;
  s.lse = true;
  add(s, grid);
  DecodeOptions o = grid;
  o.sliding_window = 100;
  add(base, o);
  o = grid;
  o.split = SplitMode::split;
  o.partition_tokens = 1024;
  add(base, o);
  const uint32_t split = bits.back();
  o.order = DecodeOrder::longest_first;
  EXPECT_EQ(std::popcount(plan(h200(), base, o).features), 2);
  EXPECT_TRUE(plan(h200(), base, o).features & split);
  o.order = DecodeOrder::grid;
  o.merge = DecodeMerge::in_dispatch;
  EXPECT_EQ(std::popcount(plan(h200(), base, o).features), 2);
  const uint32_t merge = plan(h200(), base, o).features & ~split;
  o.partition_tokens = 256;  // 8 x 4 x 128 floats: merged too
  EXPECT_EQ(plan(h200(), base, o).features, split | merge);
  for (uint32_t b : bits) EXPECT_NE(merge, b);
  // Every bit of a plan that asks for everything.
  s = base;
  s.alibi = s.softcap = s.sinks = s.lse = true;
  o.sliding_window = 100;
  o.order = DecodeOrder::longest_first;
  EXPECT_EQ(std::popcount(plan(h200(), s, o).features), 8);
}

// The matrix kernel's switches from VKPAGED_DECODE_TUNE: 0 no, 1 yes, 2 (default) by dtype.
TEST(DecodePlannerH200, MatrixKnobs) {
  const DecodeShape f16 = planner_shape(64, 32, 8, 128, 4096);
  const DecodeShape e4m3 = planner_shape(64, 32, 8, 128, 4096, DType::f16, DType::fp8_e4m3);
  EXPECT_TRUE(plan(h200(), f16, {}, tuned("prefetch=1")).early_values);
  EXPECT_FALSE(plan(h200(), e4m3, {}, tuned("prefetch=0")).early_values);
  EXPECT_TRUE(plan(h200(), f16, {}, tuned("pipeline=1")).pipeline);
  EXPECT_FALSE(plan(h200(), e4m3, {}, tuned("pipeline=0")).pipeline);
  EXPECT_TRUE(plan(h200(), e4m3, {}, tuned("share=1")).share_query);
  EXPECT_FALSE(plan(h200(), planner_shape(256, 32, 8, 128, 512), {}, tuned("share=0")).share_query);
  EXPECT_FALSE(plan(h200(), f16, {}, tuned("qregs=0")).query_registers);
  EXPECT_FALSE(plan(h200(), f16, kernel_option(Kernel::scalar), tuned("qregs=0")).query_registers);
  EXPECT_TRUE(plan(h200(), f16, kernel_option(Kernel::scalar)).query_registers);
}

// The scalar kernel plans the same on every device of the same limits, whatever its subgroup
// size: the subgroups of 16 and 64 differ from lavapipe only by compute units and ranges.
TEST(DecodePlanner, SubgroupSizeDoesNotMoveTheScalarPlan) {
  for (const char* name : {"long1", "mid8", "batch64", "batch256", "mha32", "gqa8x", "d64", "q-mha"}) {
    SCOPED_TRACE(name);
    DeviceCapabilities a = subgroups_of_64(), b = subgroups_of_64();
    b.subgroup_size = 16;
    const DecodeChoice x = plan(a, bench_shape(name)), y = plan(b, bench_shape(name));
    EXPECT_EQ(x.kernel, Kernel::scalar);
    EXPECT_EQ(x.split, y.split);
    EXPECT_EQ(x.num_partitions, y.num_partitions);
    EXPECT_EQ(x.workgroup, y.workgroup);
    EXPECT_EQ(x.lanes_per_row, y.lanes_per_row);
  }
}

}  // namespace
}  // namespace vkpaged::test
