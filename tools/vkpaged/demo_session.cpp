#include "demo_session.hpp"

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstring>
#include <numeric>

#include "vkpaged/cache_ops.hpp"
#include "vkpaged/reference.hpp"

namespace vkpaged::cli {

namespace {

uint32_t ceil_div(uint32_t a, uint32_t b) { return (a + b - 1) / b; }

// How the cache's elements sit in memory: fp8 caches are bytes.
DType stored_dtype(DType cache) { return is_fp8_dtype(cache) ? DType::u8 : cache; }

// The contract's tolerances, by the query's dtype (fp8 caches follow the query's).
double tolerance_of(DType query) {
  switch (query) {
    case DType::f32: return 1e-4;
    case DType::f16: return 3e-3;
    default: return 2e-2;
  }
}

DecodeShape decode_shape(const DemoShape& s, uint32_t num_blocks, uint32_t max_blocks_per_seq) {
  DecodeShape d;
  d.num_seqs = s.num_seqs;
  d.num_heads = s.num_heads;
  d.num_kv_heads = s.num_kv_heads;
  d.head_size = s.head_size;
  d.block_size = s.block_size;
  d.num_blocks = num_blocks;
  d.max_blocks_per_seq = max_blocks_per_seq;
  d.max_context_len = s.max_len;
  d.query_dtype = s.dtype;
  d.cache_dtype = s.cache_dtype;
  return d;
}

Shape key_cache_shape(const DemoShape& s, uint32_t num_blocks) {
  const uint32_t x = cache_pack_factor(s.cache_dtype);
  return Shape{num_blocks, s.num_kv_heads, s.head_size / x, s.block_size, x};
}

Shape value_cache_shape(const DemoShape& s, uint32_t num_blocks) {
  return Shape{num_blocks, s.num_kv_heads, s.head_size, s.block_size};
}

HostTensor download(Context& ctx, const DeviceBuffer& buffer, DType dtype, const Shape& shape) {
  HostTensor t(dtype, shape);
  ctx.download(buffer.view(0, t.bytes()), t.data(), t.bytes());
  return t;
}

}  // namespace

DemoSession::DemoSession(Context& context, const DemoShape& shape, const std::vector<uint32_t>& prompt_lens, uint64_t seed)
    : ctx_(context),
      shape_(shape),
      max_blocks_per_seq_(std::max(1u, ceil_div(shape.max_len, shape.block_size))),
      num_blocks_(shape.num_seqs * max_blocks_per_seq_),
      prompt_lens_(prompt_lens),
      blocks_(num_blocks_, shape.block_size),
      plan_(DecodePlan::create(context, decode_shape(shape, num_blocks_, max_blocks_per_seq_))),
      rng_(seed) {
  const auto& s = shape_;
  for (uint32_t i = 0; i < s.num_seqs; ++i) seq_ids_.push_back(i);
  const DType stored = stored_dtype(s.cache_dtype);
  key_mirror_ = HostTensor(stored, key_cache_shape(s, num_blocks_));
  value_mirror_ = HostTensor(stored, value_cache_shape(s, num_blocks_));
  // Zeroed so that unused slots hold harmless values in every dtype, fp8 included.
  key_cache_ = ctx_.create_buffer(key_mirror_.bytes());
  value_cache_ = ctx_.create_buffer(value_mirror_.bytes());
  ctx_.upload(key_cache_.view(), key_mirror_.data(), key_mirror_.bytes());
  ctx_.upload(value_cache_.view(), value_mirror_.data(), value_mirror_.bytes());

  staging_tokens_ = std::max<size_t>(std::accumulate(prompt_lens.begin(), prompt_lens.end(), size_t(0)), s.num_seqs);
  const size_t token_bytes = size_t(s.num_kv_heads) * s.head_size * dtype_size(s.dtype);
  new_keys_ = ctx_.create_buffer(staging_tokens_ * token_bytes, MemoryKind::host_visible);
  new_values_ = ctx_.create_buffer(staging_tokens_ * token_bytes, MemoryKind::host_visible);
  slots_ = ctx_.create_buffer(staging_tokens_ * sizeof(int64_t), MemoryKind::host_visible);

  const size_t query_bytes = size_t(s.num_seqs) * s.num_heads * s.head_size * dtype_size(s.dtype);
  query_ = ctx_.create_buffer(query_bytes, MemoryKind::host_visible);
  block_tables_ = ctx_.create_buffer(size_t(s.num_seqs) * max_blocks_per_seq_ * sizeof(int32_t), MemoryKind::host_visible);
  context_lens_ = ctx_.create_buffer(size_t(s.num_seqs) * sizeof(int32_t), MemoryKind::host_visible);
  output_ = ctx_.create_buffer(query_bytes);
  if (plan_.scratch_bytes() > 0) scratch_ = ctx_.create_buffer(plan_.scratch_bytes());
  status_ = ctx_.create_buffer(16);
  const uint32_t zeros[4] = {0, 0, 0, 0};
  ctx_.upload(status_.view(), zeros, sizeof(zeros));
}

void DemoSession::prefill() {
  std::vector<int64_t> slots;
  for (uint32_t i = 0; i < shape_.num_seqs; ++i) {
    const auto seq_slots = blocks_.add_sequence(seq_ids_[i], prompt_lens_[i]);
    slots.insert(slots.end(), seq_slots.begin(), seq_slots.end());
  }
  write_tokens(slots);
}

void DemoSession::write_tokens(const std::vector<int64_t>& slots) {
  const auto& s = shape_;
  const size_t T = slots.size();
  if (T == 0) return;
  const size_t elems = T * s.num_kv_heads * s.head_size;
  for (size_t i = 0; i < elems; ++i) store_element(new_keys_.mapped(), s.dtype, i, random_value());
  for (size_t i = 0; i < elems; ++i) store_element(new_values_.mapped(), s.dtype, i, random_value());
  std::memcpy(slots_.mapped(), slots.data(), T * sizeof(int64_t));
  for (size_t i = 0; i < T; ++i) mirror_token(i, slots[i], new_keys_.mapped(), new_values_.mapped());

  ReshapeAndCacheViews views;
  const Shape token_shape{int64_t(T), s.num_kv_heads, s.head_size};
  views.key = new_keys_.tensor(s.dtype, token_shape);
  views.value = new_values_.tensor(s.dtype, token_shape);
  views.slot_mapping = slots_.tensor(DType::i64, Shape{int64_t(T)});
  views.key_cache = key_cache_.tensor(s.cache_dtype, key_cache_shape(s, num_blocks_));
  views.value_cache = value_cache_.tensor(s.cache_dtype, value_cache_shape(s, num_blocks_));
  views.status = status_.view(0, 4);
  // The barrier orders this write after the previous step's decode read the cache.
  ctx_.run_and_wait([&](VkCommandBuffer cmd) {
    record_compute_barrier(ctx_, cmd);
    record_reshape_and_cache(ctx_, cmd, views);
  });
}

void DemoSession::mirror_token(size_t token, int64_t slot, const void* key, const void* value) {
  const auto& s = shape_;
  const size_t Hkv = s.num_kv_heads, D = s.head_size, B = s.block_size, x = cache_pack_factor(s.cache_dtype);
  const size_t block = size_t(slot) / B, offset = size_t(slot) % B;
  for (size_t g = 0; g < Hkv; ++g) {
    for (size_t d = 0; d < D; ++d) {
      const size_t src = (token * Hkv + g) * D + d;
      const size_t k_index = (((block * Hkv + g) * (D / x) + d / x) * B + offset) * x + d % x;
      const size_t v_index = ((block * Hkv + g) * D + d) * B + offset;
      // The demo's fp8 scales are 1, so encode(value / scale) is encode(value).
      store_element(key_mirror_.data(), s.cache_dtype, k_index, load_element(key, s.dtype, src));
      store_element(value_mirror_.data(), s.cache_dtype, v_index, load_element(value, s.dtype, src));
    }
  }
  written_slots_.push_back(slot);
}

double DemoSession::step() {
  const auto& s = shape_;
  std::vector<int64_t> slots;
  for (uint64_t id : seq_ids_) slots.push_back(blocks_.append_token(id));
  write_tokens(slots);

  last_query_ = HostTensor(s.dtype, Shape{s.num_seqs, s.num_heads, s.head_size});
  for (size_t i = 0; i < size_t(last_query_.numel()); ++i) last_query_.set(i, random_value());
  std::memcpy(query_.mapped(), last_query_.data(), last_query_.bytes());
  last_tables_.assign(size_t(s.num_seqs) * max_blocks_per_seq_, 0);
  last_lens_.assign(s.num_seqs, 0);
  blocks_.write_batch(seq_ids_, max_blocks_per_seq_, last_tables_.data(), last_lens_.data());
  std::memcpy(block_tables_.mapped(), last_tables_.data(), last_tables_.size() * sizeof(int32_t));
  std::memcpy(context_lens_.mapped(), last_lens_.data(), last_lens_.size() * sizeof(int32_t));
  const uint64_t tokens = std::accumulate(last_lens_.begin(), last_lens_.end(), uint64_t(0));
  kv_bytes_last_step_ = 2 * tokens * s.num_kv_heads * s.head_size * dtype_size(stored_dtype(s.cache_dtype));

  DecodeViews v;
  v.query = query_.tensor(s.dtype, Shape{s.num_seqs, s.num_heads, s.head_size});
  v.key_cache = key_cache_.tensor(s.cache_dtype, key_cache_shape(s, num_blocks_));
  v.value_cache = value_cache_.tensor(s.cache_dtype, value_cache_shape(s, num_blocks_));
  v.block_tables = block_tables_.tensor(DType::i32, Shape{s.num_seqs, max_blocks_per_seq_});
  v.context_lens = context_lens_.tensor(DType::i32, Shape{s.num_seqs});
  v.output = output_.tensor(s.dtype, Shape{s.num_seqs, s.num_heads, s.head_size});
  if (plan_.scratch_bytes() > 0) v.scratch = scratch_.view();
  v.status = status_.view(0, 4);
  // Barriers on both sides: the cache writes before, the downloads of check() after.
  auto record = [&](VkCommandBuffer cmd) {
    record_compute_barrier(ctx_, cmd);
    record_decode(ctx_, cmd, plan_, v);
    record_compute_barrier(ctx_, cmd);
  };
  if (ctx_.device_info().timestamps) return ctx_.run_and_time(record);
  const auto start = std::chrono::steady_clock::now();
  ctx_.run_and_wait(record);
  return std::chrono::duration<double, std::nano>(std::chrono::steady_clock::now() - start).count();
}

DemoCheck DemoSession::check() {
  const auto& s = shape_;
  DemoCheck c;
  c.tolerance = tolerance_of(s.dtype);
  const DType stored = stored_dtype(s.cache_dtype);
  DecodeInputs in;
  in.key_cache = download(ctx_, key_cache_, stored, key_cache_shape(s, num_blocks_));
  in.value_cache = download(ctx_, value_cache_, stored, value_cache_shape(s, num_blocks_));
  const HostTensor output = download(ctx_, output_, s.dtype, last_query_.shape());
  ctx_.download(status_.view(0, 4), &c.status, 4);

  // reshape_and_cache: every written slot holds encode(value), bit for bit.
  const size_t Hkv = s.num_kv_heads, D = s.head_size, B = s.block_size, x = cache_pack_factor(s.cache_dtype);
  const size_t elem = dtype_size(stored);
  auto same = [&](const HostTensor& a, const HostTensor& b, size_t i) {
    return std::memcmp(static_cast<const std::byte*>(a.data()) + i * elem, static_cast<const std::byte*>(b.data()) + i * elem,
                       elem) == 0;
  };
  for (int64_t slot : written_slots_) {
    const size_t block = size_t(slot) / B, offset = size_t(slot) % B;
    for (size_t g = 0; g < Hkv; ++g)
      for (size_t d = 0; d < D; ++d) {
        const size_t k_index = (((block * Hkv + g) * (D / x) + d / x) * B + offset) * x + d % x;
        const size_t v_index = ((block * Hkv + g) * D + d) * B + offset;
        c.cache_mismatches += !same(in.key_cache, key_mirror_, k_index);
        c.cache_mismatches += !same(in.value_cache, value_mirror_, v_index);
      }
  }

  // decode: against the reference on the cache as the GPU stored it.
  in.query = last_query_;
  in.cache_dtype = s.cache_dtype;
  in.block_tables = HostTensor(DType::i32, Shape{s.num_seqs, max_blocks_per_seq_});
  std::memcpy(in.block_tables.data(), last_tables_.data(), in.block_tables.bytes());
  in.context_lens = HostTensor(DType::i32, Shape{s.num_seqs});
  std::memcpy(in.context_lens.data(), last_lens_.data(), in.context_lens.bytes());
  const DecodeResult expected = reference::decode_attention(in, plan_.options());
  for (size_t i = 0; i < size_t(output.numel()); ++i) {
    const double err = std::fabs(output.get(i) - expected.output.get(i));
    c.max_error = std::isfinite(err) ? std::max(c.max_error, err) : INFINITY;
  }
  c.passed = c.max_error <= c.tolerance && c.cache_mismatches == 0 && c.status == 0;
  return c;
}

}  // namespace vkpaged::cli
