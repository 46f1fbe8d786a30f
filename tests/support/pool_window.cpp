// SPDX-License-Identifier: Apache-2.0
#include "support/pool_window.hpp"

#include <stdexcept>
#include <string>
#include <vector>

namespace vkpaged::test {

std::string past_range_skip_reason(const DeviceInfo& device) {
  if (device.max_storage_buffer_range > (uint64_t(1) << 30)) return "a pool past this device's range is too large for a test";
  if (!device.buffer_device_address) return "the device has no buffer device addresses";
  return "";
}

namespace {

uint64_t block_bytes(const TensorView& pool) {
  return uint64_t(pool.shape.numel() / pool.shape[0]) * dtype_size(pool.dtype);
}

// The two runs of the window (low blocks, high blocks) as (first pool block, first window block, count).
struct Run {
  int64_t first_block;
  int64_t first_window;
  int64_t count;
};

void for_each_run(const PoolWindow& w, auto&& f) {
  f(Run{0, 0, w.low});
  f(Run{w.num_blocks - w.high, w.low, w.high});
}

}  // namespace

int32_t PoolWindow::window_block(int32_t b) const {
  if (b >= 0 && b < low) return b;
  if (b >= num_blocks - high && b < num_blocks) return int32_t(low + (b - (num_blocks - high)));
  throw std::logic_error("PoolWindow: block " + std::to_string(b) + " is outside the window");
}

Shape PoolWindow::shape_of(const TensorView& pool) const {
  std::vector<int64_t> dims = pool.shape.dims();
  dims[0] = size();
  return Shape(dims);
}

HostTensor download_window(Context& ctx, const TensorView& pool, const PoolWindow& window) {
  HostTensor h(pool.dtype, window.shape_of(pool));
  const uint64_t bb = block_bytes(pool);
  for_each_run(window, [&](const Run& r) {
    if (r.count == 0) return;
    const BufferView v{pool.memory.buffer, pool.memory.offset + uint64_t(r.first_block) * bb, uint64_t(r.count) * bb};
    ctx.download(v, static_cast<std::byte*>(h.data()) + uint64_t(r.first_window) * bb, v.size);
  });
  return h;
}

void upload_window(Context& ctx, const TensorView& pool, const PoolWindow& window, const HostTensor& blocks) {
  const uint64_t bb = block_bytes(pool);
  for_each_run(window, [&](const Run& r) {
    if (r.count == 0) return;
    const BufferView v{pool.memory.buffer, pool.memory.offset + uint64_t(r.first_block) * bb, uint64_t(r.count) * bb};
    ctx.upload(v, static_cast<const std::byte*>(blocks.data()) + uint64_t(r.first_window) * bb, v.size);
  });
}

}  // namespace vkpaged::test
