// SPDX-License-Identifier: Apache-2.0
#pragma once
// Host-side bookkeeping of a paged KV cache: which physical blocks each sequence owns, with
// sharing (fork, prefix caching), copy-on-write, swapping to host blocks and preemption.
// No Vulkan here: the manager answers with block ids, slots and (src, dst) block copies that
// the engine hands to reshape_and_cache, copy_blocks and swap_blocks (see docs/contract.md).
// Not thread-safe: one scheduler thread owns a manager.
#include <cstdint>
#include <memory>
#include <optional>
#include <vector>

#include "vkpaged/export.hpp"
#include "vkpaged/span.hpp"

namespace vkpaged {

// Where a block whose count drops to 0 joins the free list. Blocks with nothing worth keeping
// are handed out again first; blocks whose content the prefix cache may still reuse last, so
// allocation evicts them least-recently-used and only when no plain free block is left.
enum class FreeOrder { reuse_first, reuse_last };

// N blocks with reference counts. allocate, reclaim, share and free are O(1): the free list
// is doubly linked so a given free block (a prefix-cache hit) can be taken out of its middle.
// Refused (vkpaged::Error, invalid_argument): ids outside [0, N), freeing or sharing a block
// that is not allocated, reclaiming one that is. allocate() on an empty list: out_of_memory.
class VKPAGED_API BlockAllocator {
 public:
  explicit BlockAllocator(int32_t num_blocks);

  int32_t num_blocks() const noexcept { return static_cast<int32_t>(ref_counts_.size()); }
  int32_t num_free() const noexcept { return num_free_; }
  int32_t ref_count(int32_t block) const;
  bool is_free(int32_t block) const { return ref_count(block) == 0; }

  int32_t allocate();           // the block at the head of the free list, count 1
  void reclaim(int32_t block);  // a given free block, count 1
  void share(int32_t block);    // count + 1
  // count - 1; true when it reached 0 and the block went back to the free list.
  bool free(int32_t block, FreeOrder order = FreeOrder::reuse_first);

 private:
  void check_range(const char* operation, int32_t block) const;
  void unlink(int32_t block);
  void link_after(int32_t position, int32_t block);

  std::vector<int32_t> ref_counts_;
  // Free list: next_/prev_ indexed by block, with a sentinel at index N.
  std::vector<int32_t> next_;
  std::vector<int32_t> prev_;
  int32_t num_free_ = 0;
};

struct BlockManagerOptions {
  // Fraction of device blocks that admission (can_allocate, can_swap_in) keeps free, so
  // running sequences can still grow without being preempted at once.
  double watermark = 0.01;
  bool enable_prefix_caching = true;
  // Mixed into every block hash: caches built with different salts never match each other.
  uint64_t hash_salt = 0;
  // Host (CPU-side) blocks that swap_out moves sequences to; 0 means no swap space.
  int32_t num_host_blocks = 0;
};

// One whole-block copy for copy_blocks (copy-on-write) or swap_blocks (swap out/in).
struct BlockCopy {
  int32_t src = 0;
  int32_t dst = 0;
  friend bool operator==(const BlockCopy& a, const BlockCopy& b) { return a.src == b.src && a.dst == b.dst; }
  friend bool operator!=(const BlockCopy& a, const BlockCopy& b) { return !(a == b); }
};

struct AppendResult {
  int64_t slot = 0;               // block * block_size + offset, for reshape_and_cache
  std::optional<BlockCopy> copy;  // copy-on-write to run before the slot is written
};

enum class AdmissionStatus {
  ok,     // fits now and leaves the watermark free
  later,  // would fit once other sequences release blocks
  never,  // more blocks than the cache has above the watermark
};

// The arrays the decode operator takes for S sequences at width M.
struct BatchArrays {
  std::vector<int32_t> block_tables;  // [S * M] row-major, padded with block 0
  std::vector<int32_t> context_lens;  // [S]
};

// Device blocks: in_use + free + cached == num_blocks.
struct BlockUsage {
  int32_t num_blocks = 0;
  int32_t in_use = 0;  // held by at least one sequence
  int32_t free = 0;    // holding nothing reusable
  int32_t cached = 0;  // held by no sequence, content kept for prefix reuse (evictable)
  int32_t num_host_blocks = 0;
  int32_t host_in_use = 0;
};

struct PrefixCacheStats {
  uint64_t queries = 0;  // add_sequence calls that looked up the cache
  uint64_t queried_blocks = 0;
  uint64_t hit_blocks = 0;
  uint64_t queried_tokens = 0;
  uint64_t hit_tokens = 0;
};

// Prefix caching's key of a full block: XXH3_64bits (xxHash 0.8's XXH3, 64 bits, seed 0) of
//   parent_hash: 8 bytes, little-endian
//   tokens:      4 bytes each, little-endian two's complement, in order
//   salt:        8 bytes, little-endian (BlockManagerOptions::hash_salt, 0 by default)
// where parent_hash is the key of the sequence's previous block, kRootBlockHash for its first.
// The keys are the same in every process, on every machine and in every version of vkpaged (a
// change would be an incompatible one, docs/api.md "Versions"), so an engine may compute,
// store and compare them across processes (`xxhsum -H3` of those bytes gives the same value).
inline constexpr uint64_t kRootBlockHash = 0x6a09e667f3bcc908ull;
VKPAGED_API uint64_t prefix_block_hash(uint64_t parent_hash, Span<const int32_t> tokens, uint64_t salt = 0);

// Block tables of sequences identified by caller-chosen ids. Argument errors throw
// vkpaged::Error(invalid_argument) naming the operation and the value; running out of blocks
// throws Error(out_of_memory) (check can_allocate / can_append / can_swap_* first). A refused
// call changes nothing.
//
// Prefix caching: a full block is keyed by prefix_block_hash(parent block's key, its tokens,
// salt) and a hit also compares the stored tokens and parent hash. Blocks are registered as soon as they
// are full (at add_sequence for the prompt, at append_token after), so a hit may name a block
// whose prefill runs in the same step; engines that write the cache before attention in each
// layer read it correctly.
//
// Swapping: sequences passed together to swap_out / swap_in copy each block they share once
// and share the copy on the other side. Sequences swapped in separate calls get separate
// copies (correct, uses more blocks). Swapped-in blocks are not re-registered in the prefix
// cache. A swapped-out sequence can be forked, freed or preempted, not appended to.
class VKPAGED_API BlockManager {
 public:
  BlockManager(int32_t num_blocks, int32_t block_size, BlockManagerOptions options = {});
  ~BlockManager();
  BlockManager(BlockManager&&) noexcept;
  BlockManager& operator=(BlockManager&&) noexcept;

  int32_t block_size() const noexcept;

  // Sequence lifecycle.
  AdmissionStatus can_allocate(Span<const int32_t> prompt) const;
  // Allocates the prompt's blocks, reusing prefix-cached full blocks. Returns how many leading
  // prompt tokens are already in the cache (a multiple of block_size): the engine computes
  // and writes only the rest (when that is nothing, recomputing the last token for its query
  // rewrites identical values). Does not apply the watermark (that is can_allocate's job).
  int32_t add_sequence(uint64_t seq_id, Span<const int32_t> prompt);
  bool can_append(uint64_t seq_id) const;  // false while swapped out or out of blocks
  AppendResult append_token(uint64_t seq_id, int32_t token);
  void fork(uint64_t parent_id, uint64_t child_id);
  void free_sequence(uint64_t seq_id);
  // Frees the sequence for recompute; returns its token count so the engine can requeue it.
  int32_t preempt(uint64_t seq_id);

  // Swapping, several sequences at once (a forked group) or one.
  bool can_swap_out(Span<const uint64_t> seq_ids) const;
  AdmissionStatus can_swap_in(Span<const uint64_t> seq_ids) const;
  std::vector<BlockCopy> swap_out(Span<const uint64_t> seq_ids);  // (device, host) pairs
  std::vector<BlockCopy> swap_in(Span<const uint64_t> seq_ids);   // (host, device) pairs
  std::vector<BlockCopy> swap_out(uint64_t seq_id) { return swap_out(Span<const uint64_t>(&seq_id, 1)); }
  std::vector<BlockCopy> swap_in(uint64_t seq_id) { return swap_in(Span<const uint64_t>(&seq_id, 1)); }

  // Queries, and the arrays the GPU operators take (block_table, build_batch and slot_mapping
  // refuse swapped-out sequences: their blocks are host blocks).
  bool contains(uint64_t seq_id) const;
  bool is_swapped(uint64_t seq_id) const;
  int32_t context_len(uint64_t seq_id) const;
  std::vector<int32_t> block_table(uint64_t seq_id) const;
  std::vector<int32_t> block_table(uint64_t seq_id, int32_t width) const;  // padded with 0
  std::vector<int32_t> host_block_table(uint64_t seq_id) const;  // swapped-out sequences only
  BatchArrays build_batch(Span<const uint64_t> seq_ids, int32_t width) const;
  // Slots of the sequence's tokens [first_token, first_token + count): after add_sequence
  // the uncached prompt tokens, after appends the tokens of the step.
  std::vector<int64_t> slot_mapping(uint64_t seq_id, int32_t first_token, int32_t count) const;

  // Accounting.
  int32_t num_free_blocks() const;
  int32_t num_cached_blocks() const;
  BlockUsage usage() const;
  PrefixCacheStats prefix_cache_stats() const;
  const BlockAllocator& device_allocator() const;
  const BlockAllocator& host_allocator() const;

 private:
  struct Impl;
  std::unique_ptr<Impl> impl_;
};

}  // namespace vkpaged
