// SPDX-License-Identifier: Apache-2.0
#include "simulate_gpu.hpp"

#include <fmt/format.h>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstring>
#include <optional>
#include <unordered_map>
#include <unordered_set>

#include "vkpaged/cache_ops.hpp"
#include "vkpaged/error.hpp"
#include "vkpaged/reference.hpp"
#include "vkpaged/utilities.hpp"

namespace vkpaged::cli {

namespace {

constexpr uint32_t kMaxCheckedRows = 4;

DType stored_dtype(DType cache) { return is_fp8_dtype(cache) ? DType::u8 : cache; }

// The contract's tolerances, by the query's dtype (fp8 caches follow the query's).
double tolerance_of(DType query) {
  switch (query) {
    case DType::f32:
      return 1e-4;
    case DType::f16:
      return 3e-3;
    default:
      return 2e-2;
  }
}

uint32_t seed_of(uint64_t seed, uint64_t a, uint64_t b) {
  uint64_t x = seed * 0x9e3779b97f4a7c15ull + a * 0xbf58476d1ce4e5b9ull + b * 0x94d049bb133111ebull;
  x ^= x >> 31;
  return uint32_t(x ^ (x >> 32));
}

// A pool's shape (the cache's layout) with `blocks` blocks.
Shape with_blocks(const Shape& pool, uint32_t blocks) {
  std::vector<int64_t> dims = pool.dims();
  dims[0] = blocks;
  return Shape(dims);
}

}  // namespace

SimGpu::SimGpu(Context& context, const SimGpuShape& shape)
    : ctx_(context), shape_(shape), cache_(context, shape.cache, shape.size) {
  const KvCacheShape& c = shape_.cache;
  shape_.max_batch = std::min(shape_.max_batch, cache_.num_blocks());  // every sequence holds a block
  const size_t T = shape_.token_budget, qdt = dtype_size(shape_.query_dtype);
  new_keys_ = ctx_.create_buffer(T * c.num_kv_heads * c.head_size * qdt);
  new_values_ = ctx_.create_buffer(T * c.num_kv_heads * c.head_size * qdt);
  slots_ = ctx_.create_buffer(T * sizeof(int64_t), MemoryKind::host_visible);
  positions_ = ctx_.create_buffer(T * sizeof(int64_t), MemoryKind::host_visible);
  for (uint32_t l = 0; l < c.num_layers; ++l) {
    queries_.push_back(ctx_.create_buffer(T * shape_.num_heads * c.head_size * qdt));
    outputs_.push_back(ctx_.create_buffer(T * shape_.num_heads * c.head_size * qdt));
  }
  const size_t S = shape_.max_batch;
  block_tables_ = ctx_.create_buffer(S * shape_.max_blocks_per_seq * sizeof(int32_t), MemoryKind::host_visible);
  context_lens_ = ctx_.create_buffer(S * sizeof(int32_t), MemoryKind::host_visible);
  query_starts_ = ctx_.create_buffer((S + 1) * sizeof(int32_t), MemoryKind::host_visible);
  const HostTensor cos_sin = rotary_cos_sin_cache(shape_.max_position, c.head_size);
  cos_sin_ = ctx_.create_buffer(cos_sin.bytes());
  ctx_.upload(cos_sin_.view(), cos_sin.data(), cos_sin.bytes());
  status_ = ctx_.create_buffer(16);
  const uint32_t zeros[4] = {0, 0, 0, 0};
  ctx_.upload(status_.view(), zeros, sizeof(zeros));

  check_blocks_ = std::min(cache_.num_blocks(), kMaxCheckedRows * shape_.max_blocks_per_seq);
  const size_t check_bytes = size_t(check_blocks_) * cache_.sizing().block_bytes;
  check_keys_ = ctx_.create_buffer(check_bytes, MemoryKind::host_visible);
  check_values_ = ctx_.create_buffer(check_bytes, MemoryKind::host_visible);
}

// One plan per batch size, for contexts up to M * B: a step's layers share it (and its order list).
const DecodePlan& SimGpu::decode_plan_for(uint32_t num_seqs) {
  auto it = decode_plans_.find(num_seqs);
  if (it != decode_plans_.end()) return it->second;
  DecodeShape batch;
  batch.num_seqs = num_seqs;
  batch.num_heads = shape_.num_heads;
  batch.max_blocks_per_seq = shape_.max_blocks_per_seq;
  batch.query_dtype = shape_.query_dtype;
  DecodeOptions options;
  options.order = shape_.order;
  return decode_plans_.emplace(num_seqs, DecodePlan::create(ctx_, cache_.decode_shape(batch), options)).first->second;
}

BufferView SimGpu::scratch(size_t bytes) {
  if (bytes == 0) return {};
  if (bytes > scratch_.size()) scratch_ = ctx_.create_buffer(bytes);  // the previous step has finished
  return scratch_.view(0, bytes);
}

void SimGpu::move(std::span<const BlockCopy> swap_out, std::span<const BlockCopy> swap_in, uint64_t seed,
                  bool overwrite_swap_in_targets) {
  if (swap_out.empty() && swap_in.empty()) return;
  ctx_.run_and_wait([&](VkCommandBuffer cmd) {
    record_compute_barrier(ctx_, cmd);  // after the previous step's attention read the cache
    // Out before in: a device block a swap-out frees may be where a swap-in lands.
    if (!swap_out.empty()) {
      cache_.record_swap_out(cmd, swap_out);
      record_compute_barrier(ctx_, cmd);
    }
    if (!swap_in.empty() && overwrite_swap_in_targets) {
      const uint64_t bb = cache_.sizing().block_bytes;
      for (const BlockCopy& p : swap_in)
        for (uint32_t l = 0; l < shape_.cache.num_layers; ++l)
          for (uint32_t v = 0; v < 2; ++v) {
            TensorView block = v ? cache_.value_cache(l) : cache_.key_cache(l);
            block.memory.offset += uint64_t(p.dst) * bb;
            block.memory.size = bb;
            block.shape = Shape{int64_t(bb / dtype_size(block.dtype))};
            record_fill_random(ctx_, cmd, block, seed_of(seed, 4 * l + 3, 2 * uint64_t(p.dst) + v));
          }
      record_compute_barrier(ctx_, cmd);
    }
    if (!swap_in.empty()) {
      cache_.record_swap_in(cmd, swap_in);
      record_compute_barrier(ctx_, cmd);
    }
  });
}

double SimGpu::run_step(std::span<const BlockCopy> copies, const SimBatch& batch, uint64_t seed) {
  const KvCacheShape& c = shape_.cache;
  const uint32_t S = batch.requests(), T = batch.tokens(), M = shape_.max_blocks_per_seq;
  if (T > shape_.token_budget || S > shape_.max_batch || batch.positions.size() != T ||
      batch.query_starts.size() != S + 1 || batch.block_tables.size() != size_t(S) * M)
    throw Error(ErrorCode::internal, fmt::format("simulate: a step of {} requests and {} tokens does not fit its "
                                                 "buffers ({} requests, {} tokens)",
                                                 S, T, shape_.max_batch, shape_.token_budget));
  std::memcpy(slots_.mapped(), batch.slots.data(), T * sizeof(int64_t));
  std::memcpy(positions_.mapped(), batch.positions.data(), T * sizeof(int64_t));
  std::memcpy(block_tables_.mapped(), batch.block_tables.data(), batch.block_tables.size() * sizeof(int32_t));
  std::memcpy(context_lens_.mapped(), batch.context_lens.data(), S * sizeof(int32_t));
  std::memcpy(query_starts_.mapped(), batch.query_starts.data(), (S + 1) * sizeof(int32_t));
  last_ = batch;

  // The step's plan: the attention operator's (from the query starts), or with an explicit
  // decode order, a decode plan for a decode-only step.
  const uint32_t longest = uint32_t(*std::max_element(batch.context_lens.begin(), batch.context_lens.end()));
  const bool on_decode_plan = shape_.order != DecodeOrder::automatic && batch.decode_only();
  const DecodePlan* decode_plan = on_decode_plan ? &decode_plan_for(S) : nullptr;
  std::optional<AttentionPlan> plan;
  if (!on_decode_plan) {
    AttentionShape shape;
    shape.num_requests = S;
    shape.num_query_tokens = T;
    shape.num_heads = shape_.num_heads;
    shape.max_blocks_per_seq = M;
    shape.max_context_len = longest;
    shape.query_dtype = shape_.query_dtype;
    plan = AttentionPlan::create(ctx_, cache_.attention_shape(shape), batch.query_starts);
  }
  last_plan_ = plan ? plan->describe() : "decode kernels: " + decode_plan->describe();
  const BufferView scratch_view = scratch(plan ? plan->scratch_bytes() : decode_plan->scratch_bytes());
  if (decode_plan && decode_plan->order_bytes() > order_.size()) order_ = ctx_.create_buffer(decode_plan->order_bytes());

  const DType qdt = shape_.query_dtype;
  const Shape kv_rows{T, c.num_kv_heads, c.head_size}, q_rows{T, shape_.num_heads, c.head_size};
  const TensorView lens = context_lens_.tensor(DType::i32, Shape{S});
  const TensorView tables = block_tables_.tensor(DType::i32, Shape{S, M});
  auto write = [&](VkCommandBuffer cmd) {
    record_compute_barrier(ctx_, cmd);  // after the swaps, or the previous step's attention
    // Before any token is written into a copied block's source or copy. A block freed by a
    // preemption in this step may be a copy's source and then another copy's destination:
    // such pairs go in a later batch, in the order the block manager handed them out.
    std::unordered_set<int32_t> sources, destinations;
    std::vector<BlockCopy> pairs;
    auto flush = [&] {
      if (pairs.empty()) return;
      cache_.record_copy_blocks(cmd, pairs);
      record_compute_barrier(ctx_, cmd);
      pairs.clear();
      sources.clear();
      destinations.clear();
    };
    for (const BlockCopy& p : copies) {
      if (destinations.contains(p.src) || sources.contains(p.dst) || destinations.contains(p.dst)) flush();
      pairs.push_back(p);
      sources.insert(p.src);
      destinations.insert(p.dst);
    }
    flush();
    // Every layer's new keys and values, rotated on their way into the cache, and its queries
    // rotated in place (one dispatch). The staging of keys and values is shared by the layers.
    const NewTokens tokens{new_keys_.tensor(qdt, kv_rows), new_values_.tensor(qdt, kv_rows),
                           slots_.tensor(DType::i64, Shape{T}), status_.view(0, 4)};
    const TensorView cos_sin = cos_sin_.tensor(DType::f32, Shape{shape_.max_position, c.head_size});
    for (uint32_t l = 0; l < c.num_layers; ++l) {
      const TensorView query = queries_[l].tensor(qdt, q_rows);
      record_fill_random(ctx_, cmd, tokens.key, seed_of(seed, 4 * l, 0));
      record_fill_random(ctx_, cmd, tokens.value, seed_of(seed, 4 * l, 1));
      record_fill_random(ctx_, cmd, query, seed_of(seed, 4 * l + 1, 0));
      record_compute_barrier(ctx_, cmd);
      cache_.record_reshape_and_cache(cmd, l, tokens,
                                      RotaryInputs{query, positions_.tensor(DType::i64, Shape{T}), cos_sin});
      record_compute_barrier(ctx_, cmd);  // the staging is refilled next; attention reads the cache
    }
  };
  auto attend = [&](VkCommandBuffer cmd) {
    // Longest first: the step's lengths are listed once, and every layer's decode reads the list.
    if (decode_plan && decode_plan->longest_first()) {
      record_decode_order(ctx_, cmd, *decode_plan, lens, order_.view(0, decode_plan->order_bytes()));
      record_compute_barrier(ctx_, cmd);
    }
    for (uint32_t l = 0; l < c.num_layers; ++l) {
      if (plan) {
        AttentionViews v;
        v.query = queries_[l].tensor(qdt, q_rows);
        v.block_tables = tables;
        v.context_lens = lens;
        v.query_starts = query_starts_.tensor(DType::i32, Shape{S + 1});
        v.output = outputs_[l].tensor(qdt, q_rows);
        v.scratch = scratch_view;
        v.status = status_.view(0, 4);
        cache_.record_attention(cmd, l, *plan, v);
      } else {
        DecodeViews v;
        v.query = queries_[l].tensor(qdt, q_rows);
        v.block_tables = tables;
        v.context_lens = lens;
        v.output = outputs_[l].tensor(qdt, q_rows);
        v.scratch = scratch_view;
        if (decode_plan->longest_first()) v.order = order_.view(0, decode_plan->order_bytes());
        v.status = status_.view(0, 4);
        cache_.record_decode(cmd, l, *decode_plan, v);
      }
      record_compute_barrier(ctx_, cmd);  // layers share the scratch; check() reads the outputs
    }
  };
  if (ctx_.device_info().timestamps) return ctx_.run_and_time(attend, write);
  ctx_.run_and_wait(write);
  const auto start = std::chrono::steady_clock::now();
  ctx_.run_and_wait(attend);
  return std::chrono::duration<double, std::nano>(std::chrono::steady_clock::now() - start).count();
}

void SimGpu::copy_to_check_pools(uint32_t layer, std::span<const BlockCopy> pairs) {
  const LayerCacheViews src = cache_.layers()[layer];
  const LayerCacheViews dst{check_keys_.tensor(src.key_cache.dtype, with_blocks(src.key_cache.shape, check_blocks_)),
                            check_values_.tensor(src.value_cache.dtype, with_blocks(src.value_cache.shape, check_blocks_)),
                            src.layout};
  ctx_.run_and_wait([&](VkCommandBuffer cmd) {
    record_compute_barrier(ctx_, cmd);
    record_swap_blocks(ctx_, cmd, std::span(&src, 1), std::span(&dst, 1), pairs);
  });
}

SimBlocks SimGpu::read_blocks(std::span<const int32_t> blocks) {
  const KvCacheShape& c = shape_.cache;
  const uint64_t bb = cache_.sizing().block_bytes;
  SimBlocks out(c, bb, uint32_t(blocks.size()));
  std::vector<BlockCopy> pairs;
  for (size_t first = 0; first < blocks.size(); first += check_blocks_) {
    const size_t n = std::min<size_t>(check_blocks_, blocks.size() - first);
    pairs.clear();
    for (size_t i = 0; i < n; ++i) pairs.push_back({blocks[first + i], int32_t(i)});
    for (uint32_t l = 0; l < c.num_layers; ++l) {
      copy_to_check_pools(l, pairs);
      ctx_.download(check_keys_.view(0, n * bb), out.block(l, false, uint32_t(first)), n * bb);
      ctx_.download(check_values_.view(0, n * bb), out.block(l, true, uint32_t(first)), n * bb);
    }
  }
  return out;
}

SimCheck SimGpu::check(uint32_t layer, std::span<const uint32_t> requests) {
  const KvCacheShape& c = shape_.cache;
  const uint32_t M = shape_.max_blocks_per_seq, B = c.block_size, H = shape_.num_heads, D = c.head_size;
  SimCheck result;
  result.layer = layer;
  result.tolerance = tolerance_of(shape_.query_dtype);
  if (requests.size() > kMaxCheckedRows) requests = requests.first(kMaxCheckedRows);
  result.requests = uint32_t(requests.size());

  // The requests' blocks, each once, gathered into the check pool with swap_blocks.
  std::unordered_map<int32_t, int32_t> local;
  std::vector<BlockCopy> pairs;
  std::vector<int32_t> tables(requests.size() * M, 0), lens(requests.size(), 0), starts{0};
  for (size_t i = 0; i < requests.size(); ++i) {
    const uint32_t r = requests[i];
    lens[i] = last_.context_lens[r];
    starts.push_back(starts.back() + last_.query_starts[r + 1] - last_.query_starts[r]);
    for (int32_t j = 0; j < int32_t((uint32_t(lens[i]) + B - 1) / B); ++j) {
      const int32_t block = last_.block_tables[size_t(r) * M + size_t(j)];
      const auto [it, fresh] = local.emplace(block, int32_t(pairs.size()));
      if (fresh) pairs.push_back({block, it->second});
      tables[i * M + size_t(j)] = it->second;
    }
  }
  result.tokens = uint32_t(starts.back());
  const uint32_t gathered = std::max<uint32_t>(1, uint32_t(pairs.size()));
  copy_to_check_pools(layer, pairs);

  const DType stored = stored_dtype(c.dtype);
  AttentionInputs in;
  in.cache_dtype = c.dtype;
  in.kv_layout = c.layout;
  in.key_cache = HostTensor(stored, with_blocks(cache_.key_cache(layer).shape, gathered));
  in.value_cache = HostTensor(stored, with_blocks(cache_.value_cache(layer).shape, gathered));
  ctx_.download(check_keys_.view(0, in.key_cache.bytes()), in.key_cache.data(), in.key_cache.bytes());
  ctx_.download(check_values_.view(0, in.value_cache.bytes()), in.value_cache.data(), in.value_cache.bytes());
  ctx_.download(status_.view(0, 4), &result.status, 4);

  // The requests' query rows (as rotated on the GPU) and output rows.
  const DType qdt = shape_.query_dtype;
  const Shape all_rows{last_.tokens(), H, D};
  HostTensor query(qdt, all_rows), output(qdt, all_rows);
  ctx_.download(queries_[layer].view(0, query.bytes()), query.data(), query.bytes());
  ctx_.download(outputs_[layer].view(0, output.bytes()), output.data(), output.bytes());
  const size_t row_bytes = size_t(H) * D * dtype_size(qdt), row_elems = size_t(H) * D;
  in.query = HostTensor(qdt, Shape{int64_t(result.tokens), H, D});
  for (size_t i = 0; i < requests.size(); ++i)
    std::memcpy(static_cast<std::byte*>(in.query.data()) + size_t(starts[i]) * row_bytes,
                static_cast<const std::byte*>(query.data()) + size_t(last_.query_starts[requests[i]]) * row_bytes,
                size_t(starts[i + 1] - starts[i]) * row_bytes);
  in.block_tables = HostTensor(DType::i32, Shape{int64_t(requests.size()), M});
  std::memcpy(in.block_tables.data(), tables.data(), in.block_tables.bytes());
  in.context_lens = HostTensor(DType::i32, Shape{int64_t(requests.size())});
  std::memcpy(in.context_lens.data(), lens.data(), in.context_lens.bytes());
  in.query_starts = HostTensor(DType::i32, Shape{int64_t(requests.size()) + 1});
  std::memcpy(in.query_starts.data(), starts.data(), in.query_starts.bytes());

  const AttentionResult expected = reference::batch_attention(in);
  for (size_t i = 0; i < requests.size(); ++i) {
    const size_t from = size_t(last_.query_starts[requests[i]]) * row_elems, to = size_t(starts[i]) * row_elems;
    for (size_t e = 0; e < size_t(starts[i + 1] - starts[i]) * row_elems; ++e) {
      const double err = std::fabs(output.get(from + e) - expected.output.get(to + e));
      result.max_error = std::isfinite(err) ? std::max(result.max_error, err) : INFINITY;
    }
  }
  result.passed = result.max_error <= result.tolerance && result.status == 0;
  return result;
}

}  // namespace vkpaged::cli
