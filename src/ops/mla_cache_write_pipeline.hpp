// SPDX-License-Identifier: Apache-2.0
#pragma once
// The pipeline an MLA cache write records (record_mla_reshape_and_cache,
// mla_reshape_and_cache.cpp) for its dtypes, cache form, pools' reach and rope, described once
// so that Context::prepare (prepare.cpp) builds the same one ahead for a CacheWriteKind of an
// MLA cache.
#include "ops/rotary_checks.hpp"
#include "vk/pipeline_request.hpp"
#include "vkpaged/dtype.hpp"
#include "vkpaged/rotary.hpp"

namespace vkpaged::detail {

struct MlaCacheWritePipeline {
  DType token_dtype = DType::f16;  // kv_c and k_pe
  DType cache_dtype = DType::f16;
  bool slot_i64 = true;
  bool two_pools = false;          // ckv and kpe, not the one pool
  bool address = false;            // a pool past maxStorageBufferRange: the `_address` variant
  const RotaryGeometry* rope = nullptr;  // the rope variant, with its checked geometry
  RotaryStyle rope_style = RotaryStyle::neox;
};

vk::PipelineRequest mla_cache_write_request(const MlaCacheWritePipeline& p);

}  // namespace vkpaged::detail
