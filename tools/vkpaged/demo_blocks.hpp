// SPDX-License-Identifier: Apache-2.0
#pragma once
// The demo's block bookkeeping: a vkpaged::BlockManager (no prefix caching, no forks) behind
// a narrow interface of slots and batch arrays, with the token ids it does not need left out.
#include <cstdint>
#include <memory>
#include <span>
#include <vector>

namespace vkpaged::cli {

class DemoBlocks {
 public:
  DemoBlocks(uint32_t num_blocks, uint32_t block_size);
  ~DemoBlocks();
  DemoBlocks(const DemoBlocks&) = delete;
  DemoBlocks& operator=(const DemoBlocks&) = delete;

  // Registers sequence `seq` with a prompt of `len` tokens; returns the prompt's slots.
  std::vector<int64_t> add_sequence(uint64_t seq, uint32_t len);
  // One more token for `seq` (a new block when the last one is full); returns its slot.
  int64_t append_token(uint64_t seq);
  // Block tables [S, width] and context lengths [S] of `seqs`, as record_decode reads them.
  void write_batch(std::span<const uint64_t> seqs, uint32_t width, int32_t* block_tables, int32_t* context_lens) const;
  uint32_t blocks_in_use() const;

 private:
  struct Impl;
  std::unique_ptr<Impl> impl_;
};

}  // namespace vkpaged::cli
