// SPDX-License-Identifier: Apache-2.0
#pragma once
// The pieces `vkpaged bench` is made of (command_bench.cpp runs them): each case prepared once
// for the run, its buffers (its own allocations or views into the arena: the MLA suites' buffers
// too), one timed run of it, and the JSON of the results.
#include <functional>
#include <optional>
#include <string>
#include <vector>

#include "bench.hpp"
#include "vkpaged/context.hpp"
#include "vkpaged/decode.hpp"
#include "vkpaged/utilities.hpp"

namespace vkpaged::cli {

// One case's lengths, block table and plan, made once for the run: every round reuses them.
struct PreparedCase {
  std::string suite;
  BenchCase config;
  std::vector<int32_t> lens;
  std::vector<int32_t> table;  // [batch, M], blocks in random order
  uint32_t max_blocks = 0;     // M
  uint64_t blocks = 0, pool_bytes = 0, kv_bytes = 0;
  DecodeShape shape;
  std::optional<DecodePlan> plan;
  std::string skipped;  // why the case does not run, if it does not
};

// The case's geometry, its shuffled table and its plan. A case that cannot run on the device
// (pools past maxStorageBufferRange or device memory, or a kernel --kernel matrix cannot give)
// comes back with `skipped` set. Throws vkpaged::Error for other refusals.
PreparedCase prepare_case(Context& ctx, const std::string& suite, const BenchCase& c, const DecodeOptions& options);

// The views of one case's buffers (CaseBuffer order): into the arena, or into allocations of
// its own that live as long as this object (the case).
enum CaseBuffer : size_t { kKey, kValue, kQuery, kOutput, kTables, kLengths, kScratch, kOrder, kCounters, kBufferCount };
struct CaseMemory {
  std::vector<BufferView> views;
  std::vector<DeviceBuffer> owned;
};
CaseMemory own_memory(Context& ctx, const PreparedCase& p);
CaseMemory arena_memory(const Context& ctx, const DeviceBuffer& arena, const PreparedCase& p);
// The arena's size for these cases: the largest one's buffers laid out as arena_memory lays them.
size_t arena_bytes(const Context& ctx, const std::vector<PreparedCase>& cases);

// The same for any suite's case, given its buffers' sizes in order, the first `pools` of them its
// pools (the decode suites' key and value pools, the MLA suites' one pool): each an allocation of
// its own; or views into the arena, each pool at a 2 MiB boundary, the rest at the small
// alignment (256 bytes or the device's storage-buffer offset alignment); and the arena bytes
// that layout ends at.
CaseMemory own_memory(Context& ctx, const std::vector<size_t>& sizes);
CaseMemory arena_memory(const Context& ctx, const DeviceBuffer& arena, const std::vector<size_t>& sizes, size_t pools);
size_t arena_bytes(const Context& ctx, const std::vector<size_t>& sizes, size_t pools);
// The run's arena (--arena): one allocation of `bytes`, the largest case's arena_bytes. Throws
// vkpaged::Error naming --arena and the bytes where the device cannot allocate it.
DeviceBuffer create_arena(Context& ctx, size_t bytes);
// The line the bench prints about where the cases' buffers live: in `arena`, or (null) in
// allocations of each case's own (--no-arena).
std::string buffers_line(const DeviceBuffer* arena);

// What every case of the run shares: the decode options (for --timeline), the flush (with
// --flush-caches), the sinks of the pools' streaming reads.
struct RunShared {
  DecodeOptions options;
  const StreamingRead* flush = nullptr;
  BufferView key_sink, value_sink;
};

// The decode timed over the case's buffers (the data filled anew), then the streaming read of
// its pools. A skipped case comes back as it was prepared.
BenchResult run_case(Context& ctx, const PreparedCase& p, const CaseMemory& m, int round, const BenchOptions& o,
                     const RunShared& shared);

// What the JSON says of the run besides its results.
struct BenchJsonRun {
  double bandwidth = 0;  // the process's first measure
  size_t flush_bytes = 0;
  bool warm_start = false;
  double clock_warmup_ms = 0;
  bool arena = false;
  size_t arena_bytes = 0;
  int rounds = 1;
};
void write_bench_json(const std::string& path, const DeviceInfo& dev, const BenchJsonRun& run,
                      const std::vector<BenchResult>& results, const std::vector<SuiteRun>& suites,
                      const std::vector<CaseRounds>& rounds);

}  // namespace vkpaged::cli
