// SPDX-License-Identifier: Apache-2.0
#pragma once
// How every bench suite times a case: untimed warm-up runs, then the median (and least and
// greatest) of the timed repetitions.
#include <algorithm>
#include <functional>
#include <vector>

#include "bench.hpp"

namespace vkpaged::cli {

struct RepetitionTimes {
  double median_us = 0, min_us = 0, max_us = 0;
};

// options.warmup untimed calls of `timed_ns` (one repetition, its GPU time in ns), then
// options.repetitions timed ones, at least `min_repetitions`.
inline RepetitionTimes time_repetitions(const BenchOptions& options, int min_repetitions,
                                        const std::function<double()>& timed_ns) {
  for (int i = 0; i < options.warmup; ++i) timed_ns();
  std::vector<double> us;
  for (int i = 0; i < std::max(min_repetitions, options.repetitions); ++i) us.push_back(timed_ns() * 1e-3);
  std::sort(us.begin(), us.end());
  return {us[us.size() / 2], us.front(), us.back()};
}

}  // namespace vkpaged::cli
