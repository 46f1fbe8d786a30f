#pragma once
// The simulation's scheduler: continuous batching over a BlockManager with prefix caching, as
// vLLM's does it, host bookkeeping only. Each step
//   1. every running sequence appends its next token (a new block when its last one is full, a
//      copy-on-write copy when that block is shared); when no block is free, the newest running
//      sequence is preempted: swapped out to the host blocks where there is room (and swapping
//      is on), else freed and requeued at the front for recompute, until the append fits;
//   2. if nothing was preempted, swapped-out sequences come back first (oldest first) while
//      can_swap_in allows and their next token fits, and append;
//   3. if nothing was preempted and nothing waits swapped out, waiting requests are admitted in
//      order while can_allocate says the prompt (and its first token) fits above the watermark;
//      their uncached prompt tokens are prefilled, a request asking for n samples is forked into
//      n sequences sharing the prompt's blocks, and every sample appends its first token (the
//      shared partly filled last block is copied on write for all but one of them);
//   4. (after the GPU ran the step) every running sequence has generated a token; the finished
//      ones are freed.
// schedule() returns the step's GPU work in the order it must run: swap-outs, swap-ins, the
// prefill, copy-on-write copies, the appended tokens.
#include <cstdint>
#include <deque>
#include <unordered_set>
#include <vector>

#include "simulate_workload.hpp"
#include "vkpaged/block_manager.hpp"

namespace vkpaged::cli {

// A copy-on-write copy and the slots [0, shared_slots) of its block that other holders still
// see: the copy must carry them and the source must keep them.
struct CowCopy {
  BlockCopy pair;
  uint32_t shared_slots = 0;
  // No holder of the source was preempted this step: it keeps its bytes (else its block may be
  // freed and handed out again within the step, and only the copy is checked).
  bool source_kept = true;
};

// A sequence that moved between device and host, with its device blocks on the device side
// (those it left, or those it came back to), in table order.
struct SwapMove {
  uint64_t seq = 0;
  std::vector<int32_t> device_blocks;
};

struct SimStep {
  bool preempted = false;
  std::vector<BlockCopy> swap_out, swap_in;  // block pairs: (device, host), (host, device)
  std::vector<SwapMove> swapped_out, swapped_in;
  std::vector<int64_t> prefill_slots;  // uncached prompt tokens of admitted sequences
  std::vector<CowCopy> cow;
  std::vector<int64_t> append_slots;  // one new token per running sequence
  std::vector<BlockCopy> copies() const;
};

struct SimCounts {
  uint32_t finished_requests = 0;
  uint64_t generated_tokens = 0;
  uint64_t prefill_tokens = 0;     // prompt tokens written (cache misses)
  uint64_t recomputed_tokens = 0;  // of those, tokens of preempted sequences written again
  uint32_t preemptions = 0;
  uint32_t swap_preemptions = 0;  // of those, by swapping out (the rest by recompute)
  uint64_t swap_outs = 0, swap_ins = 0;                    // sequences
  uint64_t swapped_out_blocks = 0, swapped_in_blocks = 0;  // block pairs (every layer, keys and values)
  uint32_t forked_requests = 0;                            // requests with n > 1 samples admitted
  uint64_t forks = 0;                                      // sequences forked from them
  uint64_t copy_on_write = 0;
};

struct SimSchedulerOptions {
  uint32_t max_batch = 256;  // sequences decoding at once
  bool swap = true;          // preempt by swapping where the host blocks allow
  int32_t watermark_blocks = 0;
};

class SimScheduler {
 public:
  SimScheduler(const std::vector<SimRequest>& requests, BlockManager& blocks, const SimSchedulerOptions& options);

  bool done() const { return counts_.finished_requests == requests_.size(); }
  // Requests arrived by `step` join the queue; false when nothing runs, waits or is swapped out
  // (idle until next_arrival()).
  bool arrive(uint64_t step);
  uint64_t next_arrival() const { return requests_[next_arrival_].arrival_step; }
  // Steps 1 to 3 above. Throws Error(internal) when nothing can run.
  SimStep schedule(uint64_t step);
  // Step 4.
  void finish_step();

  const std::vector<uint64_t>& running() const { return running_; }
  size_t waiting() const { return waiting_.size(); }
  size_t swapped() const { return swapped_.size(); }
  const SimCounts& counts() const { return counts_; }

 private:
  struct Sequence {
    size_t request = 0;
    uint32_t sample = 0;
    std::vector<int32_t> tokens;  // prompt, then what was generated so far
    uint32_t generated = 0;
    bool forked = false;     // the request's other samples exist (forked at first admission)
    bool recompute = false;  // was preempted for recompute
  };

  void append(uint64_t id, SimStep& step);
  void preempt(uint64_t victim, SimStep& step);
  bool swap_in(SimStep& step);
  bool admit(SimStep& step);

  const std::vector<SimRequest>& requests_;
  BlockManager& blocks_;
  SimSchedulerOptions options_;
  std::vector<Sequence> sequences_;  // id = index
  std::vector<uint32_t> samples_left_;  // per request, samples not finished
  std::deque<uint64_t> waiting_, swapped_;
  std::vector<uint64_t> running_;  // in admission order: the last is the first to be preempted
  std::unordered_set<int32_t> released_;  // device blocks of this step's preempted sequences
  size_t next_arrival_ = 0;
  SimCounts counts_;
};

}  // namespace vkpaged::cli
