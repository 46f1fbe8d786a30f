// SPDX-License-Identifier: Apache-2.0
#pragma once
// Helpers around the operators: filling device tensors without an upload, and measuring the
// device's read bandwidth the way the benchmark reports it.
#include <vulkan/vulkan.h>

#include <cstdint>

#include "vkpaged/context.hpp"
#include "vkpaged/export.hpp"
#include "vkpaged/tensor.hpp"

namespace vkpaged {

// Records a fill of `view` with reproducible pseudo-random values: in (-1, 1) for f32, f16 and
// bf16; for fp8 and every other dtype, random bytes with bit 6 clear (fp8 codes of magnitude
// below 2, never NaN). Compute stage.
VKPAGED_API void record_fill_random(Context& context, VkCommandBuffer cmd, const TensorView& view, uint32_t seed);

struct BandwidthMeasurement {
  size_t bytes = 0;          // bytes read per repetition
  double median_ns = 0.0;    // GPU time (timestamps), median over the repetitions
  double bytes_per_second() const { return median_ns > 0 ? double(bytes) / (median_ns * 1e-9) : 0.0; }
};

// A device buffer of its own, read end to end with 16-byte loads as the decode kernels read a
// cache. measure_read_bandwidth times it; a benchmark records it between repetitions so that
// the next one's reads come from memory, not from the GPU's caches (a cache flush that leaves
// nothing dirty to write back). `bytes` is rounded down to 16 and capped at the device's
// maxStorageBufferRange and maxMemoryAllocationSize; below 16 it is refused. record() may be
// recorded again and again while the object lives (compute stage; it may write a 16-byte sink of
// its own, so two records in one command buffer need a barrier between them).
class VKPAGED_API StreamingRead {
 public:
  StreamingRead(Context& context, size_t bytes);
  size_t bytes() const noexcept { return bytes_; }
  Context& context() const noexcept { return *context_; }
  void record(VkCommandBuffer cmd) const;

 private:
  Context* context_;
  size_t bytes_;
  DeviceBuffer data_;
  DeviceBuffer sink_;
};

// Records one streaming read (StreamingRead's kernel) of memory the caller owns: `data` is read
// end to end with 16-byte loads, its size rounded down to 16 (at least 16 bytes, at most
// maxStorageBufferRange, the offset a multiple of 16 and of minStorageBufferOffsetAlignment);
// `sink` (16 bytes, same rules) may be written, so two records sharing a sink need a barrier
// between them. `vkpaged bench` reads a case's own cache pools with it, to see whether that
// memory reads as fast as the probe's. Compute stage. Throws vkpaged::Error naming the view.
VKPAGED_API void record_streaming_read(Context& context, VkCommandBuffer cmd, const BufferView& data,
                                       const BufferView& sink);

// Streams `bytes` (rounded down to 16) from a device buffer with 16-byte loads (StreamingRead):
// warm-up, then the median of `repetitions` timed runs.
VKPAGED_API BandwidthMeasurement measure_read_bandwidth(Context& context, size_t bytes, int repetitions = 20);
// The same with a read the caller keeps (one buffer both to time and to flush the caches
// with); `read` must have been made on `context`.
VKPAGED_API BandwidthMeasurement measure_read_bandwidth(Context& context, const StreamingRead& read,
                                                        int repetitions = 20);
// The same with each timed run recorded after `untimed_before`, in one command buffer
// (Context::run_and_time(record, untimed_before)): the read timed as it runs in a command buffer
// already under way, as `vkpaged bench --warm-start` times its probes. Both reads must have been
// made on `context`.
VKPAGED_API BandwidthMeasurement measure_read_bandwidth_after(Context& context, const StreamingRead& read,
                                                              const StreamingRead& untimed_before, int repetitions = 20);

}  // namespace vkpaged
