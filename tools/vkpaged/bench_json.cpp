// SPDX-License-Identifier: Apache-2.0
// `vkpaged bench --json`: the run (device, the read bandwidth at the start, flush, warm start,
// arena, rounds), every suite run's read bandwidth after it, every case's rounds, and every
// case of every round; each flagged as performance-targets.md's target 7 asks.
#include <fmt/format.h>
#include <fmt/ranges.h>

#include <algorithm>
#include <fstream>

#include "bench_run.hpp"
#include "vkpaged/error.hpp"

namespace vkpaged::cli {

namespace {

std::string json_escape(const std::string& s) {
  std::string out;
  for (char ch : s) {
    if (ch == '"' || ch == '\\') out += '\\';
    out += ch;
  }
  return out;
}

}  // namespace

void write_bench_json(const std::string& path, const DeviceInfo& dev, const BenchJsonRun& run,
                      const std::vector<BenchResult>& results, const std::vector<SuiteRun>& suites,
                      const std::vector<CaseRounds>& rounds) {
  auto b = [](bool x) { return x ? "true" : "false"; };
  auto suite_disturbed = [&](const std::string& suite, int round) {
    return std::any_of(suites.begin(), suites.end(),
                       [&](const SuiteRun& s) { return s.suite == suite && s.round == round && s.disturbed; });
  };
  auto case_differs = [&](const std::string& suite, const std::string& name) {
    return std::any_of(rounds.begin(), rounds.end(),
                       [&](const CaseRounds& c) { return c.suite == suite && c.name == name && c.differs; });
  };
  const bool disturbed = std::any_of(suites.begin(), suites.end(), [](const SuiteRun& s) { return s.disturbed; }) ||
                         std::any_of(rounds.begin(), rounds.end(), [](const CaseRounds& c) { return c.differs; });
  std::string j = fmt::format(
      "{{\n  \"device\": \"{}\",\n  \"driver\": \"{}\",\n  \"read_bandwidth_bytes_per_second\": {:.6g},\n"
      "  \"cache_flush_bytes\": {},\n  \"warm_start\": {},\n  \"arena\": {},\n  \"arena_bytes\": {},\n"
      "  \"rounds\": {},\n  \"stable_tolerance\": {},\n  \"disturbed\": {},\n  \"suite_runs\": [\n",
      json_escape(dev.name), json_escape(dev.driver), run.bandwidth, run.flush_bytes, b(run.warm_start), b(run.arena),
      run.arena_bytes, run.rounds, kStableTolerance, b(disturbed));
  for (size_t i = 0; i < suites.size(); ++i) {
    const auto& s = suites[i];
    j += fmt::format(
        "    {{\"suite\": \"{}\", \"round\": {}, \"read_start_bytes_per_second\": {:.6g}, "
        "\"read_after_bytes_per_second\": {:.6g}, \"read_change\": {:.4f}, \"disturbed\": {}}}{}\n",
        s.suite, s.round, s.read_start, s.read_after, s.read_start > 0 ? (s.read_after - s.read_start) / s.read_start : 0.0,
        b(s.disturbed), i + 1 < suites.size() ? "," : "");
  }
  j += "  ],\n  \"case_rounds\": [\n";
  for (size_t i = 0; i < rounds.size(); ++i) {
    const auto& c = rounds[i];
    j += fmt::format(
        "    {{\"suite\": \"{}\", \"name\": \"{}\", \"median_us\": [{:.3f}], \"pool_read_bytes_per_second\": [{:.6g}], "
        "\"spread\": {:.4f}, \"disturbed\": {}}}{}\n",
        c.suite, c.name, fmt::join(c.median_us, ", "), fmt::join(c.pool_read_bytes_per_second, ", "), c.spread,
        b(c.differs), i + 1 < rounds.size() ? "," : "");
  }
  j += "  ],\n  \"cases\": [\n";
  const double bandwidth = run.bandwidth;
  for (size_t i = 0; i < results.size(); ++i) {
    const auto& r = results[i];
    const auto& c = r.config;
    j += fmt::format(
        "    {{\"suite\": \"{}\", \"round\": {}, \"name\": \"{}\", \"batch\": {}, \"context\": {}, \"heads\": {}, "
        "\"kv_heads\": {}, \"head_size\": {}, \"block_size\": {}, \"query_dtype\": \"{}\", \"cache_dtype\": \"{}\", "
        "\"kv_layout\": \"{}\", "
        "\"ragged\": {}, \"kv_bytes\": {}, \"median_us\": {:.3f}, \"min_us\": {:.3f}, \"max_us\": {:.3f}, "
        "\"kv_bytes_per_second\": {:.6g}, \"share_of_bandwidth\": {:.4f}, \"order_us\": {:.3f}, "
        "\"pool_read_bytes_per_second\": {:.6g}, \"disturbed\": {}, \"path\": \"{}\", \"skipped\": \"{}\"}}{}\n",
        r.suite, r.round, c.name, c.batch, c.context, c.heads, c.kv_heads, c.head_size, c.block_size,
        dtype_name(c.query_dtype), dtype_name(c.cache_dtype), kv_layout_name(c.kv_layout), b(c.ragged), r.kv_bytes, r.median_us, r.min_us, r.max_us,
        r.kv_bytes_per_second(), bandwidth > 0 ? r.kv_bytes_per_second() / bandwidth : 0.0, r.order_us,
        r.pool_read_bytes_per_second,
        b(r.skipped.empty() && (suite_disturbed(r.suite, r.round) || case_differs(r.suite, c.name))), json_escape(r.path),
        json_escape(r.skipped), i + 1 < results.size() ? "," : "");
  }
  j += "  ]\n}\n";
  std::ofstream f(path);
  f << j;
  if (!f) throw Error(ErrorCode::io_error, fmt::format("--json: cannot write {}", path));
}

}  // namespace vkpaged::cli
