// SPDX-License-Identifier: Apache-2.0
// `vkpaged bench --suite mla` (and mla-quick, lavapipe-sized; mla-resident, decode steps of more
// workgroups than a GPU has compute units in one pass, for the phase clocks of
// scripts/h200-session.sh): DeepSeek's multi-head latent attention in decode (one new token per
// request) over the paged MLA cache, and `--suite
// mla-prefill` (mla-prefill-quick): prefills and chunks after a cached prefix (many new tokens per
// request, causal), record_mla_attention
// timed with GPU timestamps, each case beside its two limits measured in the same run: the cache
// bytes over the streaming read's bandwidth, and the FLOPs over the cooperative-matrix ceiling
// (src/ops/matrix_ceiling_khr.cpp). The absorbed shapes of DeepSeek-V2/V3: one latent kv head,
// keys Dk = 512 latent + 64 rope = 576 wide, values the rows' first Dv = 512; the cache in one
// pool [N, B, 576] (vLLM's form), bf16 or fp8 E4M3 with a scale, blocks of 64 in shuffled order;
// bf16 queries. Each case's buffers are allocations of its own, freed when it ends, or with
// --arena views into one allocation made once for the run (its pool at a 2 MiB boundary), as the
// decode suites' (bench_case.cpp). After timing, each case's output is checked against the CPU
// reference for its first and last request (their first and last new token) on a few heads.
#include <fmt/format.h>
#include <fmt/ranges.h>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <functional>
#include <numeric>
#include <optional>
#include <random>
#include <string>
#include <vector>

#include "bench.hpp"
#include "bench_run.hpp"
#include "bench_timing.hpp"
#include "cli_context.hpp"
#include "decode_option_names.hpp"
#include "json_file.hpp"
#include "ops/integer_math.hpp"
#include "ops/matrix_ceiling_khr.hpp"
#include "vkpaged/context.hpp"
#include "vkpaged/error.hpp"
#include "vkpaged/mla_attention.hpp"
#include "vkpaged/reference.hpp"
#include "vkpaged/utilities.hpp"

namespace vkpaged::cli {

using detail::ceil_div;

namespace {

constexpr DType kQueryDtype = DType::bf16;
// fp8 caches: stored as encode(x / scale), read back as decode(byte) * scale (k_scale = v_scale).
constexpr float kFp8Scale = 0.5f;
// DeepSeek-V3's softmax scale: 1 / sqrt(qk_nope 128 + qk_rope 64) times the YaRN mscale squared
// (0.1 * mscale_all_dim 1.0 * ln(factor 40) + 1), as its engines fold it in before the call.
const float kDeepSeekScale = float(std::pow(0.1 * std::log(40.0) + 1.0, 2) / std::sqrt(192.0));

MlaBenchCase mla_case(uint32_t requests, uint32_t context, uint32_t heads, DType cache, const char* prefix = "") {
  const std::string length = context % 1024 == 0 ? fmt::format("{}k", context / 1024) : fmt::format("{}", context);
  return {fmt::format("{}r{}-{}-h{}-{}", prefix, requests, length, heads, dtype_name(cache)), requests, context, heads,
          cache};
}

// `shape` names the requests and their tokens as the prefill suite does (p4k, chunk4x512+8k).
MlaBenchCase mla_prefill_case(const char* shape, uint32_t requests, uint32_t new_tokens, uint32_t context,
                              uint32_t heads, DType cache) {
  return {fmt::format("{}-h{}-{}", shape, heads, dtype_name(cache)), requests, context, heads, cache, new_tokens};
}

// --kernel: MlaOptions::kernel (automatic, the portable kernel or the tensor-core one).
void set_mla_kernel(MlaOptions& options, const std::string& name) {
  if (name == "auto") options.kernel = AttentionKernel::automatic;
  else if (name == "scalar") options.kernel = AttentionKernel::scalar;
  else if (name == "matrix") options.kernel = AttentionKernel::matrix;
  else throw Error(ErrorCode::invalid_argument, fmt::format("--kernel: \"{}\" is not auto, scalar or matrix", name));
}

std::string mla_kernel_name(const MlaPlan& plan) {
  return plan.kernel() == AttentionKernel::matrix ? "matrix" : "scalar";
}

}  // namespace

const std::vector<std::string>& mla_suite_names() {
  static const std::vector<std::string> names = {"mla", "mla-quick", "mla-resident", "mla-prefill", "mla-prefill-quick"};
  return names;
}

bool is_mla_suite(const std::string& suite) {
  const auto& names = mla_suite_names();
  return std::find(names.begin(), names.end(), suite) != names.end();
}

std::vector<MlaBenchCase> mla_bench_cases(const std::string& suite) {
  std::vector<MlaBenchCase> cases;
  if (suite == "mla") {
    for (DType cache : {DType::bf16, DType::fp8_e4m3})
      for (uint32_t heads : {16u, 128u})
        for (uint32_t context : {4096u, 32768u})
          for (uint32_t requests : {1u, 8u, 32u, 128u}) cases.push_back(mla_case(requests, context, heads, cache));
    return cases;
  }
  // 256 requests of 16 heads: in one pass (--split single) 256 workgroups, more than one per
  // compute unit on a GPU of fewer: the phase clocks show how many an SM holds at once and what
  // a tile costs beside another (bench/experiments/mla-two-resident.md).
  if (suite == "mla-resident") return {mla_case(256, 4096, 16, DType::bf16), mla_case(256, 4096, 16, DType::fp8_e4m3)};
  if (suite == "mla-quick")  // lavapipe-sized; 200 rows end in a block of 8
    return {mla_case(1, 512, 16, DType::bf16, "q-"), mla_case(4, 256, 16, DType::fp8_e4m3, "q-"),
            mla_case(2, 256, 128, DType::bf16, "q-"), mla_case(3, 200, 128, DType::fp8_e4m3, "q-")};
  // Target 14: the prefill suite's shapes (bench/torch_prefill_anchor.py) with MLA's heads:
  // DeepSeek-V2-Lite's 16 and V3's 128 (bench/torch_mla_anchor.py --suite mla-prefill times
  // FlashAttention-2 on the same tokens unabsorbed).
  if (suite == "mla-prefill") {
    for (DType cache : {DType::bf16, DType::fp8_e4m3})
      for (uint32_t heads : {16u, 128u}) {
        cases.push_back(mla_prefill_case("p4k", 1, 4096, 4096, heads, cache));
        cases.push_back(mla_prefill_case("p8x2k", 8, 2048, 2048, heads, cache));
        cases.push_back(mla_prefill_case("chunk4x512+8k", 4, 512, 8704, heads, cache));
      }
    return cases;
  }
  if (suite == "mla-prefill-quick")  // lavapipe-sized; a chunk of 40 after 160 ends in a block of 8
    return {mla_prefill_case("q-p96", 1, 96, 96, 16, DType::bf16),
            mla_prefill_case("q-chunk2x40+160", 2, 40, 200, 16, DType::fp8_e4m3),
            mla_prefill_case("q-p48", 1, 48, 48, 128, DType::bf16)};
  const auto& names = mla_suite_names();
  throw Error(ErrorCode::invalid_argument,
              fmt::format("--suite: \"{}\" is not {} or {}", suite,
                          fmt::join(names.begin(), names.end() - 1, ", "), names.back()));
}

MlaCaseBytes mla_case_bytes(const MlaBenchCase& c) {
  MlaCaseBytes b;
  const uint64_t elem = dtype_size(c.cache_dtype);
  b.blocks = c.requests * ceil_div(c.context, kMlaBlockSize);
  b.pool = b.blocks * kMlaBlockSize * kMlaKeyWidth * elem;
  b.cache_read = uint64_t(c.requests) * c.context * kMlaKeyWidth * elem;
  const uint64_t rows = uint64_t(c.requests) * c.new_tokens;
  b.query = rows * c.heads * kMlaKeyWidth * dtype_size(kQueryDtype);
  b.output = rows * c.heads * kMlaValueWidth * dtype_size(kQueryDtype);
  // New token j of q sees the L - q + j + 1 keys up to its own.
  const double q = c.new_tokens, seen = q * (double(c.context) - q) + q * (q + 1) / 2;
  b.flops = 2.0 * c.heads * double(kMlaKeyWidth + kMlaValueWidth) * seen * c.requests;
  return b;
}

std::string mla_case_unfit(const MlaBenchCase& c, const DeviceInfo& dev) {
  const MlaCaseBytes b = mla_case_bytes(c);
  // A pool past the range is read by device address (the kernels' address variants).
  if (b.pool > dev.max_storage_buffer_range && !dev.buffer_device_address)
    return fmt::format("the pool of {} MB exceeds maxStorageBufferRange ({} MB), and the device has no buffer device "
                       "addresses",
                       b.pool / 1000000, dev.max_storage_buffer_range / 1000000);
  if (dev.max_memory_allocation_size && b.pool > dev.max_memory_allocation_size)
    return fmt::format("the pool of {} MB exceeds maxMemoryAllocationSize ({} MB)", b.pool / 1000000,
                       dev.max_memory_allocation_size / 1000000);
  // The bench's own buffers (the bandwidth probe: a quarter of the device's memory at most) stay
  // allocated beside the case's, so a case may take half.
  const uint64_t total = b.pool + b.query + b.output;
  const uint64_t memory =
      dev.memory_budget && dev.device_local_free_bytes ? dev.device_local_free_bytes : dev.device_local_bytes;
  if (total > memory / 2)
    return fmt::format("{} MB of buffers exceed half the device's {} memory ({} MB)", total / 1000000,
                       dev.memory_budget ? "free" : "local", memory / 1000000);
  return "";
}

namespace {

// One case made once for the run, before any case's buffers exist (the arena is sized for the
// largest case that runs): its plan, query starts, lengths and block table, or why it cannot run
// on this device.
struct MlaPrepared {
  MlaBenchCase config;
  MlaCaseBytes bytes;
  std::vector<int32_t> starts, lens, table;  // table: [S, M], blocks in random order
  std::optional<MlaPlan> plan;
  std::string skipped;
};

MlaPrepared prepare_mla_case(Context& ctx, const MlaBenchCase& c, const MlaOptions& options) {
  MlaPrepared p;
  p.config = c;
  p.bytes = mla_case_bytes(c);
  p.skipped = mla_case_unfit(c, ctx.device_info());
  if (!p.skipped.empty()) return p;
  const uint32_t S = c.requests, B = kMlaBlockSize, T = S * c.new_tokens;
  const uint32_t M = uint32_t(ceil_div(c.context, B));
  p.starts.resize(S + 1);
  for (uint32_t r = 0; r <= S; ++r) p.starts[r] = int32_t(r * c.new_tokens);
  p.lens.assign(S, int32_t(c.context));
  MlaShape s;
  s.attention.num_requests = S;
  s.attention.num_query_tokens = T;
  s.attention.num_heads = c.heads;
  s.attention.num_kv_heads = 1;
  s.attention.head_size = kMlaKeyWidth;
  s.attention.block_size = B;
  s.attention.num_blocks = uint32_t(p.bytes.blocks);
  s.attention.max_blocks_per_seq = M;
  s.attention.max_context_len = c.context;
  s.attention.query_dtype = kQueryDtype;
  s.attention.cache_dtype = c.cache_dtype;
  s.attention.kv_layout = KvLayout::nhd;
  s.value_head_size = kMlaValueWidth;
  s.cache_form = MlaCacheForm::one_pool;
  try {
    p.plan.emplace(MlaPlan::create(ctx, s, p.starts, options));
  } catch (const Error& e) {
    // What this device cannot run (a refused plan, memory the checks above did not foresee).
    if (e.code() != ErrorCode::unsupported && e.code() != ErrorCode::out_of_memory) throw;
    p.skipped = e.what();
    return p;
  }
  // Blocks handed out in random order, as a server's free list does.
  std::vector<int32_t> ids(p.bytes.blocks);
  std::iota(ids.begin(), ids.end(), 0);
  std::shuffle(ids.begin(), ids.end(), std::mt19937(39));
  p.table.assign(size_t(S) * M, 0);
  for (size_t i = 0; i < p.table.size(); ++i) p.table[i] = ids[i];
  return p;
}

// An MLA case's buffers, in the order the arena lays them out: the pool first (kMlaPools: at a
// 2 MiB boundary), then the small ones.
enum MlaBuffer : size_t {
  kMlaPool, kMlaQuery, kMlaOutput, kMlaTables, kMlaLengths, kMlaStarts, kMlaScratch, kMlaBufferCount
};
constexpr size_t kMlaPools = 1;

std::vector<size_t> mla_buffer_sizes(const MlaPrepared& p) {
  std::vector<size_t> sizes(kMlaBufferCount);
  sizes[kMlaPool] = p.bytes.pool;
  sizes[kMlaQuery] = p.bytes.query;
  sizes[kMlaOutput] = p.bytes.output;
  sizes[kMlaTables] = p.table.size() * 4;
  sizes[kMlaLengths] = p.lens.size() * 4;
  sizes[kMlaStarts] = p.starts.size() * 4;
  sizes[kMlaScratch] = std::max<size_t>(p.plan->scratch_bytes(), 16);
  return sizes;
}

// Random contents for a pool, in slices that each fit one descriptor: fill_random binds its view,
// and a pool may be past maxStorageBufferRange (its kernels then read it by device address).
void fill_pool(Context& ctx, VkCommandBuffer cmd, const TensorView& pool, uint32_t seed) {
  const size_t element = dtype_size(pool.dtype);
  const size_t slice = (ctx.device_info().max_storage_buffer_range - 256) / 256 * 256;  // whole elements, aligned starts
  const size_t bytes = pool.bytes();
  for (size_t at = 0, i = 0; at < bytes; at += slice, ++i) {
    const size_t n = std::min(slice, bytes - at);
    record_fill_random(ctx, cmd,
                       TensorView{BufferView{pool.memory.buffer, pool.memory.offset + at, n}, pool.dtype,
                                  Shape{int64_t(n / element)}},
                       seed + uint32_t(1000 * i));
  }
}

// One case's tensors on the device (random contents) in its buffers: allocations of its own or
// views into the arena (`buffers`, MlaBuffer order, outliving this object).
class MlaBatch {
 public:
  MlaBatch(Context& ctx, const MlaPrepared& p, const std::vector<BufferView>& buffers)
      : ctx_(ctx), c_(p.config), table_(p.table), plan_(*p.plan) {
    const uint32_t S = c_.requests, B = kMlaBlockSize, T = S * c_.new_tokens;
    const uint32_t M = uint32_t(ceil_div(c_.context, B));
    auto tensor = [&](MlaBuffer i, DType dtype, const Shape& shape) {
      const BufferView& b = buffers[i];
      return TensorView{BufferView{b.buffer, b.offset, size_t(shape.numel()) * dtype_size(dtype)}, dtype, shape};
    };
    const DType stored = is_fp8_dtype(c_.cache_dtype) ? DType::u8 : c_.cache_dtype;
    views_.query = tensor(kMlaQuery, kQueryDtype, Shape{T, c_.heads, kMlaKeyWidth});
    views_.output = tensor(kMlaOutput, kQueryDtype, Shape{T, c_.heads, kMlaValueWidth});
    views_.mla_cache = tensor(kMlaPool, stored, Shape{int64_t(p.bytes.blocks), B, kMlaKeyWidth});
    views_.block_tables = tensor(kMlaTables, DType::i32, Shape{S, M});
    views_.context_lens = tensor(kMlaLengths, DType::i32, Shape{S});
    views_.query_starts = tensor(kMlaStarts, DType::i32, Shape{S + 1});
    ctx.upload(views_.block_tables.memory, p.table.data(), views_.block_tables.bytes());
    ctx.upload(views_.context_lens.memory, p.lens.data(), views_.context_lens.bytes());
    ctx.upload(views_.query_starts.memory, p.starts.data(), views_.query_starts.bytes());
    if (plan_.scratch_bytes()) {
      const BufferView& b = buffers[kMlaScratch];
      views_.scratch = BufferView{b.buffer, b.offset, plan_.scratch_bytes()};
    }
    ctx.run_and_wait([&](VkCommandBuffer cmd) {
      record_fill_random(ctx, cmd, views_.query, 5);
      fill_pool(ctx, cmd, views_.mla_cache, 6);
    });
    params_.scale = kDeepSeekScale;
    if (is_fp8_dtype(c_.cache_dtype)) params_.k_scale = params_.v_scale = kFp8Scale;
  }

  void record(VkCommandBuffer cmd) const { record_mla_attention(ctx_, cmd, plan_, views_, params_); }
  const MlaPlan& plan() const { return plan_; }

  // The output of the first and the last request (their first and last new token) on a few heads
  // against the CPU reference over the same rows, read back from the device (the last recorded
  // call's output).
  MlaCheck check() const {
    const auto start = std::chrono::steady_clock::now();
    MlaCheck k;
    k.requests = {0};
    if (c_.requests > 1) k.requests.push_back(c_.requests - 1);
    k.tokens = {0};
    if (c_.new_tokens > 1) k.tokens.push_back(c_.new_tokens - 1);
    for (uint32_t h : {0u, c_.heads / 3, 2 * c_.heads / 3, c_.heads - 1})
      if (std::find(k.heads.begin(), k.heads.end(), h) == k.heads.end()) k.heads.push_back(h);
    bool passed = true;
    for (uint32_t r : k.requests)
      for (uint32_t j : k.tokens) {
        const uint32_t row = r * c_.new_tokens + j;
        const HostTensor want = reference::mla_attention(token_inputs(row, k.heads), params_).output;  // [1, h, Dv]
        const HostTensor got = download_rows(views_.output, row);                                        // [H, Dv]
        for (int64_t i = 0; i < want.numel(); ++i)
          k.max_reference = std::max(k.max_reference, std::fabs(want.get(size_t(i))));
        for (size_t i = 0; i < k.heads.size(); ++i)
          for (size_t d = 0; d < kMlaValueWidth; ++d) {
            const double w = want.get(i * kMlaValueWidth + d), g = got.get(k.heads[i] * kMlaValueWidth + d);
            const double error = std::isfinite(g) ? std::fabs(g - w) : INFINITY;
            k.max_error = std::max(k.max_error, error);
            if (!(error <= kMlaCheckRelative * std::fabs(w) + kMlaCheckFloor * k.max_reference)) passed = false;
          }
      }
    k.passed = passed;
    k.seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
    return k;
  }

 private:
  // Token t's rows of a [T, H, D] view of the query's dtype, as [H, D].
  HostTensor download_rows(const TensorView& v, uint32_t t) const {
    HostTensor rows(v.dtype, Shape{v.shape[1], v.shape[2]});
    const BufferView m = v.memory;
    ctx_.download(BufferView{m.buffer, m.offset + t * rows.bytes(), rows.bytes()}, rows.data(), rows.bytes());
    return rows;
  }

  // Query token `row` (new token j = row % new_tokens of request row / new_tokens) alone, for the reference: its query on
  // `heads`, its request's blocks read back from the pool (renumbered 0 .. M - 1), and the length
  // it sees: causal, the keys up to its own (the same output as within its request).
  MlaInputs token_inputs(uint32_t row, const std::vector<uint32_t>& heads) const {
    const uint32_t r = row / c_.new_tokens, j = row % c_.new_tokens;
    const int64_t B = kMlaBlockSize, M = int64_t(ceil_div(c_.context, B)), h = int64_t(heads.size());
    MlaInputs in;
    in.cache_dtype = c_.cache_dtype;
    in.value_head_size = kMlaValueWidth;
    const TensorView& pool = views_.mla_cache;
    in.mla_cache = HostTensor(pool.dtype, Shape{M, B, kMlaKeyWidth});
    const size_t block_bytes = size_t(B) * kMlaKeyWidth * dtype_size(pool.dtype);
    for (int64_t j = 0; j < M; ++j) {
      const size_t id = size_t(table_[size_t(r) * M + j]);
      ctx_.download(BufferView{pool.memory.buffer, pool.memory.offset + id * block_bytes, block_bytes},
                    static_cast<std::byte*>(in.mla_cache.data()) + size_t(j) * block_bytes, block_bytes);
    }
    const HostTensor query = download_rows(views_.query, row);  // [H, Dk]
    const size_t row_bytes = size_t(kMlaKeyWidth) * dtype_size(kQueryDtype);
    in.query = HostTensor(kQueryDtype, Shape{1, h, kMlaKeyWidth});
    for (size_t i = 0; i < heads.size(); ++i)
      std::copy_n(static_cast<const std::byte*>(query.data()) + heads[i] * row_bytes, row_bytes,
                  static_cast<std::byte*>(in.query.data()) + i * row_bytes);
    in.block_tables = HostTensor(DType::i32, Shape{1, M});
    std::iota(in.block_tables.as<int32_t>(), in.block_tables.as<int32_t>() + M, 0);
    in.context_lens = HostTensor(DType::i32, Shape{1});
    in.context_lens.as<int32_t>()[0] = int32_t(c_.context - c_.new_tokens + j + 1);
    in.query_starts = HostTensor(DType::i32, Shape{2});
    in.query_starts.as<int32_t>()[1] = 1;
    return in;
  }

  Context& ctx_;
  const MlaBenchCase& c_;
  const std::vector<int32_t>& table_;
  const MlaPlan& plan_;
  MlaViews views_;
  AttentionParams params_;
};

struct MlaResult : RepetitionTimes {
  MlaBenchCase config;
  MlaCaseBytes bytes;
  std::string kernel, path, skipped;  // kernel: scalar (portable) or matrix (tensor cores)
  MlaCheck check;
  double bytes_per_second() const { return median_us > 0 ? double(bytes.cache_read) / (median_us * 1e-6) : 0.0; }
  double flops_per_second() const { return median_us > 0 ? bytes.flops / (median_us * 1e-6) : 0.0; }
};

// The run's two references (0: not measured).
struct Limits {
  double read_bytes_per_second = 0;
  double matrix_flops_per_second = 0;
  double memory_us(const MlaResult& r) const {
    return read_bytes_per_second > 0 ? double(r.bytes.cache_read) / read_bytes_per_second * 1e6 : 0.0;
  }
  double compute_us(const MlaResult& r) const {
    return matrix_flops_per_second > 0 ? r.bytes.flops / matrix_flops_per_second * 1e6 : 0.0;
  }
};

// The case timed in its buffers: views into `arena` (--arena), or allocations of its own (null),
// freed when it ends.
MlaResult run_mla_case(Context& ctx, const MlaPrepared& p, const DeviceBuffer* arena, const BenchOptions& o,
                       const StreamingRead* flush) {
  MlaResult r;
  r.config = p.config;
  r.bytes = p.bytes;
  r.skipped = p.skipped;
  if (!r.skipped.empty()) return r;
  const std::vector<size_t> sizes = mla_buffer_sizes(p);
  CaseMemory memory;
  std::optional<MlaBatch> batch;
  try {
    memory = arena ? arena_memory(ctx, *arena, sizes, kMlaPools) : own_memory(ctx, sizes);
    batch.emplace(ctx, p, memory.views);
  } catch (const Error& e) {
    // What this device cannot run after all (memory the checks of prepare_mla_case did not foresee).
    if (e.code() != ErrorCode::unsupported && e.code() != ErrorCode::out_of_memory) throw;
    r.skipped = e.what();
    return r;
  }
  r.kernel = mla_kernel_name(batch->plan());
  r.path = batch->plan().describe();
  auto run = [&](VkCommandBuffer cmd) { batch->record(cmd); };
  // Warm start: the same call, then the flush, untimed, in the timed repetition's command buffer.
  auto run_then_flush = [&](VkCommandBuffer cmd) {
    run(cmd);
    record_compute_barrier(ctx, cmd);
    flush->record(cmd);
  };
  auto timed = [&] {
    if (o.warm_start) return ctx.run_and_time(run, run_then_flush);
    if (flush) ctx.run_and_wait([&](VkCommandBuffer cmd) { flush->record(cmd); });
    return ctx.run_and_time(run);
  };
  const RepetitionTimes t = time_repetitions(ctx, o, kMlaMinRepetitions, timed);
  static_cast<RepetitionTimes&>(r) = t;
  r.check = batch->check();
  return r;
}

std::string share(double limit_us, double us) {
  return limit_us > 0 && us > 0 ? fmt::format("{:5.1f}%", 100.0 * limit_us / us) : std::string("    -");
}

void print_row(const MlaResult& r, const Limits& limits) {
  const MlaBenchCase& c = r.config;
  if (!r.skipped.empty()) {
    fmt::print("{:<28} skipped: {}\n", c.name, r.skipped);
    return;
  }
  const double mem_us = limits.memory_us(r), compute_us = limits.compute_us(r);
  fmt::print("{:<28} {:>4} {:>5} {:>6} {:>4} {:>9} {:>10.1f} {:>10.1f} {:>10.1f} {:>8.2f} {:>8.2f} {:>9.1f} {} {:>9} {}  {:<6} {:<6}  {}\n",
             c.name, c.requests, c.new_tokens, c.context, c.heads, dtype_name(c.cache_dtype), r.median_us, r.min_us, r.max_us,
             r.bytes_per_second() / 1e9, r.flops_per_second() / 1e12, mem_us, share(mem_us, r.median_us),
             compute_us > 0 ? fmt::format("{:.1f}", compute_us) : "-", share(compute_us, r.median_us),
             r.check.passed ? "ok" : "FAILED", r.kernel, r.path);
  if (!r.check.passed)
    fmt::print("{:<28} check FAILED: max |output - reference| {:.3g}, max |reference| {:.3g} (requests {}, heads {})\n",
               "", r.check.max_error, r.check.max_reference, fmt::join(r.check.requests, " "),
               fmt::join(r.check.heads, " "));
}

Json json_case(const MlaResult& r, const Limits& limits) {
  const MlaBenchCase& c = r.config;
  const double mem_us = limits.memory_us(r), compute_us = limits.compute_us(r);
  Json j = {{"name", c.name},
            {"requests", c.requests},
            {"new_tokens", c.new_tokens},
            {"context", c.context},
            {"heads", c.heads},
            {"kv_heads", 1},
            {"key_width", kMlaKeyWidth},
            {"value_width", kMlaValueWidth},
            {"block_size", kMlaBlockSize},
            {"query_dtype", dtype_name(kQueryDtype)},
            {"cache_dtype", dtype_name(c.cache_dtype)},
            {"cache_bytes", r.bytes.cache_read},
            {"flops", r.bytes.flops},
            {"skipped", r.skipped}};
  if (!r.skipped.empty()) return j;
  j["median_us"] = r.median_us;
  j["min_us"] = r.min_us;
  j["max_us"] = r.max_us;
  j["wall_clock_s"] = wall_clock_json(r.wall);
  j["cache_bytes_per_second"] = r.bytes_per_second();
  j["flops_per_second"] = r.flops_per_second();
  j["memory_limit_us"] = mem_us;
  j["share_of_memory_limit"] = mem_us > 0 ? mem_us / r.median_us : 0.0;
  j["compute_limit_us"] = compute_us;
  j["share_of_compute_limit"] = compute_us > 0 ? compute_us / r.median_us : 0.0;
  j["kernel"] = r.kernel;
  j["path"] = r.path;
  j["check"] = {{"against", "the CPU reference (reference::mla_attention)"},
                {"requests", r.check.requests},
                {"tokens", r.check.tokens},
                {"heads", r.check.heads},
                {"max_abs_error", r.check.max_error},
                {"max_abs_reference", r.check.max_reference},
                {"passed", r.check.passed},
                {"seconds", r.check.seconds}};
  return j;
}

// Options that mean something for the decode suites only are refused by name, before the
// device is opened, rather than ignored.
MlaOptions mla_options_of(const BenchOptions& o) {
  MlaOptions options;
  set_mla_kernel(options, o.kernel);
  if (!o.cache_dtype.empty())
    throw Error(ErrorCode::invalid_argument, "--cache-dtype: the MLA suites run bf16 and fp8_e4m3 caches, each case its own");
  if (o.kv_layout != "vllm")
    throw Error(ErrorCode::invalid_argument, "--kv-layout: an MLA pool has one layout ([N, B, 576] rows)");
  if (o.repeat != 1) throw Error(ErrorCode::invalid_argument, "--repeat: the MLA suites run one round");
  if (!o.timeline_dir.empty() || !o.chart_path.empty())
    throw Error(ErrorCode::invalid_argument, "--timeline, --chart: the decode suites' only");
  if (o.warm_start && !o.flush_caches)
    throw Error(ErrorCode::invalid_argument,
                "--warm-start needs --flush-caches: the untimed call before each repetition would leave its bytes in "
                "the GPU's caches");
  if (const auto split = split_mode_named(o.split)) options.split = *split;
  else throw Error(ErrorCode::invalid_argument, fmt::format("--split: \"{}\" is not auto, single or split", o.split));
  options.partition_tokens = o.partition_tokens;
  return options;
}

}  // namespace

int run_mla_bench(const BenchOptions& o) {
  const MlaOptions options = mla_options_of(o);
  const std::vector<MlaBenchCase> cases = selected_cases(o, mla_bench_cases(o.suite), o.suite);
  Context ctx(cli_context_options(o.device));
  const auto& dev = ctx.device_info();
  const size_t probe_bytes = std::min<size_t>({size_t(1) << 30, dev.max_storage_buffer_range, dev.device_local_bytes / 4});
  const StreamingRead probe(ctx, probe_bytes);
  std::optional<StreamingRead> lead;  // a warm start times the probe after a read of its pipeline
  if (o.warm_start) lead.emplace(ctx, size_t(1) << 16);
  const int reps = std::max(kMlaMinRepetitions, o.repetitions);
  Limits limits;
  limits.read_bytes_per_second =
      (lead ? measure_read_bandwidth_after(ctx, probe, *lead, reps) : measure_read_bandwidth(ctx, probe, reps))
          .bytes_per_second();
  const detail::MatrixCeiling ceiling = detail::measure_matrix_ceiling_khr(ctx, reps);
  limits.matrix_flops_per_second = ceiling.flops_per_second();
  const StreamingRead* flush = o.flush_caches ? &probe : nullptr;

  fmt::print("device: {} ({})\n", dev.name, dev.driver);
  fmt::print("{}", clock_warmup_line(o, dev.type));
  fmt::print("read bandwidth (streaming 16-byte loads, {} MB, median of {}): {:.1f} GB/s\n", probe.bytes() / 1000000, reps,
             limits.read_bytes_per_second / 1e9);
  if (ceiling.unavailable.empty())
    fmt::print("matrix ceiling (cooperative matrices, median of {}): {:.3f} TFLOP/s ({})\n", reps,
               limits.matrix_flops_per_second / 1e12, ceiling.describe());
  else
    fmt::print("matrix ceiling: no cooperative matrices ({})\n", ceiling.unavailable);
  const bool prefill = o.suite == "mla-prefill" || o.suite == "mla-prefill-quick";
  fmt::print("MLA {}, one latent kv head, Dk {} ({} latent + {} rope), Dv {} (the rows' "
             "first {}), one pool [N, {}, {}] in shuffled blocks, {} queries, scale {:.4f} (DeepSeek-V3's, YaRN mscale "
             "folded in), fp8 scale {}; kernel {}{}{}\n",
             prefill ? "prefill and chunks: each request's new tokens (new) the last of its context (ctx), causal"
                     : "decode: one new token per request",
             kMlaKeyWidth, kMlaValueWidth, kMlaKeyWidth - kMlaValueWidth, kMlaValueWidth, kMlaValueWidth, kMlaBlockSize,
             kMlaKeyWidth, dtype_name(kQueryDtype), kDeepSeekScale, kFp8Scale, o.kernel,
             flush ? fmt::format(", caches flushed ({} MB read) before each repetition", flush->bytes() / 1000000) : "",
             o.warm_start ? ", warm start (each repetition after the same call and the flush, untimed)" : "");
  // Every case's plan and table before any case's buffers exist; the arena is sized for the
  // largest case that runs (not for one skipped: a pool past the device's limits).
  std::vector<MlaPrepared> prepared;
  for (const MlaBenchCase& c : cases) prepared.push_back(prepare_mla_case(ctx, c, options));
  std::optional<DeviceBuffer> arena;
  if (o.arena) {
    size_t bytes = 16;
    for (const MlaPrepared& p : prepared)
      if (p.skipped.empty()) bytes = std::max(bytes, arena_bytes(ctx, mla_buffer_sizes(p), kMlaPools));
    arena.emplace(create_arena(ctx, bytes));
  }
  fmt::print("{}\n", buffers_line(arena ? &*arena : nullptr));
  fmt::print("GB/s: cache bytes (every row of every request read once) per second; TFLOP/s: 2 x H x ({} + {}) per "
             "query token per key it sees; limits: cache bytes / read bandwidth, FLOPs / matrix ceiling, each share = "
             "limit / time; check: first and last request (first and last new token), a few heads, against the CPU "
             "reference\n\n",
             kMlaKeyWidth, kMlaValueWidth);
  fmt::print("{:<28} {:>4} {:>5} {:>6} {:>4} {:>9} {:>10} {:>10} {:>10} {:>8} {:>8} {:>9} {:>6} {:>9} {:>6}  {:<6} {:<6}  {}\n",
             "case", "reqs", "new", "ctx", "H", "cache", "median us", "min us", "max us", "GB/s", "TFLOP/s", "mem us", "share",
             "mma us", "share", "check", "kernel", "path");
  std::vector<MlaResult> results;
  for (const MlaPrepared& p : prepared) {
    results.push_back(run_mla_case(ctx, p, arena ? &*arena : nullptr, o, flush));
    print_row(results.back(), limits);
    std::fflush(stdout);
  }
  const bool failed =
      std::any_of(results.begin(), results.end(), [](const MlaResult& r) { return r.skipped.empty() && !r.check.passed; });
  if (failed) fmt::print("check FAILED: a case's output differs from the CPU reference (see the rows marked FAILED)\n");

  if (!o.json_path.empty()) {
    Json j;
    j["device"] = dev.name;
    j["driver"] = dev.driver;
    j["suite"] = o.suite;
    j["kernel_requested"] = o.kernel;
    j["cache_flush_bytes"] = flush ? flush->bytes() : 0;
    j["warm_start"] = o.warm_start;
    j["clock_warmup_ms"] = clock_warmup_ms(o, dev.type);
    j["arena"] = o.arena;
    j["arena_bytes"] = arena ? arena->size() : 0;
    j["read_bandwidth_bytes_per_second"] = limits.read_bytes_per_second;
    j["matrix_ceiling"] = {{"flops_per_second", limits.matrix_flops_per_second},
                           {"unavailable", ceiling.unavailable},
                           {"m", ceiling.m},
                           {"n", ceiling.n},
                           {"k", ceiling.k},
                           {"workgroups", ceiling.workgroups},
                           {"median_ns", ceiling.median_ns}};
    j["scale"] = kDeepSeekScale;
    j["fp8_scale"] = kFp8Scale;
    j["cases"] = Json::array();
    for (const MlaResult& r : results) j["cases"].push_back(json_case(r, limits));
    write_json_file(o.json_path, j);
  }
  return failed ? 1 : 0;
}

}  // namespace vkpaged::cli
