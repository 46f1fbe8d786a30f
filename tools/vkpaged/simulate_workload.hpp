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
  uint32_t output_len = 0;      // tokens it generates before it finishes (1..max_output)
  uint64_t token_seed = 0;      // generated token ids are a function of this and the position
};

// Requests in arrival order. About 3 in 4 start with one of the system prompts (when there are
// any); output lengths lean short (1 + (max_output - 1) * u^2), as chat answers do.
std::vector<SimRequest> make_workload(const SimulateArgs& args);

// Token id generated at `position` of a request (the same after a preemption and recompute).
int32_t generated_token(const SimRequest& request, size_t position);

// Blocks of `tokens` tokens.
inline uint32_t blocks_for_tokens(uint64_t tokens, uint32_t block_size) {
  return uint32_t((tokens + block_size - 1) / block_size);
}

struct ReservePolicyResult {
  uint64_t steps = 0;          // steps until the last request finished
  double live_fraction = 0;    // average over steps of live tokens / reserved slots
  double average_running = 0;  // requests decoding at once, averaged over steps
  uint32_t max_running = 0;
};

// The same arrivals served with static reservation: a request is admitted (FIFO, at most
// max_batch at once) only when ceil((prompt + max_output) / B) blocks are free, keeps them
// until it finishes, and shares nothing. Host-only: the GPU work per token is the same.
ReservePolicyResult simulate_reserve_policy(const std::vector<SimRequest>& requests, uint32_t num_blocks,
                                            uint32_t block_size, uint32_t max_output, uint32_t max_batch);

}  // namespace vkpaged::cli
