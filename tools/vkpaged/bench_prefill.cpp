// SPDX-License-Identifier: Apache-2.0
// `vkpaged bench --suite prefill` (and prefill-quick, lavapipe-sized): multi-query attention over
// the paged cache (record_attention) for the shapes of bench/torch_prefill_anchor.py, timed with
// GPU timestamps: TFLOP/s for the compute-bound shapes (FLOPs = 4 * D * H * the keys each query
// sees, as the anchor counts them) and the share of the read bandwidth for the memory-bound
// speculative one (every request's keys and values read once); then the mixed engine step of
// performance-targets.md target 10 (decode requests and one chunk after a cached prefix) in one
// call and as its two parts, each in a call of its own. f16 queries and cache, the vllm layout,
// blocks of 16 in shuffled order, causal masks aligned bottom-right, scale 1/sqrt(D).
#include <fmt/format.h>

#include <algorithm>
#include <cstdio>
#include <functional>
#include <numeric>
#include <optional>
#include <random>
#include <string>
#include <vector>

#include "bench.hpp"
#include "bench_buffers.hpp"
#include "bench_timing.hpp"
#include "cli_context.hpp"
#include "decode_option_names.hpp"
#include "json_file.hpp"
#include "vkpaged/attention.hpp"
#include "vkpaged/context.hpp"
#include "vkpaged/error.hpp"
#include "vkpaged/utilities.hpp"

namespace vkpaged::cli {

namespace {

constexpr uint32_t kBlockSize = 16;

// One request: q new tokens at the end of a context of `context` positions.
struct Request {
  uint32_t new_tokens = 1, context = 1;
};

struct PrefillCase {
  std::string name;
  std::vector<Request> requests;
  uint32_t heads = 32, kv_heads = 8, head_size = 128;
  bool memory_bound = false;  // reported as a share of the read bandwidth
};

PrefillCase uniform(std::string name, uint32_t requests, uint32_t q, uint32_t context, uint32_t heads, uint32_t kv_heads,
                    uint32_t head_size, bool memory_bound = false) {
  return {std::move(name), std::vector<Request>(requests, Request{q, context}), heads, kv_heads, head_size, memory_bound};
}

// The anchor's shapes (name, requests, q each, context each, H, Hkv, D), or tiny ones.
std::vector<PrefillCase> prefill_cases(const std::string& suite) {
  if (suite == "prefill")
    return {uniform("p4k", 1, 4096, 4096, 32, 8, 128),
            uniform("p16k", 1, 16384, 16384, 32, 8, 128),
            uniform("p8x2k", 8, 2048, 2048, 32, 8, 128),
            uniform("chunk4x512+8k", 4, 512, 8704, 32, 8, 128),
            uniform("prefix16x256+2k", 16, 256, 2304, 32, 8, 128),
            uniform("spec64x4@4k", 64, 4, 4096, 32, 8, 128, true),
            uniform("p4k-d256", 1, 4096, 4096, 16, 8, 256),
            uniform("p4k-d64", 1, 4096, 4096, 32, 8, 64)};
  return {uniform("p256", 1, 256, 256, 8, 2, 64), uniform("chunk2x64+192", 2, 64, 256, 8, 2, 64),
          uniform("spec8x4@512", 8, 4, 512, 8, 2, 64, true), uniform("p128-d128", 1, 128, 128, 4, 2, 128)};
}

// Target 10's step: decode requests at one context and a chunk after a cached prefix.
struct MixedStep {
  uint32_t decode_requests, decode_context, chunk_tokens, chunk_context, heads, kv_heads, head_size;
};
MixedStep mixed_step(const std::string& suite) {
  if (suite == "prefill") return {63, 4096, 1024, 4096, 32, 8, 128};
  return {7, 512, 128, 512, 8, 2, 64};
}

PrefillCase mixed_case(const MixedStep& m, const std::string& name, bool decode, bool chunk) {
  PrefillCase c;
  c.name = name;
  c.heads = m.heads;
  c.kv_heads = m.kv_heads;
  c.head_size = m.head_size;
  if (decode) c.requests.assign(m.decode_requests, Request{1, m.decode_context});
  if (chunk) c.requests.push_back(Request{m.chunk_tokens, m.chunk_context});
  return c;
}

double flops_of(const PrefillCase& c) {
  double seen = 0;  // keys each query sees, summed
  for (const Request& r : c.requests)
    seen += double(r.new_tokens) * (double(r.context) - r.new_tokens) + double(r.new_tokens) * (r.new_tokens + 1) / 2.0;
  return 4.0 * c.head_size * c.heads * seen;
}

uint64_t kv_bytes_of(const PrefillCase& c) {
  uint64_t positions = 0;
  for (const Request& r : c.requests) positions += r.context;
  return 2ull * positions * c.kv_heads * c.head_size * 2;
}

// One case's plan and buffers on the device, filled once with random data.
class PrefillBatch {
 public:
  PrefillBatch(Context& ctx, const PrefillCase& c, const AttentionOptions& options) : ctx_(ctx), buffers_(ctx) {
    const uint32_t S = uint32_t(c.requests.size());
    std::vector<int32_t> starts{0}, lens;
    uint32_t max_blocks = 0, blocks = 0;
    for (const Request& r : c.requests) {
      starts.push_back(starts.back() + int32_t(r.new_tokens));
      lens.push_back(int32_t(r.context));
      max_blocks = std::max(max_blocks, (r.context + kBlockSize - 1) / kBlockSize);
      blocks += (r.context + kBlockSize - 1) / kBlockSize;
    }
    AttentionShape s;
    s.num_requests = S;
    s.num_query_tokens = uint32_t(starts.back());
    s.num_heads = c.heads;
    s.num_kv_heads = c.kv_heads;
    s.head_size = c.head_size;
    s.block_size = kBlockSize;
    s.num_blocks = blocks;
    s.max_blocks_per_seq = max_blocks;
    plan_.emplace(AttentionPlan::create(ctx, s, starts, options));

    const int64_t T = s.num_query_tokens, H = c.heads, Hkv = c.kv_heads, D = c.head_size, N = blocks;
    const int64_t x = cache_pack_factor(DType::f16);
    const Shape key_shape{N, Hkv, D / x, kBlockSize, x}, value_shape{N, Hkv, D, kBlockSize};
    const uint64_t largest = uint64_t(N) * Hkv * D * kBlockSize * 2;
    if (std::max<uint64_t>(largest, uint64_t(T) * H * D * 2) > ctx.device_info().max_storage_buffer_range)
      throw Error(ErrorCode::unsupported, fmt::format("a buffer of {} bytes is past the device's maxStorageBufferRange",
                                                      std::max<uint64_t>(largest, uint64_t(T) * H * D * 2)));
    views_.query = buffers_.make(DType::f16, Shape{T, H, D});
    views_.output = buffers_.make(DType::f16, Shape{T, H, D});
    views_.key_cache = buffers_.make(DType::f16, key_shape);
    views_.value_cache = buffers_.make(DType::f16, value_shape);
    // Blocks handed out in random order, as a server's free list does.
    std::vector<int32_t> ids(static_cast<size_t>(N)), table(size_t(S) * max_blocks, 0);
    std::iota(ids.begin(), ids.end(), 0);
    std::shuffle(ids.begin(), ids.end(), std::mt19937(7));
    size_t next = 0;
    for (uint32_t i = 0; i < S; ++i)
      for (uint32_t j = 0; j < (c.requests[i].context + kBlockSize - 1) / kBlockSize; ++j)
        table[size_t(i) * max_blocks + j] = ids[next++];
    views_.block_tables = buffers_.upload(DType::i32, Shape{S, max_blocks}, table.data());
    views_.context_lens = buffers_.upload(DType::i32, Shape{S}, lens.data());
    views_.query_starts = buffers_.upload(DType::i32, Shape{S + 1}, starts.data());
    if (plan_->scratch_bytes()) {
      views_.scratch = buffers_.bytes(plan_->scratch_bytes());
    }
    ctx.run_and_wait([&](VkCommandBuffer cmd) {
      uint32_t seed = 11;
      for (const TensorView* v : {&views_.query, &views_.key_cache, &views_.value_cache})
        record_fill_random(ctx, cmd, *v, seed++);
    });
  }

  void record(VkCommandBuffer cmd) const { record_attention(ctx_, cmd, *plan_, views_); }
  const AttentionPlan& plan() const { return *plan_; }

 private:
  Context& ctx_;
  std::optional<AttentionPlan> plan_;
  BenchBuffers buffers_;
  AttentionViews views_;
};

struct PrefillResult : RepetitionTimes {
  PrefillCase config;
  std::string path, skipped;
  double flops = 0;
  uint64_t kv_bytes = 0;
  double tflops() const { return median_us > 0 ? flops / (median_us * 1e6) : 0.0; }
  double kv_bytes_per_second() const { return median_us > 0 ? double(kv_bytes) / (median_us * 1e-6) : 0.0; }
};

PrefillResult run_prefill_case(Context& ctx, const PrefillCase& c, const AttentionOptions& options,
                               const BenchOptions& o, const StreamingRead* flush) {
  PrefillResult r;
  r.config = c;
  r.flops = flops_of(c);
  r.kv_bytes = kv_bytes_of(c);
  std::optional<PrefillBatch> batch;
  try {
    batch.emplace(ctx, c, options);
  } catch (const Error& e) {
    // What this device or kernel cannot run (a refused --kernel, a buffer past the range, memory).
    if (e.code() != ErrorCode::unsupported && e.code() != ErrorCode::out_of_memory) throw;
    r.skipped = e.what();
    return r;
  }
  r.path = batch->plan().describe();
  auto timed = [&] {
    if (flush) ctx.run_and_wait([&](VkCommandBuffer cmd) { flush->record(cmd); });
    return ctx.run_and_time([&](VkCommandBuffer cmd) { batch->record(cmd); });
  };
  const RepetitionTimes t = time_repetitions(ctx, o, 10, timed);
  static_cast<RepetitionTimes&>(r) = t;
  return r;
}

AttentionKernel parse_prefill_kernel(const std::string& s) {
  if (s == "auto") return AttentionKernel::automatic;
  if (s == "scalar") return AttentionKernel::scalar;
  if (s == "matrix") return AttentionKernel::matrix;
  throw Error(ErrorCode::invalid_argument, fmt::format("--kernel: \"{}\" is not auto, scalar or matrix", s));
}

void print_row(const PrefillResult& r, double bandwidth) {
  const PrefillCase& c = r.config;
  if (!r.skipped.empty()) {
    fmt::print("{:<22} skipped: {}\n", c.name, r.skipped);
    return;
  }
  uint32_t tokens = 0;
  for (const Request& q : c.requests) tokens += q.new_tokens;
  const double share = bandwidth > 0 ? r.kv_bytes_per_second() / bandwidth : 0.0;
  fmt::print("{:<22} {:>4} {:>6} {:>3}/{:<3} {:>3} {:>10.1f} {:>10.1f} {:>10.1f} {:>8.1f} {:>9.1f} {:>5.1f}%{}  {}\n",
             c.name, c.requests.size(), tokens, c.heads, c.kv_heads, c.head_size, r.median_us, r.min_us, r.max_us,
             r.tflops(), r.kv_bytes_per_second() / 1e9, 100.0 * share, c.memory_bound ? "*" : " ", r.path);
}

Json json_case(const PrefillResult& r, double bandwidth) {
  const PrefillCase& c = r.config;
  uint32_t tokens = 0, context = 0;
  for (const Request& q : c.requests) {
    tokens += q.new_tokens;
    context = std::max(context, q.context);
  }
  return {{"name", c.name},
          {"requests", c.requests.size()},
          {"query_tokens", tokens},
          {"max_context", context},
          {"heads", c.heads},
          {"kv_heads", c.kv_heads},
          {"head_size", c.head_size},
          {"block_size", kBlockSize},
          {"memory_bound", c.memory_bound},
          {"flops", r.flops},
          {"kv_bytes", r.kv_bytes},
          {"median_us", r.median_us},
          {"min_us", r.min_us},
          {"max_us", r.max_us},
          {"wall_clock_s", wall_clock_json(r.wall)},
          {"tflops", r.tflops()},
          {"kv_bytes_per_second", r.kv_bytes_per_second()},
          {"share_of_bandwidth", bandwidth > 0 ? r.kv_bytes_per_second() / bandwidth : 0.0},
          {"path", r.path},
          {"skipped", r.skipped}};
}

// Target 10: the mixed step in one call, and its parts each in a call of its own.
struct MixedResults {
  PrefillResult one_call, decode_part, chunk_part;
  bool ran() const { return one_call.skipped.empty() && decode_part.skipped.empty() && chunk_part.skipped.empty(); }
  double parts_us() const { return decode_part.median_us + chunk_part.median_us; }
};

MixedResults run_mixed_step(Context& ctx, const AttentionOptions& options, const BenchOptions& o,
                            const StreamingRead* flush, double bandwidth) {
  const MixedStep m = mixed_step(o.suite);
  fmt::print("\nmixed step: {} decode requests at {} and one {}-token chunk after {} cached, {}/{} heads, D {}\n",
             m.decode_requests, m.decode_context, m.chunk_tokens, m.chunk_context - m.chunk_tokens, m.heads, m.kv_heads,
             m.head_size);
  MixedResults r;
  r.one_call = run_prefill_case(ctx, mixed_case(m, "mixed (one call)", true, true), options, o, flush);
  print_row(r.one_call, bandwidth);
  r.decode_part = run_prefill_case(ctx, mixed_case(m, "mixed: decode part", true, false), options, o, flush);
  print_row(r.decode_part, bandwidth);
  r.chunk_part = run_prefill_case(ctx, mixed_case(m, "mixed: chunk part", false, true), options, o, flush);
  print_row(r.chunk_part, bandwidth);
  if (r.ran())
    fmt::print("mixed step: one call {:.1f} us, parts {:.1f} + {:.1f} = {:.1f} us, one call / parts = {:.3f}\n",
               r.one_call.median_us, r.decode_part.median_us, r.chunk_part.median_us, r.parts_us(),
               r.one_call.median_us / r.parts_us());
  return r;
}

}  // namespace

bool is_prefill_suite(const std::string& suite) { return suite == "prefill" || suite == "prefill-quick"; }

int run_prefill_bench(const BenchOptions& o) {
  AttentionOptions options;
  options.kernel = parse_prefill_kernel(o.kernel);
  if (const auto split = split_mode_named(o.split)) options.split = *split;
  else throw Error(ErrorCode::invalid_argument, fmt::format("--split: \"{}\" is not auto, single or split", o.split));
  options.partition_tokens = o.partition_tokens;
  if (!o.cache_dtype.empty())
    throw Error(ErrorCode::invalid_argument, "--cache-dtype: the prefill suites run f16 caches (the anchor's)");
  const std::vector<PrefillCase> cases = kept_cases(o, prefill_cases(o.suite));
  const bool run_mixed = case_selected(o, "mixed");  // the mixed step's three rows go together
  if (cases.empty() && !run_mixed) throw_no_case_selected(o, o.suite);

  Context ctx(cli_context_options(o.device));
  const auto& dev = ctx.device_info();
  const size_t probe_bytes = std::min<size_t>({size_t(1) << 30, dev.max_storage_buffer_range, dev.device_local_bytes / 4});
  const StreamingRead probe(ctx, probe_bytes);
  const double bandwidth = measure_read_bandwidth(ctx, probe, std::max(10, o.repetitions)).bytes_per_second();
  const StreamingRead* flush = o.flush_caches ? &probe : nullptr;
  fmt::print("device: {} ({})\n", dev.name, dev.driver);
  fmt::print("{}", clock_warmup_line(o, dev.type));
  fmt::print("read bandwidth (streaming 16-byte loads, {} MB): {:.1f} GB/s\n", probe.bytes() / 1000000, bandwidth / 1e9);
  fmt::print("f16 queries and cache, vllm layout, blocks of {} in shuffled order, causal (bottom-right); kernel {}{}\n",
             kBlockSize, o.kernel,
             flush ? fmt::format(", caches flushed ({} MB read) before each repetition", flush->bytes() / 1000000) : "");
  fmt::print("TFLOP/s: 4 * D * H * the keys each query sees; GB/s: every request's keys and values read once "
             "(* memory-bound: the share is the figure)\n\n");
  fmt::print("{:<22} {:>4} {:>6} {:>3}/{:<3} {:>3} {:>10} {:>10} {:>10} {:>8} {:>9} {:>6}   {}\n", "case", "reqs", "tokens",
             "H", "Hkv", "D", "median us", "min us", "max us", "TFLOP/s", "KV GB/s", "share", "path");
  std::vector<PrefillResult> results;
  for (const PrefillCase& c : cases) {
    results.push_back(run_prefill_case(ctx, c, options, o, flush));
    print_row(results.back(), bandwidth);
    std::fflush(stdout);
  }

  std::optional<MixedResults> mixed;
  if (run_mixed) mixed = run_mixed_step(ctx, options, o, flush, bandwidth);

  if (!o.json_path.empty()) {
    Json j;
    j["device"] = dev.name;
    j["suite"] = o.suite;
    j["kernel"] = o.kernel;
    j["cache_flush_bytes"] = flush ? flush->bytes() : 0;
    j["clock_warmup_ms"] = clock_warmup_ms(o, dev.type);
    j["read_bandwidth_bytes_per_second"] = bandwidth;
    j["cases"] = Json::array();
    for (const PrefillResult& r : results) j["cases"].push_back(json_case(r, bandwidth));
    if (mixed)
      j["mixed"] = {{"one_call", json_case(mixed->one_call, bandwidth)},
                    {"decode_part", json_case(mixed->decode_part, bandwidth)},
                    {"chunk_part", json_case(mixed->chunk_part, bandwidth)},
                    {"parts_us", mixed->ran() ? mixed->parts_us() : 0.0},
                    {"one_call_over_parts", mixed->ran() && mixed->parts_us() > 0 ? mixed->one_call.median_us / mixed->parts_us() : 0.0}};
    write_json_file(o.json_path, j);
  }
  return 0;
}

}  // namespace vkpaged::cli
