// SPDX-License-Identifier: Apache-2.0
// Whether the bench's figures are stable (performance-targets.md, target 7): the rules that flag
// a suite or a case as disturbed, kept pure so that tests can give them made-up figures, and the
// arena's layout.
#include <fmt/format.h>
#include <fmt/ranges.h>

#include <algorithm>
#include <cmath>

#include "bench.hpp"

namespace vkpaged::cli {

bool bandwidth_disturbed(double start, double after, double tolerance) {
  if (!(start > 0) || !(after > 0)) return false;
  return std::abs(after - start) > tolerance * start;
}

double round_spread(const std::vector<double>& medians_us) {
  if (medians_us.size() < 2) return 0.0;
  const auto [lo, hi] = std::minmax_element(medians_us.begin(), medians_us.end());
  if (!(*lo > 0)) return 0.0;
  return (*hi - *lo) / *lo;
}

std::vector<CaseRounds> case_rounds(const std::vector<BenchResult>& results, double tolerance) {
  std::vector<CaseRounds> cases;
  for (const auto& r : results) {
    if (!r.skipped.empty()) continue;
    auto it = std::find_if(cases.begin(), cases.end(),
                           [&](const CaseRounds& c) { return c.suite == r.suite && c.name == r.config.name; });
    if (it == cases.end()) {
      cases.push_back({r.suite, r.config.name, {}, {}, 0.0, false});
      it = cases.end() - 1;
    }
    it->median_us.push_back(r.median_us);
    it->pool_read_bytes_per_second.push_back(r.pool_read_bytes_per_second);
  }
  for (auto& c : cases) {
    c.spread = round_spread(c.median_us);
    c.differs = c.spread > tolerance;
  }
  return cases;
}

std::vector<std::string> disturbed_lines(const std::vector<SuiteRun>& suites, const std::vector<CaseRounds>& cases) {
  std::vector<std::string> lines;
  for (const auto& s : suites)
    if (s.disturbed)
      lines.push_back(fmt::format(
          "disturbed: suite {}, round {}: read bandwidth {:.1f} GB/s at the start, {:.1f} after the suite ({:+.1f} %)",
          s.suite, s.round, s.read_start / 1e9, s.read_after / 1e9, 100.0 * (s.read_after - s.read_start) / s.read_start));
  for (const auto& c : cases)
    if (c.differs)
      lines.push_back(fmt::format("disturbed: case {} ({}): rounds {:.1f} us, spread {:.1f} %", c.name, c.suite,
                                  fmt::join(c.median_us, ", "), 100.0 * c.spread));
  return lines;
}

std::vector<size_t> arena_offsets(const std::vector<size_t>& sizes, size_t large, size_t large_alignment,
                                  size_t alignment) {
  auto align_up = [](size_t x, size_t a) { return (x + a - 1) / a * a; };
  std::vector<size_t> offsets;
  size_t end = 0;
  for (size_t i = 0; i < sizes.size(); ++i) {
    const size_t at = align_up(end, i < large ? large_alignment : alignment);
    offsets.push_back(at);
    end = at + sizes[i];
  }
  offsets.push_back(end);
  return offsets;
}

}  // namespace vkpaged::cli
