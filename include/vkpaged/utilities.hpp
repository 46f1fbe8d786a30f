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

// Streams `bytes` (rounded down to 16) from a device buffer with 16-byte loads: warm-up, then
// the median of `repetitions` timed runs.
VKPAGED_API BandwidthMeasurement measure_read_bandwidth(Context& context, size_t bytes, int repetitions = 20);

}  // namespace vkpaged
