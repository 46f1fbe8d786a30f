// `vkpaged simulate` in-process on tiny workloads: every request finishes, every decode check
// passes, paging wastes less of the cache than reserving the maximum length, shared system
// prompts hit the prefix cache, a tight cache preempts and recomputes and still checks out;
// plus the workload generator, the reserve-policy baseline on numbers worked by hand, and
// the options it refuses.
#include <gtest/gtest.h>

#include <numeric>
#include <sstream>
#include <string>

#include "commands.hpp"
#include "simulate.hpp"
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
                         [](uint64_t sum, const SimRequest& r) { return sum + r.output_len; });
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

TEST_F(SimulateTest, TightCachePreemptsRecomputesAndStillChecksOut) {
  SimulateArgs a = tiny();
  a.requests = 10;
  a.blocks = 14;  // one request needs up to 7 blocks
  a.max_output = 48;
  a.arrival_rate = 10.0;
  a.check_every = 3;
  a.layers = 1;
  a.kv_dtype = "fp8_e4m3";
  const SimulateReport r = run(a);
  EXPECT_EQ(r.finished, a.requests);
  EXPECT_GT(r.preemptions, 0u);
  EXPECT_GT(r.recomputed_tokens, 0u);
  EXPECT_EQ(r.checks_failed, 0u) << "max |error| " << r.max_error;
  EXPECT_GT(r.checks, 0u);
}

TEST_F(SimulateTest, SameSeedSameRun) {
  SimulateArgs a = tiny();
  a.requests = 6;
  a.check_every = 0;
  const SimulateReport x = run(a), y = run(a);
  EXPECT_EQ(x.steps, y.steps);
  EXPECT_EQ(x.preemptions, y.preemptions);
  EXPECT_EQ(x.prefix_hit_tokens, y.prefix_hit_tokens);
  EXPECT_DOUBLE_EQ(x.live_fraction, y.live_fraction);
  EXPECT_EQ(x.checks, 0u);
}

TEST_F(SimulateTest, RefusesOptionsBeforeAllocating) {
  auto refused = [&](SimulateArgs a, const std::string& part) {
    try {
      run(a);
      ADD_FAILURE() << "not refused: " << part;
    } catch (const Error& e) {
      EXPECT_NE(std::string(e.what()).find(part), std::string::npos) << e.what();
    }
  };
  SimulateArgs a = tiny();
  a.blocks = 6;  // 64 + 48 tokens need 7 blocks of 16
  refused(a, "--blocks: 6 blocks cannot hold one request");
  a = tiny();
  a.budget_mb = 1;
  refused(a, "--blocks and --budget-mb");
  a = tiny();
  a.blocks = 0;
  a.budget_mb = 0.001;
  refused(a, "holds no block");
  a = tiny();
  a.kv_dtype = "int8";
  refused(a, "--kv-dtype: 'int8'");
  a = tiny();
  a.heads = 3;
  refused(a, "--heads: 3");
  a = tiny();
  a.head_size = 20;
  refused(a, "D = 20");
  a = tiny();
  a.device = "cpu";
  refused(a, "--device");
}

TEST_F(SimulateTest, CommandPrintsTheReport) {
  SimulateArgs a = tiny();
  a.requests = 4;
  a.device = "";
  std::ostringstream out, progress;
  EXPECT_EQ(run_simulate(a, out, progress, false), 0);
  const std::string text = out.str();
  for (const char* part : {"cache memory holding live tokens", "prefix-cache hit rate", "preemptions",
                           "requests finished: 4 of 4", "reserve-the-maximum-length", "checks:", "passed"})
    EXPECT_NE(text.find(part), std::string::npos) << part << "\n" << text;
}

// ---- host only ----

TEST(SimulateWorkload, DeterministicAndWithinBounds) {
  SimulateArgs a = tiny();
  a.requests = 200;
  a.system_prompts = 3;
  const auto w = make_workload(a), again = make_workload(a);
  ASSERT_EQ(w.size(), 200u);
  size_t with_system = 0;
  for (size_t i = 0; i < w.size(); ++i) {
    EXPECT_EQ(w[i].prompt, again[i].prompt);
    EXPECT_GE(w[i].prompt.size(), 1u);
    EXPECT_LE(w[i].prompt.size(), a.max_prompt);
    EXPECT_GE(w[i].output_len, 1u);
    EXPECT_LE(w[i].output_len, a.max_output);
    if (i > 0) {
      EXPECT_GE(w[i].arrival_step, w[i - 1].arrival_step);
    }
    with_system += w[i].system_prompt >= 0;
  }
  EXPECT_GT(with_system, 120u);  // about 3 in 4
  EXPECT_LT(with_system, 180u);
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
    r.output_len = 16;
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
}

}  // namespace
}  // namespace vkpaged::cli
