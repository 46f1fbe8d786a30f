// SPDX-License-Identifier: Apache-2.0
#include "simulate_workload.hpp"

#include <algorithm>
#include <cmath>
#include <deque>
#include <random>

namespace vkpaged::cli {

namespace {

constexpr int32_t kVocabulary = 32000;

uint64_t mix(uint64_t x) {  // splitmix64's finaliser
  x += 0x9e3779b97f4a7c15ull;
  x = (x ^ (x >> 30)) * 0xbf58476d1ce4e5b9ull;
  x = (x ^ (x >> 27)) * 0x94d049bb133111ebull;
  return x ^ (x >> 31);
}

}  // namespace

uint64_t SimRequest::total_output() const {
  uint64_t sum = 0;
  for (uint32_t len : output_lens) sum += len;
  return sum;
}

int32_t generated_token(const SimRequest& request, size_t position, uint32_t sample) {
  return int32_t(mix(request.token_seed ^ (uint64_t(position) << 20) ^ (uint64_t(sample) << 52)) % kVocabulary);
}

std::vector<SimRequest> make_workload(const SimulateArgs& a) {
  std::mt19937_64 rng(a.seed);
  auto uniform = [&](uint32_t lo, uint32_t hi) { return std::uniform_int_distribution<uint32_t>(lo, hi)(rng); };
  std::uniform_int_distribution<int32_t> token(0, kVocabulary - 1);

  // System prompts of max_prompt/8 .. max_prompt/2 tokens, leaving room for a user turn.
  std::vector<std::vector<int32_t>> system(a.system_prompts);
  for (auto& prompt : system) {
    const uint32_t hi = std::max(1u, std::min(a.max_prompt / 2, a.max_prompt - 1));
    prompt.resize(uniform(std::min(hi, std::max(1u, a.max_prompt / 8)), hi));
    for (auto& t : prompt) t = token(rng);
  }

  std::vector<SimRequest> requests(a.requests);
  std::exponential_distribution<double> gap(a.arrival_rate);
  std::uniform_real_distribution<double> unit(0.0, 1.0);
  auto output_len = [&](double u) { return 1 + uint32_t(std::floor(double(a.max_output - 1) * u * u)); };
  std::mt19937_64 sampling(a.seed ^ 0x5a4d504c45530000ull);  // parallel sampling's own stream
  double time = 0;
  for (auto& r : requests) {
    r.arrival_step = uint64_t(time);
    time += gap(rng);
    if (!system.empty() && a.max_prompt > 1 && unit(rng) < 0.75) {
      r.system_prompt = int32_t(uniform(0, uint32_t(system.size()) - 1));
      r.prompt = system[size_t(r.system_prompt)];
    }
    const uint32_t user = uniform(1, a.max_prompt - uint32_t(r.prompt.size()));
    for (uint32_t i = 0; i < user; ++i) r.prompt.push_back(token(rng));
    r.output_lens = {output_len(unit(rng))};
    r.token_seed = rng();
    if (a.max_samples > 1 && unit(sampling) < a.parallel_share) {
      const uint32_t n = std::uniform_int_distribution<uint32_t>(2, a.max_samples)(sampling);
      while (r.output_lens.size() < n) r.output_lens.push_back(output_len(unit(sampling)));
    }
  }
  return requests;
}

ReservePolicyResult simulate_reserve_policy(const std::vector<SimRequest>& requests, uint32_t num_blocks,
                                            uint32_t block_size, uint32_t max_output, uint32_t max_batch) {
  struct Running {
    uint32_t reserved = 0;  // blocks
    uint64_t tokens = 0;    // live tokens
    uint32_t left = 0;      // tokens still to generate
  };
  ReservePolicyResult result;
  struct Sample {
    size_t request;
    uint32_t index;
  };
  std::deque<Sample> waiting;  // every sample of a request is a sequence of its own
  std::vector<Running> running;
  size_t next = 0, finished = 0, sequences = 0;
  for (const SimRequest& r : requests) sequences += r.samples();
  uint32_t free = num_blocks;
  double live_sum = 0, running_sum = 0;
  uint64_t busy_steps = 0;
  for (uint64_t step = 0; finished < sequences; ++step) {
    for (; next < requests.size() && requests[next].arrival_step <= step; ++next)
      for (uint32_t k = 0; k < requests[next].samples(); ++k) waiting.push_back({next, k});
    while (!waiting.empty() && running.size() < max_batch) {
      const SimRequest& r = requests[waiting.front().request];
      const uint32_t need = blocks_for_tokens(r.prompt.size() + max_output, block_size);
      if (need > free) break;
      free -= need;
      running.push_back({need, r.prompt.size(), r.output_lens[waiting.front().index]});
      waiting.pop_front();
    }
    if (running.empty()) continue;  // waiting for arrivals (the inputs fit an empty cache)
    // One decode step: every running request generates a token.
    uint64_t live = 0, reserved = 0;
    for (auto& r : running) {
      r.tokens += 1;
      r.left -= 1;
      live += r.tokens;
      reserved += r.reserved;
    }
    live_sum += double(live) / double(reserved * block_size);
    running_sum += double(running.size());
    result.max_running = std::max(result.max_running, uint32_t(running.size()));
    ++busy_steps;
    for (size_t i = 0; i < running.size();) {
      if (running[i].left == 0) {
        free += running[i].reserved;
        running.erase(running.begin() + std::ptrdiff_t(i));
        ++finished;
      } else {
        ++i;
      }
    }
    result.steps = step + 1;
  }
  if (busy_steps > 0) {
    result.live_fraction = live_sum / double(busy_steps);
    result.average_running = running_sum / double(busy_steps);
  }
  return result;
}

}  // namespace vkpaged::cli
