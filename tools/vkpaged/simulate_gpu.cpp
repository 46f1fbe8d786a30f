#include "simulate_gpu.hpp"

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstring>
#include <unordered_map>
#include <unordered_set>

#include "vkpaged/cache_ops.hpp"
#include "vkpaged/error.hpp"
#include "vkpaged/reference.hpp"
#include "vkpaged/utilities.hpp"

namespace vkpaged::cli {

namespace {

constexpr uint32_t kMaxCheckedRows = 4;
constexpr uint32_t kChunkTokens = 8192;  // staging of one reshape_and_cache dispatch

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

Shape key_shape(const KvCacheShape& s, uint32_t blocks) {
  const uint32_t x = cache_pack_factor(s.dtype);
  return Shape{blocks, s.num_kv_heads, s.head_size / x, s.block_size, x};
}

Shape value_shape(const KvCacheShape& s, uint32_t blocks) {
  return Shape{blocks, s.num_kv_heads, s.head_size, s.block_size};
}

}  // namespace

SimGpu::SimGpu(Context& context, const SimGpuShape& shape)
    : ctx_(context), shape_(shape), cache_(context, shape.cache, shape.size) {
  const KvCacheShape& c = shape_.cache;
  shape_.max_batch = std::min(shape_.max_batch, cache_.num_blocks());  // every sequence holds a block
  const uint64_t max_tokens = cache_.num_tokens() + shape_.max_batch;  // a step's writes at most
  chunk_tokens_ = uint32_t(std::min<uint64_t>(max_tokens, kChunkTokens));
  const size_t token_bytes = size_t(c.num_kv_heads) * c.head_size * dtype_size(shape_.query_dtype);
  new_keys_ = ctx_.create_buffer(chunk_tokens_ * token_bytes);
  new_values_ = ctx_.create_buffer(chunk_tokens_ * token_bytes);
  slots_ = ctx_.create_buffer(max_tokens * sizeof(int64_t), MemoryKind::host_visible);

  const size_t rows_bytes = size_t(shape_.max_batch) * shape_.num_heads * c.head_size * dtype_size(shape_.query_dtype);
  for (uint32_t l = 0; l < c.num_layers; ++l) {
    queries_.push_back(ctx_.create_buffer(rows_bytes));
    outputs_.push_back(ctx_.create_buffer(rows_bytes));
  }
  block_tables_ = ctx_.create_buffer(size_t(shape_.max_batch) * shape_.max_blocks_per_seq * sizeof(int32_t),
                                     MemoryKind::host_visible);
  context_lens_ = ctx_.create_buffer(size_t(shape_.max_batch) * sizeof(int32_t), MemoryKind::host_visible);
  status_ = ctx_.create_buffer(16);
  const uint32_t zeros[4] = {0, 0, 0, 0};
  ctx_.upload(status_.view(), zeros, sizeof(zeros));

  check_blocks_ = std::min(cache_.num_blocks(), kMaxCheckedRows * shape_.max_blocks_per_seq);
  const size_t check_bytes = size_t(check_blocks_) * cache_.sizing().block_bytes;
  check_keys_ = ctx_.create_buffer(check_bytes, MemoryKind::host_visible);
  check_values_ = ctx_.create_buffer(check_bytes, MemoryKind::host_visible);
}

const DecodePlan& SimGpu::plan_for(uint32_t num_seqs) {
  auto it = plans_.find(num_seqs);
  if (it != plans_.end()) return it->second;
  const KvCacheShape& c = shape_.cache;
  DecodeShape d;
  d.num_seqs = num_seqs;
  d.num_heads = shape_.num_heads;
  d.num_kv_heads = c.num_kv_heads;
  d.head_size = c.head_size;
  d.block_size = c.block_size;
  d.num_blocks = cache_.num_blocks();
  d.max_blocks_per_seq = shape_.max_blocks_per_seq;
  d.query_dtype = shape_.query_dtype;
  d.cache_dtype = c.dtype;
  DecodeOptions options;
  options.order = shape_.order;
  return plans_.emplace(num_seqs, DecodePlan::create(ctx_, d, options)).first->second;
}

std::string SimGpu::plan_description(uint32_t num_seqs) { return plan_for(num_seqs).describe(); }

void SimGpu::record_writes(VkCommandBuffer cmd, std::span<const int64_t> slots, uint64_t seed, uint32_t stream) {
  const KvCacheShape& c = shape_.cache;
  const DType qdt = shape_.query_dtype;
  for (uint32_t l = 0; l < c.num_layers; ++l)
    for (size_t first = 0, chunk = 0; first < slots.size(); first += chunk_tokens_, ++chunk) {
      const int64_t n = int64_t(std::min<size_t>(chunk_tokens_, slots.size() - first));
      const Shape tokens{n, c.num_kv_heads, c.head_size};
      ReshapeAndCacheViews v;
      v.key = new_keys_.tensor(qdt, tokens);
      v.value = new_values_.tensor(qdt, tokens);
      record_fill_random(ctx_, cmd, v.key, seed_of(seed, 4 * l + stream, 2 * chunk));
      record_fill_random(ctx_, cmd, v.value, seed_of(seed, 4 * l + stream, 2 * chunk + 1));
      record_compute_barrier(ctx_, cmd);
      v.slot_mapping = slots_.tensor(DType::i64, Shape{n}, first * sizeof(int64_t));
      v.key_cache = cache_.key_cache(l);
      v.value_cache = cache_.value_cache(l);
      v.status = status_.view(0, 4);
      record_reshape_and_cache(ctx_, cmd, v);
      record_compute_barrier(ctx_, cmd);  // the staging is refilled next
    }
}

void SimGpu::move_and_prefill(std::span<const BlockCopy> swap_out, std::span<const BlockCopy> swap_in,
                              std::span<const int64_t> prefill, uint64_t seed, bool overwrite_swap_in_targets) {
  if (swap_out.empty() && swap_in.empty() && prefill.empty()) return;
  if (prefill.size() * sizeof(int64_t) > slots_.size())
    throw Error(ErrorCode::internal, "simulate: more prompt tokens in one step than the cache has slots");
  if (!prefill.empty()) std::memcpy(slots_.mapped(), prefill.data(), prefill.size() * sizeof(int64_t));
  ctx_.run_and_wait([&](VkCommandBuffer cmd) {
    record_compute_barrier(ctx_, cmd);  // after the previous step's decode read the cache
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
    record_writes(cmd, prefill, seed, 2);
  });
}

void SimGpu::append(std::span<const BlockCopy> copies, std::span<const int64_t> slots, uint32_t num_seqs,
                    uint64_t seed) {
  const KvCacheShape& c = shape_.cache;
  if (slots.size() * sizeof(int64_t) > slots_.size())
    throw Error(ErrorCode::internal, "simulate: more new tokens in one step than the cache has slots");
  if (!slots.empty()) std::memcpy(slots_.mapped(), slots.data(), slots.size() * sizeof(int64_t));
  const DType qdt = shape_.query_dtype;
  ctx_.run_and_wait([&](VkCommandBuffer cmd) {
    record_compute_barrier(ctx_, cmd);  // after the prefill, or the previous step's decode
    // Before any token is written into a copied block's source or copy. A block freed by a
    // preemption in this step may be a copy's source and then another copy's destination:
    // such pairs go in a later batch, in the order the block manager handed them out.
    std::unordered_set<int32_t> sources, destinations;
    std::vector<BlockCopy> batch;
    auto flush = [&] {
      if (batch.empty()) return;
      cache_.record_copy_blocks(cmd, batch);
      record_compute_barrier(ctx_, cmd);
      batch.clear();
      sources.clear();
      destinations.clear();
    };
    for (const BlockCopy& p : copies) {
      if (destinations.contains(p.src) || sources.contains(p.dst) || destinations.contains(p.dst)) flush();
      batch.push_back(p);
      sources.insert(p.src);
      destinations.insert(p.dst);
    }
    flush();
    record_writes(cmd, slots, seed, 0);
    for (uint32_t l = 0; l < c.num_layers && num_seqs > 0; ++l)
      record_fill_random(ctx_, cmd, queries_[l].tensor(qdt, Shape{num_seqs, shape_.num_heads, c.head_size}),
                         seed_of(seed, 4 * l + 1, 0));
    record_compute_barrier(ctx_, cmd);
  });
}

void SimGpu::copy_to_check_pools(uint32_t layer, std::span<const BlockCopy> pairs) {
  const KvCacheShape& c = shape_.cache;
  const LayerCacheViews src = cache_.layers()[layer];
  const LayerCacheViews dst{check_keys_.tensor(c.dtype, key_shape(c, check_blocks_)),
                            check_values_.tensor(c.dtype, value_shape(c, check_blocks_))};
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

double SimGpu::decode(const BatchArrays& batch, uint32_t num_seqs) {
  const KvCacheShape& c = shape_.cache;
  const DecodePlan& plan = plan_for(num_seqs);
  const uint32_t M = shape_.max_blocks_per_seq;
  std::memcpy(block_tables_.mapped(), batch.block_tables.data(), size_t(num_seqs) * M * sizeof(int32_t));
  std::memcpy(context_lens_.mapped(), batch.context_lens.data(), size_t(num_seqs) * sizeof(int32_t));
  last_seqs_ = num_seqs;
  last_tables_ = batch.block_tables;
  last_lens_ = batch.context_lens;
  if (plan.scratch_bytes() > scratch_.size()) scratch_ = ctx_.create_buffer(plan.scratch_bytes());
  if (plan.order_bytes() > order_.size()) order_ = ctx_.create_buffer(plan.order_bytes());

  const DType qdt = shape_.query_dtype;
  const Shape rows{num_seqs, shape_.num_heads, c.head_size};
  const TensorView lens = context_lens_.tensor(DType::i32, Shape{num_seqs});
  auto record = [&](VkCommandBuffer cmd) {
    // Longest first: the step's lengths are listed once, and every layer's decode reads the list.
    if (plan.longest_first()) {
      record_decode_order(ctx_, cmd, plan, lens, order_.view(0, plan.order_bytes()));
      record_compute_barrier(ctx_, cmd);
    }
    for (uint32_t l = 0; l < c.num_layers; ++l) {
      DecodeViews v;
      v.query = queries_[l].tensor(qdt, rows);
      v.key_cache = cache_.key_cache(l);
      v.value_cache = cache_.value_cache(l);
      v.block_tables = block_tables_.tensor(DType::i32, Shape{num_seqs, M});
      v.context_lens = lens;
      v.output = outputs_[l].tensor(qdt, rows);
      if (plan.scratch_bytes() > 0) v.scratch = scratch_.view(0, plan.scratch_bytes());
      if (plan.longest_first()) v.order = order_.view(0, plan.order_bytes());
      v.status = status_.view(0, 4);
      record_decode(ctx_, cmd, plan, v);
      record_compute_barrier(ctx_, cmd);  // layers share the scratch; check() reads the outputs
    }
  };
  if (ctx_.device_info().timestamps) return ctx_.run_and_time(record);
  const auto start = std::chrono::steady_clock::now();
  ctx_.run_and_wait(record);
  return std::chrono::duration<double, std::nano>(std::chrono::steady_clock::now() - start).count();
}

SimCheck SimGpu::check(uint32_t layer, std::span<const uint32_t> rows) {
  const KvCacheShape& c = shape_.cache;
  const uint32_t M = shape_.max_blocks_per_seq, B = c.block_size;
  SimCheck result;
  result.layer = layer;
  result.tolerance = tolerance_of(shape_.query_dtype);
  if (rows.size() > kMaxCheckedRows) rows = rows.first(kMaxCheckedRows);
  result.sequences = uint32_t(rows.size());

  // The rows' blocks, each once, gathered into the check pool with swap_blocks.
  std::unordered_map<int32_t, int32_t> local;
  std::vector<BlockCopy> pairs;
  std::vector<int32_t> tables(rows.size() * M, 0), lens(rows.size(), 0);
  for (size_t i = 0; i < rows.size(); ++i) {
    const uint32_t r = rows[i];
    lens[i] = last_lens_[r];
    for (int32_t j = 0; j < int32_t((uint32_t(lens[i]) + B - 1) / B); ++j) {
      const int32_t block = last_tables_[size_t(r) * M + size_t(j)];
      const auto [it, fresh] = local.emplace(block, int32_t(pairs.size()));
      if (fresh) pairs.push_back({block, it->second});
      tables[i * M + size_t(j)] = it->second;
    }
  }
  const uint32_t gathered = std::max<uint32_t>(1, uint32_t(pairs.size()));
  copy_to_check_pools(layer, pairs);

  const DType stored = stored_dtype(c.dtype);
  DecodeInputs in;
  in.cache_dtype = c.dtype;
  in.key_cache = HostTensor(stored, key_shape(c, gathered));
  in.value_cache = HostTensor(stored, value_shape(c, gathered));
  ctx_.download(check_keys_.view(0, in.key_cache.bytes()), in.key_cache.data(), in.key_cache.bytes());
  ctx_.download(check_values_.view(0, in.value_cache.bytes()), in.value_cache.data(), in.value_cache.bytes());
  ctx_.download(status_.view(0, 4), &result.status, 4);

  const DType qdt = shape_.query_dtype;
  const Shape all_rows{last_seqs_, shape_.num_heads, c.head_size};
  HostTensor query(qdt, all_rows), output(qdt, all_rows);
  ctx_.download(queries_[layer].view(0, query.bytes()), query.data(), query.bytes());
  ctx_.download(outputs_[layer].view(0, output.bytes()), output.data(), output.bytes());
  const size_t row_bytes = size_t(shape_.num_heads) * c.head_size * dtype_size(qdt);
  in.query = HostTensor(qdt, Shape{int64_t(rows.size()), shape_.num_heads, c.head_size});
  for (size_t i = 0; i < rows.size(); ++i)
    std::memcpy(static_cast<std::byte*>(in.query.data()) + i * row_bytes,
                static_cast<const std::byte*>(query.data()) + rows[i] * row_bytes, row_bytes);
  in.block_tables = HostTensor(DType::i32, Shape{int64_t(rows.size()), M});
  std::memcpy(in.block_tables.data(), tables.data(), in.block_tables.bytes());
  in.context_lens = HostTensor(DType::i32, Shape{int64_t(rows.size())});
  std::memcpy(in.context_lens.data(), lens.data(), in.context_lens.bytes());

  const DecodeResult expected = reference::decode_attention(in, plan_for(last_seqs_).options());
  const size_t row_elems = size_t(shape_.num_heads) * c.head_size;
  for (size_t i = 0; i < rows.size(); ++i)
    for (size_t e = 0; e < row_elems; ++e) {
      const double err = std::fabs(output.get(rows[i] * row_elems + e) - expected.output.get(i * row_elems + e));
      result.max_error = std::isfinite(err) ? std::max(result.max_error, err) : INFINITY;
    }
  result.passed = result.max_error <= result.tolerance && result.status == 0;
  return result;
}

}  // namespace vkpaged::cli
