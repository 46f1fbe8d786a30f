// SPDX-License-Identifier: Apache-2.0
#include "simulate_scheduler.hpp"

#include <fmt/format.h>

#include <algorithm>

#include "vkpaged/error.hpp"

namespace vkpaged::cli {

std::vector<BlockCopy> SimStep::copies() const {
  std::vector<BlockCopy> pairs;
  for (const CowCopy& c : cow) pairs.push_back(c.pair);
  return pairs;
}

uint32_t SimStep::tokens() const {
  uint32_t n = 0;
  for (const ScheduledRequest& r : batch) n += r.count;
  return n;
}

SimScheduler::SimScheduler(const std::vector<SimRequest>& requests, BlockManager& blocks,
                           const SimSchedulerOptions& options)
    : requests_(requests),
      blocks_(blocks),
      options_(options),
      samples_left_(requests.size(), 0),
      written_(size_t(blocks.device_allocator().num_blocks()), 0) {}

bool SimScheduler::arrive(uint64_t step) {
  for (; next_arrival_ < requests_.size() && requests_[next_arrival_].arrival_step <= step; ++next_arrival_) {
    const SimRequest& r = requests_[next_arrival_];
    samples_left_[next_arrival_] = r.samples();
    waiting_.push_back(sequences_.size());
    Sequence seq;
    seq.request = next_arrival_;
    seq.tokens = r.prompt;
    seq.forked = r.samples() == 1;
    sequences_.push_back(std::move(seq));
  }
  return !(running_.empty() && waiting_.empty() && swapped_.empty());
}

uint32_t SimScheduler::reserved_samples() const {
  uint32_t n = 0;
  for (const uint64_t id : running_)
    if (!sequences_[id].forked) n += requests_[sequences_[id].request].samples() - 1;
  return n;
}

// Blocks whose last slot lies in [first, first + count) are written whole by then.
void SimScheduler::mark_written(uint64_t id, uint32_t first, uint32_t count) {
  const uint32_t B = uint32_t(blocks_.block_size());
  const std::vector<int32_t> table = blocks_.block_table(id);
  for (uint32_t j = first / B; (j + 1) * B <= first + count; ++j) written_[size_t(table[j])] = 1;
}

void SimScheduler::decode(uint64_t id, SimStep& step, uint32_t& budget) {
  Sequence& seq = sequences_[id];
  const uint32_t position = uint32_t(seq.tokens.size()) - 1;  // the newest token, sampled last step
  if (blocks_.context_len(id) != int32_t(position) || seq.computed != position)
    throw Error(ErrorCode::internal,
                fmt::format("simulate: sequence {} decodes position {} with {} slots and {} tokens computed", id,
                            position, blocks_.context_len(id), seq.computed));
  const AppendResult result = blocks_.append_token(id, seq.tokens.back());
  const uint32_t B = uint32_t(blocks_.block_size());
  if (result.copy) {
    // The block holding positions [position - position % B, position) was shared.
    step.cow.push_back({*result.copy, position % B, true});
    written_[size_t(result.copy->dst)] = 0;
    ++counts_.copy_on_write;
  } else if (result.slot % B == 0) {
    written_[size_t(result.slot / B)] = 0;  // a new block
  }
  step.batch.push_back({id, position, 1, true, false, {result.slot}});
  seq.computed = position + 1;
  mark_written(id, position, 1);
  ++counts_.decode_tokens;
  --budget;
}

void SimScheduler::prefill_chunk(uint64_t id, SimStep& step, uint32_t& budget) {
  Sequence& seq = sequences_[id];
  const uint32_t remaining = uint32_t(seq.tokens.size()) - seq.computed;
  uint32_t n = std::min(remaining, budget);
  if (options_.chunk > 0) n = std::min(n, options_.chunk);
  if (n == 0) return;
  ScheduledRequest r{id, seq.computed, n, false, seq.computed > 0,
                     blocks_.slot_mapping(id, int32_t(seq.computed), int32_t(n))};
  if (seq.query_only && seq.computed + n == seq.tokens.size()) r.slots.back() = -1;  // its keys and values are cached
  step.batch.push_back(std::move(r));
  mark_written(id, seq.computed, n);
  seq.computed += n;
  budget -= n;
  counts_.prefill_tokens += n;
  if (seq.recompute) counts_.recomputed_tokens += n;
  ++counts_.prefill_chunks;
  counts_.chunks_after_prefix += step.batch.back().after_prefix;
}

void SimScheduler::preempt(uint64_t victim, SimStep& step) {
  ++counts_.preemptions;
  const std::vector<int32_t> table = blocks_.block_table(victim);
  released_.insert(table.begin(), table.end());
  if (options_.swap && blocks_.can_swap_out(std::span(&victim, 1))) {
    const std::vector<BlockCopy> pairs = blocks_.swap_out(victim);
    step.swap_out.insert(step.swap_out.end(), pairs.begin(), pairs.end());
    step.swapped_out.push_back({victim, table});
    swapped_.push_back(victim);
    ++counts_.swap_preemptions;
    ++counts_.swap_outs;
    counts_.swapped_out_blocks += pairs.size();
    return;
  }
  blocks_.preempt(victim);
  Sequence& seq = sequences_[victim];
  seq.computed = 0;
  seq.prefilled = seq.query_only = false;
  seq.recompute = true;
  waiting_.push_front(victim);
}

bool SimScheduler::swap_in(SimStep& step, uint32_t& budget) {
  if (swapped_.empty()) return false;
  const uint64_t id = swapped_.front();
  Sequence& seq = sequences_[id];
  const uint32_t group = seq.forked ? 1 : requests_[seq.request].samples();
  if (running_.size() + reserved_samples() + group > options_.max_batch) return false;
  const AdmissionStatus status = blocks_.can_swap_in(std::span(&id, 1));
  if (status == AdmissionStatus::never) {  // cannot come back whole: recompute instead
    blocks_.preempt(id);
    seq.computed = 0;
    seq.prefilled = seq.query_only = false;
    seq.recompute = true;
    swapped_.pop_front();
    waiting_.push_front(id);
    return true;
  }
  if (status != AdmissionStatus::ok) return false;
  // A sequence that decodes appends now: one block more when its last block is full.
  const int32_t B = blocks_.block_size();
  const int64_t needed =
      int64_t(blocks_.host_block_table(id).size()) + (seq.prefilled && blocks_.context_len(id) % B == 0 ? 1 : 0);
  if (blocks_.device_allocator().num_free() - needed < options_.watermark_blocks) return false;
  const std::vector<BlockCopy> pairs = blocks_.swap_in(id);
  step.swap_in.insert(step.swap_in.end(), pairs.begin(), pairs.end());
  const std::vector<int32_t> table = blocks_.block_table(id);
  step.swapped_in.push_back({id, table});
  for (size_t j = 0; j < table.size(); ++j) written_[size_t(table[j])] = (j + 1) * size_t(B) <= seq.computed;
  ++counts_.swap_ins;
  counts_.swapped_in_blocks += pairs.size();
  swapped_.pop_front();
  running_.push_back(id);
  if (seq.prefilled && budget > 0) decode(id, step, budget);
  return true;
}

bool SimScheduler::admit(SimStep& step, uint32_t& budget) {
  if (waiting_.empty() || budget == 0) return false;
  const uint64_t id = waiting_.front();
  const size_t request = sequences_[id].request;
  const SimRequest& r = requests_[request];
  const uint32_t group = sequences_[id].forked ? 1 : r.samples();
  if (running_.size() + reserved_samples() + group > options_.max_batch) return false;
  std::vector<int32_t> probe = sequences_[id].tokens;  // the prompt and the token it samples next
  probe.push_back(generated_token(r, probe.size(), sequences_[id].sample));
  if (blocks_.can_allocate(probe) != AdmissionStatus::ok) return false;
  const int32_t B = blocks_.block_size();
  const int32_t len = int32_t(sequences_[id].tokens.size());
  // Each sample's first token needs a block of its own: a copy of the shared last block or a new one.
  if (group > 1 && blocks_.device_allocator().num_free() <
                       int64_t(blocks_for_tokens(uint64_t(len), uint32_t(B))) + group + options_.watermark_blocks)
    return false;

  const int32_t cached = blocks_.add_sequence(id, sequences_[id].tokens);
  const std::vector<int32_t> table = blocks_.block_table(id);
  for (size_t j = size_t(cached / B); j < table.size(); ++j) written_[size_t(table[j])] = 0;  // fresh blocks
  // The cached prefix counts up to the first block nobody has written yet: this sequence
  // prefills from there.
  int32_t computed = 0;
  while (computed < cached && written_[size_t(table[size_t(computed / B)])]) computed += B;
  counts_.prefix_rewritten += uint64_t(cached - computed);
  Sequence& seq = sequences_[id];
  seq.query_only = computed == len;
  if (seq.query_only) {  // the whole prompt is cached: its last token still needs its query
    computed = len - 1;
    ++counts_.prefix_rewritten;
  }
  seq.computed = uint32_t(computed);
  seq.prefilled = false;
  waiting_.pop_front();
  running_.push_back(id);
  prefill_chunk(id, step, budget);
  return true;
}

SimStep SimScheduler::schedule(uint64_t step_index) {
  SimStep step;
  released_.clear();
  scheduled_.clear();
  uint32_t budget = options_.token_budget;
  // 1. Decode requests; preempt the newest while a block is missing.
  for (size_t i = 0; i < running_.size(); ++i) {
    const uint64_t id = running_[i];
    if (!sequences_[id].prefilled) continue;
    bool self = false;
    while (!blocks_.can_append(id)) {
      const uint64_t victim = running_.back();
      running_.pop_back();
      preempt(victim, step);
      step.preempted = true;
      if (victim == id) {
        self = true;
        break;
      }
    }
    if (self) break;
    decode(id, step, budget);
  }
  // 2. Swapped-out sequences come back first, unless this step preempted.
  if (!step.preempted)
    while (swap_in(step, budget)) {
    }
  // 3. Prefill chunks of running sequences, in admission order.
  for (const uint64_t id : running_)
    if (!sequences_[id].prefilled && budget > 0) prefill_chunk(id, step, budget);
  // 4. New requests, while the budget lasts.
  if (!step.preempted && swapped_.empty())
    while (admit(step, budget)) {
    }
  if (step.batch.empty())
    throw Error(ErrorCode::internal,
                fmt::format("simulate: step {}: nothing runs ({} running, {} waiting, {} swapped out cannot come back)",
                            step_index, running_.size(), waiting_.size(), swapped_.size()));
  for (CowCopy& c : step.cow) c.source_kept = !released_.contains(c.pair.src);
  // The call's requests: decode requests first (appends, swap-ins), then prefill chunks.
  std::stable_partition(step.batch.begin(), step.batch.end(), [](const ScheduledRequest& r) { return r.decode; });
  for (const ScheduledRequest& r : step.batch) scheduled_.push_back(r.seq);
  const bool decodes = step.batch.front().decode, chunks = !step.batch.back().decode;
  counts_.mixed_steps += decodes && chunks;
  counts_.max_step_tokens = std::max(counts_.max_step_tokens, step.tokens());
  return step;
}

void SimScheduler::finish_step() {
  std::unordered_set<uint64_t> finished;
  std::vector<uint64_t> forked;
  for (const uint64_t id : scheduled_) {
    if (sequences_[id].computed < sequences_[id].tokens.size()) continue;  // a chunk short of the end
    sequences_[id].prefilled = true;
    sequences_[id].query_only = false;
    const size_t request = sequences_[id].request;
    const SimRequest& r = requests_[request];
    std::vector<uint64_t> samples = {id};
    if (!sequences_[id].forked) {  // the prompt is in: the other samples share its blocks
      sequences_[id].forked = true;
      ++counts_.forked_requests;
      for (uint32_t k = 1; k < r.samples(); ++k) {
        const uint64_t child = sequences_.size();
        Sequence copy = sequences_[id];
        copy.sample = k;
        copy.recompute = false;
        sequences_.push_back(std::move(copy));
        blocks_.fork(id, child);
        samples.push_back(child);
        forked.push_back(child);
        ++counts_.forks;
      }
    }
    // Each sample samples its next token from this step's output, or finishes.
    for (const uint64_t s : samples) {
      Sequence& seq = sequences_[s];
      ++seq.generated;
      ++counts_.generated_tokens;
      if (seq.generated == r.output_lens[seq.sample]) {
        blocks_.free_sequence(s);
        finished.insert(s);
        if (--samples_left_[request] == 0) ++counts_.finished_requests;
      } else {
        seq.tokens.push_back(generated_token(r, seq.tokens.size(), seq.sample));
      }
    }
  }
  std::vector<uint64_t> still;
  for (const uint64_t id : running_)
    if (!finished.contains(id)) still.push_back(id);
  for (const uint64_t id : forked)
    if (!finished.contains(id)) still.push_back(id);
  running_.swap(still);
}

}  // namespace vkpaged::cli
