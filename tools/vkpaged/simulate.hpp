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
  std::string plan;  // the decode plan of a full batch, described

  uint32_t host_blocks = 0;  // of the swap pool (0 = none)
  bool swap = false;         // preemption by swapping (recompute where the host blocks run out)

  // The paged engine (BlockManager with prefix caching, continuous batching).
  uint32_t requests = 0;
  uint32_t finished = 0;
  uint64_t sequences = 0;          // samples: a request with n samples is n sequences
  uint64_t steps = 0;              // simulated steps until the last request finished
  uint64_t busy_steps = 0;         // steps that ran a decode
  uint64_t generated_tokens = 0;   // one per running sequence per step
  uint64_t prefill_tokens = 0;     // prompt tokens written by reshape_and_cache (cache misses)
  uint64_t recomputed_tokens = 0;  // of those, tokens of preempted requests written again
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
  double decode_ns = 0;         // decode of every layer, summed over the steps
  bool gpu_timestamps = false;  // decode_ns from timestamps (else wall clock)

  // Checks against the CPU reference.
  uint32_t checks = 0;
  uint32_t checks_failed = 0;
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
