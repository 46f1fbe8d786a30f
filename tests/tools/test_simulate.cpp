// SPDX-License-Identifier: Apache-2.0
// `vkpaged simulate` in-process on tiny workloads: every request finishes, every attention check
// passes (decode requests and prefill chunks alike), paging wastes less of the cache than
// reserving the maximum length, prompts run in chunks under a token budget mixed with decode
// requests, shared system prompts hit the prefix cache (only the rest is prefilled, attending
// the cached prefix), requests with several samples fork and copy on write (every copy checked
// against the block it copied), a tight cache preempts by swapping out and back in (every
// swapped-in sequence checked bit for bit) or by recompute (prefilled again), and still checks
// out, on every cache layout; the check fails on a block changed behind its back; plus the
// scheduler's steps worked by hand, the workload generator, the slot comparison the checks use,
// the reserve-policy baseline on numbers worked by hand, and the options it refuses.
#include <gtest/gtest.h>

#include <cstring>
#include <functional>
#include <numeric>
#include <sstream>
#include <string>
#include <utility>
#include <vector>

#include "commands.hpp"
#include "simulate.hpp"
#include "simulate_checks.hpp"
#include "simulate_gpu.hpp"
#include "simulate_scheduler.hpp"
#include "simulate_workload.hpp"
#include "support/test_context.hpp"
#include "vkpaged/error.hpp"
#include "vkpaged/utilities.hpp"

namespace vkpaged::cli {
namespace {

using vkpaged::test::GpuTest;

SimulateArgs tiny() {
  SimulateArgs a;
  a.requests = 12;
  a.system_prompts = 2;
  a.max_prompt = 64;
  a.max_output = 48;
  a.arrival_rate = 2.0;
  a.blocks = 40;
  a.block_size = 16;
  a.layers = 2;
  a.heads = 4;
  a.kv_heads = 2;
  a.head_size = 64;
  a.check_every = 4;
  a.seed = 3;
  return a;
}

uint64_t total_output(const SimulateArgs& a) {
  const auto requests = make_workload(a);
  return std::accumulate(requests.begin(), requests.end(), uint64_t(0),
                         [](uint64_t sum, const SimRequest& r) { return sum + r.total_output(); });
}

class SimulateTest : public GpuTest {
 protected:
  SimulateReport run(const SimulateArgs& a) {
    std::ostringstream progress;
    return simulate(ctx(), a, progress, false);
  }
};

TEST_F(SimulateTest, TinyWorkloadInvariants) {
  const SimulateArgs a = tiny();
  const SimulateReport r = run(a);
  EXPECT_EQ(r.finished, a.requests);
  EXPECT_EQ(r.generated_tokens, total_output(a));
  EXPECT_GT(r.checks, 0u);
  EXPECT_EQ(r.checks_failed, 0u) << "max |error| " << r.max_error;
  EXPECT_GT(r.hit_rate(), 0.0);
  // Only what the prefix cache did not hold is prefilled (hits not yet written computed again).
  EXPECT_EQ(r.prefill_tokens, r.prefix_queried_tokens - r.prefix_hit_tokens + r.prefix_rewritten);
  EXPECT_GT(r.live_fraction, r.reserve.live_fraction);  // paging wastes less than reserving
  EXPECT_GT(r.live_fraction, 0.5);
  EXPECT_LE(r.live_fraction, 1.0);
  EXPECT_GE(r.max_running, r.reserve.max_running);
  EXPECT_GT(r.attention_ns, 0.0);
  EXPECT_EQ(r.cache.num_blocks, 40u);
}

// Prompts of up to 64 tokens in chunks of at most 8 under a budget of 24 new tokens per step:
// decode requests and chunks in one attention call per layer, the checks comparing chunks too.
TEST_F(SimulateTest, ChunkedPrefillUnderATokenBudget) {
  SimulateArgs a = tiny();
  a.max_batch = 16;
  a.token_budget = 24;
  a.chunk = 8;
  a.check_every = 2;
  const SimulateReport r = run(a);
  EXPECT_EQ(r.finished, a.requests);
  EXPECT_EQ(r.generated_tokens, total_output(a));
  EXPECT_LE(r.max_step_tokens, 24u);
  EXPECT_GE(r.prefill_chunks * 8, r.prefill_tokens);  // no chunk above 8 tokens
  EXPECT_GT(r.prefill_chunks, uint64_t(a.requests) * 2);
  EXPECT_GT(r.chunks_after_prefix, 0u);
  EXPECT_GT(r.mixed_steps, 0u);
  EXPECT_GT(r.decode_tokens, 0u);
  EXPECT_EQ(r.prefill_tokens, r.prefix_queried_tokens - r.prefix_hit_tokens + r.prefix_rewritten);
  EXPECT_GT(r.checks, 0u);
  EXPECT_GT(r.checked_tokens, r.checked_requests) << "no prefill chunk was compared";
  EXPECT_EQ(r.checks_failed, 0u) << "max |error| " << r.max_error;
  // A multi-query kernel (the portable one's or the matrix kernel's description), not decode's.
  EXPECT_TRUE(r.mixed_plan.find("attention kernel") != std::string::npos ||
              r.mixed_plan.find("matrix kernel") != std::string::npos)
      << r.mixed_plan;
  EXPECT_TRUE(r.passed());
}

// The nhd and hnd layouts (decode-only steps on the decode kernels, through the attention
// operator on nhd and on a decode plan in grid order on hnd), with forks, swaps and every check on.
TEST_F(SimulateTest, OtherLayoutsForkSwapAndCheckOut) {
  for (const char* layout : {"nhd", "hnd"}) {
    SimulateArgs a = tiny();
    a.kv_layout = layout;
    if (std::string(layout) == "hnd") a.order = "grid";
    a.requests = 8;
    a.blocks = 14;
    a.host_blocks = 32;
    a.max_output = 32;
    a.arrival_rate = 4.0;
    a.parallel_share = 0.5;
    a.layers = 1;
    a.check_every = 3;
    a.seed = 4;
    const SimulateReport r = run(a);
    EXPECT_EQ(r.finished, a.requests) << layout;
    EXPECT_GT(r.swap_outs, 0u) << layout;
    EXPECT_EQ(r.swap_checks, r.swap_ins) << layout;
    EXPECT_GT(r.cow_checks, 0u) << layout;
    EXPECT_GT(r.checks, 0u) << layout;
    EXPECT_TRUE(r.passed()) << layout << ": " << r.checks_failed << " attention, " << r.swap_checks_failed << " swap, "
                            << r.cow_checks_failed << " copy-on-write checks failed";
    EXPECT_NE(r.plan.find("heads/wg"), std::string::npos) << r.plan;  // a decode kernel's plan (DecodePlan::describe)
  }
}

// An engine's steps longest first: the list made once per step, every layer's decode reading
// it, and the checks against the reference still passing.
TEST_F(SimulateTest, LongestFirstStepsCheckOut) {
  SimulateArgs a = tiny();
  a.order = "longest-first";
  const SimulateReport r = run(a);
  EXPECT_EQ(r.finished, a.requests);
  EXPECT_GT(r.checks, 0u);
  EXPECT_EQ(r.checks_failed, 0u) << "max |error| " << r.max_error;
  EXPECT_NE(r.plan.find("longest first"), std::string::npos) << r.plan;
}

TEST_F(SimulateTest, TightCachePreemptsRecomputesAndStillChecksOut) {
  SimulateArgs a = tiny();
  a.requests = 10;
  a.blocks = 14;  // one request needs up to 7 blocks
  a.max_output = 48;
  a.arrival_rate = 10.0;
  a.check_every = 3;
  a.layers = 1;
  a.kv_dtype = "fp8_e4m3";
  a.preemption = "recompute";
  const SimulateReport r = run(a);
  EXPECT_EQ(r.finished, a.requests);
  EXPECT_GT(r.preemptions, 0u);
  EXPECT_EQ(r.swap_preemptions, 0u);
  EXPECT_EQ(r.swap_outs, 0u);
  EXPECT_GT(r.recomputed_tokens, 0u);
  EXPECT_EQ(r.checks_failed, 0u) << "max |error| " << r.max_error;
  EXPECT_GT(r.checks, 0u);
  EXPECT_TRUE(r.passed());
}

// The same tight cache with swap space: preempted sequences go to the host pool and come back
// (swap_blocks through KvCache::record_swap_out/in), each checked bit for bit on its return.
TEST_F(SimulateTest, TightCacheSwapsOutAndBackInBitForBit) {
  SimulateArgs a = tiny();
  a.requests = 10;
  a.blocks = 14;
  a.host_blocks = 64;
  a.max_output = 48;
  a.arrival_rate = 10.0;
  a.check_every = 3;
  a.layers = 2;
  a.kv_dtype = "fp8_e5m2";
  const SimulateReport r = run(a);
  EXPECT_EQ(r.finished, a.requests);
  EXPECT_GT(r.swap_preemptions, 0u);
  EXPECT_GT(r.swap_outs, 0u);
  EXPECT_EQ(r.swap_ins, r.swap_outs);  // every swapped-out sequence came back to finish
  EXPECT_GT(r.swapped_bytes, 0u);
  EXPECT_EQ(r.swapped_bytes % r.cache.bytes_per_block, 0u);
  EXPECT_EQ(r.swap_checks, r.swap_ins);
  EXPECT_EQ(r.swap_checks_failed, 0u);
  EXPECT_GT(r.checks, 0u);
  EXPECT_EQ(r.checks_failed, 0u) << "max |error| " << r.max_error;
  EXPECT_TRUE(r.passed());
}

// Every request asks for 2 or 3 samples: forked after the prompt, the partly filled last block
// is copied on write (copy_blocks on the GPU), each copy checked against the block it copied.
TEST_F(SimulateTest, ParallelSamplingForksAndCopiesOnWrite) {
  SimulateArgs a = tiny();
  a.parallel_share = 1.0;
  a.max_samples = 3;
  a.blocks = 64;
  a.check_every = 2;
  const SimulateReport r = run(a);
  EXPECT_EQ(r.finished, a.requests);
  EXPECT_EQ(r.forked_requests, a.requests);
  EXPECT_GE(r.forks, uint64_t(a.requests));
  EXPECT_EQ(r.sequences, a.requests + r.forks);
  EXPECT_EQ(r.generated_tokens, total_output(a));
  EXPECT_GT(r.copy_on_write, 0u);
  EXPECT_EQ(r.cow_checks, r.copy_on_write);
  EXPECT_EQ(r.cow_checks_failed, 0u);
  EXPECT_EQ(r.checks_failed, 0u) << "max |error| " << r.max_error;
  EXPECT_TRUE(r.passed());
}

TEST_F(SimulateTest, SameSeedSameRun) {
  SimulateArgs a = tiny();
  a.requests = 6;
  a.check_every = 0;
  const SimulateReport x = run(a), y = run(a);
  EXPECT_EQ(x.steps, y.steps);
  EXPECT_EQ(x.preemptions, y.preemptions);
  EXPECT_EQ(x.prefix_hit_tokens, y.prefix_hit_tokens);
  EXPECT_EQ(x.forks, y.forks);
  EXPECT_EQ(x.copy_on_write, y.copy_on_write);
  EXPECT_EQ(x.swap_outs, y.swap_outs);
  EXPECT_DOUBLE_EQ(x.live_fraction, y.live_fraction);
  EXPECT_EQ(x.checks, 0u);
}

TEST_F(SimulateTest, RefusesOptionsBeforeAllocating) {
  // Each case: one change to a workload that runs, and a part of the message it must give.
  const std::vector<std::pair<std::function<void(SimulateArgs&)>, std::string>> cases = {
      // 64 + 48 tokens need 7 blocks of 16.
      {[](SimulateArgs& a) { a.blocks = 6; }, "--blocks: 6 blocks cannot hold one request"},
      {[](SimulateArgs& a) { a.budget_mb = 1; }, "--blocks, --budget-mb and --budget-fraction"},
      {[](SimulateArgs& a) { a.blocks = 0; a.budget_fraction = 2; },
       "--budget-fraction: KvCache: budget_fraction 2 is outside (0, 1]"},
      {[](SimulateArgs& a) { a.blocks = 0; a.budget_mb = 0.001; }, "holds no block"},
      {[](SimulateArgs& a) { a.kv_dtype = "int8"; }, "--kv-dtype: 'int8'"},
      {[](SimulateArgs& a) { a.heads = 3; }, "--heads: 3"},
      {[](SimulateArgs& a) { a.head_size = 20; }, "D = 20"},
      {[](SimulateArgs& a) { a.device = "cpu"; }, "--device"},
      {[](SimulateArgs& a) { a.preemption = "drop"; }, "--preemption: 'drop'"},
      {[](SimulateArgs& a) { a.order = "longest"; }, "--order: 'longest' is not auto, grid or longest-first"},
      {[](SimulateArgs& a) { a.token_budget = 100; }, "--token-budget: 100 is below --max-batch 256"},
      {[](SimulateArgs& a) { a.kv_layout = "flash"; }, "--kv-layout: 'flash' is not vllm, nhd or hnd"},
      {[](SimulateArgs& a) { a.parallel_share = 1.5; }, "--parallel-share: 1.5"},
      {[](SimulateArgs& a) { a.max_samples = 5; a.max_batch = 4; }, "--max-samples: 5"},
      // 7 blocks hold one request, not a prompt of 4 blocks forked into 4 samples.
      {[](SimulateArgs& a) { a.blocks = 7; a.max_samples = 4; }, "--blocks: 7 blocks cannot hold a prompt"},
  };
  for (const auto& [change, part] : cases) {
    SimulateArgs a = tiny();
    change(a);
    try {
      run(a);
      ADD_FAILURE() << "not refused: " << part;
    } catch (const Error& e) {
      EXPECT_NE(std::string(e.what()).find(part), std::string::npos) << e.what();
    }
  }
}

TEST_F(SimulateTest, CommandPrintsTheReport) {
  SimulateArgs a = tiny();
  a.requests = 4;
  a.device = "";
  std::ostringstream out, progress;
  EXPECT_EQ(run_simulate(a, out, progress, false), 0);
  const std::string text = out.str();
  for (const char* part : {"cache memory holding live tokens", "prefix-cache hit rate", "preemptions",
                           "requests finished: 4 of 4", "reserve-the-maximum-length", "checks:", "passed",
                           "parallel sampling:", "copy-on-write block copies:", "swap-outs:", "swap-ins:",
                           "swapped out and back in, bit for bit:", "copy-on-write left the shared slots unchanged:"})
    EXPECT_NE(text.find(part), std::string::npos) << part << "\n" << text;
}

// --budget-fraction sizes the cache from the free device memory where the device reports it
// (VK_EXT_memory_budget), else from the heaps' size, and the report says which.
TEST_F(SimulateTest, BudgetFractionSaysWhichMemoryItWasOf) {
  SimulateArgs a = tiny();
  a.requests = 3;
  a.blocks = 0;
  const DeviceInfo& device = ctx().device_info();
  const uint64_t memory = device.memory_budget ? device.device_local_free_bytes : device.device_local_bytes;
  const uint64_t block = KvCache::bytes_per_block({a.layers, a.kv_heads, a.head_size, a.block_size, DType::f16});
  a.budget_fraction = double(48 * block) / double(memory);  // about 48 blocks
  std::ostringstream out, progress;
  EXPECT_EQ(run_simulate(a, out, progress, false), 0);
  const SimulateReport r = run(a);
  EXPECT_EQ(r.cache.fraction_of, device.memory_budget ? MemorySource::memory_budget : MemorySource::heap_size);
  EXPECT_GE(r.cache.num_blocks, 40u);
  EXPECT_LE(r.cache.num_blocks, 56u);
  const std::string text = out.str();
  EXPECT_NE(text.find("sized by --budget-fraction"), std::string::npos) << text;
  EXPECT_NE(text.find(device.memory_budget ? "free device-local memory (VK_EXT_memory_budget)"
                                           : "device-local heaps' size (no VK_EXT_memory_budget)"),
            std::string::npos)
      << text;
}

// The check compares against the cache as stored: a block changed after the step's attention
// makes it fail.
TEST_F(SimulateTest, CheckFailsOnABlockChangedBehindItsBack) {
  SimGpuShape shape;
  shape.cache.num_layers = 1;
  shape.cache.num_kv_heads = 2;
  shape.cache.head_size = 64;
  shape.cache.block_size = 16;
  shape.size.num_blocks = 4;
  shape.num_heads = 4;
  shape.max_blocks_per_seq = 2;
  shape.max_batch = 2;
  shape.token_budget = 24;
  shape.max_position = 32;
  SimGpu gpu(ctx(), shape);
  // A decode request at position 9 (block 3) and a chunk of 20 tokens from position 0 (blocks 1, 2).
  SimBatch batch;
  batch.slots = {3 * 16 + 9};
  batch.positions = {9};
  for (int64_t p = 0; p < 20; ++p) {
    batch.slots.push_back(16 + p);  // blocks 1 and 2
    batch.positions.push_back(p);
  }
  batch.query_starts = {0, 1, 21};
  batch.block_tables = {3, 0, 1, 2};
  batch.context_lens = {10, 20};
  // Block 3's first 9 slots and the rest hold whatever the pool held: fill it first.
  ctx().run_and_wait([&](VkCommandBuffer cmd) {
    record_fill_random(ctx(), cmd, gpu.cache().key_cache(0), 7);
    record_fill_random(ctx(), cmd, gpu.cache().value_cache(0), 8);
  });
  gpu.run_step({}, batch, 1);
  const std::vector<uint32_t> both = {0, 1};
  const SimCheck good = gpu.check(0, both);
  EXPECT_TRUE(good.passed) << good.max_error;
  EXPECT_EQ(good.requests, 2u);
  EXPECT_EQ(good.tokens, 21u);
  // Block 2 (the chunk's positions 16..19) gets other values: the chunk's last rows change.
  ctx().run_and_wait([&](VkCommandBuffer cmd) {
    TensorView block = gpu.cache().value_cache(0);
    const uint64_t bytes = gpu.cache().sizing().block_bytes;
    block.memory.offset += 2 * bytes;
    block.memory.size = bytes;
    block.shape = Shape{int64_t(bytes / 2)};
    record_fill_random(ctx(), cmd, block, 99);
  });
  const std::vector<uint32_t> chunk = {1};
  const SimCheck bad = gpu.check(0, chunk);
  EXPECT_FALSE(bad.passed);
  EXPECT_GT(bad.max_error, bad.tolerance);
  EXPECT_TRUE(gpu.check(0, std::vector<uint32_t>{0}).passed) << "the decode request reads none of block 2";
}

// ---- host only ----

// Two requests sharing a 32-token prefix (two blocks of 16), a third whose prompt is that
// prefix: the scheduler's steps worked by hand.
TEST(SimulateScheduler, ChunksDecodesFirstAndPrefixHits) {
  std::vector<int32_t> shared(32);
  std::iota(shared.begin(), shared.end(), 100);
  auto request = [&](uint64_t step, int32_t tail, std::vector<uint32_t> outputs) {
    SimRequest r;
    r.arrival_step = step;
    r.prompt = shared;
    for (int32_t i = 0; i < tail; ++i) r.prompt.push_back(1000 + int32_t(step) * 100 + i);
    r.output_lens = std::move(outputs);
    r.token_seed = step + 1;
    return r;
  };
  // r0: 40 tokens; r1 (same step): 40 tokens, hits the shared blocks; r2 (later): the prefix alone.
  const std::vector<SimRequest> requests = {request(0, 8, {3}), request(0, 8, {2}), request(3, 0, {1})};
  BlockManager blocks(16, 16);
  SimSchedulerOptions o;
  o.max_batch = 4;
  o.token_budget = 40;
  o.chunk = 16;
  SimScheduler scheduler(requests, blocks, o);

  ASSERT_TRUE(scheduler.arrive(0));
  SimStep s = scheduler.schedule(0);
  // r0 prefills [0, 16) and writes block 0; r1's hit on block 1 is not written yet: it prefills
  // from 16 itself.
  ASSERT_EQ(s.batch.size(), 2u);
  EXPECT_EQ(s.batch[0].seq, 0u);
  EXPECT_EQ(s.batch[0].first, 0u);
  EXPECT_EQ(s.batch[0].count, 16u);
  EXPECT_EQ(s.batch[1].seq, 1u);
  EXPECT_EQ(s.batch[1].first, 16u);
  EXPECT_EQ(s.batch[1].count, 16u);
  EXPECT_TRUE(s.batch[1].after_prefix);
  EXPECT_EQ(s.batch[1].slots, blocks.slot_mapping(1, 16, 16));
  EXPECT_EQ(scheduler.counts().prefix_rewritten, 16u);
  EXPECT_EQ(s.tokens(), 32u);
  scheduler.finish_step();

  ASSERT_TRUE(scheduler.arrive(1));
  s = scheduler.schedule(1);
  // Chunks of 16 and 8 within the budget of 40: r0 [16, 32), r1 [32, 40) (its prompt's end).
  ASSERT_EQ(s.batch.size(), 2u);
  EXPECT_EQ(s.batch[0].first, 16u);
  EXPECT_EQ(s.batch[0].count, 16u);
  EXPECT_EQ(s.batch[1].first, 32u);
  EXPECT_EQ(s.batch[1].count, 8u);
  scheduler.finish_step();  // r1 samples its first token

  ASSERT_TRUE(scheduler.arrive(2));
  s = scheduler.schedule(2);
  // Decode requests first: r1 at position 40, then r0's last chunk [32, 40).
  ASSERT_EQ(s.batch.size(), 2u);
  EXPECT_TRUE(s.batch[0].decode);
  EXPECT_EQ(s.batch[0].seq, 1u);
  EXPECT_EQ(s.batch[0].first, 40u);
  EXPECT_EQ(s.batch[0].slots.size(), 1u);
  EXPECT_FALSE(s.batch[1].decode);
  EXPECT_EQ(s.batch[1].seq, 0u);
  EXPECT_EQ(s.batch[1].first, 32u);
  EXPECT_EQ(scheduler.counts().mixed_steps, 1u);
  scheduler.finish_step();  // r1 finishes (2 tokens); r0 samples its first

  ASSERT_TRUE(scheduler.arrive(3));
  s = scheduler.schedule(3);
  // r0 decodes; r2's whole prompt is cached and written: it computes its last token's query
  // only (slot -1), attending the 31 positions before it.
  ASSERT_EQ(s.batch.size(), 2u);
  EXPECT_TRUE(s.batch[0].decode);
  EXPECT_EQ(s.batch[1].seq, 2u);
  EXPECT_EQ(s.batch[1].first, 31u);
  EXPECT_EQ(s.batch[1].count, 1u);
  EXPECT_EQ(s.batch[1].slots, std::vector<int64_t>{-1});
  EXPECT_EQ(scheduler.counts().prefix_rewritten, 17u);
  scheduler.finish_step();
  EXPECT_EQ(scheduler.counts().finished_requests, 2u);  // r1, and r2 (one token)
  EXPECT_EQ(scheduler.counts().generated_tokens, 1u + 2u + 2u);
  EXPECT_EQ(scheduler.counts().prefill_tokens, 16u + 16u + 16u + 8u + 8u + 1u);
  EXPECT_EQ(scheduler.counts().decode_tokens, 2u);
}


TEST(SimulateWorkload, DeterministicAndWithinBounds) {
  SimulateArgs a = tiny();
  a.requests = 200;
  a.system_prompts = 3;
  const auto w = make_workload(a), again = make_workload(a);
  ASSERT_EQ(w.size(), 200u);
  size_t with_system = 0, multi = 0;
  for (size_t i = 0; i < w.size(); ++i) {
    EXPECT_EQ(w[i].prompt, again[i].prompt);
    EXPECT_GE(w[i].prompt.size(), 1u);
    EXPECT_LE(w[i].prompt.size(), a.max_prompt);
    ASSERT_GE(w[i].samples(), 1u);
    EXPECT_LE(w[i].samples(), a.max_samples);
    EXPECT_EQ(w[i].output_lens, again[i].output_lens);
    for (uint32_t len : w[i].output_lens) {
      EXPECT_GE(len, 1u);
      EXPECT_LE(len, a.max_output);
    }
    multi += w[i].samples() > 1;
    if (i > 0) {
      EXPECT_GE(w[i].arrival_step, w[i - 1].arrival_step);
    }
    with_system += w[i].system_prompt >= 0;
  }
  EXPECT_GT(with_system, 120u);  // about 3 in 4
  EXPECT_LT(with_system, 180u);
  EXPECT_GT(multi, 25u);  // about 1 in 4 asks for several samples
  EXPECT_LT(multi, 75u);
  // Parallel sampling draws from its own stream: without it, the same prompts and first samples.
  SimulateArgs single = a;
  single.parallel_share = 0;
  const auto plain = make_workload(single);
  for (size_t i = 0; i < w.size(); ++i) {
    EXPECT_EQ(plain[i].samples(), 1u);
    EXPECT_EQ(plain[i].prompt, w[i].prompt);
    EXPECT_EQ(plain[i].output_lens[0], w[i].output_lens[0]);
    EXPECT_EQ(plain[i].arrival_step, w[i].arrival_step);
  }
  // Samples of one request generate different tokens; sample 0 as before parallel sampling.
  EXPECT_NE(generated_token(w[0], 5, 0), generated_token(w[0], 5, 1));
  EXPECT_EQ(generated_token(w[0], 5), generated_token(w[0], 5, 0));
  // Two requests with the same system prompt share its tokens.
  for (size_t i = 1; i < w.size(); ++i)
    if (w[i].system_prompt >= 0 && w[i].system_prompt == w[0].system_prompt) {
      EXPECT_EQ(std::vector<int32_t>(w[i].prompt.begin(), w[i].prompt.begin() + 8),
                std::vector<int32_t>(w[0].prompt.begin(), w[0].prompt.begin() + 8));
      break;
    }
  a.seed = 4;
  EXPECT_NE(make_workload(a)[0].prompt, w[0].prompt);
}

TEST(SimulateReservePolicy, NumbersWorkedByHand) {
  // Four requests at step 0, prompt 16, output 16, max_output 32: each reserves 3 blocks of 16;
  // 6 blocks run two at once. Live tokens after step k (1..16) are 16 + k of 48 reserved slots.
  std::vector<SimRequest> requests(4);
  for (auto& r : requests) {
    r.prompt.assign(16, 1);
    r.output_lens = {16};
  }
  const ReservePolicyResult r = simulate_reserve_policy(requests, 6, 16, 32, 256);
  EXPECT_EQ(r.steps, 32u);
  EXPECT_EQ(r.max_running, 2u);
  EXPECT_DOUBLE_EQ(r.average_running, 2.0);
  double expected = 0;
  for (int k = 1; k <= 16; ++k) expected += (16.0 + k) / 48.0;
  EXPECT_NEAR(r.live_fraction, expected / 16.0, 1e-12);
  // max_batch caps it too.
  EXPECT_EQ(simulate_reserve_policy(requests, 6, 16, 32, 1).steps, 64u);
  // Samples are sequences of their own: two requests of two samples are the same four sequences.
  std::vector<SimRequest> sampled(2);
  for (auto& q : sampled) {
    q.prompt.assign(16, 1);
    q.output_lens = {16, 16};
  }
  const ReservePolicyResult s = simulate_reserve_policy(sampled, 6, 16, 32, 256);
  EXPECT_EQ(s.steps, r.steps);
  EXPECT_EQ(s.max_running, r.max_running);
  EXPECT_DOUBLE_EQ(s.live_fraction, r.live_fraction);
}

// The comparison the copy-on-write check makes: slots [0, n) of every row of a block, in the
// key layout [Hkv][D/x][B][x] and the value layout [Hkv][D][B].
TEST(SimulateChecks, LeadingSlotsOfKeyAndValueBlocks) {
  KvCacheShape s;
  s.num_kv_heads = 2;
  s.head_size = 16;
  s.block_size = 4;
  s.dtype = DType::f16;  // x = 8: a key block is 2 heads x 2 chunks x 4 slots x 16 bytes
  const size_t key_bytes = 2 * 2 * 4 * 16, value_bytes = 2 * 16 * 4 * 2;
  std::vector<std::byte> a(key_bytes), b(key_bytes);
  for (size_t i = 0; i < a.size(); ++i) a[i] = b[i] = std::byte(i * 7);
  // Slot 2 of (head 1, chunk 1): row 3, bytes [3 * 64 + 32, 3 * 64 + 48).
  b[3 * 64 + 40] ^= std::byte(1);
  EXPECT_TRUE(same_leading_slots(s, false, a.data(), b.data(), 2));
  EXPECT_FALSE(same_leading_slots(s, false, a.data(), b.data(), 3));
  EXPECT_FALSE(same_leading_slots(s, false, a.data(), b.data(), 4));
  std::vector<std::byte> v(value_bytes), w(value_bytes);
  for (size_t i = 0; i < v.size(); ++i) v[i] = w[i] = std::byte(i * 3);
  // Slot 1 of (head 1, dim 15): row 31, element 1, bytes [31 * 8 + 2, 31 * 8 + 4).
  w[31 * 8 + 3] ^= std::byte(0x80);
  EXPECT_TRUE(same_leading_slots(s, true, v.data(), w.data(), 1));
  EXPECT_FALSE(same_leading_slots(s, true, v.data(), w.data(), 2));

  // Whole blocks of every layer.
  s.num_layers = 2;
  SimBlocks x(s, key_bytes, 2), y(s, key_bytes, 2);
  for (size_t i = 0; i < x.bytes.size(); ++i) x.bytes[i] = y.bytes[i] = std::byte(i * 131 % 251);
  EXPECT_TRUE(same_block_slots(x, 1, y, 1, 4));
  EXPECT_FALSE(same_block_slots(x, 0, y, 1, 4));
  y.block(1, true, 1)[0] ^= std::byte(1);  // layer 1, values, block 1, slot 0 of row 0
  EXPECT_FALSE(same_block_slots(x, 1, y, 1, 1));
  EXPECT_TRUE(same_block_slots(x, 0, y, 0, 4));
}

}  // namespace
}  // namespace vkpaged::cli
