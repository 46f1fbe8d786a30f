// SPDX-License-Identifier: Apache-2.0
#include "demo_blocks.hpp"

#include <algorithm>

#include "vkpaged/block_manager.hpp"

namespace vkpaged::cli {

namespace {

// Token ids only matter to prefix caching, which the demo turns off.
constexpr int32_t kAnyToken = 1;

BlockManagerOptions demo_options() {
  BlockManagerOptions o;
  o.enable_prefix_caching = false;
  o.watermark = 0.0;
  return o;
}

}  // namespace

struct DemoBlocks::Impl {
  Impl(uint32_t num_blocks, uint32_t block_size)
      : manager(int32_t(num_blocks), int32_t(block_size), demo_options()) {}
  BlockManager manager;
};

DemoBlocks::DemoBlocks(uint32_t num_blocks, uint32_t block_size) : impl_(std::make_unique<Impl>(num_blocks, block_size)) {}
DemoBlocks::~DemoBlocks() = default;

std::vector<int64_t> DemoBlocks::add_sequence(uint64_t seq, uint32_t len) {
  const std::vector<int32_t> prompt(len, kAnyToken);
  impl_->manager.add_sequence(seq, prompt);
  return impl_->manager.slot_mapping(seq, 0, int32_t(len));
}

int64_t DemoBlocks::append_token(uint64_t seq) { return impl_->manager.append_token(seq, kAnyToken).slot; }

void DemoBlocks::write_batch(std::span<const uint64_t> seqs, uint32_t width, int32_t* block_tables,
                             int32_t* context_lens) const {
  const BatchArrays batch = impl_->manager.build_batch(seqs, int32_t(width));
  std::copy(batch.block_tables.begin(), batch.block_tables.end(), block_tables);
  std::copy(batch.context_lens.begin(), batch.context_lens.end(), context_lens);
}

uint32_t DemoBlocks::blocks_in_use() const { return uint32_t(impl_->manager.usage().in_use); }

}  // namespace vkpaged::cli
