// `vkpaged simulate` in-process on tiny workloads: every request finishes, every decode check
// passes, paging wastes less of the cache than reserving the maximum length, shared system
// prompts hit the prefix cache, requests with several samples fork and copy on write (every
// copy checked against the block it copied), a tight cache preempts by swapping out and back
// in (every swapped-in sequence checked bit for bit) or by recompute, and still checks out;
// plus the workload generator, the slot comparison the checks use, the reserve-policy
// baseline on numbers worked by hand, and the options it refuses.
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
#include "simulate_workload.hpp"
#include "support/test_context.hpp"
#include "vkpaged/error.hpp"

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
  EXPECT_EQ(r.prefill_tokens, r.prefix_queried_tokens - r.prefix_hit_tokens);
  EXPECT_GT(r.live_fraction, r.reserve.live_fraction);  // paging wastes less than reserving
  EXPECT_GT(r.live_fraction, 0.5);
  EXPECT_LE(r.live_fraction, 1.0);
  EXPECT_GE(r.max_running, r.reserve.max_running);
  EXPECT_GT(r.decode_ns, 0.0);
  EXPECT_EQ(r.cache.num_blocks, 40u);
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

// ---- host only ----

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
