// SPDX-License-Identifier: Apache-2.0
// `vkpaged bench --json`: the run (device, the read bandwidth at the start, flush, warm start,
// arena, rounds), every suite run's read bandwidth after it, every case's rounds, and every
// case of every round; each flagged as performance-targets.md's target 7 asks.
#include <algorithm>

#include "bench_run.hpp"
#include "json_file.hpp"

namespace vkpaged::cli {

void write_bench_json(const std::string& path, const DeviceInfo& dev, const BenchJsonRun& run,
                      const std::vector<BenchResult>& results, const std::vector<SuiteRun>& suites,
                      const std::vector<CaseRounds>& rounds) {
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
  Json j;
  j["device"] = dev.name;
  j["driver"] = dev.driver;
  j["read_bandwidth_bytes_per_second"] = run.bandwidth;
  j["cache_flush_bytes"] = run.flush_bytes;
  j["warm_start"] = run.warm_start;
  j["clock_warmup_ms"] = run.clock_warmup_ms;
  j["arena"] = run.arena;
  j["arena_bytes"] = run.arena_bytes;
  j["rounds"] = run.rounds;
  j["stable_tolerance"] = kStableTolerance;
  j["disturbed"] = disturbed;
  j["suite_runs"] = Json::array();
  for (const SuiteRun& s : suites)
    j["suite_runs"].push_back({{"suite", s.suite},
                               {"round", s.round},
                               {"read_start_bytes_per_second", s.read_start},
                               {"read_after_bytes_per_second", s.read_after},
                               {"read_change", s.read_start > 0 ? (s.read_after - s.read_start) / s.read_start : 0.0},
                               {"disturbed", s.disturbed}});
  j["case_rounds"] = Json::array();
  for (const CaseRounds& c : rounds)
    j["case_rounds"].push_back({{"suite", c.suite},
                                {"name", c.name},
                                {"median_us", c.median_us},
                                {"pool_read_bytes_per_second", c.pool_read_bytes_per_second},
                                {"spread", c.spread},
                                {"disturbed", c.differs}});
  j["cases"] = Json::array();
  for (const BenchResult& r : results) {
    const BenchCase& c = r.config;
    j["cases"].push_back(
        {{"suite", r.suite},
         {"round", r.round},
         {"name", c.name},
         {"batch", c.batch},
         {"context", c.context},
         {"heads", c.heads},
         {"kv_heads", c.kv_heads},
         {"head_size", c.head_size},
         {"block_size", c.block_size},
         {"query_dtype", dtype_name(c.query_dtype)},
         {"cache_dtype", dtype_name(c.cache_dtype)},
         {"kv_layout", kv_layout_name(c.kv_layout)},
         {"ragged", c.ragged},
         {"kv_bytes", r.kv_bytes},
         {"median_us", r.median_us},
         {"min_us", r.min_us},
         {"max_us", r.max_us},
         {"wall_clock_s", wall_clock_json(r.wall)},
         {"kv_bytes_per_second", r.kv_bytes_per_second()},
         {"share_of_bandwidth", run.bandwidth > 0 ? r.kv_bytes_per_second() / run.bandwidth : 0.0},
         {"order_us", r.order_us},
         {"pool_read_bytes_per_second", r.pool_read_bytes_per_second},
         {"disturbed", r.skipped.empty() && (suite_disturbed(r.suite, r.round) || case_differs(r.suite, c.name))},
         {"path", r.path},
         {"skipped", r.skipped}});
  }
  write_json_file(path, j);
}

}  // namespace vkpaged::cli
