// `vkpaged simulate`: a synthetic serving workload on the GPU through KvCache, BlockManager
// (prefix caching), reshape_and_cache and decode attention, with continuous batching and
// preemption; reports how much of the cache holds live tokens against reserving each
// request's maximum length. The scheduler is simulate.cpp, the GPU side simulate_gpu.cpp.
#include <fmt/format.h>
#include <fmt/ostream.h>

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

}  // namespace

void print_simulate_report(std::ostream& out, const SimulateArgs& a, const SimulateReport& r) {
  const KvCacheShape& c = r.cache_shape;
  fmt::print(out,
             "vkpaged simulate on {}: {} requests, {} system prompts, prompts <= {}, outputs <= {} tokens, "
             "arrival rate {:g} per step, seed {}\n",
             r.device, r.requests, a.system_prompts, a.max_prompt, a.max_output, a.arrival_rate, a.seed);
  fmt::print(out,
             "  cache: {} layers x {} kv heads x head size {}, block size {}, {}: {} blocks = {} tokens, {:.1f} MiB\n",
             c.num_layers, c.num_kv_heads, c.head_size, c.block_size, dtype_name(c.dtype), r.cache.num_blocks,
             r.cache.num_tokens, double(r.cache.total_bytes) / double(1 << 20));
  fmt::print(out, "  queries: {} heads, {}; decode plan of a full batch: {}\n", a.heads, a.dtype, r.plan);

  fmt::print(out, "paged (BlockManager with prefix caching, continuous batching, preemption by recompute):\n");
  fmt::print(
      out,
      "  requests finished: {} of {} in {} steps; {} tokens generated, {} prompt tokens prefilled ({} recomputed)\n",
      r.finished, r.requests, r.steps, r.generated_tokens, r.prefill_tokens, r.recomputed_tokens);
  fmt::print(out, "  cache memory holding live tokens: {} (waste {})\n", percent(r.live_fraction),
             percent(1.0 - r.live_fraction));
  fmt::print(out, "  prefix-cache hit rate: {} of prompt tokens ({} of {})\n", percent(r.hit_rate()),
             r.prefix_hit_tokens, r.prefix_queried_tokens);
  fmt::print(out, "  preemptions: {}; copy-on-write block copies: {}\n", r.preemptions, r.copy_on_write);
  fmt::print(out, "  requests running at once: {:.1f} on average, {} at most\n", r.average_running, r.max_running);
  if (r.wall_seconds > 0)
    fmt::print(out, "  generated: {} tokens in {:.2f} s wall (checks excluded): {}\n", r.generated_tokens,
               r.wall_seconds, rate(double(r.generated_tokens) / r.wall_seconds, "tokens/s"));
  if (r.decode_ns > 0)
    fmt::print(out, "  decode: {} tokens x {} layers in {:.1f} ms ({}): {}\n", r.generated_tokens, c.num_layers,
               r.decode_ns * 1e-6, r.gpu_timestamps ? "GPU timestamps" : "wall clock",
               rate(double(r.generated_tokens) / (r.decode_ns * 1e-9), "tokens/s"));

  fmt::print(out, "reserve-the-maximum-length (prompt + {} output tokens reserved per request, no sharing):\n",
             a.max_output);
  fmt::print(out, "  cache memory holding live tokens: {} (waste {})\n", percent(r.reserve.live_fraction),
             percent(1.0 - r.reserve.live_fraction));
  fmt::print(out, "  requests running at once: {:.1f} on average, {} at most; all finished in {} steps\n",
             r.reserve.average_running, r.reserve.max_running, r.reserve.steps);

  if (r.checks == 0)
    fmt::print(out, "checks: none (--check-every 0)\n");
  else
    fmt::print(out, "checks: {} of {} passed, max |error| {:.2e} (tolerance {:.0e}){}\n", r.checks - r.checks_failed,
               r.checks, r.max_error, r.tolerance, r.checks_failed ? ": FAILED" : "");
}

int run_simulate(const SimulateArgs& args, std::ostream& out, std::ostream& progress, bool progress_is_tty) {
  if (args.device == "cpu")
    throw Error(ErrorCode::invalid_argument,
                "--device: the simulation runs on a Vulkan device; the CPU reference is what it checks against");
  ContextOptions options;
  options.device = args.device;
  Context context(options);
  const SimulateReport report = simulate(context, args, progress, progress_is_tty);
  print_simulate_report(out, args, report);
  return report.checks_failed == 0 && report.finished == report.requests ? 0 : 1;
}

}  // namespace vkpaged::cli
