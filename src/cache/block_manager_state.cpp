// SPDX-License-Identifier: Apache-2.0
#include "cache/block_manager_state.hpp"

#include "cache/cache_errors.hpp"

namespace vkpaged {

using cache::refuse;
using cache::Sequence;

BlockManager::Impl::Impl(int32_t num_blocks, int32_t tokens_per_block,
                         const BlockManagerOptions& options)
    : block_size(tokens_per_block),
      watermark_blocks(static_cast<int32_t>(options.watermark * num_blocks)),
      prefix_caching(options.enable_prefix_caching),
      hash_salt(options.hash_salt),
      device(num_blocks),
      host(options.num_host_blocks),
      prefix_cache(num_blocks) {}

Sequence& BlockManager::Impl::find(std::string_view operation, uint64_t seq_id) {
  const auto found = sequences.find(seq_id);
  if (found == sequences.end()) refuse("{}: unknown sequence {}", operation, seq_id);
  return found->second;
}

const Sequence& BlockManager::Impl::find(std::string_view operation, uint64_t seq_id) const {
  return const_cast<Impl*>(this)->find(operation, seq_id);
}

Sequence& BlockManager::Impl::find_on_device(std::string_view operation, uint64_t seq_id) {
  Sequence& seq = find(operation, seq_id);
  if (seq.swapped) refuse("{}: sequence {} is swapped out", operation, seq_id);
  return seq;
}

const Sequence& BlockManager::Impl::find_on_device(std::string_view operation,
                                                   uint64_t seq_id) const {
  return const_cast<Impl*>(this)->find_on_device(operation, seq_id);
}

// vLLM's rule: never if the blocks would not fit above the watermark even in an empty cache.
AdmissionStatus BlockManager::Impl::admission(int64_t blocks_held, int64_t blocks_taken) const {
  if (blocks_held > device.num_blocks() - watermark_blocks) return AdmissionStatus::never;
  if (device.num_free() - blocks_taken >= watermark_blocks) return AdmissionStatus::ok;
  return AdmissionStatus::later;
}

cache::PrefixMatch BlockManager::Impl::match_prefix(std::span<const int32_t> prompt) const {
  cache::PrefixMatch match;
  if (!prefix_caching) return match;
  uint64_t parent = kRootBlockHash;
  for (size_t index = 0; index < prompt.size() / block_size; ++index) {
    const auto tokens = prompt.subspan(index * block_size, block_size);
    const uint64_t hash = prefix_block_hash(parent, tokens, hash_salt);
    // Only a run of hits from the first block is usable: stop at the first miss.
    if (match.hit_blocks.size() == index) {
      if (const auto block = prefix_cache.find(hash, parent, tokens)) {
        match.hit_blocks.push_back(*block);
        if (device.is_free(*block)) ++match.cached_hits;
      }
    }
    match.hashes.push_back(hash);
    parent = hash;
  }
  return match;
}

void BlockManager::Impl::acquire_cached(int32_t block) {
  if (device.is_free(block)) {
    device.reclaim(block);
    --num_cached;
  } else {
    device.share(block);
  }
}

int32_t BlockManager::Impl::take_device_block() {
  const int32_t block = device.allocate();
  if (prefix_cache.contains(block)) {
    prefix_cache.evict(block);
    --num_cached;
  }
  return block;
}

void BlockManager::Impl::release_device_block(int32_t block) {
  const bool cached = prefix_cache.contains(block);
  if (device.free(block, cached ? FreeOrder::reuse_last : FreeOrder::reuse_first) && cached)
    ++num_cached;
}

void BlockManager::Impl::release_blocks(const Sequence& seq) {
  // Last block first: a sequence's tail is less likely to be shared than its head, so it
  // reaches the free list earlier and is evicted earlier.
  for (auto block = seq.blocks.rbegin(); block != seq.blocks.rend(); ++block) {
    if (seq.swapped) {
      host.free(*block);
    } else {
      release_device_block(*block);
    }
  }
}

void BlockManager::Impl::cache_full_block(const Sequence& seq, size_t index) {
  const auto tokens = std::span(seq.tokens).subspan(index * block_size, block_size);
  prefix_cache.insert(seq.blocks[index], seq.full_block_hashes[index], parent_hash(seq, index),
                      tokens);
}

uint64_t BlockManager::Impl::parent_hash(const Sequence& seq, size_t index) const {
  return index == 0 ? kRootBlockHash : seq.full_block_hashes[index - 1];
}

}  // namespace vkpaged
