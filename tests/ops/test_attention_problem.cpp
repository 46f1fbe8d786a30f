// SPDX-License-Identifier: Apache-2.0
// Decode as the attention problem's one-token case, on fabricated devices and without a GPU: a
// decode batch converted into the problem (ops/attention_problem.hpp) goes to the decode family
// whether it comes as a DecodePlan's batch (single tokens by construction, its options) or as an
// AttentionPlan's step of one token per request, and the decode family then makes the decode
// planner's very choice (or the same refusal), with the decode shape and options coming back
// unchanged.
#include <gtest/gtest.h>

#include <string>
#include <variant>
#include <vector>

#include "ops/attention_planner.hpp"
#include "ops/attention_problem.hpp"
#include "ops/shared_fields.hpp"
#include "support/fabricated_devices.hpp"
#include "vkpaged/error.hpp"

namespace vkpaged::test {
namespace {

using detail::DecodeChoice;
using detail::DecodeTuning;
using detail::QueryRows;

// A choice, or the error that refused it.
using Outcome = std::variant<DecodeChoice, std::string>;

template <typename F>
Outcome outcome_of(F&& plan) {
  try {
    return plan();
  } catch (const Error& e) {
    return std::string(e.what());
  }
}

std::string str(const Outcome& o) {
  if (const auto* why = std::get_if<std::string>(&o)) return "refused: " + *why;
  const DecodeChoice& c = std::get<DecodeChoice>(o);
  return "kernel " + std::to_string(int(c.kernel)) + ", " + std::to_string(c.num_partitions) + " partitions";
}

struct Case {
  std::string name;
  DecodeShape shape;
  DecodeOptions options;
};

DecodeShape shape_of(uint32_t seqs, uint32_t heads, uint32_t kv_heads, uint32_t head_size, uint32_t context) {
  DecodeShape s;
  s.num_seqs = seqs;
  s.num_heads = heads;
  s.num_kv_heads = kv_heads;
  s.head_size = head_size;
  s.block_size = 16;
  s.max_blocks_per_seq = (context + 15) / 16;
  s.num_blocks = seqs * s.max_blocks_per_seq;
  return s;
}

std::vector<Case> cases() {
  std::vector<Case> all;
  all.push_back({"gqa", shape_of(64, 32, 8, 128, 2048), {}});
  all.push_back({"mha long", shape_of(8, 32, 32, 128, 16384), {}});
  all.push_back({"no requests", shape_of(0, 8, 8, 64, 256), {}});
  Case features{"features nhd fp8", shape_of(16, 16, 2, 128, 1024), {}};
  features.shape.kv_layout = KvLayout::nhd;
  features.shape.cache_dtype = DType::fp8_e4m3;
  features.shape.alibi = features.shape.sinks = features.shape.lse = features.shape.softcap = true;
  features.options.sliding_window = 100;
  all.push_back(features);
  Case bf16{"bf16 csr head 512", shape_of(4, 8, 8, 512, 512), {}};
  bf16.shape.query_dtype = bf16.shape.cache_dtype = DType::bf16;
  bf16.shape.csr_page_table = true;
  all.push_back(bf16);
  Case split{"forced split, longest first", shape_of(32, 32, 8, 128, 4096), {}};
  split.options.split = SplitMode::split;
  split.options.partition_tokens = 512;
  split.options.order = DecodeOrder::longest_first;
  all.push_back(split);
  Case merged{"merged in the dispatch", shape_of(2, 32, 8, 128, 8192), {}};
  merged.options.merge = DecodeMerge::in_dispatch;
  merged.options.timeline = true;
  all.push_back(merged);
  Case scalar{"scalar kernel, single pass", shape_of(16, 32, 8, 128, 2048), {}};
  scalar.options.kernel = DecodeKernel::scalar;
  scalar.options.split = SplitMode::single_pass;
  all.push_back(scalar);
  Case bad{"bad partition", shape_of(16, 32, 8, 128, 2048), {}};
  bad.options.partition_tokens = 300;
  all.push_back(bad);
  return all;
}

std::vector<DeviceCapabilities> devices() { return {h200(), lavapipe(), amd_rdna3(), intel_xe(), minimal()}; }

std::vector<int32_t> one_token_each(uint32_t requests) {
  std::vector<int32_t> starts(requests + 1);
  for (uint32_t i = 0; i <= requests; ++i) starts[i] = int32_t(i);
  return starts;
}

TEST(AttentionProblem, DecodeShapesAndOptionsComeBackUnchanged) {
  for (const Case& c : cases()) {
    SCOPED_TRACE(c.name);
    const AttentionShape problem = detail::decode_problem(c.shape, c.options.sliding_window);
    EXPECT_EQ(problem.num_query_tokens, c.shape.num_seqs);
    EXPECT_EQ(problem.sliding_window, c.options.sliding_window);
    const DecodeShape shape = detail::attention_decode_shape(problem);
    EXPECT_EQ(shape.num_seqs, c.shape.num_seqs);
#define VKP_EXPECT_SAME(f) EXPECT_EQ(shape.f, c.shape.f) << #f;
    VKP_SHARED_SHAPE_FIELDS(VKP_EXPECT_SAME)
#undef VKP_EXPECT_SAME
    const DecodeOptions o = detail::attention_decode_options(problem, detail::decode_attention_options(c.options),
                                                             detail::decode_family_options(c.options));
    EXPECT_EQ(o.sliding_window, c.options.sliding_window);
    EXPECT_EQ(o.split, c.options.split);
    EXPECT_EQ(o.partition_tokens, c.options.partition_tokens);
    EXPECT_EQ(o.kernel, c.options.kernel);
    EXPECT_EQ(o.order, c.options.order);
    EXPECT_EQ(o.merge, c.options.merge);
    EXPECT_EQ(o.timeline, c.options.timeline);
    EXPECT_EQ(detail::decode_attention_options(c.options).kernel, AttentionKernel::decode);
  }
}

TEST(AttentionProblem, ADecodeBatchIsPlannedAsTheProblemOnTheDecodeFamily) {
  const DecodeTuning tuning;
  for (const DeviceCapabilities& dev : devices()) {
    for (const Case& c : cases()) {
      SCOPED_TRACE(dev.name + ", " + c.name);
      // What the decode planner chooses for the batch on its own.
      const Outcome direct = outcome_of([&] { return detail::plan_decode(dev, c.shape, c.options, tuning); });
      const AttentionShape problem = detail::decode_problem(c.shape, c.options.sliding_window);
      // DecodePlan::create's way: the problem of single tokens, with the decode family's options.
      const AttentionOptions as_decode = detail::decode_attention_options(c.options);
      const Outcome via_problem = outcome_of([&] {
        EXPECT_EQ(detail::plan_attention_rows(dev, problem, QueryRows::single_tokens(), as_decode).kernel,
                  AttentionKernel::decode);
        return detail::plan_decode_family(dev, problem, as_decode, detail::decode_family_options(c.options), tuning)
            .choice;
      });
      EXPECT_EQ(via_problem, direct) << str(via_problem) << " against " << str(direct);
      // AttentionPlan::create's way, for a step of one token per request with options it can say
      // (the split; kernel, order, merge and timeline automatic or off): the same family and choice.
      const DecodeOptions& o = c.options;
      if (o.kernel != DecodeKernel::automatic || o.order != DecodeOrder::automatic ||
          o.merge != DecodeMerge::reduce_pass || o.timeline)
        continue;
      AttentionOptions attention;
      attention.split = o.split;
      attention.partition_tokens = o.partition_tokens;
      const std::vector<int32_t> starts = one_token_each(c.shape.num_seqs);
      const Outcome via_step = outcome_of([&] {
        EXPECT_EQ(detail::plan_attention(dev, problem, starts, attention).kernel, AttentionKernel::decode);
        return detail::plan_decode_family(dev, problem, attention, {}, tuning).choice;
      });
      EXPECT_EQ(via_step, direct) << str(via_step) << " against " << str(direct);
    }
  }
}

}  // namespace
}  // namespace vkpaged::test
