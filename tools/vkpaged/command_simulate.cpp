// SPDX-License-Identifier: Apache-2.0
// `vkpaged simulate`: a synthetic serving workload on the GPU through KvCache, BlockManager
// (prefix caching, forks with copy-on-write, swapping), reshape_and_cache with rotary,
// copy_blocks, swap_blocks and multi-query attention, with continuous batching, chunked
// prefill under a token budget, parallel sampling and preemption; reports how much of the cache holds live tokens against reserving each
// request's maximum length. The loop is simulate.cpp, the scheduler simulate_scheduler.cpp,
// the GPU side simulate_gpu.cpp.
#include <fmt/format.h>
#include <fmt/ostream.h>

#include "cli_context.hpp"
#include "commands.hpp"
#include "simulate.hpp"
#include "vkpaged/error.hpp"

namespace vkpaged::cli {

namespace {

std::string rate(double value, const char* unit) {
  if (value >= 1e9) return fmt::format("{:.2f} G{}", value / 1e9, unit);
  if (value >= 1e6) return fmt::format("{:.2f} M{}", value / 1e6, unit);
  if (value >= 1e3) return fmt::format("{:.2f} k{}", value / 1e3, unit);
  return fmt::format("{:.2f} {}", value, unit);
}

std::string percent(double fraction) { return fmt::format("{:.1f} %", 100.0 * fraction); }

std::string mib(uint64_t bytes) { return fmt::format("{:.1f} MiB", double(bytes) / double(1 << 20)); }

}  // namespace

void print_simulate_report(std::ostream& out, const SimulateArgs& a, const SimulateReport& r) {
  const KvCacheShape& c = r.cache_shape;
  fmt::print(out,
             "vkpaged simulate on {}: {} requests ({} asking for 2 to {} samples), {} system prompts, prompts <= {}, "
             "outputs <= {} tokens, arrival rate {:g} per step, seed {}\n",
             r.device, r.requests, r.forked_requests, a.max_samples, a.system_prompts, a.max_prompt, a.max_output,
             a.arrival_rate, a.seed);
  fmt::print(out,
             "  cache: {} layers x {} kv heads x head size {}, block size {}, {}: {} blocks = {} tokens, {}; "
             "swap space: {} host blocks ({})\n",
             c.num_layers, c.num_kv_heads, c.head_size, c.block_size, dtype_name(c.dtype), r.cache.num_blocks,
             r.cache.num_tokens, mib(r.cache.total_bytes), r.host_blocks, mib(r.host_blocks * r.cache.bytes_per_block));
  if (r.cache.fraction_of != MemorySource::none)
    fmt::print(out, "  sized by --budget-fraction {:g} of {} ({})\n", a.budget_fraction,
               r.cache.fraction_of == MemorySource::memory_budget ? "the free device-local memory (VK_EXT_memory_budget)"
                                                                  : "the device-local heaps' size (no VK_EXT_memory_budget)",
               mib(r.cache.fraction_of_bytes));
  fmt::print(out, "  queries: {} heads, {}; {} layout; rotary neox on the way into the cache\n", a.heads, a.dtype,
             a.kv_layout);
  fmt::print(out, "  steps: a budget of {} new tokens, decode requests first, then prefill chunks {}\n", r.token_budget,
             r.chunk > 0 ? fmt::format("of up to {} tokens", r.chunk) : std::string("up to what the budget leaves"));
  if (!r.mixed_plan.empty()) fmt::print(out, "  plan of the first step mixing decode and prefill: {}\n", r.mixed_plan);
  if (!r.plan.empty()) fmt::print(out, "  plan of the first decode-only step: {}\n", r.plan);

  fmt::print(out,
             "paged (BlockManager with prefix caching, continuous batching, parallel sampling by fork and "
             "copy-on-write, preemption by {}):\n",
             r.swap ? "swapping to host (recompute where the host blocks run out)" : "recompute");
  fmt::print(out, "  requests finished: {} of {} ({} sequences) in {} steps; {} tokens generated\n", r.finished,
             r.requests, r.sequences, r.steps, r.generated_tokens);
  fmt::print(out,
             "  attention calls: {} decode tokens and {} prompt tokens in {} prefill chunks ({} after a cached prefix "
             "or an earlier chunk; {} recomputed after preemption, {} prefix-cache hits computed again); {} of {} "
             "steps mixed decode and prefill, at most {} tokens in a step\n",
             r.decode_tokens, r.prefill_tokens, r.prefill_chunks, r.chunks_after_prefix, r.recomputed_tokens,
             r.prefix_rewritten, r.mixed_steps, r.busy_steps, r.max_step_tokens);
  fmt::print(out, "  cache memory holding live tokens: {} (waste {})\n", percent(r.live_fraction),
             percent(1.0 - r.live_fraction));
  fmt::print(out, "  prefix-cache hit rate: {} of prompt tokens ({} of {})\n", percent(r.hit_rate()),
             r.prefix_hit_tokens, r.prefix_queried_tokens);
  fmt::print(out, "  parallel sampling: {} forks of {} requests; copy-on-write block copies: {}\n", r.forks,
             r.forked_requests, r.copy_on_write);
  fmt::print(out, "  preemptions: {} ({} by swapping, {} by recompute); swap-outs: {}, swap-ins: {}, {} swapped\n",
             r.preemptions, r.swap_preemptions, r.preemptions - r.swap_preemptions, r.swap_outs, r.swap_ins,
             mib(r.swapped_bytes));
  fmt::print(out, "  sequences running at once: {:.1f} on average, {} at most\n", r.average_running, r.max_running);
  if (r.wall_seconds > 0)
    fmt::print(out, "  generated: {} tokens in {:.2f} s wall (checks excluded): {}\n", r.generated_tokens,
               r.wall_seconds, rate(double(r.generated_tokens) / r.wall_seconds, "tokens/s"));
  if (r.attention_ns > 0)
    fmt::print(out, "  attention: {} new tokens x {} layers in {:.1f} ms ({}): {}\n", r.decode_tokens + r.prefill_tokens,
               c.num_layers, r.attention_ns * 1e-6, r.gpu_timestamps ? "GPU timestamps" : "wall clock",
               rate(double(r.decode_tokens + r.prefill_tokens) / (r.attention_ns * 1e-9), "tokens/s"));

  fmt::print(out, "reserve-the-maximum-length (prompt + {} output tokens reserved per sample, no sharing):\n",
             a.max_output);
  fmt::print(out, "  cache memory holding live tokens: {} (waste {})\n", percent(r.reserve.live_fraction),
             percent(1.0 - r.reserve.live_fraction));
  fmt::print(out, "  sequences running at once: {:.1f} on average, {} at most; all finished in {} steps\n",
             r.reserve.average_running, r.reserve.max_running, r.reserve.steps);

  if (r.checks == 0) {
    fmt::print(out, "checks: none (--check-every 0)\n");
    return;
  }
  fmt::print(out, "checks: attention {} of {} passed ({} requests, {} new tokens), max |error| {:.2e} (tolerance {:.0e}){}\n",
             r.checks - r.checks_failed, r.checks, r.checked_requests, r.checked_tokens, r.max_error, r.tolerance,
             r.checks_failed ? ": FAILED" : "");
  fmt::print(out, "  swapped out and back in, bit for bit: {} of {} sequences passed{}\n",
             r.swap_checks - r.swap_checks_failed, r.swap_checks, r.swap_checks_failed ? ": FAILED" : "");
  fmt::print(out, "  copy-on-write left the shared slots unchanged: {} of {} copies passed{}\n",
             r.cow_checks - r.cow_checks_failed, r.cow_checks, r.cow_checks_failed ? ": FAILED" : "");
}

int run_simulate(const SimulateArgs& args, std::ostream& out, std::ostream& progress, bool progress_is_tty) {
  if (args.device == "cpu")
    throw Error(ErrorCode::invalid_argument,
                "--device: the simulation runs on a Vulkan device; the CPU reference is what it checks against");
  Context context(cli_context_options(args.device));
  const SimulateReport report = simulate(context, args, progress, progress_is_tty);
  print_simulate_report(out, args, report);
  return report.passed() ? kExitSuccess : kExitFailure;
}

}  // namespace vkpaged::cli
