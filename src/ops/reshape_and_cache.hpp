// SPDX-License-Identifier: Apache-2.0
#pragma once
// What reshape_and_cache (reshape_and_cache.cpp) and its rotary form
// (reshape_and_cache_rotary.cpp) share: the checks of the cache views, the bindings and the
// push constants of the cache write.
#include <array>
#include <cstdint>

#include "common/shader_interface.h"
#include "ops/cache_write_pipeline.hpp"
#include "ops/cache_geometry.hpp"
#include "ops/cache_pool_access.hpp"
#include "ops/strided_rows.hpp"
#include "vk/context_impl.hpp"
#include "vkpaged/cache_ops.hpp"

namespace vkpaged::detail {

struct CacheWrite {
  CacheGeometry cache;
  int64_t tokens = 0;
  RowsView key, value;  // the new tokens, strided views
  float inv_k_scale = 1.0f, inv_v_scale = 1.0f;
  CachePoolAccess pools;
};

// Checks every view and scale of a cache write (nothing recorded; vkpaged::Error naming the
// argument otherwise) and picks how the pools are reached. `keys_written`: the rotary form
// rotates the keys in place, so their rows must not overlap.
CacheWrite check_cache_write(const ContextImpl& impl, const ReshapeAndCacheViews& views, const CacheScales& scales,
                             bool keys_written);

// Binds the write's views into bindings [0, RESHAPE_BINDING_COUNT) of `bound`.
void bind_cache_write(const ContextImpl& impl, const ReshapeAndCacheViews& views, const CacheWrite& write,
                      BoundView* bound);

// The push constants of the write, bound as bind_cache_write left them.
shader::ReshapeAndCachePush cache_write_push(const CacheWrite& write, const BoundView* bound, uint32_t groups_x);

// The write's pipeline without its rotary part (ops/cache_write_pipeline.hpp).
CacheWritePipeline cache_write_pipeline(const ReshapeAndCacheViews& views, const CacheWrite& write);

}  // namespace vkpaged::detail
