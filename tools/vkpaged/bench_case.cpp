// SPDX-License-Identifier: Apache-2.0
// `vkpaged bench`'s cases: each prepared once for the run, its buffers (allocations of its own
// or views into the arena), one timed run of it.
#include <fmt/format.h>

#include <algorithm>
#include <fstream>
#include <functional>
#include <numeric>
#include <random>

#include "bench_run.hpp"
#include "bench_timing.hpp"
#include "ops/integer_math.hpp"
#include "vkpaged/error.hpp"
#include "vkpaged/kv_cache.hpp"

namespace vkpaged::cli {

using detail::ceil_div;

namespace {

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

// The arena places a case's pools (a decode case's first two of CaseBuffer, an MLA case's one) at
// 2 MiB boundaries, the rest at 256 bytes or the device's storage-buffer offset alignment.
constexpr size_t kPoolBuffers = 2;
constexpr size_t kPoolAlignment = size_t(2) << 20;

std::vector<size_t> buffer_sizes(const PreparedCase& p) {
  const auto& c = p.config;
  const DecodePlan& plan = *p.plan;
  const size_t q = size_t(c.batch) * c.heads * c.head_size * dtype_size(c.query_dtype);
  std::vector<size_t> sizes(kBufferCount);
  sizes[kKey] = sizes[kValue] = p.pool_bytes;
  sizes[kQuery] = sizes[kOutput] = q;
  sizes[kTables] = size_t(c.batch) * p.max_blocks * 4;
  sizes[kLengths] = size_t(c.batch) * 4;
  sizes[kScratch] = std::max<size_t>(plan.scratch_bytes(), 16);
  sizes[kOrder] = std::max<size_t>(plan.order_bytes(), 16);
  sizes[kCounters] = std::max<size_t>(plan.merge_counter_bytes(), 16);
  return sizes;
}

size_t small_alignment(const Context& ctx) {
  return std::max<size_t>(ctx.device_info().min_storage_buffer_offset_alignment, 256);
}

// Median GPU time of `record` in ns: three untimed runs, then `repetitions` timed ones, each
// after `before` (untimed, in the same command buffer) when given.
double median_ns(Context& ctx, const std::function<void(VkCommandBuffer)>& record,
                 const std::function<void(VkCommandBuffer)>* before, int repetitions) {
  auto timed = [&] { return before ? ctx.run_and_time(record, *before) : ctx.run_and_time(record); };
  for (int i = 0; i < 3; ++i) timed();
  std::vector<double> ns;
  for (int i = 0; i < std::max(1, repetitions); ++i) ns.push_back(timed());
  std::nth_element(ns.begin(), ns.begin() + ns.size() / 2, ns.end());
  return ns[ns.size() / 2];
}

}  // namespace

CaseMemory own_memory(Context& ctx, const std::vector<size_t>& sizes) {
  CaseMemory m;
  for (size_t bytes : sizes) {
    m.owned.push_back(ctx.create_buffer(bytes));
    m.views.push_back(m.owned.back().view());
  }
  return m;
}

CaseMemory arena_memory(const Context& ctx, const DeviceBuffer& arena, const std::vector<size_t>& sizes, size_t pools) {
  const auto at = arena_offsets(sizes, pools, kPoolAlignment, small_alignment(ctx));
  CaseMemory m;
  for (size_t i = 0; i < sizes.size(); ++i) m.views.push_back(arena.view(at[i], sizes[i]));
  return m;
}

size_t arena_bytes(const Context& ctx, const std::vector<size_t>& sizes, size_t pools) {
  return arena_offsets(sizes, pools, kPoolAlignment, small_alignment(ctx)).back();
}

DeviceBuffer create_arena(Context& ctx, size_t bytes) {
  try {
    return ctx.create_buffer(bytes);
  } catch (const Error& e) {
    if (e.code() != ErrorCode::out_of_memory) throw;
    throw Error(ErrorCode::out_of_memory,
                fmt::format("--arena: one allocation of {} bytes ({} MB) for the run's largest case: {}; --no-arena "
                            "allocates each case's buffers apart",
                            bytes, bytes / 1000000, e.what()));
  }
}

std::string buffers_line(const DeviceBuffer* arena) {
  if (!arena) return "buffers: each case allocates its own and frees them when it ends (--no-arena)";
  return fmt::format(
      "buffers: one arena of {} MB, allocated once, every case's pools and tables views into it (--arena)",
      arena->size() / 1000000);
}

CaseMemory own_memory(Context& ctx, const PreparedCase& p) { return own_memory(ctx, buffer_sizes(p)); }

CaseMemory arena_memory(const Context& ctx, const DeviceBuffer& arena, const PreparedCase& p) {
  return arena_memory(ctx, arena, buffer_sizes(p), kPoolBuffers);
}

size_t arena_bytes(const Context& ctx, const std::vector<PreparedCase>& cases) {
  size_t bytes = 16;
  for (const auto& p : cases)
    if (p.skipped.empty()) bytes = std::max(bytes, arena_bytes(ctx, buffer_sizes(p), kPoolBuffers));
  return bytes;
}

PreparedCase prepare_case(Context& ctx, const std::string& suite, const BenchCase& c, const DecodeOptions& options) {
  PreparedCase p;
  p.suite = suite;
  p.config = c;
  const auto& dev = ctx.device_info();
  std::mt19937 rng(1234);
  p.lens.assign(c.batch, int32_t(c.context));
  if (c.ragged) {
    std::uniform_int_distribution<int32_t> len(1, int32_t(c.context));
    for (auto& l : p.lens) l = len(rng);
  }
  p.max_blocks = ceil_div(c.context, c.block_size);
  uint64_t tokens = 0;
  for (int32_t l : p.lens) {
    p.blocks += ceil_div(uint64_t(l), c.block_size);
    tokens += uint64_t(l);
  }
  const uint64_t elem = dtype_size(c.cache_dtype);
  // One layer's key (or value) pool, as a KvCache of this geometry holds it.
  p.pool_bytes = KvCache::sizing({.num_kv_heads = uint32_t(c.kv_heads), .head_size = uint32_t(c.head_size),
                                  .block_size = uint32_t(c.block_size), .dtype = c.cache_dtype},
                                 uint32_t(p.blocks))
                     .pool_bytes;
  p.kv_bytes = 2 * tokens * c.kv_heads * c.head_size * elem;
  if (p.pool_bytes > dev.max_storage_buffer_range) {
    p.skipped = fmt::format("a pool of {} MB exceeds maxStorageBufferRange", p.pool_bytes / 1000000);
    return p;
  }
  if (2 * p.pool_bytes > dev.device_local_bytes * 3 / 4) {
    p.skipped = fmt::format("{} MB of KV does not fit device memory", 2 * p.pool_bytes / 1000000);
    return p;
  }

  DecodeShape& s = p.shape;
  s.num_seqs = c.batch;
  s.num_heads = c.heads;
  s.num_kv_heads = c.kv_heads;
  s.head_size = c.head_size;
  s.block_size = c.block_size;
  s.num_blocks = uint32_t(p.blocks);
  s.max_blocks_per_seq = p.max_blocks;
  s.max_context_len = uint32_t(*std::max_element(p.lens.begin(), p.lens.end()));
  s.query_dtype = c.query_dtype;
  s.cache_dtype = c.cache_dtype;
  s.kv_layout = c.kv_layout;
  try {
    p.plan = DecodePlan::create(ctx, s, options);
  } catch (const Error& e) {
    // --kernel matrix (or matrix-khr) asks for every case; those it cannot run (other dtypes,
    // head sizes) are skipped with the reason so that the rest of the suite still runs.
    const bool matrix = options.kernel == DecodeKernel::matrix || options.kernel == DecodeKernel::matrix_khr;
    if (e.code() != ErrorCode::unsupported || !matrix) throw;
    p.skipped = e.what();
    return p;
  }

  // Blocks in random order, as a long-running server's free list hands them out.
  std::vector<int32_t> ids(p.blocks);
  std::iota(ids.begin(), ids.end(), 0);
  std::shuffle(ids.begin(), ids.end(), rng);
  p.table.assign(size_t(c.batch) * p.max_blocks, 0);
  size_t next = 0;
  for (uint32_t i = 0; i < c.batch; ++i)
    for (uint32_t j = 0; j < ceil_div(uint64_t(p.lens[i]), c.block_size); ++j)
      p.table[size_t(i) * p.max_blocks + j] = ids[next++];
  return p;
}

BenchResult run_case(Context& ctx, const PreparedCase& p, const CaseMemory& m, int round, const BenchOptions& o,
                     const RunShared& shared) {
  BenchResult r;
  r.config = p.config;
  r.suite = p.suite;
  r.round = round;
  r.kv_bytes = p.kv_bytes;
  r.skipped = p.skipped;
  if (!r.skipped.empty()) return r;
  const BenchCase& c = p.config;
  const DecodePlan& plan = *p.plan;
  r.path = plan.describe();
  const StreamingRead* flush = shared.flush;

  const int64_t x = cache_pack_factor(c.cache_dtype);
  const DType stored = is_fp8_dtype(c.cache_dtype) ? DType::u8 : c.cache_dtype;
  const int64_t N = int64_t(p.blocks), Hkv = c.kv_heads, D = c.head_size, B = c.block_size;
  const Shape kshape = c.kv_layout == KvLayout::nhd   ? Shape{N, B, Hkv, D}
                       : c.kv_layout == KvLayout::hnd ? Shape{N, Hkv, B, D}
                                                      : Shape{N, Hkv, D / x, B, x};
  const Shape vshape = c.kv_layout == KvLayout::vllm ? Shape{N, Hkv, D, B} : kshape;
  const Shape qshape{c.batch, c.heads, c.head_size};
  const Shape tshape{c.batch, p.max_blocks};
  ctx.upload(m.views[kTables], p.table.data(), p.table.size() * 4);
  ctx.upload(m.views[kLengths], p.lens.data(), p.lens.size() * 4);

  auto tensor = [&](size_t i, DType dtype, const Shape& shape) {
    const BufferView& b = m.views[i];
    return TensorView{BufferView{b.buffer, b.offset, size_t(shape.numel()) * dtype_size(dtype)}, dtype, shape};
  };
  DecodeViews v;
  v.query = tensor(kQuery, c.query_dtype, qshape);
  v.key_cache = tensor(kKey, stored, kshape);
  v.value_cache = tensor(kValue, stored, vshape);
  v.block_tables = tensor(kTables, DType::i32, tshape);
  v.context_lens = tensor(kLengths, DType::i32, Shape{c.batch});
  v.output = tensor(kOutput, c.query_dtype, qshape);
  auto part = [&](size_t i, size_t bytes) { return BufferView{m.views[i].buffer, m.views[i].offset, bytes}; };
  if (plan.scratch_bytes()) v.scratch = part(kScratch, plan.scratch_bytes());
  ctx.run_and_wait([&](VkCommandBuffer cmd) {
    record_fill_random(ctx, cmd, v.key_cache, 1);
    record_fill_random(ctx, cmd, v.value_cache, 2);
    record_fill_random(ctx, cmd, v.query, 3);
  });

  // Longest first: the list is made once, as an engine makes it once per step for all its
  // layers; its own time is measured apart.
  if (plan.longest_first()) {
    v.order = part(kOrder, plan.order_bytes());
    auto make_list = [&](VkCommandBuffer cmd) { record_decode_order(ctx, cmd, plan, v.context_lens, v.order); };
    ctx.run_and_wait(make_list);
    std::vector<double> list_us;
    for (int i = 0; i < 20; ++i) list_us.push_back(ctx.run_and_time(make_list) * 1e-3);
    std::sort(list_us.begin(), list_us.end());
    r.order_us = list_us[list_us.size() / 2];
    r.path += fmt::format(" (list {:.1f} us once per step)", r.order_us);
  }
  // DecodeMerge::in_dispatch: counters zeroed once, left zero by every decode.
  if (plan.merge_counter_bytes()) {
    v.merge_counters = part(kCounters, plan.merge_counter_bytes());
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
  const RepetitionTimes t = time_repetitions(ctx, o, 20, timed);
  if (!o.timeline_dir.empty() && round == 1) write_timeline(ctx, c, p.shape, shared.options, v, o.timeline_dir);
  static_cast<RepetitionTimes&>(r) = t;

  // Both pools read end to end, after the flush when the bench flushes (which also runs the
  // read's pipeline first, as a warm start does).
  auto read_pools = [&](VkCommandBuffer cmd) {
    record_streaming_read(ctx, cmd, part(kKey, p.pool_bytes), shared.key_sink);
    record_streaming_read(ctx, cmd, part(kValue, p.pool_bytes), shared.value_sink);
  };
  const std::function<void(VkCommandBuffer)> flush_first = [&](VkCommandBuffer cmd) { flush->record(cmd); };
  const double pool_ns = median_ns(ctx, read_pools, flush ? &flush_first : nullptr, o.repetitions);
  if (pool_ns > 0) r.pool_read_bytes_per_second = double(2 * (p.pool_bytes / 16 * 16)) / (pool_ns * 1e-9);
  return r;
}

}  // namespace vkpaged::cli
