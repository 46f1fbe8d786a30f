// SPDX-License-Identifier: Apache-2.0
#pragma once
// How every bench suite times a case: the device kept busy for --clock-warmup-ms, untimed
// warm-up runs, then the median (and least and greatest) of the timed repetitions.
#include <algorithm>
#include <chrono>
#include <functional>
#include <string>
#include <vector>

#include "bench.hpp"
#include "vkpaged/context.hpp"

namespace vkpaged::cli {

// Keeps the device saturated for `ms` of wall time: submissions of back-to-back streaming reads
// (the bandwidth probe's kernel, over a buffer of its own), each grown until it lasts a few
// milliseconds. An H100 left idle lowers its SM clock to 345 MHz and raises it again under a full
// load within about half a second, but not under a case's own repetitions, which leave it idle
// half the time (bench/experiments/disturbed-runs.md). Does nothing for ms <= 0.
void keep_device_busy(Context& ctx, double ms);

// --clock-warmup-ms resolved for a device of this type (DeviceInfo::type): auto is
// kClockWarmupMsOnGpus but 0 on a CPU device. Throws vkpaged::Error naming the option where the text
// is neither auto nor a number of milliseconds, 0 or more (run_bench checks it before opening a
// device: `device_type` "" then).
double clock_warmup_ms(const BenchOptions& options, const std::string& device_type);

// keep_device_busy for clock_warmup_ms, options.warmup untimed calls of `timed_ns` (one
// repetition, its GPU time in ns), then options.repetitions timed ones, at least `min_repetitions`.
RepetitionTimes time_repetitions(Context& ctx, const BenchOptions& options, int min_repetitions,
                                 const std::function<double()>& timed_ns);

// The line each suite prints after its device line: how long the device is kept busy before each
// case ("" where not at all).
std::string clock_warmup_line(const BenchOptions& options, const std::string& device_type);

}  // namespace vkpaged::cli
