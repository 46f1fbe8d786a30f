// SPDX-License-Identifier: Apache-2.0
#include "demo_session.hpp"

#include <fmt/format.h>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstring>

#include "ops/integer_math.hpp"
#include "vkpaged/error.hpp"
#include "vkpaged/reference.hpp"

namespace vkpaged::cli {

using detail::ceil_div;

namespace {

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

KvCacheShape cache_shape(const DemoShape& s) {
  KvCacheShape c;
  c.num_layers = 1;
  c.num_kv_heads = s.num_kv_heads;
  c.head_size = s.head_size;
  c.block_size = s.block_size;
  c.dtype = s.cache_dtype;
  c.layout = s.layout;
  return c;
}

KvCacheOptions cache_blocks(uint32_t num_blocks) {
  KvCacheOptions o;
  o.num_blocks = num_blocks;
  return o;
}

HostTensor download(Context& ctx, const TensorView& view, DType dtype) {
  HostTensor t(dtype, view.shape);
  ctx.download(view.memory, t.data(), t.bytes());
  return t;
}

HostTensor host_ints(DType dtype, const void* data, int64_t n) {
  HostTensor t(dtype, Shape{n});
  std::memcpy(t.data(), data, t.bytes());
  return t;
}

void max_into(double& worst, double err) { worst = std::isfinite(err) ? std::max(worst, err) : INFINITY; }

}  // namespace

DemoSession::DemoSession(Context& context, const DemoShape& shape, const std::vector<uint32_t>& prompt_lens,
                         uint32_t decode_steps, uint64_t seed)
    : ctx_(context),
      shape_(shape),
      decode_steps_(decode_steps),
      max_blocks_per_seq_(uint32_t(std::max<uint64_t>(1, ceil_div(shape.max_len, shape.block_size)))),
      blocks_(shape.num_seqs * max_blocks_per_seq_, shape.block_size),
      cache_(context, cache_shape(shape), cache_blocks(shape.num_seqs * max_blocks_per_seq_)),
      rng_(seed) {
  const auto& s = shape_;
  for (uint32_t i = 0; i < s.num_seqs; ++i) {
    Sequence q;
    q.id = i;
    q.prompt_len = prompt_lens[i];
    q.prompt_slots = blocks_.add_sequence(i, q.prompt_len);  // every prompt block now: the chunks fill them
    seqs_.push_back(std::move(q));
    total_steps_ = std::max(total_steps_, uint32_t(ceil_div(prompt_lens[i], s.chunk)) + decode_steps);
  }
  max_step_tokens_ = s.num_seqs * std::max(1u, std::min(s.chunk, s.max_len));

  const DType stored = stored_dtype(s.cache_dtype);
  key_mirror_ = HostTensor(stored, cache_.key_cache(0).shape);
  value_mirror_ = HostTensor(stored, cache_.value_cache(0).shape);
  const size_t T = max_step_tokens_, e = dtype_size(s.dtype);
  new_keys_ = ctx_.create_buffer(T * s.num_kv_heads * s.head_size * e, MemoryKind::host_visible);
  new_values_ = ctx_.create_buffer(T * s.num_kv_heads * s.head_size * e, MemoryKind::host_visible);
  query_ = ctx_.create_buffer(T * s.num_heads * s.head_size * e, MemoryKind::host_visible);
  slots_ = ctx_.create_buffer(T * sizeof(int64_t), MemoryKind::host_visible);
  positions_ = ctx_.create_buffer(T * sizeof(int64_t), MemoryKind::host_visible);
  output_ = ctx_.create_buffer(T * s.num_heads * s.head_size * e);
  block_tables_ =
      ctx_.create_buffer(size_t(s.num_seqs) * max_blocks_per_seq_ * sizeof(int32_t), MemoryKind::host_visible);
  context_lens_ = ctx_.create_buffer(size_t(s.num_seqs) * sizeof(int32_t), MemoryKind::host_visible);
  query_starts_ = ctx_.create_buffer((size_t(s.num_seqs) + 1) * sizeof(int32_t), MemoryKind::host_visible);
  if (s.rotary) {
    const HostTensor cos_sin = rotary_cos_sin_cache(std::max(1u, s.max_len), s.head_size);
    cos_sin_ = ctx_.create_buffer(cos_sin.bytes());
    ctx_.upload(cos_sin_.view(), cos_sin.data(), cos_sin.bytes());
  }
  status_ = ctx_.create_buffer(16);
  const uint32_t zeros[4] = {0, 0, 0, 0};
  ctx_.upload(status_.view(), zeros, sizeof(zeros));
  // Rows past a step's tokens are the buckets' padding: zeros, rotated and never attended.
  for (const DeviceBuffer* b : {&new_keys_, &new_values_, &query_}) std::memset(b->mapped(), 0, b->size());
  // The scratch the steps can need, once: the larger of the two buckets' (their plans come later).
  size_t scratch = 0;
  for (const bool decode_only : {true, false}) {
    const AttentionBucket b = bucket(decode_only);
    scratch = std::max(scratch, AttentionPlan::max_scratch_bytes(ctx_, b.shape, b.max_query_tokens, b.options));
  }
  if (scratch > 0) scratch_ = ctx_.create_buffer(scratch);
}

AttentionBucket DemoSession::bucket(bool decode_only) const {
  const auto& s = shape_;
  const uint32_t longest = std::min(std::max(1u, s.max_len), max_blocks_per_seq_ * s.block_size);
  AttentionShape b;
  b.num_requests = s.num_seqs;
  b.num_query_tokens = decode_only ? s.num_seqs : max_step_tokens_;
  b.num_heads = s.num_heads;
  b.max_blocks_per_seq = max_blocks_per_seq_;
  b.max_context_len = longest;
  b.query_dtype = s.dtype;
  return {cache_.attention_shape(b), decode_only ? 1u : std::min(s.chunk, longest), {}};
}

const AttentionPlan& DemoSession::plan(bool decode_only) {
  std::optional<AttentionPlan>& plan = decode_only ? decode_plan_ : mixed_plan_;
  if (!plan) {
    const AttentionBucket b = bucket(decode_only);
    plan = AttentionPlan::create_bucket(ctx_, b.shape, b.max_query_tokens, b.options);
  }
  return *plan;
}

PipelineSet DemoSession::pipelines() const {
  PipelineSet set;
  set.attention = {bucket(true), bucket(false)};
  std::optional<RotaryWrite> rotary;
  if (shape_.rotary) rotary = RotaryWrite{*shape_.rotary, shape_.head_size};
  set.cache_writes.push_back(CacheWriteKind::of(cache_, shape_.dtype, rotary));
  return set;
}

bool DemoSession::done() const {
  return std::all_of(seqs_.begin(), seqs_.end(),
                     [&](const Sequence& q) { return q.computed >= q.prompt_len && q.decoded >= decode_steps_; });
}

HostTensor DemoSession::random_tensor(Shape shape) {
  HostTensor t(shape_.dtype, shape);
  for (size_t i = 0; i < size_t(t.numel()); ++i) t.set(i, uniform_(rng_));
  return t;
}

DemoStep DemoSession::step() {
  const auto& s = shape_;
  const uint32_t M = max_blocks_per_seq_;
  DemoStep result;

  // Schedule: each sequence's next prompt chunk, else its next decode token.
  std::vector<int64_t> slots, positions;
  std::vector<int32_t> starts{0}, lens;
  std::vector<uint64_t> ids;
  for (Sequence& q : seqs_) {
    uint32_t n = 0;
    if (q.computed < q.prompt_len) {
      n = std::min(s.chunk, q.prompt_len - q.computed);
      slots.insert(slots.end(), q.prompt_slots.begin() + q.computed, q.prompt_slots.begin() + q.computed + n);
      result.prompt_tokens += n;
    } else if (q.decoded < decode_steps_) {
      n = 1;
      slots.push_back(blocks_.append_token(q.id));  // a new block when the last one is full
      ++q.decoded;
      ++result.decode_tokens;
    }
    if (n == 0) continue;
    for (uint32_t j = 0; j < n; ++j) positions.push_back(q.computed + j);
    q.computed += n;
    ids.push_back(q.id);
    lens.push_back(int32_t(q.computed));
    starts.push_back(starts.back() + int32_t(n));
  }
  const int64_t S = int64_t(ids.size()), T = starts.back();
  if (S == 0) throw Error(ErrorCode::internal, "demo: a step with nothing to run");
  const auto started = std::chrono::steady_clock::now();
  // The step's bucket: its plan serves every step of the kind; the arrays are padded to it.
  const AttentionPlan& plan = this->plan(result.prompt_tokens == 0);
  const int64_t Sb = plan.shape().num_requests, Tb = plan.shape().num_query_tokens;

  // The step's new tokens (random: there is no model) and the batch arrays.
  last_query_ = random_tensor(Shape{T, s.num_heads, s.head_size});
  last_keys_ = random_tensor(Shape{T, s.num_kv_heads, s.head_size});
  const HostTensor values = random_tensor(Shape{T, s.num_kv_heads, s.head_size});
  std::memcpy(query_.mapped(), last_query_.data(), last_query_.bytes());
  std::memcpy(new_keys_.mapped(), last_keys_.data(), last_keys_.bytes());
  std::memcpy(new_values_.mapped(), values.data(), values.bytes());
  last_positions_ = host_ints(DType::i64, positions.data(), T);
  std::vector<int32_t> tables(static_cast<size_t>(S) * M), manager_lens(static_cast<size_t>(S));
  blocks_.write_batch(ids, M, tables.data(), manager_lens.data());  // its lengths count whole prompts
  // Padding to the bucket: tokens of no slot (skipped) at position 0, then requests of no new
  // tokens and length 0 (their table rows are not read).
  slots.resize(size_t(Tb), -1);
  positions.resize(size_t(Tb), 0);
  tables.resize(size_t(Sb) * M, 0);
  lens.resize(size_t(Sb), 0);
  starts.resize(size_t(Sb) + 1, int32_t(T));
  std::memcpy(slots_.mapped(), slots.data(), slots.size() * sizeof(int64_t));
  std::memcpy(positions_.mapped(), positions.data(), positions.size() * sizeof(int64_t));
  std::memcpy(block_tables_.mapped(), tables.data(), tables.size() * sizeof(int32_t));
  std::memcpy(context_lens_.mapped(), lens.data(), lens.size() * sizeof(int32_t));
  std::memcpy(query_starts_.mapped(), starts.data(), starts.size() * sizeof(int32_t));
  result.plan = plan.describe();

  const Shape kv_rows{Tb, s.num_kv_heads, s.head_size}, q_rows{Tb, s.num_heads, s.head_size};
  const NewTokens tokens{new_keys_.tensor(s.dtype, kv_rows), new_values_.tensor(s.dtype, kv_rows),
                         slots_.tensor(DType::i64, Shape{Tb}), status_.view(0, 4)};
  AttentionViews v;
  v.query = query_.tensor(s.dtype, q_rows);
  v.block_tables = block_tables_.tensor(DType::i32, Shape{Sb, M});
  v.context_lens = context_lens_.tensor(DType::i32, Shape{Sb});
  v.query_starts = query_starts_.tensor(DType::i32, Shape{Sb + 1});
  v.output = output_.tensor(s.dtype, q_rows);
  if (plan.scratch_bytes() > 0) v.scratch = scratch_.view(0, plan.scratch_bytes());
  v.status = status_.view(0, 4);

  auto write = [&](VkCommandBuffer cmd) {
    record_compute_barrier(ctx_, cmd);  // after the previous step's attention read the cache
    if (s.rotary)
      cache_.record_reshape_and_cache(
          cmd, 0, tokens,
          RotaryInputs{v.query, positions_.tensor(DType::i64, Shape{Tb}),
                       cos_sin_.tensor(DType::f32, Shape{std::max(1u, s.max_len), s.head_size}), *s.rotary});
    else
      cache_.record_reshape_and_cache(cmd, 0, tokens);
    record_compute_barrier(ctx_, cmd);  // the keys and values (and rotated queries) before attention reads them
  };
  auto attend = [&](VkCommandBuffer cmd) {
    cache_.record_attention(cmd, 0, plan, v);
    record_compute_barrier(ctx_, cmd);  // before the downloads of check()
  };
  if (ctx_.device_info().timestamps) {
    result.attention_ns = ctx_.run_and_time(attend, write);
  } else {
    ctx_.run_and_wait(write);
    const auto start = std::chrono::steady_clock::now();
    ctx_.run_and_wait(attend);
    result.attention_ns = std::chrono::duration<double, std::nano>(std::chrono::steady_clock::now() - start).count();
  }
  result.wall_ns = std::chrono::duration<double, std::nano>(std::chrono::steady_clock::now() - started).count();
  lens.resize(size_t(S));  // the step's own requests from here on
  slots.resize(size_t(T));
  for (int32_t len : lens)
    result.kv_bytes += 2ull * uint64_t(len) * s.num_kv_heads * s.head_size * dtype_size(stored_dtype(s.cache_dtype));

  // What the cache must hold now: the values as given, the keys as the GPU rotated them.
  last_rotated_keys_ = download(ctx_, new_keys_.tensor(s.dtype, Shape{T, s.num_kv_heads, s.head_size}), s.dtype);
  mirror(slots, last_rotated_keys_, values);
  last_ = AttentionInputs{};
  last_.query = download(ctx_, query_.tensor(s.dtype, Shape{T, s.num_heads, s.head_size}), s.dtype);  // rotated in place
  last_.block_tables = HostTensor(DType::i32, Shape{S, M});
  std::memcpy(last_.block_tables.data(), tables.data(), last_.block_tables.bytes());  // the first S rows
  last_.context_lens = host_ints(DType::i32, lens.data(), S);
  last_.query_starts = host_ints(DType::i32, starts.data(), S + 1);
  last_.cache_dtype = s.cache_dtype;
  last_.kv_layout = s.layout;
  return result;
}

void DemoSession::mirror(const std::vector<int64_t>& slots, const HostTensor& keys, const HostTensor& values) {
  const auto& s = shape_;
  const KvBlockGeometry g{s.num_kv_heads, s.head_size, s.block_size, cache_pack_factor(s.cache_dtype)};
  for (size_t i = 0; i < slots.size(); ++i) {
    const uint64_t block = uint64_t(slots[i]) / s.block_size;
    const uint32_t offset = uint32_t(uint64_t(slots[i]) % s.block_size);
    for (uint32_t h = 0; h < s.num_kv_heads; ++h)
      for (uint32_t d = 0; d < s.head_size; ++d) {
        const size_t src = (i * s.num_kv_heads + h) * s.head_size + d;
        // The demo's fp8 scales are 1, so encode(value / scale) is encode(value).
        store_element(key_mirror_.data(), s.cache_dtype, block * g.block_elements() + g.key_offset(s.layout, h, d, offset),
                      float(keys.get(src)));
        store_element(value_mirror_.data(), s.cache_dtype,
                      block * g.block_elements() + g.value_offset(s.layout, h, d, offset), float(values.get(src)));
      }
    written_slots_.push_back(slots[i]);
  }
}

DemoCheck DemoSession::check() {
  const auto& s = shape_;
  DemoCheck c;
  c.tolerance = tolerance_of(s.dtype);
  const DType stored = stored_dtype(s.cache_dtype);
  AttentionInputs& in = last_;
  in.key_cache = download(ctx_, cache_.key_cache(0), stored);
  in.value_cache = download(ctx_, cache_.value_cache(0), stored);
  ctx_.download(status_.view(0, 4), &c.status, 4);

  // reshape_and_cache: every written slot holds encode(value) and encode(rotated key), bit for bit.
  const KvBlockGeometry g{s.num_kv_heads, s.head_size, s.block_size, cache_pack_factor(s.cache_dtype)};
  const size_t elem = dtype_size(stored);
  auto same = [&](const HostTensor& a, const HostTensor& b, uint64_t i) {
    return std::memcmp(static_cast<const std::byte*>(a.data()) + i * elem, static_cast<const std::byte*>(b.data()) + i * elem,
                       elem) == 0;
  };
  for (int64_t slot : written_slots_) {
    const uint64_t base = uint64_t(slot) / s.block_size * g.block_elements();
    const uint32_t offset = uint32_t(uint64_t(slot) % s.block_size);
    for (uint32_t h = 0; h < s.num_kv_heads; ++h)
      for (uint32_t d = 0; d < s.head_size; ++d) {
        c.cache_mismatches += !same(in.key_cache, key_mirror_, base + g.key_offset(s.layout, h, d, offset));
        c.cache_mismatches += !same(in.value_cache, value_mirror_, base + g.value_offset(s.layout, h, d, offset));
      }
  }

  // Rotary: the last step's queries and keys as the GPU rotated them, against the reference.
  if (s.rotary) {
    HostTensor want_q = last_query_, want_k = last_keys_;
    reference::rotary_embedding(want_q, want_k, last_positions_, rotary_cos_sin_cache(std::max(1u, s.max_len), s.head_size),
                                *s.rotary);
    for (size_t i = 0; i < size_t(want_q.numel()); ++i) max_into(c.rotary_error, std::fabs(in.query.get(i) - want_q.get(i)));
    for (size_t i = 0; i < size_t(want_k.numel()); ++i)
      max_into(c.rotary_error, std::fabs(last_rotated_keys_.get(i) - want_k.get(i)));
  }

  // Attention: against the reference on the cache as the GPU stored it.
  const HostTensor output = download(ctx_, output_.tensor(s.dtype, in.query.shape()), s.dtype);
  const AttentionResult expected = reference::batch_attention(in);
  for (size_t i = 0; i < size_t(output.numel()); ++i)
    max_into(c.max_error, std::fabs(output.get(i) - expected.output.get(i)));
  c.passed = c.max_error <= c.tolerance && c.rotary_error <= c.tolerance && c.cache_mismatches == 0 && c.status == 0;
  return c;
}

}  // namespace vkpaged::cli
