// SPDX-License-Identifier: Apache-2.0
// `vkpaged bench --suite cache-write` (and cache-write-quick, lavapipe-sized): one engine
// step's new tokens into the paged cache, the rotary embedding fused into reshape_and_cache
// (record_reshape_and_cache_rotary) against the two-kernel path (record_rotary_embedding, a
// barrier, record_reshape_and_cache), for each cache dtype and layout, timed with GPU
// timestamps. The plain write and the rotation alone are timed too, for what each part costs.
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
#include "json_file.hpp"
#include "vkpaged/cache_ops.hpp"
#include "vkpaged/context.hpp"
#include "vkpaged/error.hpp"
#include "vkpaged/rotary.hpp"
#include "vkpaged/utilities.hpp"

namespace vkpaged::cli {

namespace {

struct StepShape {
  uint32_t tokens, heads, kv_heads, head_size, block_size;
};

// A prefill-sized step of a Llama-3-8B-like layer (32 / 8 heads, D 128), or a tiny one.
StepShape step_of(const std::string& suite) {
  if (suite == "cache-write") return {4096, 32, 8, 128, 16};
  return {64, 8, 2, 64, 16};
}

struct Timing : RepetitionTimes {
  std::string name;
  uint64_t bytes = 0;  // what the operation must move at least
};

// One case: its buffers on the device, filled once.
class CacheWriteCase {
 public:
  CacheWriteCase(Context& ctx, const StepShape& s, DType cache, KvLayout layout) : s_(s), buffers_(ctx) {
    const int64_t T = s.tokens, blocks = 2 * ((T + s.block_size - 1) / s.block_size);  // half the pool written
    const int64_t x = cache_pack_factor(cache);
    const DType in = DType::f16;
    query_ = buffers_.make(in, Shape{T, s.heads, s.head_size});
    key_ = buffers_.make(in, Shape{T, s.kv_heads, s.head_size});
    value_ = buffers_.make(in, Shape{T, s.kv_heads, s.head_size});
    const Shape nhd{blocks, s.block_size, s.kv_heads, s.head_size}, hnd{blocks, s.kv_heads, s.block_size, s.head_size};
    const Shape vllm_key{blocks, s.kv_heads, s.head_size / x, s.block_size, x};
    const Shape vllm_value{blocks, s.kv_heads, s.head_size, s.block_size};
    const Shape key_shape = layout == KvLayout::nhd ? nhd : layout == KvLayout::hnd ? hnd : vllm_key;
    const Shape value_shape = layout == KvLayout::nhd ? nhd : layout == KvLayout::hnd ? hnd : vllm_value;
    key_cache_ = buffers_.make(cache, key_shape);
    value_cache_ = buffers_.make(cache, value_shape);
    layout_ = layout;
    ctx.run_and_wait([&](VkCommandBuffer cmd) {
      uint32_t seed = 1;
      for (const TensorView* v : {&query_, &key_, &value_, &key_cache_, &value_cache_})
        record_fill_random(ctx, cmd, *v, seed++);
    });
    // Slots: T distinct slots of the pool in shuffled order, as a server's free list hands
    // blocks out; positions: a prefill continuing a 1000-token context.
    std::mt19937 rng(7);
    std::vector<int64_t> slots(size_t(blocks) * s.block_size);
    std::iota(slots.begin(), slots.end(), 0);
    std::shuffle(slots.begin(), slots.end(), rng);
    slots.resize(size_t(T));
    std::vector<int64_t> positions(static_cast<size_t>(T));
    std::iota(positions.begin(), positions.end(), 1000);
    slots_ = buffers_.upload(DType::i64, Shape{T}, slots.data());
    positions_ = buffers_.upload(DType::i64, Shape{T}, positions.data());
    const HostTensor cos_sin = rotary_cos_sin_cache(uint32_t(1000 + T), s.head_size, 500000.0);
    cos_sin_ = buffers_.upload(cos_sin.dtype(), cos_sin.shape(), cos_sin.data());
  }

  ReshapeAndCacheViews cache_views() const { return {key_, value_, slots_, key_cache_, value_cache_, {}, layout_}; }
  RotaryInputs rotary() const { return {query_, positions_, cos_sin_, RotaryStyle::neox}; }
  RotaryViews rotary_views() const { return {query_, key_, positions_, cos_sin_, {}, RotaryStyle::neox}; }

  // Least traffic: the fused write reads queries, keys and values once, writes queries and
  // keys back and the new tokens' cache entries.
  uint64_t fused_bytes() const { return 2 * query_.bytes() + 2 * key_.bytes() + value_.bytes() + cache_bytes(); }
  uint64_t cache_bytes() const {
    return 2 * uint64_t(s_.tokens) * s_.kv_heads * s_.head_size * dtype_size(key_cache_.dtype);
  }
  uint64_t reshape_bytes() const { return key_.bytes() + value_.bytes() + cache_bytes(); }
  uint64_t rotary_bytes() const { return 2 * (query_.bytes() + key_.bytes()); }

 private:
  StepShape s_;
  KvLayout layout_ = KvLayout::vllm;
  BenchBuffers buffers_;
  TensorView query_, key_, value_, key_cache_, value_cache_, slots_, positions_, cos_sin_;
};

Timing time_it(Context& ctx, const BenchOptions& o, const StreamingRead* flush, std::string name, uint64_t bytes,
               const std::function<void(VkCommandBuffer)>& record) {
  auto timed = [&] {
    if (flush) ctx.run_and_wait([&](VkCommandBuffer cmd) { flush->record(cmd); });
    return ctx.run_and_time(record);
  };
  const RepetitionTimes t = time_repetitions(ctx, o, 10, timed);
  return {t, std::move(name), bytes};
}

}  // namespace

bool is_cache_write_suite(const std::string& suite) { return suite == "cache-write" || suite == "cache-write-quick"; }

int run_cache_write_bench(const BenchOptions& o) {
  const StepShape s = step_of(o.suite);
  if (!o.cases.empty())
    throw Error(ErrorCode::invalid_argument, "--case: the cache-write suites time every dtype and layout together");
  Context ctx(cli_context_options(o.device));
  const auto& dev = ctx.device_info();
  std::optional<StreamingRead> flush;
  if (o.flush_caches)
    flush.emplace(ctx, std::min<size_t>({size_t(1) << 30, dev.max_storage_buffer_range, dev.device_local_bytes / 4}));
  fmt::print("device: {} ({})\n", dev.name, dev.driver);
  fmt::print("{}", clock_warmup_line(o, dev.type));
  fmt::print(
      "step: {} new tokens, {} query / {} kv heads, D {}, B {}, f16 keys and values, NeoX rotary over all of D{}\n\n",
      s.tokens, s.heads, s.kv_heads, s.head_size, s.block_size,
      flush ? fmt::format(", caches flushed ({} MB read) before each repetition", flush->bytes() / 1000000) : "");
  fmt::print("{:<30} {:>10} {:>10} {:>10} {:>9}  {}\n", "case", "median us", "min us", "max us", "GB/s", "");
  std::vector<Timing> results;
  for (DType cache : {DType::f16, DType::fp8_e4m3}) {
    for (KvLayout layout : {KvLayout::vllm, KvLayout::nhd, KvLayout::hnd}) {
      const CacheWriteCase c(ctx, s, cache, layout);
      const CacheScales scales{0.05f, 0.05f};
      const std::string prefix = fmt::format("{}-{}", dtype_name(cache), kv_layout_name(layout));
      std::vector<Timing> rows;
      rows.push_back(
          time_it(ctx, o, flush ? &*flush : nullptr, prefix + " reshape", c.reshape_bytes(),
                  [&](VkCommandBuffer cmd) { record_reshape_and_cache(ctx, cmd, c.cache_views(), scales); }));
      rows.push_back(time_it(ctx, o, flush ? &*flush : nullptr, prefix + " rotary", c.rotary_bytes(),
                             [&](VkCommandBuffer cmd) { record_rotary_embedding(ctx, cmd, c.rotary_views()); }));
      rows.push_back(time_it(ctx, o, flush ? &*flush : nullptr, prefix + " two kernels", c.fused_bytes(),
                             [&](VkCommandBuffer cmd) {
                               record_rotary_embedding(ctx, cmd, c.rotary_views());
                               record_compute_barrier(ctx, cmd);
                               record_reshape_and_cache(ctx, cmd, c.cache_views(), scales);
                             }));
      rows.push_back(
          time_it(ctx, o, flush ? &*flush : nullptr, prefix + " fused", c.fused_bytes(), [&](VkCommandBuffer cmd) {
            record_reshape_and_cache_rotary(ctx, cmd, c.cache_views(), c.rotary(), scales);
          }));
      const double ratio = rows[3].median_us > 0 ? rows[2].median_us / rows[3].median_us : 0.0;
      for (size_t i = 0; i < rows.size(); ++i) {
        const Timing& t = rows[i];
        fmt::print("{:<30} {:>10.2f} {:>10.2f} {:>10.2f} {:>9.1f}  {}\n", t.name, t.median_us, t.min_us, t.max_us,
                   t.median_us > 0 ? double(t.bytes) / (t.median_us * 1e3) : 0.0,
                   i == 3 ? fmt::format("two kernels / fused = {:.2f}", ratio) : "");
      }
      std::fflush(stdout);
      results.insert(results.end(), rows.begin(), rows.end());
    }
  }
  if (!o.json_path.empty()) {
    Json j;
    j["device"] = dev.name;
    j["suite"] = o.suite;
    j["tokens"] = s.tokens;
    j["heads"] = s.heads;
    j["kv_heads"] = s.kv_heads;
    j["head_size"] = s.head_size;
    j["block_size"] = s.block_size;
    j["cases"] = Json::array();
    for (const Timing& t : results)
      j["cases"].push_back(
          {{"name", t.name}, {"median_us", t.median_us}, {"min_us", t.min_us}, {"max_us", t.max_us}, {"bytes", t.bytes},
           {"wall_clock_s", wall_clock_json(t.wall)}});
    write_json_file(o.json_path, j);
  }
  return 0;
}

}  // namespace vkpaged::cli
