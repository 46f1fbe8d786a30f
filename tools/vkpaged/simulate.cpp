// The simulation's scheduler: continuous batching over a BlockManager with prefix caching, as
// vLLM's does it. Each step
//   1. every running sequence appends its next token (a new block when its last one is full);
//      when no block is free, the newest running sequence is preempted (freed, requeued at the
//      front, recomputed on readmission) until the append fits;
//   2. if nothing was preempted, waiting requests are admitted in order while can_allocate says
//      the prompt (and its first token) fits above the watermark; their uncached prompt tokens
//      are prefilled, and they append their first token;
//   3. the GPU runs the copy-on-write copies, reshape_and_cache of every new token in every layer
//      and decode attention of every layer over the batch;
//   4. requests that generated their output length are freed.
#include "simulate.hpp"

#include <fmt/format.h>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <deque>

#include "progress_bar.hpp"
#include "simulate_gpu.hpp"
#include "vkpaged/block_manager.hpp"
#include "vkpaged/error.hpp"

namespace vkpaged::cli {

namespace {

constexpr double kWatermark = 0.01;

[[noreturn]] void refuse(const std::string& message) { throw Error(ErrorCode::invalid_argument, message); }

DType parse_query_dtype(const std::string& name) {
  const auto dtype = parse_dtype(name);
  if (!dtype || !is_float_dtype(*dtype)) refuse(fmt::format("--dtype: '{}' is not f32, f16 or bf16", name));
  return *dtype;
}

DType parse_cache_dtype(const std::string& name, DType query) {
  if (name == "auto") return query;
  if (name == "fp8_e4m3") return DType::fp8_e4m3;
  if (name == "fp8_e5m2") return DType::fp8_e5m2;
  refuse(fmt::format("--kv-dtype: '{}' is not auto, fp8_e4m3 or fp8_e5m2", name));
}

// Checks the options and sizes the cache (no allocation yet).
SimGpuShape setup(const SimulateArgs& a, const DeviceInfo& device) {
  if (a.device == "cpu")
    refuse("--device: the simulation runs on a Vulkan device; the CPU reference is what it checks against");
  if (a.requests == 0) refuse("--requests: must be at least 1");
  if (a.max_prompt == 0) refuse("--max-prompt: must be at least 1");
  if (a.max_output == 0) refuse("--max-output: must be at least 1");
  if (uint64_t(a.max_prompt) + a.max_output > (1u << 24))
    refuse(fmt::format("--max-prompt: {} plus --max-output {} exceeds 2^24 tokens", a.max_prompt, a.max_output));
  if (!(a.arrival_rate > 0.0) || !std::isfinite(a.arrival_rate))
    refuse(fmt::format("--arrival-rate: {} is not a positive number of requests per step", a.arrival_rate));
  if (a.max_batch == 0) refuse("--max-batch: must be at least 1");
  if (a.block_size == 0) refuse("--block-size: must be at least 1");
  if (a.heads == 0 || a.kv_heads == 0 || a.heads % a.kv_heads != 0)
    refuse(fmt::format("--heads: {} is not a positive multiple of --kv-heads {}", a.heads, a.kv_heads));
  if (a.blocks > 0 && a.budget_mb > 0) refuse("--blocks and --budget-mb: give one of them");
  if (a.budget_mb < 0 || !std::isfinite(a.budget_mb)) refuse(fmt::format("--budget-mb: {} is not a size", a.budget_mb));

  SimGpuShape s;
  s.query_dtype = parse_query_dtype(a.dtype);
  s.cache.dtype = parse_cache_dtype(a.kv_dtype, s.query_dtype);
  s.cache.num_layers = a.layers;
  s.cache.num_kv_heads = a.kv_heads;
  s.cache.head_size = a.head_size;
  s.cache.block_size = a.block_size;
  s.num_heads = a.heads;
  s.max_batch = a.max_batch;
  s.max_blocks_per_seq = blocks_for_tokens(uint64_t(a.max_prompt) + a.max_output, a.block_size);
  if (a.budget_mb > 0)
    s.size.budget_bytes = uint64_t(a.budget_mb * double(1 << 20));
  else
    s.size.num_blocks = a.blocks > 0 ? a.blocks : 256;
  KvCache::validate(s.cache);  // its messages name D, x and the dtype
  const char* size_option = a.budget_mb > 0 ? "--budget-mb" : "--blocks";
  KvCacheSizing z;
  try {
    z = KvCache::plan(device, s.cache, s.size);  // the device's limits, before anything is allocated
  } catch (const Error& e) {
    throw Error(e.code(), fmt::format("{}: {}", size_option, e.what()));
  }
  const uint32_t usable = z.num_blocks - uint32_t(kWatermark * z.num_blocks);
  if (s.max_blocks_per_seq > usable)
    refuse(
        fmt::format("{}: {} blocks cannot hold one request of --max-prompt {} + --max-output {} tokens ({} blocks of "
                    "{} tokens, above a watermark of {} blocks)",
                    size_option, z.num_blocks, a.max_prompt, a.max_output, s.max_blocks_per_seq, a.block_size,
                    z.num_blocks - usable));
  return s;
}

std::string check_line(uint64_t step, const SimCheck& c) {
  std::string line = fmt::format("step {}: check of layer {} ({} sequences) {}: max |error| {:.2e} (tolerance {:.0e})",
                                 step, c.layer, c.sequences, c.passed ? "passed" : "FAILED", c.max_error, c.tolerance);
  if (c.status) line += fmt::format(", shader status {:#x}", c.status);
  return line;
}

}  // namespace

SimulateReport simulate(Context& context, const SimulateArgs& a, std::ostream& progress, bool progress_is_tty) {
  const SimGpuShape shape = setup(a, context.device_info());
  const std::vector<SimRequest> requests = make_workload(a);
  SimGpu gpu(context, shape);
  const uint32_t N = gpu.num_blocks(), B = a.block_size, M = shape.max_blocks_per_seq;
  const uint32_t max_batch = std::min(a.max_batch, N);
  BlockManagerOptions options;
  options.watermark = kWatermark;
  options.enable_prefix_caching = true;
  BlockManager blocks(int32_t(N), int32_t(B), options);

  SimulateReport report;
  report.device = context.device_info().name;
  report.cache_shape = shape.cache;
  report.cache = gpu.cache().sizing();
  report.max_blocks_per_seq = M;
  report.plan = gpu.plan_description(max_batch);
  report.requests = a.requests;
  report.gpu_timestamps = context.device_info().timestamps;

  const size_t R = requests.size();
  std::vector<std::vector<int32_t>> tokens(R);  // prompt, then what was generated so far
  std::vector<uint32_t> generated(R, 0);
  std::vector<bool> preempted_before(R, false);
  for (size_t r = 0; r < R; ++r) tokens[r] = requests[r].prompt;
  std::deque<size_t> waiting;
  std::vector<size_t> running;  // in admission order: the last is the first to be preempted
  size_t next_arrival = 0;

  ProgressBar bar(progress, progress_is_tty, a.requests);
  const auto start = std::chrono::steady_clock::now();
  double live_sum = 0, running_sum = 0;
  std::vector<int32_t> fill(N, 0);  // live tokens per block, within one step
  std::vector<BlockCopy> copies;
  std::vector<int64_t> slots;

  for (uint64_t step = 0; report.finished < a.requests; ++step) {
    while (next_arrival < R && requests[next_arrival].arrival_step <= step) waiting.push_back(next_arrival++);
    if (running.empty() && waiting.empty()) {
      step = requests[next_arrival].arrival_step - 1;  // idle until the next arrival
      continue;
    }
    copies.clear();
    slots.clear();
    auto append = [&](size_t r) {
      const int32_t token = generated_token(requests[r], tokens[r].size());
      const AppendResult result = blocks.append_token(r, token);
      if (result.copy) copies.push_back(*result.copy);
      slots.push_back(result.slot);
      tokens[r].push_back(token);
    };

    // 1. Running sequences grow; preempt the newest while a block is missing.
    bool preempted = false;
    for (size_t i = 0; i < running.size(); ++i) {
      const size_t r = running[i];
      bool self = false;
      while (!blocks.can_append(r)) {
        const size_t victim = running.back();
        blocks.preempt(victim);
        running.pop_back();
        waiting.push_front(victim);
        preempted_before[victim] = true;
        ++report.preemptions;
        preempted = true;
        if (victim == r) {
          self = true;
          break;
        }
      }
      if (self) break;
      append(r);
    }

    // 2. Admission, unless this step had to preempt.
    while (!preempted && !waiting.empty() && running.size() < max_batch) {
      const size_t r = waiting.front();
      std::vector<int32_t> probe = tokens[r];  // the prompt and the token this step appends
      probe.push_back(generated_token(requests[r], probe.size()));
      if (blocks.can_allocate(probe) != AdmissionStatus::ok) break;
      const int32_t len = int32_t(tokens[r].size());
      const int32_t cached = blocks.add_sequence(r, tokens[r]);
      const std::vector<int64_t> prefill = blocks.slot_mapping(r, cached, len - cached);
      slots.insert(slots.end(), prefill.begin(), prefill.end());
      report.prefill_tokens += uint64_t(len - cached);
      if (preempted_before[r]) report.recomputed_tokens += uint64_t(len - cached);
      waiting.pop_front();
      running.push_back(r);
      append(r);
    }
    if (running.empty())
      throw Error(ErrorCode::internal, fmt::format("simulate: step {}: nothing runs and request {} cannot be admitted",
                                                   step, waiting.empty() ? 0 : waiting.front()));

    // 3. The GPU: copies, cache writes, decode.
    const uint32_t S = uint32_t(running.size());
    report.copy_on_write += copies.size();
    gpu.write(copies, slots, S, step);
    std::vector<uint64_t> ids(running.begin(), running.end());
    const BatchArrays batch = blocks.build_batch(ids, int32_t(M));
    report.decode_ns += gpu.decode(batch, S);
    ++report.busy_steps;

    // Memory: tokens held by the blocks in use (a shared block counts once).
    uint64_t live = 0;
    std::vector<int32_t> touched;
    for (uint32_t s = 0; s < S; ++s)
      for (int32_t j = 0; j * int32_t(B) < batch.context_lens[s]; ++j) {
        const int32_t block = batch.block_tables[size_t(s) * M + size_t(j)];
        const int32_t held = std::min<int32_t>(int32_t(B), batch.context_lens[s] - j * int32_t(B));
        if (fill[size_t(block)] == 0) touched.push_back(block);
        fill[size_t(block)] = std::max(fill[size_t(block)], held);
      }
    for (int32_t block : touched) {
      live += uint64_t(fill[size_t(block)]);
      fill[size_t(block)] = 0;
    }
    const int32_t in_use = blocks.usage().in_use;
    if (size_t(in_use) != touched.size())  // no sequence is swapped out, so the tables hold every block in use
      throw Error(ErrorCode::internal, fmt::format("simulate: step {}: the block tables name {} blocks, the block "
                                                   "manager counts {} in use",
                                                   step, touched.size(), in_use));
    live_sum += double(live) / (double(in_use) * B);
    running_sum += S;
    report.max_running = std::max(report.max_running, S);

    // Every few steps, a few rows of one layer against the CPU reference.
    if (a.check_every > 0 && report.busy_steps % a.check_every == 0) {
      const auto check_start = std::chrono::steady_clock::now();
      std::vector<uint32_t> rows = {0, S / 3, 2 * S / 3, S - 1};
      rows.erase(std::unique(rows.begin(), rows.end()), rows.end());
      const SimCheck c = gpu.check(uint32_t(report.checks % a.layers), rows);
      ++report.checks;
      report.checks_failed += !c.passed;
      report.max_error = std::max(report.max_error, c.max_error);
      report.tolerance = c.tolerance;
      if (!progress_is_tty || !c.passed)
        bar.note(fmt::format("{}; {} of {} finished, {} running, {} waiting, {} preemptions", check_line(step, c),
                             report.finished, a.requests, S, waiting.size(), report.preemptions));
      report.check_seconds += std::chrono::duration<double>(std::chrono::steady_clock::now() - check_start).count();
    }

    // 4. Every running sequence generated a token; the finished ones leave.
    report.generated_tokens += S;
    std::vector<size_t> still;
    for (size_t r : running) {
      if (++generated[r] == requests[r].output_len) {
        blocks.free_sequence(r);
        ++report.finished;
      } else {
        still.push_back(r);
      }
    }
    running.swap(still);
    report.steps = step + 1;
    if (!progress_is_tty && a.check_every == 0 && report.busy_steps % 64 == 0)  // else the checks' lines
      bar.note(fmt::format("step {}: {} of {} finished, {} running, {} waiting, {} preemptions", step, report.finished,
                           a.requests, running.size(), waiting.size(), report.preemptions));
    bar.update(report.finished, fmt::format("step {}, {} running, {} waiting, {} preempted", step, running.size(),
                                            waiting.size(), report.preemptions));
  }
  bar.finish();
  report.wall_seconds =
      std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count() - report.check_seconds;

  const PrefixCacheStats stats = blocks.prefix_cache_stats();
  report.prefix_queried_tokens = stats.queried_tokens;
  report.prefix_hit_tokens = stats.hit_tokens;
  if (report.busy_steps > 0) {
    report.live_fraction = live_sum / double(report.busy_steps);
    report.average_running = running_sum / double(report.busy_steps);
  }
  report.reserve = simulate_reserve_policy(requests, N, B, a.max_output, max_batch);
  return report;
}

}  // namespace vkpaged::cli
