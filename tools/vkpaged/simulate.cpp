// SPDX-License-Identifier: Apache-2.0
// `vkpaged simulate`: the workload (simulate_workload.cpp), the scheduler's bookkeeping
// (simulate_scheduler.cpp) and the GPU work (simulate_gpu.cpp) step by step, with the checks:
// attention outputs (decode requests and prefill chunks) against the CPU reference every few
// steps, every swapped-in sequence against its blocks before the swap-out, every copy-on-write
// copy against the block it copied.
#include "simulate.hpp"

#include <fmt/format.h>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <map>

#include "decode_option_names.hpp"
#include "ops/block_size_rule.hpp"
#include "progress_bar.hpp"
#include "simulate_checks.hpp"
#include "simulate_gpu.hpp"
#include "simulate_scheduler.hpp"
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

DecodeOrder parse_order(const std::string& name) {
  if (const auto order = decode_order_named(name)) return *order;
  refuse(fmt::format("--order: '{}' is not auto, grid or longest-first", name));
}

const char* size_option(const SimulateArgs& a) {
  return a.budget_mb > 0 ? "--budget-mb" : a.budget_fraction != 0 ? "--budget-fraction" : "--blocks";
}

// A cache of `num_blocks` holds the longest request, and the prompt of a request forked into
// its samples with a block more each, above the watermark: else admission would wait forever.
void check_cache_holds(const SimulateArgs& a, const SimGpuShape& s, uint32_t num_blocks) {
  const uint32_t usable = num_blocks - uint32_t(kWatermark * num_blocks);
  if (s.max_blocks_per_seq > usable)
    refuse(
        fmt::format("{}: {} blocks cannot hold one request of --max-prompt {} + --max-output {} tokens ({} blocks of "
                    "{} tokens, above a watermark of {} blocks)",
                    size_option(a), num_blocks, a.max_prompt, a.max_output, s.max_blocks_per_seq, a.block_size,
                    num_blocks - usable));
  const uint32_t group_blocks = blocks_for_tokens(a.max_prompt, a.block_size) + a.max_samples;
  if (a.parallel_share > 0.0 && a.max_samples > 1 && group_blocks > usable)
    refuse(fmt::format("{}: {} blocks cannot hold a prompt of --max-prompt {} tokens forked into --max-samples {} "
                       "samples ({} blocks, above a watermark of {} blocks)",
                       size_option(a), num_blocks, a.max_prompt, a.max_samples, group_blocks, num_blocks - usable));
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
  if (!detail::is_supported_block_size(a.block_size))
    refuse(fmt::format("--block-size: {} is not {}", a.block_size, detail::kBlockSizeRule));
  if (a.heads == 0 || a.kv_heads == 0 || a.heads % a.kv_heads != 0)
    refuse(fmt::format("--heads: {} is not a positive multiple of --kv-heads {}", a.heads, a.kv_heads));
  if (!(a.parallel_share >= 0.0 && a.parallel_share <= 1.0))
    refuse(fmt::format("--parallel-share: {} is outside [0, 1]", a.parallel_share));
  if (a.max_samples == 0) refuse("--max-samples: must be at least 1");
  if (a.parallel_share > 0.0 && a.max_samples > a.max_batch)
    refuse(fmt::format("--max-samples: {} samples of one request cannot decode together within --max-batch {}",
                       a.max_samples, a.max_batch));
  if (a.preemption != "swap" && a.preemption != "recompute")
    refuse(fmt::format("--preemption: '{}' is not swap or recompute", a.preemption));
  if ((a.blocks > 0) + (a.budget_mb > 0) + (a.budget_fraction != 0) > 1)
    refuse("--blocks, --budget-mb and --budget-fraction: give one of them");
  if (a.budget_mb < 0 || !std::isfinite(a.budget_mb)) refuse(fmt::format("--budget-mb: {} is not a size", a.budget_mb));
  if (a.token_budget < a.max_batch)
    refuse(fmt::format("--token-budget: {} is below --max-batch {}: every running sequence's decode token must fit "
                       "one step",
                       a.token_budget, a.max_batch));
  const auto layout = parse_kv_layout(a.kv_layout);
  if (!layout) refuse(fmt::format("--kv-layout: '{}' is not vllm, nhd or hnd", a.kv_layout));

  SimGpuShape s;
  s.query_dtype = parse_query_dtype(a.dtype);
  s.cache.dtype = parse_cache_dtype(a.kv_dtype, s.query_dtype);
  s.order = parse_order(a.order);
  s.cache.layout = *layout;
  s.token_budget = a.token_budget;
  s.max_position = a.max_prompt + a.max_output;
  s.cache.num_layers = a.layers;
  s.cache.num_kv_heads = a.kv_heads;
  s.cache.head_size = a.head_size;
  s.cache.block_size = a.block_size;
  s.num_heads = a.heads;
  s.max_batch = a.max_batch;
  s.max_blocks_per_seq = blocks_for_tokens(uint64_t(a.max_prompt) + a.max_output, a.block_size);
  if (a.budget_mb > 0)
    s.size.budget_bytes = uint64_t(a.budget_mb * double(1 << 20));
  else if (a.budget_fraction != 0)
    s.size.budget_fraction = a.budget_fraction;  // KvCache refuses one outside (0, 1]
  else
    s.size.num_blocks = a.blocks > 0 ? a.blocks : 256;
  s.size.num_host_blocks = a.host_blocks;
  KvCache::validate(s.cache);  // its messages name D, x and the dtype
  KvCacheSizing z;
  try {
    z = KvCache::plan(device, s.cache, s.size);  // the device's limits, before anything is allocated
  } catch (const Error& e) {
    throw Error(e.code(), fmt::format("{}: {}", size_option(a), e.what()));
  }
  check_cache_holds(a, s, z.num_blocks);
  return s;
}

std::string check_line(uint64_t step, const SimCheck& c) {
  std::string line =
      fmt::format("step {}: check of layer {} ({} requests, {} tokens) {}: max |error| {:.2e} (tolerance {:.0e})", step,
                  c.layer, c.requests, c.tokens, c.passed ? "passed" : "FAILED", c.max_error, c.tolerance);
  if (c.status) line += fmt::format(", shader status {:#x}", c.status);
  return line;
}

// The step's attention call: its requests' new tokens, block tables and lengths.
SimBatch batch_of(const SimStep& work, const BlockManager& blocks, uint32_t M) {
  SimBatch b;
  b.query_starts.push_back(0);
  for (const ScheduledRequest& r : work.batch) {
    b.slots.insert(b.slots.end(), r.slots.begin(), r.slots.end());
    for (uint32_t j = 0; j < r.count; ++j) b.positions.push_back(r.first + j);
    b.query_starts.push_back(b.query_starts.back() + int32_t(r.count));
    const std::vector<int32_t> table = blocks.block_table(r.seq, int32_t(M));
    b.block_tables.insert(b.block_tables.end(), table.begin(), table.end());
    b.context_lens.push_back(int32_t(r.first + r.count));
  }
  return b;
}

// Which requests of a step a check compares: the first decode request, the first prefill
// chunk, the first chunk after a cached prefix, and the last request.
std::vector<uint32_t> requests_to_check(const SimStep& work) {
  const auto& batch = work.batch;
  const uint32_t S = uint32_t(batch.size());
  std::vector<uint32_t> picks = {0, S - 1};
  auto first = [&](auto&& pred) {
    for (uint32_t i = 0; i < S; ++i)
      if (pred(batch[i])) return picks.push_back(i);
  };
  first([](const ScheduledRequest& r) { return !r.decode; });
  first([](const ScheduledRequest& r) { return r.after_prefix; });
  std::sort(picks.begin(), picks.end());
  picks.erase(std::unique(picks.begin(), picks.end()), picks.end());
  return picks;
}

}  // namespace

SimulateReport simulate(Context& context, const SimulateArgs& a, std::ostream& progress, bool progress_is_tty) {
  const SimGpuShape shape = setup(a, context.device_info());
  const std::vector<SimRequest> requests = make_workload(a);
  SimGpu gpu(context, shape);
  check_cache_holds(a, shape, gpu.num_blocks());  // a fraction of the free memory may have shrunk since setup
  const uint32_t N = gpu.num_blocks(), B = a.block_size, M = shape.max_blocks_per_seq;
  const uint32_t max_batch = std::min(a.max_batch, N);
  BlockManagerOptions options;
  options.watermark = kWatermark;
  options.enable_prefix_caching = true;
  options.num_host_blocks = int32_t(gpu.cache().num_host_blocks());
  BlockManager blocks(int32_t(N), int32_t(B), options);
  SimSchedulerOptions scheduling;
  scheduling.max_batch = max_batch;
  scheduling.token_budget = a.token_budget;
  scheduling.chunk = a.chunk;
  scheduling.swap = a.preemption == "swap" && options.num_host_blocks > 0;
  scheduling.watermark_blocks = int32_t(kWatermark * N);
  SimScheduler scheduler(requests, blocks, scheduling);

  SimulateReport report;
  report.device = context.device_info().name;
  report.cache_shape = shape.cache;
  report.cache = gpu.cache().sizing();
  report.host_blocks = gpu.cache().num_host_blocks();
  report.swap = scheduling.swap;
  report.max_blocks_per_seq = M;
  report.token_budget = a.token_budget;
  report.chunk = a.chunk;
  report.requests = a.requests;
  for (const SimRequest& r : requests) report.sequences += r.samples();
  report.gpu_timestamps = context.device_info().timestamps;
  const bool checking = a.check_every > 0;

  ProgressBar bar(progress, progress_is_tty, a.requests);
  const auto start = std::chrono::steady_clock::now();
  double live_sum = 0, running_sum = 0;
  std::vector<int32_t> fill(N, 0);  // live tokens per block, within one step
  std::map<uint64_t, SimBlocks> swapped_out;  // a swapped-out sequence's blocks as they left
  auto status_line = [&](uint64_t step) {
    return fmt::format("step {}: {} of {} finished, {} running, {} waiting, {} swapped out, {} preemptions", step,
                       scheduler.counts().finished_requests, a.requests, scheduler.running().size(),
                       scheduler.waiting(), scheduler.swapped(), scheduler.counts().preemptions);
  };
  auto timed_check = [&](auto&& check) {
    const auto check_start = std::chrono::steady_clock::now();
    check();
    report.check_seconds += std::chrono::duration<double>(std::chrono::steady_clock::now() - check_start).count();
  };

  for (uint64_t step = 0; !scheduler.done(); ++step) {
    if (!scheduler.arrive(step)) {
      step = scheduler.next_arrival() - 1;  // idle until the next arrival
      continue;
    }
    // 1-4. Host bookkeeping: decode appends, preemptions, swap-ins, prefill chunks, admissions.
    const SimStep work = scheduler.schedule(step);
    if (checking)
      timed_check([&] {
        for (const SwapMove& m : work.swapped_out) swapped_out[m.seq] = gpu.read_blocks(m.device_blocks);
      });

    // The GPU: swaps, then copy-on-write copies, the new tokens and the attention of every layer.
    gpu.move(work.swap_out, work.swap_in, step, checking);
    std::vector<int32_t> cow_sources;
    SimBlocks cow_before;
    if (checking)
      timed_check([&] {
        for (const SwapMove& m : work.swapped_in) {
          const auto it = swapped_out.find(m.seq);
          if (it == swapped_out.end()) continue;  // swapped out while checks were off
          const SimBlocks now = gpu.read_blocks(m.device_blocks);
          bool same = now.count == it->second.count;
          for (uint32_t i = 0; same && i < now.count; ++i) same = same_block_slots(now, i, it->second, i, B);
          ++report.swap_checks;
          if (!same) {
            ++report.swap_checks_failed;
            bar.note(fmt::format("step {}: sequence {} swapped back in does not hold the bytes it was swapped out with",
                                 step, m.seq));
          }
          swapped_out.erase(it);
        }
        for (const CowCopy& c : work.cow) cow_sources.push_back(c.pair.src);
        if (!cow_sources.empty()) cow_before = gpu.read_blocks(cow_sources);
      });
    const SimBatch batch = batch_of(work, blocks, M);
    report.attention_ns += gpu.run_step(work.copies(), batch, step);
    ++report.busy_steps;
    if (report.plan.empty() && batch.decode_only()) report.plan = gpu.last_plan();
    if (report.mixed_plan.empty() && !batch.decode_only() && work.batch.front().decode)
      report.mixed_plan = gpu.last_plan();
    if (checking && !work.cow.empty())
      timed_check([&] {
        std::vector<int32_t> destinations;
        for (const CowCopy& c : work.cow) destinations.push_back(c.pair.dst);
        const SimBlocks sources = gpu.read_blocks(cow_sources), copies = gpu.read_blocks(destinations);
        for (uint32_t i = 0; i < work.cow.size(); ++i) {
          const CowCopy& c = work.cow[i];
          const bool ok = same_block_slots(copies, i, cow_before, i, c.shared_slots) &&
                          (!c.source_kept || same_block_slots(sources, i, cow_before, i, c.shared_slots));
          ++report.cow_checks;
          if (!ok) {
            ++report.cow_checks_failed;
            bar.note(fmt::format("step {}: copy-on-write {} -> {} changed the {} shared slots", step, c.pair.src,
                                 c.pair.dst, c.shared_slots));
          }
        }
      });

    // Memory: tokens held by the blocks in use (a shared block counts once).
    const std::vector<uint64_t>& running = scheduler.running();
    const uint32_t S = uint32_t(running.size());
    const BatchArrays held = blocks.build_batch(running, int32_t(M));
    uint64_t live = 0;
    std::vector<int32_t> touched;
    for (uint32_t s = 0; s < S; ++s)
      for (int32_t j = 0; j * int32_t(B) < held.context_lens[s]; ++j) {
        const int32_t block = held.block_tables[size_t(s) * M + size_t(j)];
        const int32_t tokens = std::min<int32_t>(int32_t(B), held.context_lens[s] - j * int32_t(B));
        if (fill[size_t(block)] == 0) touched.push_back(block);
        fill[size_t(block)] = std::max(fill[size_t(block)], tokens);
      }
    for (int32_t block : touched) {
      live += uint64_t(fill[size_t(block)]);
      fill[size_t(block)] = 0;
    }
    const int32_t in_use = blocks.usage().in_use;
    if (size_t(in_use) != touched.size())  // swapped-out sequences hold host blocks only
      throw Error(ErrorCode::internal, fmt::format("simulate: step {}: the block tables name {} blocks, the block "
                                                   "manager counts {} in use",
                                                   step, touched.size(), in_use));
    live_sum += double(live) / (double(in_use) * B);
    running_sum += S;
    report.max_running = std::max(report.max_running, S);

    // Every few steps, a few requests of one layer against the CPU reference.
    if (checking && report.busy_steps % a.check_every == 0)
      timed_check([&] {
        const SimCheck c = gpu.check(uint32_t(report.checks % a.layers), requests_to_check(work));
        ++report.checks;
        report.checks_failed += !c.passed;
        report.checked_requests += c.requests;
        report.checked_tokens += c.tokens;
        report.max_error = std::max(report.max_error, c.max_error);
        report.tolerance = c.tolerance;
        if (!progress_is_tty || !c.passed) bar.note(fmt::format("{}; {}", check_line(step, c), status_line(step)));
      });

    // 5. Requests whose new tokens reached their sequence's end sampled a token; the finished leave.
    scheduler.finish_step();
    report.steps = step + 1;
    if (!progress_is_tty && !checking && report.busy_steps % 64 == 0)  // else the checks' lines
      bar.note(status_line(step));
    bar.update(scheduler.counts().finished_requests,
               fmt::format("step {}, {} running, {} waiting, {} swapped out, {} preempted", step,
                           scheduler.running().size(), scheduler.waiting(), scheduler.swapped(),
                           scheduler.counts().preemptions));
  }
  bar.finish();
  report.wall_seconds =
      std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count() - report.check_seconds;

  const SimCounts& counts = scheduler.counts();
  report.finished = counts.finished_requests;
  report.generated_tokens = counts.generated_tokens;
  report.prefill_tokens = counts.prefill_tokens;
  report.recomputed_tokens = counts.recomputed_tokens;
  report.decode_tokens = counts.decode_tokens;
  report.prefix_rewritten = counts.prefix_rewritten;
  report.prefill_chunks = counts.prefill_chunks;
  report.chunks_after_prefix = counts.chunks_after_prefix;
  report.mixed_steps = counts.mixed_steps;
  report.max_step_tokens = counts.max_step_tokens;
  report.preemptions = counts.preemptions;
  report.swap_preemptions = counts.swap_preemptions;
  report.swap_outs = counts.swap_outs;
  report.swap_ins = counts.swap_ins;
  report.swapped_bytes = (counts.swapped_out_blocks + counts.swapped_in_blocks) * report.cache.bytes_per_block;
  report.forked_requests = counts.forked_requests;
  report.forks = counts.forks;
  report.copy_on_write = counts.copy_on_write;
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
