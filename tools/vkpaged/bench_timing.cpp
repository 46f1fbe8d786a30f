// SPDX-License-Identifier: Apache-2.0
#include "bench_timing.hpp"

#include <fmt/format.h>

#include <charconv>
#include <cmath>

#include "vkpaged/error.hpp"
#include "vkpaged/utilities.hpp"

namespace vkpaged::cli {
namespace {

double ms_since(std::chrono::steady_clock::time_point start) {
  return std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - start).count();
}

// Seconds since the Unix epoch (WallClock's unit).
double unix_seconds() {
  return std::chrono::duration<double>(std::chrono::system_clock::now().time_since_epoch()).count();
}

}  // namespace

void keep_device_busy(Context& ctx, double ms) {
  if (!(ms > 0)) return;
  constexpr size_t kReadBytes = size_t(64) << 20;  // capped by StreamingRead at the device's limits
  constexpr double kSubmissionMs = 5;              // long enough that the gaps between submissions are small
  constexpr int kMostReads = 4096;
  const StreamingRead read(ctx, kReadBytes);
  const auto start = std::chrono::steady_clock::now();
  int reads = 1;
  while (ms_since(start) < ms) {
    const auto submitted = std::chrono::steady_clock::now();
    ctx.run_and_wait([&](VkCommandBuffer cmd) {
      for (int i = 0; i < reads; ++i) {
        if (i > 0) record_compute_barrier(ctx, cmd);  // the reads share a sink
        read.record(cmd);
      }
    });
    if (ms_since(submitted) < kSubmissionMs) reads = std::min(2 * reads, kMostReads);
  }
}

double clock_warmup_ms(const BenchOptions& options, const std::string& device_type) {
  const std::string& text = options.clock_warmup;
  if (text == "auto") return device_type == "cpu" ? 0.0 : kClockWarmupMsOnGpus;
  double ms = -1;
  const auto [end, error] = std::from_chars(text.data(), text.data() + text.size(), ms);
  if (error != std::errc() || end != text.data() + text.size() || !std::isfinite(ms) || ms < 0)
    throw Error(ErrorCode::invalid_argument,
                fmt::format("--clock-warmup-ms: \"{}\" is not auto or a number of milliseconds, 0 or more", text));
  return ms;
}

RepetitionTimes time_repetitions(Context& ctx, const BenchOptions& options, int min_repetitions,
                                 const std::function<double()>& timed_ns) {
  WallClock wall;
  wall.warmup_s = unix_seconds();
  keep_device_busy(ctx, clock_warmup_ms(options, ctx.device_info().type));
  for (int i = 0; i < options.warmup; ++i) timed_ns();
  wall.timed_s = unix_seconds();
  std::vector<double> us;
  for (int i = 0; i < std::max(min_repetitions, options.repetitions); ++i) us.push_back(timed_ns() * 1e-3);
  wall.end_s = unix_seconds();
  std::sort(us.begin(), us.end());
  return {us[us.size() / 2], us.front(), us.back(), wall};
}

std::string clock_warmup_line(const BenchOptions& options, const std::string& device_type) {
  const double ms = clock_warmup_ms(options, device_type);
  if (ms <= 0) return "";
  return fmt::format(
      "clock warm-up: the device kept busy (streaming reads) for {:g} ms before each case's warm-up runs\n", ms);
}

}  // namespace vkpaged::cli
