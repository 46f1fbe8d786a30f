// SPDX-License-Identifier: Apache-2.0
// Sequence lifecycle: admission, prompt allocation with prefix reuse, token appends with
// copy-on-write, fork, free and preemption.
#include <limits>

#include "cache/block_manager_state.hpp"
#include "cache/cache_errors.hpp"
#include "ops/block_size_rule.hpp"

namespace vkpaged {

using cache::refuse;
using cache::Sequence;

namespace {

constexpr size_t kMaxTokens = std::numeric_limits<int32_t>::max();  // context_lens are int32

void validate(int32_t num_blocks, int32_t block_size, const BlockManagerOptions& options) {
  if (num_blocks <= 0) refuse("BlockManager: num_blocks {} must be positive", num_blocks);
  if (!detail::is_supported_block_size(block_size))
    refuse("BlockManager: block_size {} is not {} (the block sizes decode takes)", block_size, detail::kBlockSizeRule);
  if (!(options.watermark >= 0.0 && options.watermark < 1.0))
    refuse("BlockManager: watermark {} is outside [0, 1)", options.watermark);
  if (options.num_host_blocks < 0)
    refuse("BlockManager: num_host_blocks {} is negative", options.num_host_blocks);
}

}  // namespace

BlockManager::BlockManager(int32_t num_blocks, int32_t block_size, BlockManagerOptions options) {
  validate(num_blocks, block_size, options);
  impl_ = std::make_unique<Impl>(num_blocks, block_size, options);
}

BlockManager::~BlockManager() = default;
BlockManager::BlockManager(BlockManager&&) noexcept = default;
BlockManager& BlockManager::operator=(BlockManager&&) noexcept = default;

int32_t BlockManager::block_size() const noexcept { return impl_->block_size; }

AdmissionStatus BlockManager::can_allocate(Span<const int32_t> prompt) const {
  const cache::PrefixMatch match = impl_->match_prefix(prompt);
  const int64_t blocks = impl_->blocks_for(static_cast<int64_t>(prompt.size()));
  const int64_t fresh = blocks - static_cast<int64_t>(match.hit_blocks.size());
  return impl_->admission(blocks, fresh + match.cached_hits);
}

int32_t BlockManager::add_sequence(uint64_t seq_id, Span<const int32_t> prompt) {
  Impl& state = *impl_;
  if (state.sequences.contains(seq_id)) refuse("add_sequence: sequence {} already exists", seq_id);
  if (prompt.size() > kMaxTokens)
    refuse("add_sequence: prompt of {} tokens is longer than {}", prompt.size(), kMaxTokens);

  const cache::PrefixMatch match = state.match_prefix(prompt);
  const size_t num_blocks =
      static_cast<size_t>(state.blocks_for(static_cast<int64_t>(prompt.size())));
  const size_t num_hits = match.hit_blocks.size();
  const int64_t needed = static_cast<int64_t>(num_blocks - num_hits) + match.cached_hits;
  if (needed > state.device.num_free())
    cache::out_of_blocks("add_sequence: sequence {} needs {} free blocks, {} are free", seq_id,
                         needed, state.device.num_free());

  Sequence seq;
  seq.tokens.assign(prompt.begin(), prompt.end());
  seq.full_block_hashes = match.hashes;
  // Hits first: they are off the free list before fresh allocations can evict anything.
  for (const int32_t block : match.hit_blocks) {
    state.acquire_cached(block);
    seq.blocks.push_back(block);
  }
  for (size_t index = num_hits; index < num_blocks; ++index) {
    seq.blocks.push_back(state.take_device_block());
    if (index < seq.full_block_hashes.size()) state.cache_full_block(seq, index);
  }

  if (state.prefix_caching) {
    state.stats.queries += 1;
    state.stats.queried_blocks += match.hashes.size();
    state.stats.hit_blocks += num_hits;
    state.stats.queried_tokens += prompt.size();
    state.stats.hit_tokens += num_hits * static_cast<uint64_t>(state.block_size);
  }
  state.sequences.emplace(seq_id, std::move(seq));
  return static_cast<int32_t>(num_hits) * state.block_size;
}

namespace {

// An append needs a block when the last one is full (or there is none), or when it is shared
// and must be copied before it is written.
bool append_needs_block(const Sequence& seq, const BlockAllocator& device, int32_t block_size) {
  return seq.tokens.size() % block_size == 0 || device.ref_count(seq.blocks.back()) > 1;
}

}  // namespace

bool BlockManager::can_append(uint64_t seq_id) const {
  const Sequence& seq = impl_->find("can_append", seq_id);
  if (seq.swapped || seq.tokens.size() == kMaxTokens) return false;
  return !append_needs_block(seq, impl_->device, impl_->block_size) || impl_->device.num_free() > 0;
}

AppendResult BlockManager::append_token(uint64_t seq_id, int32_t token) {
  Impl& state = *impl_;
  Sequence& seq = state.find_on_device("append_token", seq_id);
  if (seq.tokens.size() == kMaxTokens)
    refuse("append_token: sequence {} already holds {} tokens", seq_id, kMaxTokens);
  const bool needs_block = append_needs_block(seq, state.device, state.block_size);
  if (needs_block && state.device.num_free() == 0)
    cache::out_of_blocks("append_token: sequence {} needs a block and none is free", seq_id);

  const int32_t offset = static_cast<int32_t>(seq.tokens.size() % state.block_size);
  AppendResult result;
  if (offset == 0) {
    seq.blocks.push_back(state.take_device_block());
  } else if (needs_block) {
    // Copy-on-write: the other holders keep the shared block, this sequence moves to a copy.
    const int32_t copy = state.take_device_block();
    result.copy = BlockCopy{seq.blocks.back(), copy};
    state.release_device_block(seq.blocks.back());
    seq.blocks.back() = copy;
  }
  seq.tokens.push_back(token);
  result.slot = int64_t{seq.blocks.back()} * state.block_size + offset;

  if (state.prefix_caching && offset + 1 == state.block_size) {
    const size_t index = seq.blocks.size() - 1;
    const auto tokens = std::span(seq.tokens).subspan(index * state.block_size);
    seq.full_block_hashes.push_back(
        prefix_block_hash(state.parent_hash(seq, index), tokens, state.hash_salt));
    state.cache_full_block(seq, index);
  }
  return result;
}

void BlockManager::fork(uint64_t parent_id, uint64_t child_id) {
  Impl& state = *impl_;
  const Sequence& parent = state.find("fork", parent_id);
  if (state.sequences.contains(child_id))
    refuse("fork: child sequence {} already exists", child_id);
  BlockAllocator& holder = parent.swapped ? state.host : state.device;
  for (const int32_t block : parent.blocks) holder.share(block);
  Sequence child = parent;  // copied before emplace, which may rehash and move the parent
  state.sequences.emplace(child_id, std::move(child));
}

void BlockManager::free_sequence(uint64_t seq_id) {
  Impl& state = *impl_;
  state.release_blocks(state.find("free_sequence", seq_id));
  state.sequences.erase(seq_id);
}

int32_t BlockManager::preempt(uint64_t seq_id) {
  Impl& state = *impl_;
  const Sequence& seq = state.find("preempt", seq_id);
  const auto num_tokens = static_cast<int32_t>(seq.tokens.size());
  state.release_blocks(seq);
  state.sequences.erase(seq_id);
  return num_tokens;
}

}  // namespace vkpaged
