// `vkpaged bench`: sets up each case's paged cache on the device (random data, shuffled block
// tables), times record_decode with GPU timestamps, and reports KV bytes per second against
// the read bandwidth measured by the same run.
#include <fmt/format.h>

#include <algorithm>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <numeric>
#include <optional>
#include <random>

#include "bench.hpp"
#include "decode_option_names.hpp"
#include "vkpaged/context.hpp"
#include "vkpaged/error.hpp"
#include "vkpaged/utilities.hpp"

namespace vkpaged::cli {

namespace {

uint32_t ceil_div(uint64_t a, uint64_t b) { return uint32_t((a + b - 1) / b); }

SplitMode parse_split(const std::string& s) {
  if (const auto mode = split_mode_named(s)) return *mode;
  throw Error(ErrorCode::invalid_argument, fmt::format("--split: \"{}\" is not auto, single or split", s));
}

DecodeMerge parse_merge(const std::string& s) {
  if (s == "reduce-pass") return DecodeMerge::reduce_pass;
  if (s == "in-dispatch") return DecodeMerge::in_dispatch;
  throw Error(ErrorCode::invalid_argument, fmt::format("--merge: \"{}\" is not reduce-pass or in-dispatch", s));
}

DecodeOrder parse_order(const std::string& s) {
  if (const auto order = decode_order_named(s)) return *order;
  throw Error(ErrorCode::invalid_argument, fmt::format("--order: \"{}\" is not auto, grid or longest-first", s));
}

DecodeKernel parse_kernel(const std::string& s) {
  if (const auto kernel = decode_kernel_named(s)) return *kernel;
  throw Error(ErrorCode::invalid_argument, fmt::format("--kernel: \"{}\" is not auto, scalar or matrix", s));
}

// One run of the case with the timeline kernel (after one untimed run), its records written to
// DIR/<case>.bin: DecodePlan::timeline_bytes() as the device wrote them. Cases on the scalar
// kernel have none (the plan refuses the option) and write nothing.
void write_timeline(Context& ctx, const BenchCase& c, const DecodeShape& s, DecodeOptions options, DecodeViews v,
                    const std::string& dir) {
  options.timeline = true;
  std::optional<DecodePlan> plan_or;
  try {
    plan_or = DecodePlan::create(ctx, s, options);
  } catch (const Error& e) {
    if (e.code() != ErrorCode::unsupported) throw;
    return;
  }
  const DecodePlan& plan = *plan_or;
  DeviceBuffer timeline = ctx.create_buffer(plan.timeline_bytes());
  v.timeline = timeline.view();
  for (int i = 0; i < 2; ++i) ctx.run_and_wait([&](VkCommandBuffer cmd) { record_decode(ctx, cmd, plan, v); });
  std::vector<char> bytes(plan.timeline_bytes());
  ctx.download(v.timeline, bytes.data(), bytes.size());
  const std::string path = dir + "/" + c.name + ".bin";
  std::ofstream f(path, std::ios::binary);
  f.write(bytes.data(), std::streamsize(bytes.size()));
  if (!f) throw Error(ErrorCode::io_error, fmt::format("--timeline: cannot write {}", path));
}

// `flush`, when given, is recorded (untimed, its own submit) before each warm-up and timed run.
BenchResult run_case(Context& ctx, const BenchCase& c, const BenchOptions& o, const DecodeOptions& options,
                     const StreamingRead* flush) {
  BenchResult r;
  r.config = c;
  const auto& dev = ctx.device_info();
  std::mt19937 rng(1234);
  std::vector<int32_t> lens(c.batch, int32_t(c.context));
  if (c.ragged) {
    std::uniform_int_distribution<int32_t> len(1, int32_t(c.context));
    for (auto& l : lens) l = len(rng);
  }
  const uint32_t M = ceil_div(c.context, c.block_size);
  uint64_t blocks = 0, tokens = 0;
  for (int32_t l : lens) {
    blocks += ceil_div(uint64_t(l), c.block_size);
    tokens += uint64_t(l);
  }
  const uint64_t elem = is_fp8_dtype(c.cache_dtype) ? 1 : dtype_size(c.cache_dtype);
  const uint64_t pool_bytes = blocks * c.kv_heads * c.head_size * c.block_size * elem;
  r.kv_bytes = 2 * tokens * c.kv_heads * c.head_size * elem;
  if (pool_bytes > dev.max_storage_buffer_range) {
    r.skipped = fmt::format("a pool of {} MB exceeds maxStorageBufferRange", pool_bytes / 1000000);
    return r;
  }
  if (2 * pool_bytes > dev.device_local_bytes * 3 / 4) {
    r.skipped = fmt::format("{} MB of KV does not fit device memory", 2 * pool_bytes / 1000000);
    return r;
  }

  DecodeShape s;
  s.num_seqs = c.batch;
  s.num_heads = c.heads;
  s.num_kv_heads = c.kv_heads;
  s.head_size = c.head_size;
  s.block_size = c.block_size;
  s.num_blocks = uint32_t(blocks);
  s.max_blocks_per_seq = M;
  s.max_context_len = uint32_t(*std::max_element(lens.begin(), lens.end()));
  s.query_dtype = c.query_dtype;
  s.cache_dtype = c.cache_dtype;
  std::optional<DecodePlan> plan_or;
  try {
    plan_or = DecodePlan::create(ctx, s, options);
  } catch (const Error& e) {
    // --kernel matrix asks for every case; those it cannot run (other dtypes, head sizes)
    // are skipped with the reason so that the rest of the suite still runs.
    if (e.code() != ErrorCode::unsupported || options.kernel != DecodeKernel::matrix) throw;
    r.skipped = e.what();
    return r;
  }
  const DecodePlan& plan = *plan_or;
  r.path = plan.describe();

  const int64_t x = cache_pack_factor(c.cache_dtype);
  const DType stored = is_fp8_dtype(c.cache_dtype) ? DType::u8 : c.cache_dtype;
  const Shape kshape{int64_t(blocks), c.kv_heads, c.head_size / x, c.block_size, x};
  const Shape vshape{int64_t(blocks), c.kv_heads, c.head_size, c.block_size};
  const Shape qshape{c.batch, c.heads, c.head_size};
  DeviceBuffer key = ctx.create_buffer(pool_bytes), value = ctx.create_buffer(pool_bytes);
  DeviceBuffer query = ctx.create_buffer(size_t(qshape.numel()) * dtype_size(c.query_dtype));
  DeviceBuffer output = ctx.create_buffer(size_t(qshape.numel()) * dtype_size(c.query_dtype));
  DeviceBuffer tables = ctx.create_buffer(size_t(c.batch) * M * 4), lengths = ctx.create_buffer(size_t(c.batch) * 4);
  DeviceBuffer scratch = ctx.create_buffer(std::max<size_t>(plan.scratch_bytes(), 16));

  // Blocks in random order, as a long-running server's free list hands them out.
  std::vector<int32_t> ids(blocks);
  std::iota(ids.begin(), ids.end(), 0);
  std::shuffle(ids.begin(), ids.end(), rng);
  std::vector<int32_t> table(size_t(c.batch) * M, 0);
  size_t next = 0;
  for (uint32_t i = 0; i < c.batch; ++i)
    for (uint32_t j = 0; j < ceil_div(uint64_t(lens[i]), c.block_size); ++j) table[size_t(i) * M + j] = ids[next++];
  ctx.upload(tables.view(), table.data(), table.size() * 4);
  ctx.upload(lengths.view(), lens.data(), lens.size() * 4);

  DecodeViews v;
  v.query = query.tensor(c.query_dtype, qshape);
  v.key_cache = key.tensor(stored, kshape);
  v.value_cache = value.tensor(stored, vshape);
  v.block_tables = tables.tensor(DType::i32, Shape{c.batch, M});
  v.context_lens = lengths.tensor(DType::i32, Shape{c.batch});
  v.output = output.tensor(c.query_dtype, qshape);
  if (plan.scratch_bytes()) v.scratch = scratch.view(0, plan.scratch_bytes());
  ctx.run_and_wait([&](VkCommandBuffer cmd) {
    record_fill_random(ctx, cmd, v.key_cache, 1);
    record_fill_random(ctx, cmd, v.value_cache, 2);
    record_fill_random(ctx, cmd, v.query, 3);
  });

  // Longest first: the list is made once, as an engine makes it once per step for all its
  // layers; its own time is measured apart.
  DeviceBuffer order = ctx.create_buffer(std::max<size_t>(plan.order_bytes(), 16));
  if (plan.longest_first()) {
    v.order = order.view(0, plan.order_bytes());
    auto make_list = [&](VkCommandBuffer cmd) { record_decode_order(ctx, cmd, plan, v.context_lens, v.order); };
    ctx.run_and_wait(make_list);
    std::vector<double> list_us;
    for (int i = 0; i < 20; ++i) list_us.push_back(ctx.run_and_time(make_list) * 1e-3);
    std::sort(list_us.begin(), list_us.end());
    r.order_us = list_us[list_us.size() / 2];
    r.path += fmt::format(" (list {:.1f} us once per step)", r.order_us);
  }
  // DecodeMerge::in_dispatch: counters zeroed once, left zero by every decode.
  DeviceBuffer counters = ctx.create_buffer(std::max<size_t>(plan.merge_counter_bytes(), 16));
  if (plan.merge_counter_bytes()) {
    v.merge_counters = counters.view(0, plan.merge_counter_bytes());
    const std::vector<uint32_t> zeros(plan.merge_counter_bytes() / 4, 0u);
    ctx.upload(v.merge_counters, zeros.data(), plan.merge_counter_bytes());
  }
  auto run = [&](VkCommandBuffer cmd) { record_decode(ctx, cmd, plan, v); };
  // Warm start: the same decode, then the flush, in the timed repetition's command buffer.
  auto decode_then_flush = [&](VkCommandBuffer cmd) {
    run(cmd);
    record_compute_barrier(ctx, cmd);
    flush->record(cmd);
  };
  auto timed = [&] {
    if (o.warm_start) return ctx.run_and_time(run, decode_then_flush);
    if (flush) ctx.run_and_wait([&](VkCommandBuffer cmd) { flush->record(cmd); });
    return ctx.run_and_time(run);
  };
  for (int i = 0; i < o.warmup; ++i) timed();
  std::vector<double> us;
  for (int i = 0; i < std::max(20, o.repetitions); ++i) us.push_back(timed() * 1e-3);
  std::sort(us.begin(), us.end());
  if (!o.timeline_dir.empty()) write_timeline(ctx, c, s, options, v, o.timeline_dir);
  r.median_us = us[us.size() / 2];
  r.min_us = us.front();
  r.max_us = us.back();
  return r;
}

std::string json_escape(const std::string& s) {
  std::string out;
  for (char ch : s) {
    if (ch == '"' || ch == '\\') out += '\\';
    out += ch;
  }
  return out;
}

void write_json(const std::string& path, const DeviceInfo& dev, double bandwidth, size_t flush_bytes, bool warm_start,
                const std::vector<BenchResult>& results) {
  std::string j = fmt::format(
      "{{\n  \"device\": \"{}\",\n  \"driver\": \"{}\",\n  \"read_bandwidth_bytes_per_second\": {:.6g},\n"
      "  \"cache_flush_bytes\": {},\n  \"warm_start\": {},\n  \"cases\": [\n",
      json_escape(dev.name), json_escape(dev.driver), bandwidth, flush_bytes, warm_start ? "true" : "false");
  for (size_t i = 0; i < results.size(); ++i) {
    const auto& r = results[i];
    const auto& c = r.config;
    j += fmt::format(
        "    {{\"name\": \"{}\", \"batch\": {}, \"context\": {}, \"heads\": {}, \"kv_heads\": {}, \"head_size\": {}, "
        "\"block_size\": {}, \"query_dtype\": \"{}\", \"cache_dtype\": \"{}\", \"ragged\": {}, \"kv_bytes\": {}, "
        "\"median_us\": {:.3f}, \"min_us\": {:.3f}, \"max_us\": {:.3f}, \"kv_bytes_per_second\": {:.6g}, "
        "\"share_of_bandwidth\": {:.4f}, \"order_us\": {:.3f}, \"path\": \"{}\", \"skipped\": \"{}\"}}{}\n",
        c.name, c.batch, c.context, c.heads, c.kv_heads, c.head_size, c.block_size, dtype_name(c.query_dtype),
        dtype_name(c.cache_dtype), c.ragged ? "true" : "false", r.kv_bytes, r.median_us, r.min_us, r.max_us,
        r.kv_bytes_per_second(), bandwidth > 0 ? r.kv_bytes_per_second() / bandwidth : 0.0, r.order_us, json_escape(r.path),
        json_escape(r.skipped), i + 1 < results.size() ? "," : "");
  }
  j += "  ]\n}\n";
  std::ofstream f(path);
  f << j;
  if (!f) throw Error(ErrorCode::io_error, fmt::format("--json: cannot write {}", path));
}

}  // namespace

DecodeOptions bench_decode_options(const BenchOptions& o) {
  DecodeOptions options;
  options.split = parse_split(o.split);
  options.partition_tokens = o.partition_tokens;
  options.kernel = parse_kernel(o.kernel);
  options.order = parse_order(o.order);
  options.merge = parse_merge(o.merge);
  return options;
}

int run_bench(const BenchOptions& o) {
  if (is_cache_write_suite(o.suite)) return run_cache_write_bench(o);
  const auto cases = with_cache_dtype(bench_suite(o.suite), o.cache_dtype);
  // Bad option values are refused before the device is opened and its bandwidth measured.
  const DecodeOptions decode_options = bench_decode_options(o);
  if (o.warm_start && !o.flush_caches)
    throw Error(ErrorCode::invalid_argument,
                "--warm-start needs --flush-caches: the untimed decode before each repetition would leave its bytes "
                "in the GPU's caches");
  if (!o.timeline_dir.empty()) {
    std::error_code ec;
    std::filesystem::create_directories(o.timeline_dir, ec);
    if (ec) throw Error(ErrorCode::io_error, fmt::format("--timeline: cannot create {}: {}", o.timeline_dir, ec.message()));
  }
  ContextOptions copts;
  copts.device = o.device;
  Context ctx(copts);
  const auto& dev = ctx.device_info();
  // Several times the largest L2 caches (60 MB on an H200), capped by the device's limits.
  const size_t probe = std::min<size_t>({size_t(1) << 30, dev.max_storage_buffer_range, dev.device_local_bytes / 4});
  // With --flush-caches the probe's buffer is kept and read again before each repetition.
  std::optional<StreamingRead> flush;
  if (o.flush_caches) flush.emplace(ctx, probe);
  // A warm start times the probes as it times the decodes: after a small read of the same
  // pipeline in the same command buffer.
  std::optional<StreamingRead> lead;
  if (o.warm_start) lead.emplace(ctx, size_t(1) << 16);
  auto measure = [&](const StreamingRead& read) {
    return lead ? measure_read_bandwidth_after(ctx, read, *lead, o.repetitions) : measure_read_bandwidth(ctx, read, o.repetitions);
  };
  const auto bw = flush ? measure(*flush) : measure_read_bandwidth(ctx, probe, o.repetitions);
  const double bandwidth = bw.bytes_per_second();
  fmt::print("device: {} ({})\n", dev.name, dev.driver);
  fmt::print("read bandwidth (streaming 16-byte loads, {} MB, median of {}): {:.1f} GB/s\n", bw.bytes / 1000000,
             o.repetitions, bandwidth / 1e9);
  // The same kernel over the KV bytes of the small standard cases (134 MB), where a launch and
  // the last wave weigh more: what a decode of that size can reach at best. Shares stay relative
  // to the large read above, as performance-targets.md defines them.
  constexpr size_t kSmallCaseBytes = size_t(1) << 27;
  if (probe > kSmallCaseBytes) {
    const auto small = measure(StreamingRead(ctx, kSmallCaseBytes));
    fmt::print("read bandwidth over {} MB (the small standard cases' KV size): {:.1f} GB/s, {:.1f} us\n",
               small.bytes / 1000000, small.bytes_per_second() / 1e9, small.median_ns / 1e3);
  }
  if (flush) fmt::print("caches flushed before each repetition: a {} MB streaming read, not timed\n", flush->bytes() / 1000000);
  if (o.warm_start)
    fmt::print("warm start: each repetition runs after the same decode and the flush, untimed, in one command buffer\n");
  fmt::print("\n");
  fmt::print("{:<18} {:>5} {:>7} {:>3}/{:<3} {:>3} {:>3} {:>9} {:>9} {:>9} {:>9} {:>9} {:>6}  {}\n", "case", "batch",
             "context", "H", "Hkv", "D", "B", "kv", "median us", "min us", "max us", "GB/s", "share", "path");
  std::vector<BenchResult> results;
  for (const auto& c : cases) {
    BenchResult r = run_case(ctx, c, o, decode_options, flush ? &*flush : nullptr);
    const double share = bandwidth > 0 ? r.kv_bytes_per_second() / bandwidth : 0.0;
    if (!r.skipped.empty())
      fmt::print("{:<18} skipped: {}\n", c.name, r.skipped);
    else
      fmt::print("{:<18} {:>5} {:>7} {:>3}/{:<3} {:>3} {:>3} {:>9} {:>9.1f} {:>9.1f} {:>9.1f} {:>9.1f} {:>5.1f}%  {}\n",
                 c.name, c.batch, c.context, c.heads, c.kv_heads, c.head_size, c.block_size, dtype_name(c.cache_dtype),
                 r.median_us, r.min_us, r.max_us, r.kv_bytes_per_second() / 1e9, 100.0 * share, r.path);
    std::fflush(stdout);
    results.push_back(std::move(r));
  }
  if (!o.json_path.empty()) write_json(o.json_path, dev, bandwidth, flush ? flush->bytes() : 0, o.warm_start, results);
  if (!o.chart_path.empty()) {
    std::ofstream f(o.chart_path);
    const std::string title =
        fmt::format("vkpaged decode, {} suite, {}{}", o.suite, dev.name, o.warm_start ? ", warm start" : "");
    f << bench_chart_svg(results, bandwidth, title);
    if (!f) throw Error(ErrorCode::io_error, fmt::format("--chart: cannot write {}", o.chart_path));
  }
  return 0;
}

}  // namespace vkpaged::cli
