// SPDX-License-Identifier: Apache-2.0
#pragma once
// Tests of pools larger than maxStorageBufferRange touch few of their blocks: the first `low`
// and the last `high`, the latter past the range. A PoolWindow names those blocks as one small
// pool that the CPU references work on (window block w < low is pool block w, else pool block
// N - high + (w - low)); only the window travels between device and host.
#include <cstdint>
#include <string>

#include "vkpaged/context.hpp"
#include "vkpaged/tensor.hpp"

namespace vkpaged::test {

// The window the past-range tests take: blocks 0..7 and the last 48, of which the last 32 lie
// wholly past the range (their pools are sized so).
constexpr int32_t kLowBlocks = 8;
constexpr int32_t kHighBlocks = 48;
constexpr int32_t kPastBlocks = 32;

// Why a test of pools past maxStorageBufferRange cannot run on `device`, "" where it can: past
// a range of 1 GiB such a pool is too large for a test, and without buffer device addresses
// nothing reaches past the range.
std::string past_range_skip_reason(const DeviceInfo& device);

struct PoolWindow {
  int64_t num_blocks = 0;  // N of the large pool
  int32_t low = 0, high = 0;

  int32_t size() const { return low + high; }
  int32_t pool_block(int32_t w) const { return w < low ? w : int32_t(num_blocks - high + (w - low)); }
  int32_t window_block(int32_t b) const;  // refuses (std::logic_error) a block outside the window
  // The window as a small pool of `pool`'s layout and dtype, [low + high, ...].
  Shape shape_of(const TensorView& pool) const;
};

// Copies the window's blocks of a pool view to the host (two downloads), and back.
HostTensor download_window(Context& ctx, const TensorView& pool, const PoolWindow& window);
void upload_window(Context& ctx, const TensorView& pool, const PoolWindow& window, const HostTensor& blocks);

}  // namespace vkpaged::test
