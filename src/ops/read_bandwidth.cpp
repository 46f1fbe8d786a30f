// Host side of shaders/read_bandwidth.comp: the bandwidth figure the benchmark compares with.
#include <algorithm>
#include <array>
#include <vector>

#include "common/shader_interface.h"
#include "embedded_shaders.hpp"
#include "vk/context_impl.hpp"
#include "vkpaged/utilities.hpp"

namespace vkpaged {

BandwidthMeasurement measure_read_bandwidth(Context& context, size_t bytes, int repetitions) {
  auto& impl = context.impl();
  bytes = std::min<size_t>(bytes, impl.info.max_storage_buffer_range) / 16 * 16;
  DeviceBuffer data = context.create_buffer(bytes);
  DeviceBuffer sink = context.create_buffer(16);
  context.run_and_wait([&](VkCommandBuffer cmd) { record_fill_random(context, cmd, data.tensor(DType::u32, Shape{int64_t(bytes / 4)}), 7); });

  const auto& pipeline = impl.pipeline(vk::shader_read_bandwidth(), {}, 2, sizeof(shader::ReadBandwidthPush));
  const std::array<detail::BoundView, 2> bound{impl.bind_view(data.view()), impl.bind_view(sink.view())};
  shader::ReadBandwidthPush push{uint32_t(bytes / 16), 0x9e3779b9u};
  // Enough workgroups for every compute unit to keep many loads in flight.
  const uint32_t groups = uint32_t(std::clamp<size_t>(bytes / 16 / 256 / 8, 1, 65535));
  auto run = [&](VkCommandBuffer cmd) { impl.dispatch(cmd, pipeline, bound, &push, groups, 1, 1); };
  for (int i = 0; i < 3; ++i) context.run_and_wait(run);
  std::vector<double> times;
  for (int i = 0; i < std::max(1, repetitions); ++i) times.push_back(context.run_and_time(run));
  std::nth_element(times.begin(), times.begin() + times.size() / 2, times.end());
  return {bytes, times[times.size() / 2]};
}

}  // namespace vkpaged
