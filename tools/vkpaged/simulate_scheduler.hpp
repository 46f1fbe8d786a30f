// SPDX-License-Identifier: Apache-2.0
#pragma once
// The simulation's scheduler: continuous batching with chunked prefill over a BlockManager with
// prefix caching, as vLLM's scheduler does it, host bookkeeping only. Each step has a budget of
// new tokens (vLLM's max_num_batched_tokens) and runs one attention call per layer over them:
//   1. decode requests first: every running sequence whose prompt is in appends its newest
//      token (a new block when its last one is full, a copy-on-write copy when that block is
//      shared) and attends with it, one token of the budget each; when no block is free, the
//      newest running sequence is preempted: swapped out to the host blocks where there is room
//      (and swapping is on), else freed and requeued at the front for recompute, until the
//      append fits;
//   2. if nothing was preempted, swapped-out sequences come back (oldest first) while
//      can_swap_in allows and their next token fits; those whose prompt is in decode at once;
//   3. prefill chunks: running sequences whose prompt is not all in take their next chunk, in
//      admission order, up to what is left of the budget (and --chunk tokens each);
//   4. if nothing was preempted and nothing waits swapped out, waiting requests are admitted
//      in order while the budget lasts and can_allocate says the prompt (and its first token)
//      fits above the watermark. The prefix cache gives a cached prefix (whole blocks): only the
//      rest is prefilled, attending the prefix through the block table. A preempted sequence
//      recomputed prefills its prompt and what it generated again (through the prefix cache,
//      where its blocks are still there);
//   5. (after the GPU ran the step) every request whose last new token was its sequence's
//      newest has sampled a token: a finished sample leaves, a request asking for n samples is
//      forked after its prompt into n sequences sharing the prompt's blocks (each samples its
//      own first token; their next appends copy the shared partly filled last block on write).
//
// The block manager registers a prompt's full blocks in the prefix cache when the sequence is
// added, before its chunks have written them. A prefix hit is read only once it was written:
// the scheduler keeps, per device block, whether its every slot was written (or will be before
// the attention of this step), and a sequence whose cached prefix runs into a block not yet
// written prefills from there itself (as vLLM V1, which caches only computed blocks, would).
// A prompt cached whole still computes its last token's query, without writing its cached
// keys and values (slot -1: padding).
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

// One request of the step's attention call: new tokens at positions [first, first + count) of
// sequence `seq`, whose keys and values the step writes at `slots` before attending.
struct ScheduledRequest {
  uint64_t seq = 0;
  uint32_t first = 0;
  uint32_t count = 0;
  bool decode = false;         // the sequence's newest token (else a prompt chunk)
  bool after_prefix = false;   // a chunk attending positions already in the cache (first > 0)
  std::vector<int64_t> slots;  // [count]; -1: keys and values already cached (the query only)
};

struct SimStep {
  bool preempted = false;
  std::vector<BlockCopy> swap_out, swap_in;  // block pairs: (device, host), (host, device)
  std::vector<SwapMove> swapped_out, swapped_in;
  std::vector<CowCopy> cow;
  std::vector<ScheduledRequest> batch;  // decode requests first, then prefill chunks
  std::vector<BlockCopy> copies() const;
  uint32_t tokens() const;
};

struct SimCounts {
  uint32_t finished_requests = 0;
  uint64_t generated_tokens = 0;
  uint64_t decode_tokens = 0;      // new tokens of decode requests
  uint64_t prefill_tokens = 0;     // new tokens of prefill chunks (prompt tokens not taken from the cache)
  uint64_t recomputed_tokens = 0;  // of those, tokens of preempted sequences computed again
  uint64_t prefix_rewritten = 0;   // of those, prefix-cache hits computed again (not yet written, or a whole prompt's last query)
  uint64_t prefill_chunks = 0;
  uint64_t chunks_after_prefix = 0;  // chunks that attend positions already in the cache
  uint64_t mixed_steps = 0;          // steps with decode requests and prefill chunks in one call
  uint32_t max_step_tokens = 0;
  uint32_t preemptions = 0;
  uint32_t swap_preemptions = 0;  // of those, by swapping out (the rest by recompute)
  uint64_t swap_outs = 0, swap_ins = 0;                    // sequences
  uint64_t swapped_out_blocks = 0, swapped_in_blocks = 0;  // block pairs (every layer, keys and values)
  uint32_t forked_requests = 0;                            // requests forked into n > 1 samples
  uint64_t forks = 0;                                      // sequences forked from them
  uint64_t copy_on_write = 0;
};

struct SimSchedulerOptions {
  uint32_t max_batch = 256;     // sequences running at once
  uint32_t token_budget = 512;  // new tokens per step (at least max_batch: every decode request fits)
  uint32_t chunk = 0;           // most prompt tokens one request prefills in a step; 0 = the budget
  bool swap = true;             // preempt by swapping where the host blocks allow
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
  // Steps 1 to 4 above. Throws Error(internal) when nothing can run.
  SimStep schedule(uint64_t step);
  // Step 5, for the step schedule() returned last.
  void finish_step();

  const std::vector<uint64_t>& running() const { return running_; }
  size_t waiting() const { return waiting_.size(); }
  size_t swapped() const { return swapped_.size(); }
  const SimCounts& counts() const { return counts_; }

 private:
  struct Sequence {
    size_t request = 0;
    uint32_t sample = 0;
    std::vector<int32_t> tokens;  // prompt, then what was sampled so far
    uint32_t generated = 0;
    uint32_t computed = 0;     // tokens whose keys and values are in the cache (or written this step)
    bool prefilled = false;    // every token but the newest sampled one is in: it decodes
    bool query_only = false;   // a whole prompt was cached: its last token computes its query only
    bool forked = false;       // the request's other samples exist (or it asks for one)
    bool recompute = false;    // was preempted for recompute
  };

  void decode(uint64_t id, SimStep& step, uint32_t& budget);
  void prefill_chunk(uint64_t id, SimStep& step, uint32_t& budget);
  void mark_written(uint64_t id, uint32_t first, uint32_t count);
  void preempt(uint64_t victim, SimStep& step);
  bool swap_in(SimStep& step, uint32_t& budget);
  bool admit(SimStep& step, uint32_t& budget);
  uint32_t reserved_samples() const;  // samples that running, not yet forked requests will add

  const std::vector<SimRequest>& requests_;
  BlockManager& blocks_;
  SimSchedulerOptions options_;
  std::vector<Sequence> sequences_;  // id = index
  std::vector<uint32_t> samples_left_;  // per request, samples not finished
  std::deque<uint64_t> waiting_, swapped_;
  std::vector<uint64_t> running_;  // in admission order: the last is the first to be preempted
  std::unordered_set<int32_t> released_;  // device blocks of this step's preempted sequences
  std::vector<uint8_t> written_;          // per device block: every slot written
  std::vector<uint64_t> scheduled_;       // the last step's requests, for finish_step
  size_t next_arrival_ = 0;
  SimCounts counts_;
};

}  // namespace vkpaged::cli
