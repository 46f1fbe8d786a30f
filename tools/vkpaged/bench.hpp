// SPDX-License-Identifier: Apache-2.0
#pragma once
// `vkpaged bench`: decode attention timed with GPU timestamps over the suites of
// docs/performance-targets.md, against the read bandwidth measured on the same device.
#include <cstdint>
#include <string>
#include <vector>

#include "vkpaged/context.hpp"
#include "vkpaged/decode.hpp"

namespace vkpaged::cli {

struct BenchCase {
  std::string name;
  uint32_t batch = 1;
  uint32_t context = 1024;
  uint32_t heads = 32;
  uint32_t kv_heads = 8;
  uint32_t head_size = 128;
  uint32_t block_size = 16;
  DType query_dtype = DType::f16;
  DType cache_dtype = DType::f16;
  bool ragged = false;  // lengths spread uniformly over [1, context]
  KvLayout kv_layout = KvLayout::vllm;  // the pools' layout (--kv-layout)
};

// When a case's clock warm-up began, when its timed repetitions began and when they ended, in
// seconds since the Unix epoch: to line a case up with clock samples taken beside the run
// (scripts/h200-session.sh mla-clocks: nvidia-smi's). Each suite's JSON gives it as wall_clock_s.
struct WallClock {
  double warmup_s = 0, timed_s = 0, end_s = 0;
};

// A case's timed repetitions (time_repetitions, bench_timing.hpp): every suite's result holds
// them, as this base.
struct RepetitionTimes {
  double median_us = 0, min_us = 0, max_us = 0;
  WallClock wall;
};

struct BenchResult : RepetitionTimes {
  BenchCase config;
  std::string suite;     // the suite the case belongs to (a part of `all`)
  int round = 1;         // with --repeat, which round of the suite (from 1)
  std::string path;      // plan.describe()
  uint64_t kv_bytes = 0; // keys and values actually read
  double order_us = 0;  // longest first: median time of record_decode_order, made once per step (not in median_us)
  // The streaming read (the probe's kernel) over the case's own key and value pools, both
  // whole, after the case was timed: where the decode's memory reads slower than the probe's,
  // the memory's placement is to blame, not the kernel.
  double pool_read_bytes_per_second = 0;
  double kv_bytes_per_second() const { return median_us > 0 ? double(kv_bytes) / (median_us * 1e-6) : 0.0; }
  std::string skipped;  // why the case did not run, if it did not
};

// ---- stable figures (performance-targets.md, target 7) ----

// Runs of one suite, or one case's rounds, agree when they differ by at most 3 %.
inline constexpr double kStableTolerance = 0.03;

// Whether the read bandwidth measured after a suite differs from the one measured at the start
// of the process by more than `tolerance` of the start: a fall means the GPU reads memory
// slower than when the shares' reference was measured; a rise, that the reference itself was
// measured slow. Either way the suite's figures are not comparable. False when either is not
// positive (not measured).
bool bandwidth_disturbed(double start, double after, double tolerance = kStableTolerance);
// (max - min) / min of one case's median times over the rounds; 0 for fewer than two rounds,
// or when a time is not positive.
double round_spread(const std::vector<double>& medians_us);

// The read bandwidth around one run of a suite.
struct SuiteRun {
  std::string suite;
  int round = 1;
  double read_start = 0;  // bytes per second, the process's first measure (shares are relative to it)
  double read_after = 0;  // bytes per second, measured again after the suite's last case
  bool disturbed = false; // bandwidth_disturbed(read_start, read_after)
};

// One case over the rounds of --repeat.
struct CaseRounds {
  std::string suite, name;
  std::vector<double> median_us;            // per round
  std::vector<double> pool_read_bytes_per_second;  // per round
  double spread = 0;      // round_spread(median_us)
  bool differs = false;   // spread > kStableTolerance
};

// Every case that ran (not skipped) in every round, in the order of its first round; `results`
// as run_bench makes them (round after round).
std::vector<CaseRounds> case_rounds(const std::vector<BenchResult>& results, double tolerance = kStableTolerance);

// The lines that say a run was disturbed, each on its own line and starting "disturbed: " (for
// grep): one per suite run whose read bandwidth moved (SuiteRun::disturbed), one per case
// whose rounds differ. Empty when everything agreed.
std::vector<std::string> disturbed_lines(const std::vector<SuiteRun>& suites, const std::vector<CaseRounds>& cases);

// Where a case's buffers live (the decode and MLA suites). true: one allocation (the arena) made
// once per process, sized for the largest case of the run, every case's pools, tables and small
// buffers views into it, each pool at a 2 MiB boundary. false: each case allocates its buffers
// and frees them when it ends. `--arena` and `--no-arena` choose; this line is the default.
inline constexpr bool kArenaByDefault = false;

// --clock-warmup-ms auto on a GPU: on an H100 a second of full load brought every MLA case's
// timing to the full SM clock, 300 ms not every one (bench/experiments/disturbed-runs.md).
inline constexpr double kClockWarmupMsOnGpus = 1000;

struct BenchOptions {
  std::string suite = "standard";  // standard, ragged, dtypes, blocks, long, lengths, groups, latency, quick, all
  std::string device;
  int repetitions = 30;
  int warmup = 5;
  std::string split = "auto";  // auto, single, split
  uint32_t partition_tokens = 0;
  std::string kernel = "auto";  // auto, scalar, matrix
  std::string order = "auto";   // auto, grid, longest-first
  std::string merge = "reduce-pass";  // reduce-pass or in-dispatch (DecodeMerge)
  // Every case's cache dtype instead of the suite's ("" keeps it); f32, f16 and bf16 set the
  // query's dtype too, an fp8 cache takes an f16 query.
  std::string cache_dtype;
  // The pools' layout of every case (vllm, nhd, hnd); the kernels' refusals skip a case (the
  // matrix kernel reads nhd and hnd with head sizes that are multiples of 64).
  std::string kv_layout = "vllm";
  std::string json_path;
  std::string chart_path;
  // Also record each matrix-kernel case's timeline (DecodeOptions::timeline) to DIR/<case>.bin
  // after timing it; scripts/decode_timeline.py summarises the files.
  std::string timeline_dir;
  // Read a buffer as large as the bandwidth probe (StreamingRead) before each repetition, so
  // that no case reads what the last repetition left in the GPU's caches (performance-targets.md
  // allows either a cache several times the L2 or this flush).
  bool flush_caches = false;
  // With flush_caches: record each repetition after the same decode (untimed) and the flush, in
  // one command buffer, so that the decode's pipeline has run before (on NVIDIA's driver a
  // pipeline's first dispatch in a submission is slower) while its bytes are not in the L2.
  bool warm_start = false;
  bool arena = kArenaByDefault;
  // Before each case's warm-up runs, keep the device busy for this many milliseconds of wall time
  // (keep_device_busy): a GPU left idle while the host worked (preparing the cases, checking the
  // last one on the CPU) lowers its clocks, and a short case's own repetitions do not raise them
  // again (bench/experiments/disturbed-runs.md). "auto": kClockWarmupMsOnGpus on a GPU, none on a
  // CPU device (no clocks of its own to raise); else a number of milliseconds, 0 for none.
  std::string clock_warmup = "auto";
  // Runs every suite this many times in the process (rounds), each round's cases after the last
  // round's, and reports each case's rounds and their spread.
  int repeat = 1;
  // --case: only the cases whose names contain one of these texts (every case when empty).
  std::vector<std::string> cases;
};

// Whether --case selects a case of this name (every case when no --case was given).
bool case_selected(const BenchOptions& options, const std::string& name);
// Throws vkpaged::Error naming --case and its texts: they select no case of `suite`.
[[noreturn]] void throw_no_case_selected(const BenchOptions& options, const std::string& suite);
// The cases --case selects, in their order (none, maybe).
template <class Case>
std::vector<Case> kept_cases(const BenchOptions& options, std::vector<Case> cases) {
  std::erase_if(cases, [&](const Case& c) { return !case_selected(options, c.name); });
  return cases;
}
// The same; throws (above) when it selects none.
template <class Case>
std::vector<Case> selected_cases(const BenchOptions& options, std::vector<Case> cases, const std::string& suite) {
  cases = kept_cases(options, std::move(cases));
  if (cases.empty()) throw_no_case_selected(options, suite);
  return cases;
}

// The DecodeOptions of every case: --split, --partition-tokens, --kernel, --order, --merge. Throws
// vkpaged::Error naming the option for a bad value.
DecodeOptions bench_decode_options(const BenchOptions& options);
// Cases of a suite by name; throws vkpaged::Error for an unknown name.
std::vector<BenchCase> bench_suite(const std::string& name);
// The suites `name` runs one after the other: itself, or every suite for `all`. Throws
// vkpaged::Error for an unknown name.
std::vector<std::string> bench_suite_names(const std::string& name);
// The cases with --cache-dtype applied ("" leaves them); throws vkpaged::Error for a name that is
// not a cache dtype.
std::vector<BenchCase> with_cache_dtype(std::vector<BenchCase> cases, const std::string& cache_dtype);
// Every case on the pools' layout `kv_layout` ("vllm" keeps the suite's; nhd and hnd add
// "-nhd" or "-hnd" to the names). Throws vkpaged::Error for another name.
std::vector<BenchCase> with_kv_layout(std::vector<BenchCase> cases, const std::string& kv_layout);
// Runs the suite and prints the table; returns the process exit status.
int run_bench(const BenchOptions& options);
// The byte offsets of buffers of the given sizes placed one after the other in one allocation:
// the first `large` of them each at a multiple of `large_alignment`, the others at multiples of
// `alignment`; the last element is the end of the last buffer (the allocation's size).
std::vector<size_t> arena_offsets(const std::vector<size_t>& sizes, size_t large, size_t large_alignment,
                                  size_t alignment);
// --suite cache-write (a 4096-token step) and cache-write-quick (lavapipe-sized): the fused
// rotary cache write against the two-kernel path, per cache dtype and layout
// (bench_cache_write.cpp). run_bench hands these suites to it.
bool is_cache_write_suite(const std::string& suite);
int run_cache_write_bench(const BenchOptions& options);
// --suite prefill (bench/torch_prefill_anchor.py's shapes and the mixed step of target 10) and
// prefill-quick (lavapipe-sized): multi-query attention timed, --kernel auto, scalar or matrix
// (bench_prefill.cpp). run_bench hands these suites to it.
bool is_prefill_suite(const std::string& suite);
int run_prefill_bench(const BenchOptions& options);
// --suite mla (DeepSeek's absorbed MLA decode: 1 to 128 requests at 4096 and 32768 cached tokens,
// 16 and 128 heads, bf16 and fp8 E4M3 caches), mla-prefill (prefills and chunks after a cached
// prefix: target 14's shapes) and their -quick twins (lavapipe-sized): each case timed
// beside its two limits, the cache bytes over the read bandwidth and the FLOPs over the
// cooperative-matrix ceiling, both measured in the same run, and checked against the CPU
// reference (bench_mla.cpp); each case's buffers its own or, with --arena, views into the run's
// arena (the pool at a 2 MiB boundary). run_bench hands these suites to it.
inline constexpr uint32_t kMlaKeyWidth = 576;    // Dk: 512 latent + 64 rope
inline constexpr uint32_t kMlaValueWidth = 512;  // Dv: the rows' first 512
inline constexpr uint32_t kMlaBlockSize = 64;    // FlashMLA's and vLLM's MLA block size
inline constexpr int kMlaMinRepetitions = 10;
// The check's tolerance: |got - want| <= relative * |want| + floor * max |want| (two bf16 units
// in the last place, and a thousandth of the largest value for the f32 sums).
inline constexpr double kMlaCheckRelative = 1.0 / 128;
inline constexpr double kMlaCheckFloor = 1e-3;
struct MlaBenchCase {
  std::string name;
  uint32_t requests = 1, context = 4096, heads = 16;  // context: each request's, its new tokens included
  DType cache_dtype = DType::bf16;
  uint32_t new_tokens = 1;  // query tokens per request, the last of its context (causal, bottom right)
};
struct MlaCaseBytes {
  uint64_t blocks = 0;      // N: every request's blocks
  uint64_t pool = 0;        // the pool [N, B, Dk]
  uint64_t cache_read = 0;  // every request's rows, read once
  uint64_t query = 0, output = 0;
  double flops = 0;         // 2 x H x (Dk + Dv) per (query token, key it sees) pair
};
struct MlaCheck {
  std::vector<uint32_t> requests, tokens, heads;  // checked (tokens: of each request's new ones)
  double max_error = 0, max_reference = 0;
  bool passed = false;
  double seconds = 0;  // on the host: downloads and the reference
};
// The MLA suites' names, in the order the messages list them; whether `suite` is one.
const std::vector<std::string>& mla_suite_names();
bool is_mla_suite(const std::string& suite);
// The cases of mla, mla-resident, mla-prefill or their -quick twins; Error(invalid_argument) for
// another name.
std::vector<MlaBenchCase> mla_bench_cases(const std::string& suite);
MlaCaseBytes mla_case_bytes(const MlaBenchCase& c);
// Why the case cannot run on the device, "" when it fits: its pool past maxStorageBufferRange on
// a device without buffer device addresses, or past maxMemoryAllocationSize, or its buffers past
// half the device's memory (free memory where the device reports its budget).
std::string mla_case_unfit(const MlaBenchCase& c, const DeviceInfo& dev);
int run_mla_bench(const BenchOptions& options);
// Draws the share of measured bandwidth per case as an SVG bar chart.
std::string bench_chart_svg(const std::vector<BenchResult>& results, double bandwidth, const std::string& title);

}  // namespace vkpaged::cli
