// SPDX-License-Identifier: Apache-2.0
// What the GPU operators read (block tables, context lengths, slots) and block accounting.
#include <algorithm>

#include "cache/block_manager_state.hpp"
#include "cache/cache_errors.hpp"

namespace vkpaged {

using cache::refuse;
using cache::Sequence;

bool BlockManager::contains(uint64_t seq_id) const { return impl_->sequences.contains(seq_id); }

bool BlockManager::is_swapped(uint64_t seq_id) const {
  return impl_->find("is_swapped", seq_id).swapped;
}

int32_t BlockManager::context_len(uint64_t seq_id) const {
  return static_cast<int32_t>(impl_->find("context_len", seq_id).tokens.size());
}

std::vector<int32_t> BlockManager::block_table(uint64_t seq_id) const {
  return impl_->find_on_device("block_table", seq_id).blocks;
}

std::vector<int32_t> BlockManager::block_table(uint64_t seq_id, int32_t width) const {
  std::vector<int32_t> table = impl_->find_on_device("block_table", seq_id).blocks;
  if (width < static_cast<int64_t>(table.size()))
    refuse("block_table: width {} is less than the {} blocks of sequence {}", width, table.size(),
           seq_id);
  table.resize(static_cast<size_t>(width), 0);
  return table;
}

std::vector<int32_t> BlockManager::host_block_table(uint64_t seq_id) const {
  const Sequence& seq = impl_->find("host_block_table", seq_id);
  if (!seq.swapped) refuse("host_block_table: sequence {} is not swapped out", seq_id);
  return seq.blocks;
}

BatchArrays BlockManager::build_batch(Span<const uint64_t> seq_ids, int32_t width) const {
  if (width <= 0) refuse("build_batch: width {} must be positive", width);
  // Every sequence is checked before the table is allocated, so a refused call allocates nothing.
  std::vector<const Sequence*> rows;
  rows.reserve(seq_ids.size());
  for (const uint64_t id : seq_ids) {
    const Sequence& seq = impl_->find_on_device("build_batch", id);
    if (seq.blocks.size() > static_cast<size_t>(width))
      refuse("build_batch: sequence {} has {} blocks, more than width {}", id, seq.blocks.size(), width);
    rows.push_back(&seq);
  }
  BatchArrays batch;
  batch.block_tables.assign(rows.size() * static_cast<size_t>(width), 0);
  for (size_t row = 0; row < rows.size(); ++row) {
    std::ranges::copy(rows[row]->blocks, batch.block_tables.begin() + static_cast<ptrdiff_t>(row * width));
    batch.context_lens.push_back(static_cast<int32_t>(rows[row]->tokens.size()));
  }
  return batch;
}

std::vector<int64_t> BlockManager::slot_mapping(uint64_t seq_id, int32_t first_token,
                                                int32_t count) const {
  const Sequence& seq = impl_->find_on_device("slot_mapping", seq_id);
  const int64_t end = int64_t{first_token} + count;
  if (first_token < 0 || count < 0 || end > static_cast<int64_t>(seq.tokens.size()))
    refuse("slot_mapping: tokens [{}, {}) are outside the {} tokens of sequence {}", first_token,
           end, seq.tokens.size(), seq_id);
  const int32_t block_size = impl_->block_size;
  std::vector<int64_t> slots;
  for (int64_t token = first_token; token < end; ++token)
    slots.push_back(int64_t{seq.blocks[token / block_size]} * block_size + token % block_size);
  return slots;
}

int32_t BlockManager::num_free_blocks() const {
  return impl_->device.num_free() - impl_->num_cached;
}

int32_t BlockManager::num_cached_blocks() const { return impl_->num_cached; }

BlockUsage BlockManager::usage() const {
  const Impl& state = *impl_;
  return BlockUsage{
      .num_blocks = state.device.num_blocks(),
      .in_use = state.device.num_blocks() - state.device.num_free(),
      .free = num_free_blocks(),
      .cached = state.num_cached,
      .num_host_blocks = state.host.num_blocks(),
      .host_in_use = state.host.num_blocks() - state.host.num_free(),
  };
}

PrefixCacheStats BlockManager::prefix_cache_stats() const { return impl_->stats; }

const BlockAllocator& BlockManager::device_allocator() const { return impl_->device; }

const BlockAllocator& BlockManager::host_allocator() const { return impl_->host; }

}  // namespace vkpaged
