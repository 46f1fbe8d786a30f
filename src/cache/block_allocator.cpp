// SPDX-License-Identifier: Apache-2.0
#include "cache/cache_errors.hpp"
#include "vkpaged/block_manager.hpp"

namespace vkpaged {

using cache::refuse;

BlockAllocator::BlockAllocator(int32_t num_blocks) {
  if (num_blocks < 0) refuse("BlockAllocator: num_blocks {} is negative", num_blocks);
  ref_counts_.assign(static_cast<size_t>(num_blocks), 0);
  next_.assign(static_cast<size_t>(num_blocks) + 1, num_blocks);
  prev_.assign(static_cast<size_t>(num_blocks) + 1, num_blocks);
  // In id order, so a fresh allocator hands out 0, 1, 2, ...
  for (int32_t block = 0; block < num_blocks; ++block) link_after(prev_[num_blocks], block);
}

int32_t BlockAllocator::ref_count(int32_t block) const {
  check_range("ref_count", block);
  return ref_counts_[block];
}

int32_t BlockAllocator::allocate() {
  if (num_free_ == 0) cache::out_of_blocks("allocate: all {} blocks are in use", num_blocks());
  const int32_t block = next_[num_blocks()];
  unlink(block);
  ref_counts_[block] = 1;
  return block;
}

void BlockAllocator::reclaim(int32_t block) {
  check_range("reclaim", block);
  if (ref_counts_[block] != 0)
    refuse("reclaim: block {} is not free (reference count {})", block, ref_counts_[block]);
  unlink(block);
  ref_counts_[block] = 1;
}

void BlockAllocator::share(int32_t block) {
  check_range("share", block);
  if (ref_counts_[block] == 0) refuse("share: block {} is not allocated", block);
  ++ref_counts_[block];
}

bool BlockAllocator::free(int32_t block, FreeOrder order) {
  check_range("free", block);
  if (ref_counts_[block] == 0) refuse("free: block {} is not allocated (double free?)", block);
  if (--ref_counts_[block] > 0) return false;
  const int32_t sentinel = num_blocks();
  link_after(order == FreeOrder::reuse_first ? sentinel : prev_[sentinel], block);
  return true;
}

void BlockAllocator::check_range(const char* operation, int32_t block) const {
  if (block < 0 || block >= num_blocks())
    refuse("{}: block {} is out of range [0, {})", operation, block, num_blocks());
}

void BlockAllocator::unlink(int32_t block) {
  next_[prev_[block]] = next_[block];
  prev_[next_[block]] = prev_[block];
  --num_free_;
}

void BlockAllocator::link_after(int32_t position, int32_t block) {
  next_[block] = next_[position];
  prev_[block] = position;
  prev_[next_[position]] = block;
  next_[position] = block;
  ++num_free_;
}

}  // namespace vkpaged
