// SPDX-License-Identifier: Apache-2.0
// `vkpaged demo`: what an inference engine does with vkpaged, in miniature. A batch of
// sequences with prompts of different lengths runs step by step: each step every sequence
// brings a chunk of its prompt (while it lasts) or its next decode token, whose keys and values
// go into the paged cache with rotary embedding, the block tables growing as blocks fill; one
// multi-query attention call then attends them all, prompt chunks and decode requests in one
// batch. Every few steps the step is checked against the CPU reference. Then the first step
// again on new contexts, to show what start-up costs: building its pipelines as it needs them,
// after Context::prepare, and after loading this run's pipeline cache and preparing from it
// (each after the run, so that none pays the process's first compilation alone).
#include <fmt/format.h>
#include <fmt/ostream.h>

#include <chrono>

#include "cli_context.hpp"
#include "commands.hpp"
#include "demo_session.hpp"
#include "ops/block_size_rule.hpp"
#include "progress_bar.hpp"
#include "vkpaged/error.hpp"

namespace vkpaged::cli {

namespace {

[[noreturn]] void refuse(const std::string& message) { throw Error(ErrorCode::invalid_argument, message); }

DemoShape demo_shape(const DemoArgs& a) {
  if (a.batch == 0) refuse("--batch: must be at least 1");
  if (a.min_len > a.max_len) refuse(fmt::format("--min-len: {} is above --max-len {}", a.min_len, a.max_len));
  if (!detail::is_supported_block_size(a.block_size))
    refuse(fmt::format("--block-size: {} is not {}", a.block_size, detail::kBlockSizeRule));
  if (a.device == "cpu") refuse("--device: the demo runs on a Vulkan device; the CPU reference is what it checks against");
  if (a.chunk == 0) refuse("--chunk: must be at least 1");
  if (uint64_t(a.max_len) + a.steps > (1u << 24))
    refuse(fmt::format("--max-len: {} plus --steps {} exceeds 2^24 tokens", a.max_len, a.steps));
  DemoShape s;
  s.num_seqs = a.batch;
  s.num_heads = a.heads;
  s.num_kv_heads = a.kv_heads;
  s.head_size = a.head_size;
  s.block_size = a.block_size;
  s.max_len = a.max_len + a.steps;
  s.chunk = a.chunk;
  const auto layout = parse_kv_layout(a.kv_layout);
  if (!layout) refuse(fmt::format("--kv-layout: '{}' is not vllm, nhd or hnd", a.kv_layout));
  s.layout = *layout;
  if (a.rotary == "none")
    s.rotary.reset();
  else if (const auto style = parse_rotary_style(a.rotary))
    s.rotary = *style;
  else
    refuse(fmt::format("--rotary: '{}' is not neox, gptj or none", a.rotary));
  const auto dtype = parse_dtype(a.dtype);
  if (!dtype || !is_float_dtype(*dtype)) refuse(fmt::format("--dtype: '{}' is not f32, f16 or bf16", a.dtype));
  s.dtype = *dtype;
  if (a.kv_dtype == "auto")
    s.cache_dtype = s.dtype;
  else if (a.kv_dtype == "fp8_e4m3")
    s.cache_dtype = DType::fp8_e4m3;
  else if (a.kv_dtype == "fp8_e5m2")
    s.cache_dtype = DType::fp8_e5m2;
  else
    refuse(fmt::format("--kv-dtype: '{}' is not auto, fp8_e4m3 or fp8_e5m2", a.kv_dtype));
  return s;
}

// Prompt lengths spread evenly from --min-len to --max-len over the batch.
std::vector<uint32_t> prompt_lengths(const DemoArgs& a) {
  std::vector<uint32_t> lens(a.batch);
  for (uint32_t i = 0; i < a.batch; ++i)
    lens[i] = a.batch == 1 ? a.max_len : a.min_len + uint32_t(uint64_t(a.max_len - a.min_len) * i / (a.batch - 1));
  return lens;
}

std::string check_text(uint32_t step, uint32_t steps, const DemoCheck& c) {
  std::string text = fmt::format("step {}/{}: check {}: max |error| {:.2e} (tolerance {:.0e})", step, steps,
                                 c.passed ? "passed" : "FAILED", c.max_error, c.tolerance);
  if (c.cache_mismatches)
    text += fmt::format(", {} cache elements differ from encode(value) or encode(rotated key)", c.cache_mismatches);
  if (c.rotary_error > c.tolerance) text += fmt::format(", rotated queries or keys off by {:.2e}", c.rotary_error);
  if (c.status) text += fmt::format(", shader status {:#x}", c.status);
  return text;
}

// The first step of a new context and session: without prepare, or after it (and after loading a
// cache, where given).
struct FirstStep {
  double prepare_ms = 0;
  PrepareReport prepared;
  double step_ms = 0;
};

enum class StartUp { none, prepare, load_and_prepare };

FirstStep first_step(const ContextOptions& options, const DemoShape& shape, const DemoArgs& args, StartUp start_up,
                     const std::vector<uint8_t>& cache) {
  Context context(options);
  DemoSession session(context, shape, prompt_lengths(args), args.steps, args.seed);
  FirstStep f;
  const auto start = std::chrono::steady_clock::now();
  if (start_up == StartUp::load_and_prepare) context.load_pipeline_cache(cache);
  if (start_up != StartUp::none) f.prepared = context.prepare(session.pipelines());
  f.prepare_ms = std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - start).count();
  f.step_ms = session.step().wall_ns * 1e-6;
  return f;
}

std::string rate(double value, const char* unit) {
  if (value >= 1e9) return fmt::format("{:.2f} G{}", value / 1e9, unit);
  if (value >= 1e6) return fmt::format("{:.2f} M{}", value / 1e6, unit);
  if (value >= 1e3) return fmt::format("{:.2f} k{}", value / 1e3, unit);
  return fmt::format("{:.2f} {}", value, unit);
}

}  // namespace

int run_demo(const DemoArgs& args, std::ostream& out, std::ostream& progress, bool progress_is_tty) {
  const DemoShape shape = demo_shape(args);
  const ContextOptions options = cli_context_options(args.device);
  Context context(options);
  DemoSession session(context, shape, prompt_lengths(args), args.steps, args.seed);

  fmt::print(out,
             "vkpaged demo on {}: {} sequences, prompts {}..{} tokens in chunks of up to {}, then {} decode tokens "
             "each\n",
             context.device_info().name, args.batch, args.min_len, args.max_len, args.chunk, args.steps);
  fmt::print(out, "  heads {}, kv heads {}, head size {}, block size {}, {} query, {} cache, {} layout, {} blocks, {}\n",
             args.heads, args.kv_heads, args.head_size, args.block_size, dtype_name(shape.dtype),
             dtype_name(shape.cache_dtype), kv_layout_name(shape.layout), session.num_blocks(),
             shape.rotary ? fmt::format("rotary {} on the way into the cache", rotary_style_name(*shape.rotary))
                          : std::string("no rotary"));
  out << std::flush;

  const uint32_t total = session.total_steps();
  const auto start = std::chrono::steady_clock::now();
  ProgressBar bar(progress, progress_is_tty, total);
  // Steps with prompt chunks (mixed with decode requests or not), and decode-only steps.
  double prefill_ns = 0, decode_ns = 0;
  uint64_t prompt_tokens = 0, mixed_decode_tokens = 0, decode_tokens = 0, kv_bytes = 0;
  uint32_t prefill_steps = 0, mixed_steps = 0;
  std::string prefill_plan, decode_plan;
  uint32_t checks = 0, failed = 0;
  double worst_error = 0, tolerance = 0;
  for (uint32_t step = 1; !session.done(); ++step) {
    const DemoStep s = session.step();
    if (s.prompt_tokens > 0) {
      prefill_ns += s.attention_ns;
      prompt_tokens += s.prompt_tokens;
      mixed_decode_tokens += s.decode_tokens;
      ++prefill_steps;
      mixed_steps += s.decode_tokens > 0;
      if (prefill_plan.empty()) prefill_plan = s.plan;
    } else {
      decode_ns += s.attention_ns;
      decode_tokens += s.decode_tokens;
      kv_bytes += s.kv_bytes;
      if (decode_plan.empty()) decode_plan = s.plan;
    }
    const bool check_now = args.check_every > 0 && (step % args.check_every == 0 || session.done());
    if (check_now) {
      const DemoCheck c = session.check();
      ++checks;
      failed += !c.passed;
      worst_error = std::max(worst_error, c.max_error);
      tolerance = c.tolerance;
      // A line per check in logs; on a terminal the bar says it, and only failures stay.
      if (!progress_is_tty || !c.passed) bar.note(check_text(step, total, c));
    }
    bar.update(step, fmt::format("{} checks, {} failed", checks, failed));
  }
  bar.finish();
  const double wall_s = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();

  if (!prefill_plan.empty()) fmt::print(out, "plan of the first step: {}\n", prefill_plan);
  if (!decode_plan.empty()) fmt::print(out, "plan of the first decode-only step: {}\n", decode_plan);
  if (checks == 0)
    fmt::print(out, "checks: none (--check-every 0)\n");
  else
    fmt::print(out, "checks: {} of {} passed, max |error| {:.2e} (tolerance {:.0e}){}\n", checks - failed, checks,
               worst_error, tolerance, failed ? ": FAILED" : "");
  const char* clock = context.device_info().timestamps ? "GPU timestamps" : "wall clock";
  if (prefill_ns > 0)
    fmt::print(out, "prefill: {} prompt tokens in {} steps ({} beside {} decode tokens), attention {:.1f} ms (by {}): {}\n",
               prompt_tokens, prefill_steps, mixed_steps, mixed_decode_tokens, prefill_ns * 1e-6, clock,
               rate(double(prompt_tokens + mixed_decode_tokens) / (prefill_ns * 1e-9), "tokens/s"));
  if (decode_ns > 0) {
    const double seconds = decode_ns * 1e-9;
    fmt::print(out, "decode: {} tokens in decode-only steps, attention {:.1f} ms (by {}): {}, KV read {}\n",
               decode_tokens, decode_ns * 1e-6, clock, rate(double(decode_tokens) / seconds, "tokens/s"),
               rate(double(kv_bytes) / seconds, "B/s"));
  }
  fmt::print(out, "wall time of the steps: {:.2f} s (cache writes, attention, checks)\n", wall_s);
  fmt::print(out, "blocks in use at the end: {} of {}\n", session.blocks_in_use(), session.num_blocks());

  // Start-up: the first step's host time (plans, records, submission, wait) on new contexts: one
  // that builds its pipelines as the step needs them, then ones that built them first.
  out << std::flush;
  const std::vector<uint8_t> cache = context.pipeline_cache_data();
  const FirstStep cold = first_step(options, shape, args, StartUp::none, cache);
  const FirstStep prepared = first_step(options, shape, args, StartUp::prepare, cache);
  const FirstStep loaded = first_step(options, shape, args, StartUp::load_and_prepare, cache);
  fmt::print(out, "first step, building its pipelines as it needs them: {:.1f} ms\n", cold.step_ms);
  fmt::print(out, "first step after Context::prepare: {:.1f} ms (prepare: {} pipelines created in {:.1f} ms)\n",
             prepared.step_ms, prepared.prepared.created, prepared.prepare_ms);
  fmt::print(out,
             "first step after loading this run's pipeline cache ({} bytes) and prepare: {:.1f} ms (load and prepare: "
             "{} pipelines created in {:.1f} ms)\n",
             cache.size(), loaded.step_ms, loaded.prepared.created, loaded.prepare_ms);
  return failed == 0 ? kExitSuccess : kExitFailure;
}

}  // namespace vkpaged::cli
