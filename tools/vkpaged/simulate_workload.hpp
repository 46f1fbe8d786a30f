// SPDX-License-Identifier: Apache-2.0
#pragma once
// The simulation's synthetic workload (seeded, deterministic) and the baseline it is compared
// with: the same requests served by reserving each one's maximum length at admission.
#include <cstdint>
#include <vector>

#include "commands.hpp"

namespace vkpaged::cli {

struct SimRequest {
  uint64_t arrival_step = 0;
  int32_t system_prompt = -1;   // index of the shared prefix it starts with, -1 = none
  std::vector<int32_t> prompt;  // token ids (the system prompt's first, when it has one)
  // Parallel sampling: one entry per sample (n = size, 1 for most requests), the tokens each
  // generates before it finishes (1..max_output).
  std::vector<uint32_t> output_lens;
  uint64_t token_seed = 0;  // generated token ids are a function of this, the sample and the position

  uint32_t samples() const { return uint32_t(output_lens.size()); }
  uint64_t total_output() const;  // over every sample
};

// Requests in arrival order. About 3 in 4 start with one of the system prompts (when there are
// any); output lengths lean short (1 + (max_output - 1) * u^2), as chat answers do. A share
// --parallel-share of requests asks for 2..--max-samples samples (drawn from a stream of their
// own, so the prompts, arrivals and first samples do not depend on it).
std::vector<SimRequest> make_workload(const SimulateArgs& args);

// Token id that sample `sample` of a request generates at `position` (the same after a
// preemption and recompute).
int32_t generated_token(const SimRequest& request, size_t position, uint32_t sample = 0);

// Blocks of `tokens` tokens.
inline uint32_t blocks_for_tokens(uint64_t tokens, uint32_t block_size) {
  return uint32_t((tokens + block_size - 1) / block_size);
}

struct ReservePolicyResult {
  uint64_t steps = 0;          // steps until the last request finished
  double live_fraction = 0;    // average over steps of live tokens / reserved slots
  double average_running = 0;  // sequences (samples) decoding at once, averaged over steps
  uint32_t max_running = 0;
};

// The same arrivals served with static reservation: a request is admitted (FIFO, at most
// max_batch sequences at once) only when ceil((prompt + max_output) / B) blocks per sample are
// free; each sample keeps its blocks until it finishes, and nothing is shared. Host-only: the
// GPU work per token is the same.
ReservePolicyResult simulate_reserve_policy(const std::vector<SimRequest>& requests, uint32_t num_blocks,
                                            uint32_t block_size, uint32_t max_output, uint32_t max_batch);

}  // namespace vkpaged::cli
