#include "simulate_scheduler.hpp"

#include <fmt/format.h>

#include "vkpaged/error.hpp"

namespace vkpaged::cli {

std::vector<BlockCopy> SimStep::copies() const {
  std::vector<BlockCopy> pairs;
  for (const CowCopy& c : cow) pairs.push_back(c.pair);
  return pairs;
}

SimScheduler::SimScheduler(const std::vector<SimRequest>& requests, BlockManager& blocks,
                           const SimSchedulerOptions& options)
    : requests_(requests), blocks_(blocks), options_(options), samples_left_(requests.size(), 0) {}

bool SimScheduler::arrive(uint64_t step) {
  for (; next_arrival_ < requests_.size() && requests_[next_arrival_].arrival_step <= step; ++next_arrival_) {
    const SimRequest& r = requests_[next_arrival_];
    samples_left_[next_arrival_] = r.samples();
    waiting_.push_back(sequences_.size());
    sequences_.push_back({next_arrival_, 0, r.prompt, 0, r.samples() == 1, false});
  }
  return !(running_.empty() && waiting_.empty() && swapped_.empty());
}

void SimScheduler::append(uint64_t id, SimStep& step) {
  Sequence& seq = sequences_[id];
  const uint32_t position = uint32_t(seq.tokens.size());
  const int32_t token = generated_token(requests_[seq.request], position, seq.sample);
  const AppendResult result = blocks_.append_token(id, token);
  if (result.copy) {
    // The block holding positions [position - position % B, position) was shared.
    step.cow.push_back({*result.copy, position % uint32_t(blocks_.block_size()), true});
    ++counts_.copy_on_write;
  }
  step.append_slots.push_back(result.slot);
  seq.tokens.push_back(token);
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
  sequences_[victim].recompute = true;
  waiting_.push_front(victim);
}

bool SimScheduler::swap_in(SimStep& step) {
  if (swapped_.empty() || running_.size() >= options_.max_batch) return false;
  const uint64_t id = swapped_.front();
  const AdmissionStatus status = blocks_.can_swap_in(std::span(&id, 1));
  if (status == AdmissionStatus::never) {  // cannot come back whole: recompute instead
    blocks_.preempt(id);
    sequences_[id].recompute = true;
    swapped_.pop_front();
    waiting_.push_front(id);
    return true;
  }
  if (status != AdmissionStatus::ok) return false;
  // Its next token must fit too: one block more when its last block is full.
  const int32_t B = blocks_.block_size();
  const int64_t needed = int64_t(blocks_.host_block_table(id).size()) + (blocks_.context_len(id) % B == 0 ? 1 : 0);
  if (blocks_.device_allocator().num_free() - needed < options_.watermark_blocks) return false;
  const std::vector<BlockCopy> pairs = blocks_.swap_in(id);
  step.swap_in.insert(step.swap_in.end(), pairs.begin(), pairs.end());
  step.swapped_in.push_back({id, blocks_.block_table(id)});
  ++counts_.swap_ins;
  counts_.swapped_in_blocks += pairs.size();
  swapped_.pop_front();
  running_.push_back(id);
  append(id, step);
  return true;
}

bool SimScheduler::admit(SimStep& step) {
  if (waiting_.empty()) return false;
  const uint64_t id = waiting_.front();
  const size_t request = sequences_[id].request;
  const SimRequest& r = requests_[request];
  const uint32_t group = sequences_[id].forked ? 1 : r.samples();
  if (running_.size() + group > options_.max_batch) return false;
  std::vector<int32_t> probe = sequences_[id].tokens;  // the prompt and the token this step appends
  probe.push_back(generated_token(r, probe.size(), sequences_[id].sample));
  if (blocks_.can_allocate(probe) != AdmissionStatus::ok) return false;
  const int32_t B = blocks_.block_size();
  const int32_t len = int32_t(sequences_[id].tokens.size());
  // Each sample's first token needs a block of its own: a copy of the shared last block or a new one.
  if (group > 1 && blocks_.device_allocator().num_free() <
                       int64_t(blocks_for_tokens(uint64_t(len), uint32_t(B))) + group + options_.watermark_blocks)
    return false;

  const int32_t cached = blocks_.add_sequence(id, sequences_[id].tokens);
  const std::vector<int64_t> prefill = blocks_.slot_mapping(id, cached, len - cached);
  step.prefill_slots.insert(step.prefill_slots.end(), prefill.begin(), prefill.end());
  counts_.prefill_tokens += uint64_t(len - cached);
  if (sequences_[id].recompute) counts_.recomputed_tokens += uint64_t(len - cached);
  waiting_.pop_front();
  running_.push_back(id);
  std::vector<uint64_t> samples = {id};
  if (group > 1) {  // parallel sampling: the other samples share the prompt's blocks
    sequences_[id].forked = true;
    ++counts_.forked_requests;
    for (uint32_t k = 1; k < group; ++k) {
      const uint64_t child = sequences_.size();
      sequences_.push_back({request, k, r.prompt, 0, true, false});
      blocks_.fork(id, child);
      running_.push_back(child);
      samples.push_back(child);
      ++counts_.forks;
    }
  }
  for (const uint64_t s : samples) append(s, step);
  return true;
}

SimStep SimScheduler::schedule(uint64_t step_index) {
  SimStep step;
  released_.clear();
  // 1. Running sequences grow; preempt the newest while a block is missing.
  for (size_t i = 0; i < running_.size(); ++i) {
    const uint64_t id = running_[i];
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
    append(id, step);
  }
  // 2. and 3. Swapped-out sequences come back first, then new requests, unless this step preempted.
  if (!step.preempted) {
    while (swap_in(step)) {
    }
    if (swapped_.empty())
      while (admit(step)) {
      }
  }
  if (running_.empty())
    throw Error(ErrorCode::internal,
                fmt::format("simulate: step {}: nothing runs ({} waiting, {} swapped out cannot come back)", step_index,
                            waiting_.size(), swapped_.size()));
  for (CowCopy& c : step.cow) c.source_kept = !released_.contains(c.pair.src);
  return step;
}

void SimScheduler::finish_step() {
  counts_.generated_tokens += running_.size();
  std::vector<uint64_t> still;
  for (const uint64_t id : running_) {
    Sequence& seq = sequences_[id];
    if (++seq.generated == requests_[seq.request].output_lens[seq.sample]) {
      blocks_.free_sequence(id);
      if (--samples_left_[seq.request] == 0) ++counts_.finished_requests;
    } else {
      still.push_back(id);
    }
  }
  running_.swap(still);
}

}  // namespace vkpaged::cli
