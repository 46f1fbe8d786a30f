// SPDX-License-Identifier: Apache-2.0
// Host side of shaders/read_bandwidth.comp: a streaming read of a buffer (StreamingRead), and
// the bandwidth figure the benchmark compares with.
#include <fmt/format.h>

#include <algorithm>
#include <array>
#include <vector>

#include "common/shader_interface.h"
#include "embedded_shaders.hpp"
#include "ops/view_checks.hpp"
#include "vk/context_impl.hpp"
#include "vkpaged/error.hpp"
#include "vkpaged/utilities.hpp"

namespace vkpaged {

namespace {

// One buffer, bound whole: within the storage-buffer range and one allocation's promised size.
size_t largest_read(const DeviceInfo& device) {
  size_t limit = device.max_storage_buffer_range;
  if (device.max_memory_allocation_size > 0) limit = std::min<size_t>(limit, device.max_memory_allocation_size);
  return limit;
}

}  // namespace

StreamingRead::StreamingRead(Context& context, size_t bytes)
    : context_(&context), bytes_(std::min<size_t>(bytes, largest_read(context.impl().info)) / 16 * 16) {
  if (bytes_ == 0) throw Error(ErrorCode::invalid_argument, fmt::format("bytes: {} is less than 16", bytes));
  data_ = context.create_buffer(bytes_);
  sink_ = context.create_buffer(16);
  context.run_and_wait([&](VkCommandBuffer cmd) { record_fill_random(context, cmd, data_.tensor(DType::u32, Shape{int64_t(bytes_ / 4)}), 7); });
}

namespace {

// The shader indexes from the start of the bound range: the views must start on a binding
// boundary, which check_buffer's alignment rule makes sure of.
void record_read(detail::ContextImpl& impl, VkCommandBuffer cmd, const BufferView& data, const BufferView& sink) {
  const auto& pipeline = impl.pipeline(vk::shader_read_bandwidth(), {}, 2, sizeof(shader::ReadBandwidthPush));
  const std::array<detail::BoundView, 2> bound{impl.bind_view(data), impl.bind_view(sink)};
  const size_t bytes = data.size / 16 * 16;
  const shader::ReadBandwidthPush push{uint32_t(bytes / 16), 0x9e3779b9u};
  // Enough workgroups for every compute unit to keep many loads in flight.
  const uint32_t groups = uint32_t(std::clamp<size_t>(bytes / 16 / 256 / 8, 1, 65535));
  impl.dispatch(cmd, pipeline, bound, &push, groups, 1, 1);
}

}  // namespace

void StreamingRead::record(VkCommandBuffer cmd) const {
  record_read(context_->impl(), cmd, data_.view(0, bytes_), sink_.view());
}

void record_streaming_read(Context& context, VkCommandBuffer cmd, const BufferView& data, const BufferView& sink) {
  auto& impl = context.impl();
  const size_t align = std::max<size_t>(impl.info.min_storage_buffer_offset_alignment, 16);
  detail::check_buffer(impl, "data", data, 16, align);
  detail::check_buffer(impl, "sink", sink, 16, align);
  record_read(impl, cmd, BufferView{data.buffer, data.offset, data.size / 16 * 16}, sink);
}

BandwidthMeasurement measure_read_bandwidth(Context& context, size_t bytes, int repetitions) {
  return measure_read_bandwidth(context, StreamingRead(context, bytes), repetitions);
}

namespace {

void require_on(const Context& context, const StreamingRead& read, const char* name) {
  if (&read.context() != &context) throw Error(ErrorCode::invalid_argument, fmt::format("{}: created on another context", name));
}

// Three warm-up runs, then the median of `repetitions` timed ones, each after `before` when given.
BandwidthMeasurement median_read(Context& context, const StreamingRead& read, const StreamingRead* before, int repetitions) {
  auto run = [&](VkCommandBuffer cmd) { read.record(cmd); };
  auto untimed = [&](VkCommandBuffer cmd) { before->record(cmd); };
  auto timed = [&] { return before ? context.run_and_time(run, untimed) : context.run_and_time(run); };
  for (int i = 0; i < 3; ++i) timed();
  std::vector<double> times;
  for (int i = 0; i < std::max(1, repetitions); ++i) times.push_back(timed());
  std::nth_element(times.begin(), times.begin() + times.size() / 2, times.end());
  return {read.bytes(), times[times.size() / 2]};
}

}  // namespace

BandwidthMeasurement measure_read_bandwidth(Context& context, const StreamingRead& read, int repetitions) {
  require_on(context, read, "read");
  return median_read(context, read, nullptr, repetitions);
}

BandwidthMeasurement measure_read_bandwidth_after(Context& context, const StreamingRead& read,
                                                  const StreamingRead& untimed_before, int repetitions) {
  require_on(context, read, "read");
  require_on(context, untimed_before, "untimed_before");
  return median_read(context, read, &untimed_before, repetitions);
}

}  // namespace vkpaged
