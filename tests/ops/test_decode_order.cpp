// SPDX-License-Identifier: Apache-2.0
// Longest first (DecodeOrder::longest_first): the item list record_decode_order writes, and
// decodes that take their items from it, against the CPU reference, on every kernel
// (support/decode_kernels.hpp).
#include <gtest/gtest.h>

#include <algorithm>
#include <bit>
#include <cstring>
#include <vector>

#include "support/decode_case.hpp"
#include "support/decode_check.hpp"
#include "support/decode_kernels.hpp"
#include "support/expect_error.hpp"
#include "ops/decode_plan.hpp"
#include "vkpaged/error.hpp"
#include "vkpaged/reference.hpp"

namespace vkpaged::test {
namespace {

// A decode's inputs on the device, with views over them (record_decode's way, not the
// convenience path: the list is made apart).
struct DeviceDecode {
  std::vector<DeviceBuffer> buffers;
  DecodeViews views;
  DeviceBuffer output, lse, scratch, order, status;
};

DeviceDecode upload_decode(Context& ctx, const DecodeInputs& in, const DecodePlan& plan) {
  DeviceDecode d;
  auto put = [&](const HostTensor& t) {
    d.buffers.push_back(ctx.create_buffer(std::max<size_t>(t.bytes(), 16)));
    ctx.upload(d.buffers.back().view(), t.data(), t.bytes());
    return d.buffers.back().tensor(t.dtype(), t.shape());
  };
  const DType stored = is_fp8_dtype(in.cache_dtype) ? DType::u8 : in.cache_dtype;
  d.views.query = put(in.query);
  d.views.key_cache = put(in.key_cache);
  d.views.key_cache.dtype = stored;
  d.views.value_cache = put(in.value_cache);
  d.views.value_cache.dtype = stored;
  d.views.block_tables = put(in.block_tables);
  d.views.context_lens = put(in.context_lens);
  if (plan.shape().alibi) d.views.alibi_slopes = put(in.alibi_slopes);
  if (plan.shape().sinks) d.views.sinks = put(in.sinks);
  const Shape out_shape = in.query.shape();
  d.output = ctx.create_buffer(size_t(out_shape.numel()) * dtype_size(in.query.dtype()));
  d.views.output = d.output.tensor(in.query.dtype(), out_shape);
  if (plan.shape().lse) {
    d.lse = ctx.create_buffer(size_t(out_shape[0] * out_shape[1]) * 4);
    d.views.lse = d.lse.tensor(DType::f32, Shape{out_shape[0], out_shape[1]});
  }
  if (plan.scratch_bytes()) {
    d.scratch = ctx.create_buffer(plan.scratch_bytes());
    d.views.scratch = d.scratch.view();
  }
  if (plan.order_bytes()) {
    d.order = ctx.create_buffer(plan.order_bytes());
    d.views.order = d.order.view();
  }
  d.status = ctx.create_buffer(16);
  d.views.status = d.status.view(0, 4);
  const uint32_t zero = 0;
  ctx.upload(d.views.status, &zero, 4);
  return d;
}

class DecodeOrderTest : public DecodeKernelTest {
 protected:
  // The list record_decode_order writes for `plan` from `lens` (on the device).
  std::vector<uint32_t> list_of(const DecodePlan& plan, const std::vector<int32_t>& lens) {
    DeviceBuffer lens_buffer = ctx().create_buffer(std::max<size_t>(lens.size() * 4, 16));
    ctx().upload(lens_buffer.view(), lens.data(), lens.size() * 4);
    DeviceBuffer order = ctx().create_buffer(plan.order_bytes());
    const TensorView lens_view = lens_buffer.tensor(DType::i32, Shape{int64_t(lens.size())});
    ctx().run_and_wait([&](VkCommandBuffer cmd) { record_decode_order(ctx(), cmd, plan, lens_view, order.view()); });
    std::vector<uint32_t> list(plan.order_bytes() / 4);
    ctx().download(order.view(), list.data(), plan.order_bytes());
    return list;
  }
};

// Ragged lengths around the block edges, block tables in shuffled order, one pass and split,
// with and without a sliding window, ALiBi, sinks and LSE.
TEST_P(DecodeOrderTest, LongestFirstMatchesTheReference) {
  DecodeCase c;
  c.heads = 8;
  c.kv_heads = 2;
  c.head_size = 64;
  c.lens = {0, 1, 15, 16, 17, 301, 1000, 2049};
  c.alibi = true;
  c.sinks = true;
  for (SplitMode split : {SplitMode::single_pass, SplitMode::split})
    for (uint32_t window : {0u, 300u}) {
      DecodeOptions o;
      o.order = DecodeOrder::longest_first;
      o.split = split;
      o.partition_tokens = split == SplitMode::split ? 256 : 0;
      o.sliding_window = window;
      SCOPED_TRACE(::testing::Message() << "split " << int(split) << " window " << window);
      check(c, o, default_params(c), 3 + window, true);
    }
}

// Every feature mix and cache dtype the other decode tests take, longest first.
TEST_P(DecodeOrderTest, FeatureMixesAndDtypesLongestFirst) {
  for (auto mix : feature_mixes()) {
    mix.options.order = DecodeOrder::longest_first;
    check(mix.c, mix.options, mix.params, mix.seed, true);
  }
  for (DType cache : {DType::f32, DType::bf16, DType::fp8_e4m3}) {
    DecodeCase c;
    c.query_dtype = cache == DType::fp8_e4m3 ? DType::f16 : cache;
    c.cache_dtype = cache;
    c.head_size = 128;
    c.lens = {33, 0, 500, 17, 260};
    DecodeOptions o;
    o.order = DecodeOrder::longest_first;
    check(c, o, default_params(c), 21, false);
  }
}

// The list names each (sequence, partition) once, in order of decreasing tokens (to the
// step of the sizes it sorts by: a power of two that fits the longest item in 256 sizes).
TEST_P(DecodeOrderTest, ListNamesEveryItemOnceLongestFirst) {
  std::mt19937 rng(5);
  std::uniform_int_distribution<int32_t> len(0, 1500);
  std::vector<int32_t> lens(37);
  for (auto& l : lens) l = len(rng);
  lens[4] = 0;
  lens[9] = 1500;
  for (const bool split : {false, true})
    for (const uint32_t window : {0u, 700u}) {
      SCOPED_TRACE(std::string(split ? "split" : "one pass") + " window " + std::to_string(window));
      DecodeShape s = plan_shape(uint32_t(lens.size()), 4, 2, 64, 1500);
      DecodeOptions o;
      o.order = DecodeOrder::longest_first;
      o.split = split ? SplitMode::split : SplitMode::single_pass;
      o.partition_tokens = split ? 256 : 0;
      o.sliding_window = window;
      const auto plan_or = plan_or_refused(s, o);
      ASSERT_TRUE(plan_or);
      const DecodePlan& plan = *plan_or;
      ASSERT_TRUE(plan.longest_first());
      const uint32_t S = s.num_seqs, P = plan.num_partitions(), T = split ? 256 : s.max_blocks_per_seq * s.block_size;
      ASSERT_EQ(plan.order_bytes(), 4u * S * P);
      auto tokens = [&](uint32_t seq, uint32_t part) {
        const uint32_t l = uint32_t(lens[seq]);
        uint32_t lo = window > 0 && l > window ? l - window : 0, hi = l;
        if (split) {
          lo = std::max(lo, part * 256);
          hi = std::min(hi, (part + 1) * 256);
        }
        return hi > lo ? hi - lo : 0u;
      };
      const uint32_t step = T < 256 ? 1u : 1u << (std::bit_width(T) - 8);
      const std::vector<uint32_t> list = list_of(plan, lens);
      std::vector<int> seen(size_t(S) * P, 0);
      uint32_t previous_size = ~0u;
      for (size_t i = 0; i < list.size(); ++i) {
        const uint32_t seq = list[i] & 0xffff, part = list[i] >> 16;
        ASSERT_LT(seq, S) << "entry " << i;
        ASSERT_LT(part, P) << "entry " << i;
        ++seen[size_t(part) * S + seq];
        const uint32_t size = (tokens(seq, part) + step - 1) / step;
        EXPECT_LE(size, previous_size) << "entry " << i << ": sequence " << seq << " partition " << part;
        previous_size = size;
      }
      EXPECT_EQ(std::count(seen.begin(), seen.end(), 1), ptrdiff_t(seen.size())) << "an item missing or listed twice";
      EXPECT_EQ(tokens(list[0] & 0xffff, list[0] >> 16), split ? 256u : std::min(1500u, window ? window : 1500u));
    }
}

// A list made from other lengths names every item too: the decode is exact, only its order
// (its time) suffers.
TEST_P(DecodeOrderTest, AListFromOtherLengthsCostsTimeNotCorrectness) {
  DecodeCase c;
  c.lens = {3, 600, 0, 257, 40};
  c.sinks = true;
  std::mt19937 rng(17);
  const DecodeInputs in = make_decode_inputs(c, rng);
  for (SplitMode split : {SplitMode::single_pass, SplitMode::split}) {
    DecodeOptions o = with_kernel({});
    o.order = DecodeOrder::longest_first;
    o.split = split;
    o.partition_tokens = split == SplitMode::split ? 256 : 0;
    const auto plan_or = plan_or_refused(decode_shape_of(in, false), o);
    ASSERT_TRUE(plan_or);
    const DecodePlan& plan = *plan_or;
    DeviceDecode d = upload_decode(ctx(), in, plan);
    const std::vector<int32_t> other{600, 0, 1, 599, 2};  // another step's lengths, another order
    DeviceBuffer other_lens = ctx().create_buffer(other.size() * 4);
    ctx().upload(other_lens.view(), other.data(), other.size() * 4);
    ctx().run_and_wait([&](VkCommandBuffer cmd) {
      record_decode_order(ctx(), cmd, plan, other_lens.tensor(DType::i32, Shape{5}), d.views.order);
      record_compute_barrier(ctx(), cmd);
      record_decode(ctx(), cmd, plan, d.views);
    });
    HostTensor got(in.query.dtype(), in.query.shape());
    ctx().download(d.views.output.memory, got.data(), got.bytes());
    uint32_t status = 1;
    ctx().download(d.views.status, &status, 4);
    EXPECT_EQ(status, 0u);
    const DecodeResult want = reference::decode_attention(in, o);
    EXPECT_LE(max_abs_diff(got, want.output), tolerance(c.query_dtype, c.cache_dtype)) << plan.describe();
  }
}

// A list never written (here all ones) names no item of the plan: every workgroup flags it and
// reads nothing.
TEST_P(DecodeOrderTest, AnUnwrittenListIsFlaggedNotFollowed) {
  DecodeCase c;
  c.lens = {5, 70};
  std::mt19937 rng(19);
  const DecodeInputs in = make_decode_inputs(c, rng);
  DecodeOptions o = with_kernel({});
  o.order = DecodeOrder::longest_first;
  const auto plan_or = plan_or_refused(decode_shape_of(in, false), o);
  ASSERT_TRUE(plan_or);
  const DecodePlan& plan = *plan_or;
  DeviceDecode d = upload_decode(ctx(), in, plan);
  const std::vector<uint32_t> garbage(plan.order_bytes() / 4, 0xffffffffu);
  ctx().upload(d.views.order, garbage.data(), plan.order_bytes());
  ctx().run_and_wait([&](VkCommandBuffer cmd) { record_decode(ctx(), cmd, plan, d.views); });
  uint32_t status = 0;
  ctx().download(d.views.status, &status, 4);
  EXPECT_EQ(status, kStatusBadOrder);
}

TEST_P(DecodeOrderTest, RefusesWhatItCannotList) {
  DecodeOptions o = with_kernel({});
  o.order = DecodeOrder::longest_first;
  // 4097 sequences are one item past the list's 4096.
  expect_refused([&] { DecodePlan::create(ctx(), plan_shape(4097, 4, 2, 64, 64), o); },
                 "order: longest_first lists at most 4096 items", ErrorCode::unsupported);
  o.split = SplitMode::split;
  o.partition_tokens = 256;
  expect_refused([&] { DecodePlan::create(ctx(), plan_shape(1025, 4, 2, 64, 1024), o); }, "1025 x 4 = 4100",
                 ErrorCode::unsupported);

  DecodeCase c;
  std::mt19937 rng(23);
  const DecodeInputs in = make_decode_inputs(c, rng);
  o = with_kernel({});
  o.order = DecodeOrder::longest_first;
  const auto plan_or = plan_or_refused(decode_shape_of(in, false), o);
  ASSERT_TRUE(plan_or);
  const DecodePlan& plan = *plan_or;
  EXPECT_TRUE(plan.longest_first()) << plan.describe();
  DeviceDecode d = upload_decode(ctx(), in, plan);
  DecodeViews no_list = d.views;
  no_list.order = {};
  expect_refused([&] { ctx().run_and_wait([&](VkCommandBuffer cmd) { record_decode(ctx(), cmd, plan, no_list); }); },
                 "order: no buffer given");
  const BufferView short_list = d.order.view(0, plan.order_bytes() - 4);
  expect_refused([&] {
    ctx().run_and_wait([&](VkCommandBuffer cmd) { record_decode_order(ctx(), cmd, plan, d.views.context_lens, short_list); });
  }, "order:");
  o.order = DecodeOrder::grid;
  const DecodePlan grid = *plan_or_refused(decode_shape_of(in, false), o);
  EXPECT_FALSE(grid.longest_first());
  EXPECT_EQ(grid.order_bytes(), 0u);
  expect_refused([&] {
    ctx().run_and_wait([&](VkCommandBuffer cmd) { record_decode_order(ctx(), cmd, grid, d.views.context_lens, d.views.order); });
  }, "plan: record_decode_order needs a plan made with DecodeOrder::longest_first");
}

INSTANTIATE_TEST_SUITE_P(Kernels, DecodeOrderTest, ::testing::ValuesIn(kDecodeKernels), decode_kernel_param_name);

}  // namespace
}  // namespace vkpaged::test
