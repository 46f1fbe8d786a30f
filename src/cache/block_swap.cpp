// SPDX-License-Identifier: Apache-2.0
// Swapping groups of sequences between device blocks and host blocks.
#include <algorithm>
#include <unordered_map>
#include <unordered_set>

#include "cache/block_manager_state.hpp"
#include "cache/cache_errors.hpp"

namespace vkpaged {

using cache::refuse;
using cache::Sequence;

int64_t BlockManager::Impl::blocks_to_swap(std::string_view operation,
                                           std::span<const uint64_t> seq_ids, bool swapped) const {
  std::unordered_set<uint64_t> listed;
  std::unordered_set<int32_t> blocks;
  for (const uint64_t seq_id : seq_ids) {
    const Sequence& seq = find(operation, seq_id);
    if (!listed.insert(seq_id).second) refuse("{}: sequence {} is listed twice", operation, seq_id);
    if (seq.swapped && !swapped)
      refuse("{}: sequence {} is already swapped out", operation, seq_id);
    if (!seq.swapped && swapped) refuse("{}: sequence {} is not swapped out", operation, seq_id);
    blocks.insert(seq.blocks.begin(), seq.blocks.end());
  }
  return static_cast<int64_t>(blocks.size());
}

namespace {

std::vector<Sequence*> group_of(std::unordered_map<uint64_t, Sequence>& sequences,
                                std::span<const uint64_t> seq_ids) {
  std::vector<Sequence*> group;
  for (const uint64_t seq_id : seq_ids) group.push_back(&sequences.at(seq_id));
  return group;
}

// Moves every table of the group to blocks taken on the other side. A block held by several
// sequences of the group is copied once and its copy shared the same way.
template <typename Take, typename Share, typename Release>
std::vector<BlockCopy> move_tables(const std::vector<Sequence*>& group, Take take, Share share,
                                   Release release) {
  std::unordered_map<int32_t, int32_t> moved;
  std::vector<BlockCopy> copies;
  for (Sequence* seq : group) {
    std::vector<int32_t> table;
    for (const int32_t block : seq->blocks) {
      const auto [entry, first] = moved.try_emplace(block);
      if (first) {
        entry->second = take();
        copies.push_back({block, entry->second});
      } else {
        share(entry->second);
      }
      table.push_back(entry->second);
    }
    std::for_each(seq->blocks.rbegin(), seq->blocks.rend(), release);  // tail first, as in free
    seq->blocks = std::move(table);
    seq->swapped = !seq->swapped;
  }
  return copies;
}

}  // namespace

bool BlockManager::can_swap_out(Span<const uint64_t> seq_ids) const {
  return impl_->blocks_to_swap("can_swap_out", seq_ids, false) <= impl_->host.num_free();
}

AdmissionStatus BlockManager::can_swap_in(Span<const uint64_t> seq_ids) const {
  const int64_t blocks = impl_->blocks_to_swap("can_swap_in", seq_ids, true);
  return impl_->admission(blocks, blocks);
}

std::vector<BlockCopy> BlockManager::Impl::swap(std::string_view operation, std::span<const uint64_t> seq_ids,
                                                 bool to_host) {
  BlockAllocator& target = to_host ? host : device;
  const int64_t needed = blocks_to_swap(operation, seq_ids, !to_host);
  if (needed > target.num_free())
    cache::out_of_blocks("{}: the sequences need {} {} blocks, {} are free", operation, needed,
                         to_host ? "host" : "device", target.num_free());
  // Device blocks come and go through the prefix cache's bookkeeping; host blocks do not.
  return move_tables(
      group_of(sequences, seq_ids), [&] { return to_host ? host.allocate() : take_device_block(); },
      [&](int32_t block) { target.share(block); },
      [&](int32_t block) {
        if (to_host)
          release_device_block(block);
        else
          host.free(block);
      });
}

std::vector<BlockCopy> BlockManager::swap_out(Span<const uint64_t> seq_ids) {
  return impl_->swap("swap_out", seq_ids, true);
}

std::vector<BlockCopy> BlockManager::swap_in(Span<const uint64_t> seq_ids) {
  return impl_->swap("swap_in", seq_ids, false);
}

}  // namespace vkpaged
