// SPDX-License-Identifier: Apache-2.0
// The benchmark chart: one bar per case, the share of the measured read bandwidth, with the
// 90 % target line of docs/performance-targets.md.
#include <fmt/format.h>

#include <algorithm>

#include "bench.hpp"

namespace vkpaged::cli {

std::string bench_chart_svg(const std::vector<BenchResult>& results, double bandwidth, const std::string& title) {
  const int bar = 36, gap = 14, left = 60, top = 50, height = 300, bottom = 110;
  const int width = left + int(results.size()) * (bar + gap) + 40;
  std::string svg = fmt::format(
      "<svg xmlns=\"http://www.w3.org/2000/svg\" width=\"{}\" height=\"{}\" font-family=\"sans-serif\" font-size=\"12\">\n"
      "<rect width=\"100%\" height=\"100%\" fill=\"white\"/>\n<text x=\"{}\" y=\"24\" font-size=\"15\">{}</text>\n",
      width, top + height + bottom, left, title);
  auto y_of = [&](double share) { return top + height - int(std::min(share, 1.2) / 1.2 * height); };
  for (int pct = 0; pct <= 120; pct += 20) {
    const int y = y_of(pct / 100.0);
    svg += fmt::format("<line x1=\"{}\" x2=\"{}\" y1=\"{}\" y2=\"{}\" stroke=\"#ddd\"/>\n", left, width - 20, y, y);
    svg += fmt::format("<text x=\"{}\" y=\"{}\" text-anchor=\"end\">{}%</text>\n", left - 6, y + 4, pct);
  }
  const int target = y_of(0.9);
  svg += fmt::format("<line x1=\"{}\" x2=\"{}\" y1=\"{}\" y2=\"{}\" stroke=\"#c00\" stroke-dasharray=\"6 4\"/>\n", left,
                     width - 20, target, target);
  svg += fmt::format("<text x=\"{}\" y=\"{}\" fill=\"#c00\">90% target</text>\n", width - 90, target - 4);
  for (size_t i = 0; i < results.size(); ++i) {
    const auto& r = results[i];
    const double share = bandwidth > 0 ? r.kv_bytes_per_second() / bandwidth : 0.0;
    const int x = left + gap / 2 + int(i) * (bar + gap);
    const int y = y_of(share);
    svg += fmt::format("<rect x=\"{}\" y=\"{}\" width=\"{}\" height=\"{}\" fill=\"{}\"/>\n", x, y, bar, top + height - y,
                       share >= 0.9 ? "#2a7" : "#48c");
    svg += fmt::format("<text x=\"{}\" y=\"{}\" text-anchor=\"middle\" font-size=\"10\">{:.0f}%</text>\n", x + bar / 2,
                       y - 4, 100 * share);
    svg += fmt::format("<text transform=\"translate({},{}) rotate(50)\">{}</text>\n", x + 8, top + height + 12,
                       r.config.name);
  }
  svg += fmt::format("<text x=\"{}\" y=\"{}\" font-size=\"11\">bars: KV bytes per second / read bandwidth measured in the same run ({:.0f} GB/s)</text>\n",
                     left, top + height + bottom - 8, bandwidth / 1e9);
  return svg + "</svg>\n";
}

}  // namespace vkpaged::cli
