// SPDX-License-Identifier: Apache-2.0
// The bench's stability rules (performance-targets.md, target 7) with made-up figures: when a
// suite or a case is flagged as disturbed, the lines that say so, the rounds of one case, the
// arena's layout (and on the device its views and its refusal past the allocation limit) and the
// suites `all` runs; the clock warm-up; scripts/bench_stability.py's comparison of runs,
// scripts/bench_clocks.py's placing of cases among clock samples and scripts/mla_phase_clocks.py's
// sums of the MLA kernel's phase clocks. The bench itself runs in
// test_cli.cpp.
#include <gtest/gtest.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <ctime>
#include <filesystem>
#include <fstream>
#include <string>
#include <thread>
#include <vector>

#include "bench.hpp"
#include "bench_run.hpp"
#include "bench_timing.hpp"
#include "support/test_context.hpp"
#include "support/test_paths.hpp"
#include "vkpaged/error.hpp"

namespace vkpaged::cli {
namespace {

TEST(BenchStability, ReadBandwidthDisturbedWhenItMovedMoreThanThreePercent) {
  EXPECT_FALSE(bandwidth_disturbed(4550e9, 4550e9));
  EXPECT_FALSE(bandwidth_disturbed(4550e9, 4500e9));  // -1.1 %
  EXPECT_FALSE(bandwidth_disturbed(100.0, 97.1));
  EXPECT_TRUE(bandwidth_disturbed(100.0, 96.9));
  EXPECT_FALSE(bandwidth_disturbed(100.0, 102.9));
  // A rise: the start (the shares' reference) was measured slow.
  EXPECT_TRUE(bandwidth_disturbed(100.0, 103.1));
  // 2026-12-04's disturbed call read about half as fast from some case on.
  EXPECT_TRUE(bandwidth_disturbed(4558.4e9, 2300e9));
  // Another tolerance.
  EXPECT_FALSE(bandwidth_disturbed(100.0, 91.0, 0.10));
  EXPECT_TRUE(bandwidth_disturbed(100.0, 89.0, 0.10));
  // Nothing measured, nothing flagged.
  EXPECT_FALSE(bandwidth_disturbed(0.0, 100.0));
  EXPECT_FALSE(bandwidth_disturbed(100.0, 0.0));
}

TEST(BenchStability, RoundSpreadIsMaxMinusMinOverMin) {
  EXPECT_DOUBLE_EQ(round_spread({255.0, 424.0, 256.1}), (424.0 - 255.0) / 255.0);
  EXPECT_DOUBLE_EQ(round_spread({200.0, 206.0}), 0.03);
  EXPECT_DOUBLE_EQ(round_spread({206.0, 200.0}), 0.03);
  EXPECT_DOUBLE_EQ(round_spread({100.0}), 0.0);
  EXPECT_DOUBLE_EQ(round_spread({}), 0.0);
  EXPECT_DOUBLE_EQ(round_spread({0.0, 100.0}), 0.0) << "a case that did not run is not a spread";
}

BenchResult result(const std::string& suite, int round, const std::string& name, double median_us, double pool = 4.5e12) {
  BenchResult r;
  r.suite = suite;
  r.round = round;
  r.config.name = name;
  r.median_us = median_us;
  r.pool_read_bytes_per_second = pool;
  return r;
}

TEST(BenchStability, CaseRoundsGatherEachCaseAndFlagTheOnesThatDiffer) {
  std::vector<BenchResult> results{result("dtypes", 1, "batch64-f16", 250.0, 4.50e12),
                                   result("dtypes", 1, "batch256-f16", 255.0),
                                   result("standard", 1, "batch256-f16", 260.0),
                                   result("dtypes", 2, "batch64-f16", 257.0, 4.40e12),
                                   result("dtypes", 2, "batch256-f16", 424.0),
                                   result("standard", 2, "batch256-f16", 261.0),
                                   result("dtypes", 3, "batch64-f16", 251.0, 4.49e12),
                                   result("dtypes", 3, "batch256-f16", 256.1),
                                   result("standard", 3, "batch256-f16", 259.0)};
  BenchResult skipped = result("dtypes", 1, "batch64-fp8_e4m3", 0.0);
  skipped.skipped = "the matrix kernel cannot run fp8";
  results.insert(results.begin() + 1, skipped);

  const auto rounds = case_rounds(results);
  ASSERT_EQ(rounds.size(), 3u) << "the skipped case is left out; one name in two suites is two cases";
  EXPECT_EQ(rounds[0].suite, "dtypes");
  EXPECT_EQ(rounds[0].name, "batch64-f16");
  EXPECT_EQ(rounds[0].median_us, (std::vector<double>{250.0, 257.0, 251.0}));
  EXPECT_EQ(rounds[0].pool_read_bytes_per_second, (std::vector<double>{4.50e12, 4.40e12, 4.49e12}));
  EXPECT_DOUBLE_EQ(rounds[0].spread, 0.028);
  EXPECT_FALSE(rounds[0].differs) << "2.8 % is within 3 %";
  EXPECT_EQ(rounds[1].name, "batch256-f16");
  EXPECT_EQ(rounds[1].suite, "dtypes");
  EXPECT_TRUE(rounds[1].differs);
  EXPECT_EQ(rounds[2].suite, "standard");
  EXPECT_FALSE(rounds[2].differs);
  EXPECT_TRUE(case_rounds(results, 0.01)[0].differs) << "2.8 % is over 1 %";

  // One round: nothing to compare.
  results.resize(4);
  for (const auto& c : case_rounds(results)) {
    EXPECT_EQ(c.median_us.size(), 1u);
    EXPECT_FALSE(c.differs);
  }
}

TEST(BenchStability, DisturbedLinesNameTheSuiteOrTheCaseAndTheFigures) {
  const std::vector<SuiteRun> suites{{"dtypes", 1, 4550e9, 4540e9, false}, {"dtypes", 2, 4550e9, 2275e9, true}};
  CaseRounds steady{"dtypes", "batch64-f16", {250.0, 251.0}, {}, 0.004, false};
  CaseRounds slow{"dtypes", "batch256-f16", {255.0, 424.0}, {}, 0.6627, true};
  const auto lines = disturbed_lines(suites, {steady, slow});
  ASSERT_EQ(lines.size(), 2u);
  EXPECT_EQ(lines[0],
            "disturbed: suite dtypes, round 2: read bandwidth 4550.0 GB/s at the start, 2275.0 after the suite (-50.0 %)");
  EXPECT_EQ(lines[1], "disturbed: case batch256-f16 (dtypes): rounds 255.0, 424.0 us, spread 66.3 %");
  EXPECT_TRUE(disturbed_lines({suites[0]}, {steady}).empty());
}

TEST(BenchArena, PoolsAtTheirBoundaryTheRestPackedAtTheSmallAlignment) {
  constexpr size_t MiB = size_t(1) << 20;
  const auto at = arena_offsets({3 * MiB + 5, MiB, 100, 17, 256}, 2, 2 * MiB, 256);
  EXPECT_EQ(at, (std::vector<size_t>{0, 4 * MiB, 5 * MiB, 5 * MiB + 256, 5 * MiB + 512, 5 * MiB + 768}));
  EXPECT_EQ(arena_offsets({}, 2, 2 * MiB, 256), (std::vector<size_t>{0}));
  // Every case gets the same pool offsets whatever its size: the arena only grows at the end.
  EXPECT_EQ(arena_offsets({16, 16, 16}, 2, 2 * MiB, 256), (std::vector<size_t>{0, 2 * MiB, 2 * MiB + 256, 2 * MiB + 272}));
}

// The arena on the device (what the decode and MLA suites share): a case's views where
// arena_offsets puts them, the arena as large as arena_bytes says; an arena past the device's
// maxMemoryAllocationSize refused naming --arena and its bytes, before any allocation.
class BenchArenaDevice : public vkpaged::test::GpuTest {};

TEST_F(BenchArenaDevice, ViewsLieWhereTheLayoutSaysAndAnArenaTooLargeIsRefusedByName) {
  constexpr size_t MiB = size_t(1) << 20;
  const std::vector<size_t> sizes{3 * MiB + 5, 100, 17};  // one pool, two small buffers
  const size_t alignment = std::max<size_t>(ctx().device_info().min_storage_buffer_offset_alignment, 256);
  const DeviceBuffer arena = create_arena(ctx(), arena_bytes(ctx(), sizes, 1));
  const CaseMemory m = arena_memory(ctx(), arena, sizes, 1);
  ASSERT_EQ(m.views.size(), 3u);
  EXPECT_TRUE(m.owned.empty());
  EXPECT_EQ(m.views[0].offset, 0u);
  EXPECT_EQ(m.views[1].offset, (3 * MiB + 5 + alignment - 1) / alignment * alignment);
  EXPECT_EQ(m.views[2].offset, m.views[1].offset + alignment);
  for (size_t i = 0; i < sizes.size(); ++i) {
    EXPECT_EQ(m.views[i].buffer, arena.handle());
    EXPECT_EQ(m.views[i].size, sizes[i]);
  }
  EXPECT_EQ(arena.size(), m.views[2].offset + 17);
  EXPECT_EQ(own_memory(ctx(), sizes).owned.size(), 3u);

  const uint64_t limit = ctx().device_info().max_memory_allocation_size;
  if (limit == 0) GTEST_SKIP() << "the device reports no maxMemoryAllocationSize";
  const size_t bytes = size_t(limit + 2 * MiB);
  try {
    const DeviceBuffer too_large = create_arena(ctx(), bytes);
    ADD_FAILURE() << "an arena of " << bytes << " bytes was allocated past maxMemoryAllocationSize " << limit;
  } catch (const Error& e) {
    EXPECT_EQ(e.code(), ErrorCode::out_of_memory) << e.what();
    const std::string what = e.what();
    EXPECT_NE(what.find("--arena: one allocation of " + std::to_string(bytes) + " bytes"), std::string::npos) << what;
    EXPECT_NE(what.find("--no-arena"), std::string::npos) << what;
  }
}

TEST(BenchArena, DefaultIsTheConstant) {
  EXPECT_EQ(BenchOptions{}.arena, kArenaByDefault);
  EXPECT_EQ(BenchOptions{}.repeat, 1);
}

// A stand-in for one repetition: sleeps 1 ms, counts its calls, and returns its call number as its
// "GPU time" so that the timed ones can be told apart.
struct CountingRepetition {
  int calls = 0;
  double operator()() {
    std::this_thread::sleep_for(std::chrono::milliseconds(1));
    return 1000.0 * ++calls;
  }
};

// On the device: keep_device_busy submits streaming reads (the validation layer watches them).
class BenchTiming : public vkpaged::test::GpuTest {};

TEST_F(BenchTiming, WithoutClockWarmupTheWarmupRunsAloneComeBeforeTheTimedOnes) {
  BenchOptions o;
  o.warmup = 3;
  o.repetitions = 5;
  o.clock_warmup = "0";
  CountingRepetition rep;
  const RepetitionTimes t = time_repetitions(ctx(), o, 7, [&] { return rep(); });
  EXPECT_EQ(rep.calls, 3 + 7);  // at least min_repetitions timed
  EXPECT_DOUBLE_EQ(t.min_us, 4.0);  // call 4 is the first timed one (ns -> us)
  EXPECT_DOUBLE_EQ(t.max_us, 10.0);
  EXPECT_DOUBLE_EQ(t.median_us, 7.0);
  EXPECT_EQ(clock_warmup_line(o, "discrete"), "");
}

TEST_F(BenchTiming, ClockWarmupKeepsTheDeviceBusyForItsTimeBeforeTheWarmupRuns) {
  BenchOptions o;
  o.warmup = 2;
  o.repetitions = 20;
  o.clock_warmup = "30";
  CountingRepetition rep;
  const RepetitionTimes t = time_repetitions(ctx(), o, 20, [&] { return rep(); });
  EXPECT_EQ(rep.calls, 2 + 20) << "the clock warm-up runs reads of its own, not the case";
  EXPECT_DOUBLE_EQ(t.min_us, 3.0);
  EXPECT_DOUBLE_EQ(t.max_us, 22.0);
  // The wall clock: 30 ms busy and two warm-up runs of at least 1 ms, then 20 timed ones.
  EXPECT_GE(t.wall.timed_s - t.wall.warmup_s, 0.032);
  EXPECT_GE(t.wall.end_s - t.wall.timed_s, 0.020);
  EXPECT_EQ(clock_warmup_line(o, "cpu"),
            "clock warm-up: the device kept busy (streaming reads) for 30 ms before each case's warm-up runs\n");
}

TEST(BenchClockWarmup, AutoIsASecondOnAGpuAndNoneOnACpuDeviceANumberIsTakenAsGiven) {
  BenchOptions o;
  EXPECT_EQ(o.clock_warmup, "auto");
  EXPECT_EQ(clock_warmup_ms(o, "discrete"), kClockWarmupMsOnGpus);
  EXPECT_EQ(clock_warmup_ms(o, "integrated"), kClockWarmupMsOnGpus);
  EXPECT_EQ(clock_warmup_ms(o, "cpu"), 0.0);
  EXPECT_EQ(clock_warmup_line(o, "cpu"), "");
  o.clock_warmup = "12.5";
  EXPECT_EQ(clock_warmup_ms(o, "cpu"), 12.5);
  o.clock_warmup = "0";
  EXPECT_EQ(clock_warmup_ms(o, "discrete"), 0.0);
  for (const char* bad : {"-1", "abc", "5ms", "", "nan", "inf", "1e400"}) {
    o.clock_warmup = bad;
    try {
      clock_warmup_ms(o, "discrete");
      ADD_FAILURE() << "accepted " << bad;
    } catch (const Error& e) {
      EXPECT_EQ(e.code(), ErrorCode::invalid_argument);
      EXPECT_EQ(std::string(e.what()), std::string("--clock-warmup-ms: \"") + bad +
                                           "\" is not auto or a number of milliseconds, 0 or more");
    }
  }
}

TEST_F(BenchTiming, KeepDeviceBusyReturnsAtOnceWithoutATime) {
  using Ms = std::chrono::duration<double, std::milli>;
  const auto start = std::chrono::steady_clock::now();
  keep_device_busy(ctx(), 0);
  keep_device_busy(ctx(), -5);
  EXPECT_LT(Ms(std::chrono::steady_clock::now() - start).count(), 5.0);
  const auto busy = std::chrono::steady_clock::now();
  keep_device_busy(ctx(), 20);
  EXPECT_GE(Ms(std::chrono::steady_clock::now() - busy).count(), 20.0);
}

TEST(BenchSuites, AllRunsEverySuiteInTurn) {
  const auto names = bench_suite_names("all");
  EXPECT_EQ(names, (std::vector<std::string>{"standard", "ragged", "dtypes", "blocks", "long", "lengths", "groups", "latency"}));
  size_t cases = 0;
  for (const auto& n : names) cases += bench_suite(n).size();
  EXPECT_EQ(bench_suite("all").size(), cases);
  EXPECT_EQ(bench_suite_names("dtypes"), (std::vector<std::string>{"dtypes"}));
  try {
    bench_suite_names("fast");
    ADD_FAILURE() << "an unknown suite was accepted";
  } catch (const Error& e) {
    EXPECT_EQ(e.code(), ErrorCode::invalid_argument);
    EXPECT_NE(std::string(e.what()).find("--suite: unknown suite \"fast\""), std::string::npos) << e.what();
  }
}

// --kv-layout moves every case's pools to the layout, naming the case after it; a bad name is
// refused naming the option.
TEST(BenchSuites, KvLayoutMovesEveryCase) {
  const auto standard = bench_suite("standard");
  for (const char* layout : {"nhd", "hnd"}) {
    const auto cases = with_kv_layout(standard, layout);
    ASSERT_EQ(cases.size(), standard.size());
    for (size_t i = 0; i < cases.size(); ++i) {
      EXPECT_EQ(cases[i].kv_layout, *parse_kv_layout(layout));
      EXPECT_EQ(cases[i].name, standard[i].name + "-" + layout);
    }
  }
  const auto vllm = with_kv_layout(standard, "vllm");
  EXPECT_EQ(vllm.front().name, standard.front().name);
  EXPECT_EQ(vllm.front().kv_layout, KvLayout::vllm);
  EXPECT_EQ(with_kv_layout(standard, "").front().kv_layout, KvLayout::vllm);
  try {
    with_kv_layout(standard, "nchw");
    ADD_FAILURE() << "an unknown layout was accepted";
  } catch (const Error& e) {
    EXPECT_EQ(e.code(), ErrorCode::invalid_argument);
    EXPECT_NE(std::string(e.what()).find("--kv-layout: \"nchw\""), std::string::npos) << e.what();
  }
}

// Two made-up runs of the JSON the bench writes: one disturbed from round 2 on, one steady.
std::string run_json(bool arena, double after, double round2_us) {
  const bool moved = bandwidth_disturbed(4500e9, after);
  const double spread = round_spread({250.0, round2_us});
  const bool differs = spread > kStableTolerance;
  return "{\"read_bandwidth_bytes_per_second\": 4.5e12, \"arena\": " + std::string(arena ? "true" : "false") +
         ", \"rounds\": 2, \"disturbed\": " + (moved || differs ? "true" : "false") +
         ", \"suite_runs\": [{\"suite\": \"dtypes\", \"round\": 1, \"read_change\": 0.001, \"disturbed\": false}, "
         "{\"suite\": \"dtypes\", \"round\": 2, \"read_change\": " + std::to_string((after - 4500e9) / 4500e9) +
         ", \"disturbed\": " + (moved ? "true" : "false") +
         "}], \"case_rounds\": [{\"suite\": \"dtypes\", \"name\": \"batch256-f16\", \"median_us\": [250.0, " +
         std::to_string(round2_us) + "], \"pool_read_bytes_per_second\": [4.41e12, 2.25e12], \"spread\": " +
         std::to_string(spread) + ", \"disturbed\": " + (differs ? "true" : "false") + "}], \"cases\": []}";
}

// Runs scripts/NAME with `args` (each quoted), stdout and stderr together: its exit status and
// output. The source tree: VKPAGED_SOURCE_DIR where the tests run away from it (scripts/gpu-test.sh
// sets it), else the one the tests were built from.
struct ScriptRun {
  int status = -1;
  std::string out;
};
ScriptRun run_script(const std::string& name, const std::vector<std::string>& args) {
  const char* source_dir = std::getenv("VKPAGED_SOURCE_DIR");
  const auto root = source_dir != nullptr && *source_dir != '\0'
                        ? std::filesystem::path(source_dir)
                        : std::filesystem::path(VKPAGED_TEST_SOURCE_ROOT);
  const auto script = root / "scripts" / name;
  EXPECT_TRUE(std::filesystem::exists(script)) << script;
  std::string command = "'" + vkpaged::test::python_path() + "' '" + script.string() + "'";
  for (const auto& a : args) command += " '" + a + "'";
  FILE* pipe = popen((command + " 2>&1").c_str(), "r");
  ScriptRun r;
  if (pipe == nullptr) return r;
  char buffer[4096];
  while (size_t n = std::fread(buffer, 1, sizeof(buffer), pipe)) r.out.append(buffer, n);
  const int status = pclose(pipe);
  r.status = WIFEXITED(status) ? WEXITSTATUS(status) : -1;
  return r;
}

TEST(BenchStabilityScript, ComparesRunsByWhereTheirBuffersLived) {
  const std::string python = vkpaged::test::python_path();
  if (!std::filesystem::exists(python)) GTEST_SKIP() << python << " is not available";
  const auto dir = std::filesystem::temp_directory_path() / ("vkpaged_bench_stability_" + std::to_string(::getpid()));
  std::filesystem::create_directories(dir);
  std::ofstream(dir / "a.json") << run_json(false, 2300e9, 480.0);
  std::ofstream(dir / "b.json") << run_json(true, 4490e9, 251.0);
  const ScriptRun run = run_script("bench_stability.py", {"--compare", (dir / "a.json").string(), (dir / "b.json").string()});
  const std::string& out = run.out;
  EXPECT_EQ(run.status, 0) << out;
  std::filesystem::remove_all(dir);
  EXPECT_NE(out.find("a.json           per-case rounds 2  read  4500.0 GB/s  after: +0.1% -48.9%  disturbed suite runs "
                     "1/2, cases differing 1/1, max spread 92.0%"),
            std::string::npos)
      << out;
  EXPECT_NE(out.find("b.json           arena    rounds 2  read  4500.0 GB/s  after: +0.1% -0.2%  disturbed suite runs "
                     "0/2, cases differing 0/1, max spread 0.4%"),
            std::string::npos)
      << out;
  EXPECT_NE(out.find("  a.json           per-case 250.0 480.0 (92.0%) | pools 98 50  DISTURBED\n"), std::string::npos) << out;
  EXPECT_NE(out.find("  b.json           arena    250.0 251.0 (0.4%) | pools 98 50\n"), std::string::npos) << out;
  EXPECT_NE(out.find("summary: per-case: 1 of 1 runs disturbed\n"), std::string::npos) << out;
  EXPECT_NE(out.find("summary: arena: 0 of 1 runs disturbed\n"), std::string::npos) << out;
}

// scripts/bench_clocks.py on made-up samples: 345 MHz for the first second, 1980 after, one
// sample every 100 ms, written in local time as nvidia-smi writes them; four cases timed at the
// low clock, across the rise, at the high clock, and between two samples.
TEST(BenchClocksScript, PlacesEachCaseAmongTheSamplesAndFlagsTheOnesTimedAtALowClock) {
  const std::string python = vkpaged::test::python_path();
  if (!std::filesystem::exists(python)) GTEST_SKIP() << python << " is not available";
  const auto dir = std::filesystem::temp_directory_path() / ("vkpaged_bench_clocks_" + std::to_string(::getpid()));
  std::filesystem::create_directories(dir);
  const double t0 = 1.8e9;  // seconds since the epoch, a whole second
  {
    std::ofstream csv(dir / "clocks.csv");
    for (int i = 0; i <= 20; ++i) {
      const std::time_t whole = std::time_t(t0) + i / 10;
      char stamp[32];
      std::strftime(stamp, sizeof(stamp), "%Y/%m/%d %H:%M:%S", std::localtime(&whole));
      csv << stamp << "." << (i % 10) << "00, " << (i < 10 ? 345 : 1980) << ", 2619, 40, 120.5\n";
    }
    csv << "not a sample\n";
  }
  auto timed_case = [&](const std::string& name, double median, double timed, double end, int round) {
    return "{\"name\": \"" + name + "\", \"round\": " + std::to_string(round) + ", \"median_us\": " +
           std::to_string(median) + ", \"skipped\": \"\", \"wall_clock_s\": {\"warmup\": " + std::to_string(t0) +
           ", \"timed\": " + std::to_string(t0 + timed) + ", \"end\": " + std::to_string(t0 + end) + "}}";
  };
  std::ofstream(dir / "run.json") << "{\"cases\": [" << timed_case("low", 160.0, 0.2, 0.3, 1) << ", "
                                  << timed_case("rising", 90.0, 0.95, 1.2, 1) << ", " << timed_case("high", 47.0, 1.5, 1.6, 2)
                                  << ", " << timed_case("between", 35.0, 1.76, 1.77, 1)
                                  << ", {\"name\": \"skipped\", \"skipped\": \"too large\"}]}";
  const std::string csv = (dir / "clocks.csv").string(), json = (dir / "run.json").string();
  const ScriptRun plain = run_script("bench_clocks.py", {csv, json});
  const ScriptRun failing = run_script("bench_clocks.py", {csv, json, "--fail-on-low"});
  const ScriptRun missing = run_script("bench_clocks.py", {(dir / "none.csv").string(), json});
  std::filesystem::remove_all(dir);
  EXPECT_EQ(plain.status, 0) << plain.out;
  EXPECT_EQ(failing.status, 1) << failing.out;
  EXPECT_EQ(missing.status, 2) << missing.out;
  const std::string& out = plain.out;
  EXPECT_NE(out.find("bench_clocks: 21 samples, highest SM clock 1980 MHz; 4 cases, 1 timed wholly below 1782 MHz\n"),
            std::string::npos)
      << out;
  auto line_of = [&](const std::string& label) {
    const size_t at = out.find(json + "  " + label + " ");
    return at == std::string::npos ? std::string() : out.substr(at, out.find('\n', at) - at);
  };
  EXPECT_NE(line_of("low (round 1)").find("160.0 us  SM       345 MHz  LOW"), std::string::npos) << out;
  EXPECT_NE(line_of("rising (round 1)").find("90.0 us  SM  345-1980 MHz  rising"), std::string::npos) << out;
  const std::string high = line_of("high (round 2)");
  EXPECT_NE(high.find("47.0 us  SM      1980 MHz"), std::string::npos) << out;
  EXPECT_EQ(high.find("LOW"), std::string::npos) << high;
  EXPECT_EQ(high.find("rising"), std::string::npos) << high;
  EXPECT_NE(line_of("between (round 1)").find("35.0 us  SM      1980 MHz"), std::string::npos) << out;
  EXPECT_EQ(out.find("skipped"), std::string::npos) << "a skipped case has no line\n" << out;
}

// scripts/mla_phase_clocks.py on made-up dumps of the phase-clocks build: two requests of 32 heads
// (four workgroups, two of them at once on SM 3, two one after the other on SM 5), and a case
// whose workgroup wrote no record.
TEST(MlaPhaseClocksScript, SumsEachPhaseOfTheKeyTilesAndFindsTheWorkgroupsAnSmHeldAtOnce) {
  const std::string python = vkpaged::test::python_path();
  if (!std::filesystem::exists(python)) GTEST_SKIP() << python << " is not available";
  const auto dir = std::filesystem::temp_directory_path() / ("vkpaged_mla_phases_" + std::to_string(::getpid()));
  std::filesystem::create_directories(dir / "empty");
  constexpr size_t kRowWords = 512 / 2;  // an output row: 512 bf16
  std::vector<uint32_t> words(2 * 32 * kRowWords, 0u);
  struct Workgroup {
    uint32_t sm, start_ns, end_ns;
  };
  const Workgroup workgroups[4] = {{3, 1000, 11000}, {3, 2000, 12000}, {5, 1000, 11000}, {5, 11000, 21000}};
  for (uint32_t i = 0; i < 4; ++i) {  // request i / 2, heads 16 (i % 2) on: row 16 i
    uint32_t* r = &words[16 * i * kRowWords];
    const uint32_t record[17] = {0x50484153u, workgroups[i].sm, workgroups[i].start_ns, 0, workgroups[i].end_ns, 0,
                                 4,           20000,            1000, 1000, 0, 2000, 500, 500, 1000, 1000, 7};
    std::copy(std::begin(record), std::end(record), r);
  }
  std::ofstream(dir / "r2-4k-h32-bf16-single.bin", std::ios::binary)
      .write(reinterpret_cast<const char*>(words.data()), std::streamsize(words.size() * 4));
  const std::vector<uint32_t> blank(16 * kRowWords, 0u);
  std::ofstream(dir / "r1-4k-h16-fp8_e4m3-single.bin", std::ios::binary)
      .write(reinterpret_cast<const char*>(blank.data()), std::streamsize(blank.size() * 4));
  const ScriptRun run = run_script("mla_phase_clocks.py", {dir.string()});
  const ScriptRun empty = run_script("mla_phase_clocks.py", {(dir / "empty").string()});
  std::filesystem::remove_all(dir);
  EXPECT_EQ(run.status, 0) << run.out;
  EXPECT_EQ(empty.status, 2) << empty.out;
  const std::string& out = run.out;
  EXPECT_NE(out.find("r1-4k-h16-fp8_e4m3-single: 1 workgroups without a record\n"), std::string::npos) << out;
  EXPECT_NE(out.find("r2-4k-h32-bf16-single: 4 workgroups on 2 SMs, at most 2 at once on one; span 20.0 us, a workgroup "
                     "10.0-10.0 us (median 10.0); 4.0 key tiles each; SM clock 2.000 GHz\n"),
            std::string::npos)
      << out;
  EXPECT_NE(out.find("  cycles per key tile: load 250 (20%), store 0 (0%), scores 500 (40%), max 125 (10%), p 125 (10%), "
                     "values 250 (20%); all 1250\n"),
            std::string::npos)
      << out;
  EXPECT_NE(out.find("  cycles per workgroup: setup 1000, epilogue 1000, all 20000\n"), std::string::npos) << out;
}

}  // namespace
}  // namespace vkpaged::cli
