// SPDX-License-Identifier: Apache-2.0
#pragma once
// The pipeline a key/value cache write records (record_reshape_and_cache, reshape_and_cache.cpp,
// and its rotary form, reshape_and_cache_rotary.cpp) for its dtypes, layout, pools' reach and
// rotary part, described once so that Context::prepare (prepare.cpp) builds the same one ahead
// for a CacheWriteKind (as mla_cache_write_pipeline.hpp does for an MLA cache's write).
#include "ops/rotary_checks.hpp"
#include "vk/pipeline_request.hpp"
#include "vkpaged/dtype.hpp"
#include "vkpaged/kv_layout.hpp"
#include "vkpaged/rotary.hpp"

namespace vkpaged::detail {

struct CacheWritePipeline {
  DType token_dtype = DType::f16;  // the new keys and values
  DType cache_dtype = DType::f16;
  bool slot_i64 = true;
  KvLayout layout = KvLayout::vllm;
  bool address = false;                    // a pool past maxStorageBufferRange: the `_address` variant
  const RotaryGeometry* rotary = nullptr;  // the rotary form, with its checked geometry
  RotaryStyle rotary_style = RotaryStyle::neox;
};

vk::PipelineRequest cache_write_request(const CacheWritePipeline& p);

}  // namespace vkpaged::detail
