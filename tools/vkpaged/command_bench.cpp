// SPDX-License-Identifier: Apache-2.0
// `vkpaged bench`: sets up each case's paged cache on the device (random data, shuffled block
// tables), times record_decode with GPU timestamps, and reports KV bytes per second against
// the read bandwidth measured by the same run; measures that bandwidth again after every suite
// (and every round of --repeat) and says when the figures moved (performance-targets.md,
// target 7).
#include <fmt/format.h>
#include <fmt/ranges.h>

#include <algorithm>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <optional>

#include "bench_run.hpp"
#include "bench_timing.hpp"
#include "cli_context.hpp"
#include "decode_option_names.hpp"
#include "vkpaged/context.hpp"
#include "vkpaged/error.hpp"
#include "vkpaged/utilities.hpp"

namespace vkpaged::cli {

namespace {

SplitMode parse_split(const std::string& s) {
  if (const auto mode = split_mode_named(s)) return *mode;
  throw Error(ErrorCode::invalid_argument, fmt::format("--split: \"{}\" is not auto, single or split", s));
}

DecodeMerge parse_merge(const std::string& s) {
  if (s == "reduce-pass") return DecodeMerge::reduce_pass;
  if (s == "in-dispatch") return DecodeMerge::in_dispatch;
  throw Error(ErrorCode::invalid_argument, fmt::format("--merge: \"{}\" is not reduce-pass or in-dispatch", s));
}

DecodeOrder parse_order(const std::string& s) {
  if (const auto order = decode_order_named(s)) return *order;
  throw Error(ErrorCode::invalid_argument, fmt::format("--order: \"{}\" is not auto, grid or longest-first", s));
}

DecodeKernel parse_kernel(const std::string& s) {
  if (const auto kernel = decode_kernel_named(s)) return *kernel;
  throw Error(ErrorCode::invalid_argument, fmt::format("--kernel: \"{}\" is not auto, scalar, matrix or matrix-khr", s));
}

}  // namespace

DecodeOptions bench_decode_options(const BenchOptions& o) {
  DecodeOptions options;
  options.split = parse_split(o.split);
  options.partition_tokens = o.partition_tokens;
  options.kernel = parse_kernel(o.kernel);
  options.order = parse_order(o.order);
  options.merge = parse_merge(o.merge);
  return options;
}

bool case_selected(const BenchOptions& o, const std::string& name) {
  return o.cases.empty() ||
         std::any_of(o.cases.begin(), o.cases.end(), [&](const std::string& text) { return name.find(text) != std::string::npos; });
}

void throw_no_case_selected(const BenchOptions& o, const std::string& suite) {
  throw Error(ErrorCode::invalid_argument,
              fmt::format("--case: no case of suite \"{}\" has \"{}\" in its name", suite, fmt::join(o.cases, "\" or \"")));
}

int run_bench(const BenchOptions& o) {
  clock_warmup_ms(o, "");  // refuses a bad --clock-warmup-ms before any suite opens the device
  if (is_cache_write_suite(o.suite)) return run_cache_write_bench(o);
  if (is_prefill_suite(o.suite)) return run_prefill_bench(o);
  if (is_mla_suite(o.suite)) return run_mla_bench(o);
  // Bad option values are refused before the device is opened and its bandwidth measured.
  std::vector<std::pair<std::string, std::vector<BenchCase>>> suites;
  for (const auto& name : bench_suite_names(o.suite)) {
    auto cases = kept_cases(o, with_kv_layout(with_cache_dtype(bench_suite(name), o.cache_dtype), o.kv_layout));
    if (!cases.empty()) suites.emplace_back(name, std::move(cases));  // a suite --case leaves empty is not run
  }
  if (suites.empty()) throw_no_case_selected(o, o.suite);
  const DecodeOptions decode_options = bench_decode_options(o);
  if (o.warm_start && !o.flush_caches)
    throw Error(ErrorCode::invalid_argument,
                "--warm-start needs --flush-caches: the untimed decode before each repetition would leave its bytes "
                "in the GPU's caches");
  if (o.repeat < 1) throw Error(ErrorCode::invalid_argument, fmt::format("--repeat: {} is not 1 or more rounds", o.repeat));
  if (!o.timeline_dir.empty()) {
    std::error_code ec;
    std::filesystem::create_directories(o.timeline_dir, ec);
    if (ec) throw Error(ErrorCode::io_error, fmt::format("--timeline: cannot create {}: {}", o.timeline_dir, ec.message()));
  }
  Context ctx(cli_context_options(o.device));
  const auto& dev = ctx.device_info();
  // Several times the largest L2 caches (60 MB on an H200), capped by the device's limits.
  const size_t probe_bytes = std::min<size_t>({size_t(1) << 30, dev.max_storage_buffer_range, dev.device_local_bytes / 4});
  // The probe's buffer is kept for the whole run, to measure again after every suite without a
  // new allocation; with --flush-caches it is also read before each repetition.
  const StreamingRead probe(ctx, probe_bytes);
  const StreamingRead* flush = o.flush_caches ? &probe : nullptr;
  // A warm start times the probes as it times the decodes: after a small read of the same
  // pipeline in the same command buffer.
  std::optional<StreamingRead> lead;
  if (o.warm_start) lead.emplace(ctx, size_t(1) << 16);
  auto measure = [&](const StreamingRead& read) {
    return lead ? measure_read_bandwidth_after(ctx, read, *lead, o.repetitions) : measure_read_bandwidth(ctx, read, o.repetitions);
  };
  const auto bw = measure(probe);
  const double bandwidth = bw.bytes_per_second();
  fmt::print("device: {} ({})\n", dev.name, dev.driver);
  fmt::print("{}", clock_warmup_line(o, dev.type));
  fmt::print("read bandwidth (streaming 16-byte loads, {} MB, median of {}): {:.1f} GB/s\n", bw.bytes / 1000000,
             o.repetitions, bandwidth / 1e9);
  // The same kernel over the KV bytes of the small standard cases (134 MB), where a launch and
  // the last wave weigh more: what a decode of that size can reach at best. Shares stay relative
  // to the large read above, as performance-targets.md defines them.
  constexpr size_t kSmallCaseBytes = size_t(1) << 27;
  if (probe_bytes > kSmallCaseBytes) {
    const auto small = measure(StreamingRead(ctx, kSmallCaseBytes));
    fmt::print("read bandwidth over {} MB (the small standard cases' KV size): {:.1f} GB/s, {:.1f} us\n",
               small.bytes / 1000000, small.bytes_per_second() / 1e9, small.median_ns / 1e3);
  }
  if (flush) fmt::print("caches flushed before each repetition: a {} MB streaming read, not timed\n", flush->bytes() / 1000000);
  if (o.warm_start)
    fmt::print("warm start: each repetition runs after the same decode and the flush, untimed, in one command buffer\n");

  // Every case's lengths, tables and plan, before any case's buffers exist.
  std::vector<std::vector<PreparedCase>> prepared;
  for (const auto& [name, cases] : suites) {
    prepared.emplace_back();
    for (const auto& c : cases) prepared.back().push_back(prepare_case(ctx, name, c, decode_options));
  }
  RunShared shared;
  shared.options = decode_options;
  shared.flush = flush;
  const size_t sink_align = std::max<size_t>(dev.min_storage_buffer_offset_alignment, 16);
  const DeviceBuffer sinks = ctx.create_buffer(2 * sink_align);
  shared.key_sink = sinks.view(0, 16);
  shared.value_sink = sinks.view(sink_align, 16);
  std::optional<DeviceBuffer> arena;
  if (o.arena) {
    size_t bytes = 16;
    for (const auto& cases : prepared) bytes = std::max(bytes, arena_bytes(ctx, cases));
    arena.emplace(create_arena(ctx, bytes));
  }
  fmt::print("{}\n", buffers_line(arena ? &*arena : nullptr));
  if (o.repeat > 1) fmt::print("rounds: {}, every suite run again after the last round, each case's rounds compared\n", o.repeat);
  fmt::print("after every suite the read bandwidth is measured again: a change of more than {0:.0f} % from the start "
             "prints a line starting \"disturbed:\"{1}\n",
             100 * kStableTolerance, o.repeat > 1 ? ", as does a case whose rounds differ by more than that" : "");

  std::vector<BenchResult> results;
  std::vector<SuiteRun> suite_runs;
  for (int round = 1; round <= o.repeat; ++round) {
    if (o.repeat > 1) fmt::print("\nround {} of {}\n", round, o.repeat);
    for (size_t si = 0; si < prepared.size(); ++si) {
      fmt::print("\n");
      if (prepared.size() > 1) fmt::print("suite {}\n", suites[si].first);
      fmt::print("{:<18} {:>5} {:>7} {:>3}/{:<3} {:>3} {:>3} {:>9} {:>9} {:>9} {:>9} {:>9} {:>6} {:>9}  {}\n", "case",
                 "batch", "context", "H", "Hkv", "D", "B", "kv", "median us", "min us", "max us", "GB/s", "share",
                 "pool GB/s", "path");
      for (const auto& p : prepared[si]) {
        const BenchCase& c = p.config;
        BenchResult r;
        {
          const CaseMemory memory = !p.skipped.empty() ? CaseMemory{}
                                    : arena              ? arena_memory(ctx, *arena, p)
                                                         : own_memory(ctx, p);
          r = run_case(ctx, p, memory, round, o, shared);
        }
        const double share = bandwidth > 0 ? r.kv_bytes_per_second() / bandwidth : 0.0;
        if (!r.skipped.empty())
          fmt::print("{:<18} skipped: {}\n", c.name, r.skipped);
        else
          fmt::print(
              "{:<18} {:>5} {:>7} {:>3}/{:<3} {:>3} {:>3} {:>9} {:>9.1f} {:>9.1f} {:>9.1f} {:>9.1f} {:>5.1f}% {:>9.1f}  {}\n",
              c.name, c.batch, c.context, c.heads, c.kv_heads, c.head_size, c.block_size, dtype_name(c.cache_dtype),
              r.median_us, r.min_us, r.max_us, r.kv_bytes_per_second() / 1e9, 100.0 * share,
              r.pool_read_bytes_per_second / 1e9, r.path);
        std::fflush(stdout);
        results.push_back(std::move(r));
      }
      SuiteRun run;
      run.suite = suites[si].first;
      run.round = round;
      run.read_start = bandwidth;
      run.read_after = measure(probe).bytes_per_second();
      run.disturbed = bandwidth_disturbed(run.read_start, run.read_after);
      fmt::print("read bandwidth after the suite: {:.1f} GB/s, {:+.1f} % from the start\n", run.read_after / 1e9,
                 bandwidth > 0 ? 100.0 * (run.read_after - bandwidth) / bandwidth : 0.0);
      for (const auto& line : disturbed_lines({run}, {})) fmt::print("{}\n", line);
      std::fflush(stdout);
      suite_runs.push_back(run);
    }
  }

  const auto rounds = case_rounds(results);
  if (o.repeat > 1) {
    fmt::print("\nrounds: median us per round, their spread ((max - min) / min), and the pools' read in GB/s per round\n");
    for (const auto& c : rounds) {
      std::vector<double> pool_gbs;
      for (double x : c.pool_read_bytes_per_second) pool_gbs.push_back(x / 1e9);
      fmt::print("{:<18} {:>9.1f} {:>6.1f} %  pools {:.0f}\n", c.name, fmt::join(c.median_us, " "), 100.0 * c.spread,
                 fmt::join(pool_gbs, " "));
    }
    for (const auto& line : disturbed_lines({}, rounds)) fmt::print("{}\n", line);
  }
  const bool disturbed = std::any_of(suite_runs.begin(), suite_runs.end(), [](const SuiteRun& s) { return s.disturbed; }) ||
                         std::any_of(rounds.begin(), rounds.end(), [](const CaseRounds& c) { return c.differs; });
  if (!disturbed)
    fmt::print("stable: the read bandwidth after every suite within {:.0f} % of the start{}\n", 100 * kStableTolerance,
               o.repeat > 1 ? ", every case's rounds too" : "");

  if (!o.json_path.empty()) {
    BenchJsonRun run;
    run.bandwidth = bandwidth;
    run.flush_bytes = flush ? flush->bytes() : 0;
    run.warm_start = o.warm_start;
    run.clock_warmup_ms = clock_warmup_ms(o, dev.type);
    run.arena = o.arena;
    run.arena_bytes = arena ? arena->size() : 0;
    run.rounds = o.repeat;
    write_bench_json(o.json_path, dev, run, results, suite_runs, rounds);
  }
  if (!o.chart_path.empty()) {
    // The first round: what a run without --repeat shows.
    std::vector<BenchResult> first;
    for (const auto& r : results)
      if (r.round == 1) first.push_back(r);
    std::ofstream f(o.chart_path);
    const std::string title =
        fmt::format("vkpaged decode, {} suite, {}{}", o.suite, dev.name, o.warm_start ? ", warm start" : "");
    f << bench_chart_svg(first, bandwidth, title);
    if (!f) throw Error(ErrorCode::io_error, fmt::format("--chart: cannot write {}", o.chart_path));
  }
  return 0;
}

}  // namespace vkpaged::cli
