// SPDX-License-Identifier: Apache-2.0
// Context::prepare (vkpaged/prepare.hpp): the pipelines of every bucket's plan and every cache
// write an engine's steps will record, as the plans and the records would name them (a bucket,
// attention's or decode's, planned as the attention problem: ops/attention_plan.hpp), built at
// once by the context's registry (vk/pipeline_registry.cpp).
#include "vkpaged/prepare.hpp"

#include <fmt/format.h>

#include <algorithm>
#include <string>
#include <vector>

#include "ops/attention_plan.hpp"
#include "ops/cache_write_pipeline.hpp"
#include "ops/mla_attention_plan.hpp"
#include "ops/mla_attention_planner.hpp"
#include "ops/mla_cache_checks.hpp"
#include "ops/mla_cache_write_pipeline.hpp"
#include "ops/rotary_checks.hpp"
#include "vkpaged/error.hpp"

namespace vkpaged {

namespace {

// Runs `body`, prefixing what it refuses with `where` ("attention[2]: ...").
template <typename Body>
auto naming(const std::string& where, Body&& body) {
  try {
    return body();
  } catch (const Error& e) {
    throw Error(e.code(), where + ": " + e.what());
  }
}

[[noreturn]] void refuse(const std::string& message) { throw Error(ErrorCode::invalid_argument, message); }

// An MLA cache's write (record_mla_reshape_and_cache, KvCache::record_mla_reshape_and_cache; the
// kind's rotary: its rope on k_pe), `cache` validated: the pipeline mla_reshape_and_cache.cpp
// builds (ops/mla_cache_write_pipeline.hpp); `address`: a pool written by device address.
vk::PipelineRequest mla_cache_write_request(const CacheWriteKind& w, const KvCacheShape& cache, bool address,
                                            const std::string& at) {
  detail::MlaCacheWritePipeline p{.token_dtype = w.token_dtype,
                                  .cache_dtype = cache.dtype,
                                  .slot_i64 = w.slot_dtype == DType::i64,
                                  .two_pools = cache.kind == KvCacheKind::mla_two_pools,
                                  .address = address};
  detail::RotaryGeometry g;
  if (w.rotary) {
    const RotaryWrite& r = *w.rotary;
    // The rope checks of a call with these dtypes and shapes: one token's k_pe [1, R].
    g = naming(at + ".rotary", [&] {
      return detail::check_mla_rope(r.style, {true, w.token_dtype, Shape{1, int64_t(cache.rope_head_size)}},
                                    {true, r.position_dtype, Shape{1}},
                                    {true, r.cos_sin_dtype, Shape{1, int64_t(r.rotary_dim)}});
    });
    p.rope = &g;
    p.rope_style = r.style;
  }
  return detail::mla_cache_write_request(p);
}

// The pipeline record_reshape_and_cache (or its rotary form) builds for a write of this kind
// (ops/cache_write_pipeline.hpp), its checks of the kind's fields first.
vk::PipelineRequest kind_request(const detail::ContextImpl& impl, const CacheWriteKind& w, const std::string& at) {
  KvCacheShape cache = w.cache;
  cache.num_layers = 1;  // not read
  naming(at + ".cache", [&] { KvCache::validate(cache); });
  if (w.num_blocks == 0) refuse(at + ".num_blocks: the pools hold no block");
  if (!is_float_dtype(w.token_dtype))
    refuse(fmt::format("{}.token_dtype: {} is not f32, f16 or bf16", at, dtype_name(w.token_dtype)));
  if (w.slot_dtype != DType::i64 && w.slot_dtype != DType::i32)
    refuse(fmt::format("{}.slot_dtype: {} is not i64 or i32", at, dtype_name(w.slot_dtype)));
  // A pool past the range is written by device address (cache_pool_access.cpp): the cache's own
  // pool size (of an MLA cache, its largest pool).
  const bool address = KvCache::sizing(cache, w.num_blocks).pool_bytes > impl.info.max_storage_buffer_range;
  if (cache.kind != KvCacheKind::key_value) return mla_cache_write_request(w, cache, address, at);
  detail::CacheWritePipeline p{.token_dtype = w.token_dtype,
                               .cache_dtype = cache.dtype,
                               .slot_i64 = w.slot_dtype == DType::i64,
                               .layout = cache.layout,
                               .address = address};
  if (!w.rotary) return detail::cache_write_request(p);
  const RotaryWrite& r = *w.rotary;
  // The rotary checks of a call with these dtypes and shapes: one token, the cache's kv heads.
  const int64_t d = cache.head_size, hkv = cache.num_kv_heads;
  const detail::RotaryGeometry g = naming(at + ".rotary", [&] {
    return detail::check_rotary_inputs(r.style, {}, {true, w.token_dtype, Shape{1, hkv, d}},
                                       {true, r.position_dtype, Shape{1}},
                                       {true, r.cos_sin_dtype, Shape{1, int64_t(r.rotary_dim)}});
  });
  p.rotary = &g;
  p.rotary_style = r.style;
  return detail::cache_write_request(p);
}

}  // namespace

CacheWriteKind CacheWriteKind::of(const KvCache& cache, DType token_dtype, std::optional<RotaryWrite> rotary,
                                  DType slot_dtype) {
  return {cache.shape(), cache.num_blocks(), token_dtype, slot_dtype, rotary};
}

PrepareReport Context::prepare(const PipelineSet& set) {
  // Every request first (every refusal before anything is built), then one build of them all.
  std::vector<vk::PipelineRequest> requests;
  auto add = [&](std::vector<vk::PipelineRequest> more) {
    requests.insert(requests.end(), std::make_move_iterator(more.begin()), std::make_move_iterator(more.end()));
  };
  for (size_t i = 0; i < set.attention.size(); ++i) {
    const AttentionBucket& b = set.attention[i];
    add(naming(fmt::format("attention[{}]", i), [&] {
      return detail::plan_pipeline_requests(
          detail::plan_attention_problem(*this, b.shape, detail::QueryRows::bucket(b.max_query_tokens), b.options));
    }));
  }
  for (size_t i = 0; i < set.decode.size(); ++i) {
    const DecodeBucket& b = set.decode[i];
    add(naming(fmt::format("decode[{}]", i),
               [&] { return detail::plan_pipeline_requests(detail::plan_decode_batch(*this, b.shape, b.options)); }));
  }
  for (size_t i = 0; i < set.mla.size(); ++i) {
    const MlaBucket& b = set.mla[i];
    add(naming(fmt::format("mla[{}]", i), [&] {
      return detail::mla_pipeline_requests(
                 b.shape, detail::plan_mla_attention_rows(impl_->capabilities, b.shape,
                                                          detail::QueryRows::bucket(b.max_query_tokens), b.options))
          .all();
    }));
  }
  for (size_t i = 0; i < set.cache_writes.size(); ++i)
    requests.push_back(kind_request(*impl_, set.cache_writes[i], fmt::format("cache_writes[{}]", i)));
  const auto built = impl_->prepare_pipelines(requests);
  return {built.pipelines, built.created};
}

}  // namespace vkpaged
