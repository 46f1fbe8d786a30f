#pragma once
// `vkpaged bench`: decode attention timed with GPU timestamps over the suites of
// docs/performance-targets.md, against the read bandwidth measured on the same device.
#include <cstdint>
#include <string>
#include <vector>

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
};

struct BenchResult {
  BenchCase config;
  std::string path;      // plan.describe()
  uint64_t kv_bytes = 0; // keys and values actually read
  double median_us = 0, min_us = 0, max_us = 0;
  double order_us = 0;  // longest first: median time of record_decode_order, made once per step (not in median_us)
  double kv_bytes_per_second() const { return median_us > 0 ? double(kv_bytes) / (median_us * 1e-6) : 0.0; }
  std::string skipped;  // why the case did not run, if it did not
};

struct BenchOptions {
  std::string suite = "standard";  // standard, ragged, dtypes, blocks, long, quick, all
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
};

// The DecodeOptions of every case: --split, --partition-tokens, --kernel, --order, --merge. Throws
// vkpaged::Error naming the option for a bad value.
DecodeOptions bench_decode_options(const BenchOptions& options);
// Cases of a suite by name; throws vkpaged::Error for an unknown name.
std::vector<BenchCase> bench_suite(const std::string& name);
// The cases with --cache-dtype applied ("" leaves them); throws vkpaged::Error for a name that is
// not a cache dtype.
std::vector<BenchCase> with_cache_dtype(std::vector<BenchCase> cases, const std::string& cache_dtype);
// Runs the suite and prints the table; returns the process exit status.
int run_bench(const BenchOptions& options);
// --suite cache-write (a 4096-token step) and cache-write-quick (lavapipe-sized): the fused
// rotary cache write against the two-kernel path, per cache dtype and layout
// (bench_cache_write.cpp). run_bench hands these suites to it.
bool is_cache_write_suite(const std::string& suite);
int run_cache_write_bench(const BenchOptions& options);
// Draws the share of measured bandwidth per case as an SVG bar chart.
std::string bench_chart_svg(const std::vector<BenchResult>& results, double bandwidth, const std::string& title);

}  // namespace vkpaged::cli
