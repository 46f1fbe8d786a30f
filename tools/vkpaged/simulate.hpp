// SPDX-License-Identifier: Apache-2.0
#pragma once
// `vkpaged simulate` as a function: runs the workload on a context and returns what the command
// prints, so that tests can assert on the numbers.
#include <cstdint>
#include <ostream>
#include <string>

#include "commands.hpp"
#include "simulate_workload.hpp"
#include "vkpaged/context.hpp"
#include "vkpaged/kv_cache.hpp"

namespace vkpaged::cli {

struct SimulateReport {
  // The setup.
  std::string device;
  KvCacheShape cache_shape;
  KvCacheSizing cache;  // device blocks, tokens and bytes
  uint32_t max_blocks_per_seq = 0;
  uint32_t token_budget = 0;  // new tokens per step
  uint32_t chunk = 0;         // most prompt tokens a request prefills in a step (0 = the budget)
  std::string plan;        // the plan of the first decode-only step, described
  std::string mixed_plan;  // the plan of the first step mixing decode requests and prefill chunks

  uint32_t host_blocks = 0;  // of the swap pool (0 = none)
  bool swap = false;         // preemption by swapping (recompute where the host blocks run out)

  // The paged engine (BlockManager with prefix caching, continuous batching).
  uint32_t requests = 0;
  uint32_t finished = 0;
  uint64_t sequences = 0;          // samples: a request with n samples is n sequences
  uint64_t steps = 0;              // simulated steps until the last request finished
  uint64_t busy_steps = 0;         // steps that ran an attention call
  uint64_t generated_tokens = 0;   // sampled tokens, every sample's
  uint64_t decode_tokens = 0;      // new tokens of decode requests
  uint64_t prefill_tokens = 0;     // new tokens of prefill chunks (prompt tokens not taken from the prefix cache)
  uint64_t recomputed_tokens = 0;  // of those, tokens of preempted sequences computed again
  uint64_t prefix_rewritten = 0;   // of those, prefix-cache hits computed again (not yet written, or a whole
                                   // prompt's last token for its query)
  uint64_t prefill_chunks = 0;
  uint64_t chunks_after_prefix = 0;  // chunks attending positions already in the cache (cached prefix, earlier chunks)
  uint64_t mixed_steps = 0;          // steps whose one call mixed decode requests and prefill chunks
  uint32_t max_step_tokens = 0;      // most new tokens in one step (at most token_budget)
  uint32_t preemptions = 0;
  uint32_t swap_preemptions = 0;   // of those, by swapping out (the others by recompute)
  uint64_t swap_outs = 0, swap_ins = 0;  // sequences moved by record_swap_out / record_swap_in
  uint64_t swapped_bytes = 0;            // out and in, every layer, keys and values
  uint32_t forked_requests = 0;          // requests with n > 1 samples
  uint64_t forks = 0;                    // sequences forked after their prompt
  uint64_t copy_on_write = 0;  // blocks copied by record_copy_blocks before appends
  uint64_t prefix_queried_tokens = 0;
  uint64_t prefix_hit_tokens = 0;
  double hit_rate() const {
    return prefix_queried_tokens ? double(prefix_hit_tokens) / double(prefix_queried_tokens) : 0.0;
  }
  double live_fraction = 0;  // average over steps of live tokens / (blocks in use * B)
  double average_running = 0;
  uint32_t max_running = 0;
  double wall_seconds = 0;  // of the steps, checks excluded
  double check_seconds = 0;
  double attention_ns = 0;      // the attention of every layer, summed over the steps
  bool gpu_timestamps = false;  // attention_ns from timestamps (else wall clock)

  // Checks against the CPU reference.
  uint32_t checks = 0;
  uint32_t checks_failed = 0;
  uint64_t checked_requests = 0;  // requests compared, over every check
  uint64_t checked_tokens = 0;    // their new tokens (more than requests: prefill chunks were compared)
  double max_error = 0;
  double tolerance = 0;
  // Every swap-in: the sequence's blocks hold, bit for bit, what they held before its swap-out.
  uint32_t swap_checks = 0;
  uint32_t swap_checks_failed = 0;
  // Every copy-on-write copy: after the step, the copy holds the shared slots of the block as
  // they were, and the source (where no holder was preempted) still does.
  uint32_t cow_checks = 0;
  uint32_t cow_checks_failed = 0;
  bool passed() const {
    return checks_failed == 0 && swap_checks_failed == 0 && cow_checks_failed == 0 && finished == requests;
  }

  // The same workload, reserving prompt + max_output per request, sharing nothing.
  ReservePolicyResult reserve;
};

// Validates the arguments (vkpaged::Error naming the option), runs the simulation on `context`
// with progress on `progress`, and returns the report.
SimulateReport simulate(Context& context, const SimulateArgs& args, std::ostream& progress, bool progress_is_tty);

// The report as `vkpaged simulate` prints it.
void print_simulate_report(std::ostream& out, const SimulateArgs& args, const SimulateReport& report);

}  // namespace vkpaged::cli
