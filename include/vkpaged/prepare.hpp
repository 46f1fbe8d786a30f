// SPDX-License-Identifier: Apache-2.0
#pragma once
// Start-up: building every pipeline before the first step. Plans build theirs when they are
// made and the cache writes when they are first recorded, each compiled by the driver on the
// calling thread; an engine that knows its buckets lists what its steps will record, and
// Context::prepare builds all of it at once, on several threads, so that no step compiles:
//
//   PipelineSet set;
//   set.attention.push_back({cache.attention_shape(decode_bucket), 1});          // decode steps
//   set.attention.push_back({cache.attention_shape(mixed_bucket), max_chunk});   // prompt chunks
//   set.cache_writes.push_back(CacheWriteKind::of(cache, DType::f16, RotaryWrite{RotaryStyle::neox, 128}));
//   set.mla.push_back({mla_cache.mla_shape(decode_bucket), 1});                // an MLA cache's decode steps
//   ctx.load_pipeline_cache(saved);   // optional: the last run's Context::pipeline_cache_data()
//   ctx.prepare(set);                 // builds what the cache does not hold
//
// Then AttentionPlan::create_bucket, DecodePlan::create, MlaPlan::create_bucket and the records of
// those cache writes find their pipelines built. A list that names more than the steps use costs only start-up.
#include <cstddef>
#include <cstdint>
#include <optional>
#include <vector>

#include "vkpaged/attention.hpp"
#include "vkpaged/context.hpp"
#include "vkpaged/decode.hpp"
#include "vkpaged/kv_cache.hpp"
#include "vkpaged/mla_attention.hpp"
#include "vkpaged/rotary.hpp"

namespace vkpaged {

// AttentionPlan::create_bucket's arguments.
struct AttentionBucket {
  AttentionShape shape;
  uint32_t max_query_tokens = 0;  // 0 = shape.num_query_tokens
  AttentionOptions options;
};

// MlaPlan::create_bucket's arguments.
struct MlaBucket {
  MlaShape shape;
  uint32_t max_query_tokens = 0;  // 0 = shape.attention.num_query_tokens
  MlaOptions options;
};

// DecodePlan::create's arguments (a DecodeShape is a bucket already: S and the longest context).
struct DecodeBucket {
  DecodeShape shape;
  DecodeOptions options;
};

// The rotary part of a cache write (record_reshape_and_cache_rotary, KvCache's rotary form).
struct RotaryWrite {
  RotaryStyle style = RotaryStyle::neox;
  uint32_t rotary_dim = 0;                // columns of the cos/sin cache: even, 2 <= rotary_dim <= head_size
  DType cos_sin_dtype = DType::f32;       // f32 or the token dtype
  DType position_dtype = DType::i64;      // i64 or i32
};

// One kind of cache write (record_reshape_and_cache, KvCache::record_reshape_and_cache) into a
// cache of this geometry, its pools each one buffer from its start (as KvCache's are). A cache
// of an MLA kind (cache.kind) takes MLA writes (record_mla_reshape_and_cache,
// KvCache::record_mla_reshape_and_cache; `rotary`: the rope on k_pe, rotary_dim its R).
struct CacheWriteKind {
  KvCacheShape cache;                 // num_layers is not read
  uint32_t num_blocks = 0;            // N of each pool (past maxStorageBufferRange: by device address)
  DType token_dtype = DType::f16;     // the new keys and values: f32, f16, bf16
  DType slot_dtype = DType::i64;      // the slot mapping: i64 or i32
  std::optional<RotaryWrite> rotary;  // the keys rotated on their way in
  // The kind a KvCache's writes are.
  static CacheWriteKind of(const KvCache& cache, DType token_dtype, std::optional<RotaryWrite> rotary = {},
                           DType slot_dtype = DType::i64);
};

// What an engine's steps will record.
struct PipelineSet {
  std::vector<AttentionBucket> attention;
  std::vector<DecodeBucket> decode;
  std::vector<CacheWriteKind> cache_writes;
  std::vector<MlaBucket> mla;
};

struct PrepareReport {
  size_t pipelines = 0;  // distinct pipelines the set uses
  size_t created = 0;    // of them, built by this call (the others the context had built before)
};

// Context::prepare(set) (context.hpp): plans every bucket as create_bucket and DecodePlan::create
// would (the same checks: an argument they refuse is refused here, naming
// "attention[i]: ...", "decode[i]: ...", "mla[i]: ..." or "cache_writes[i].<field>: ...", before anything is
// built) and builds the pipelines the context lacks. A decode bucket that could take the matrix
// kernel runs its fragment-layout probe here, as DecodePlan::create would.

}  // namespace vkpaged
