// SPDX-License-Identifier: Apache-2.0
// Host side of shaders/mla_reshape_and_cache.comp and its rope variant
// (mla_reshape_and_cache_rope.comp), and of their `_address` variants for pools past
// maxStorageBufferRange: the checks (mla_cache_checks.hpp, the rotary ones for the rope), then
// one dispatch: one invocation per (token, 16-byte chunk of its row), or, with the rope, one
// workgroup per rotary tile of tokens.
#include <fmt/format.h>
#include <fmt/ranges.h>

#include <array>
#include <cstddef>

#include "common/mla_interface.h"
#include "ops/cache_pool_access.hpp"
#include "ops/linear_grid.hpp"
#include "ops/mla_cache_write_pipeline.hpp"
#include "ops/mla_cache_checks.hpp"
#include "ops/scale_validation.hpp"
#include "ops/view_checks.hpp"
#include "vk/context_impl.hpp"
#include "vkpaged/error.hpp"
#include "vkpaged/mla_cache_ops.hpp"

namespace vkpaged {

namespace {

struct MlaWrite {
  detail::MlaCacheGeometry cache;
  int64_t tokens = 0;
  float inv_scale = 1.0f;
  detail::PoolReach pools;  // the one pool, or ckv then kpe
};

MlaWrite check_write(const detail::ContextImpl& impl, const MlaReshapeAndCacheViews& v, float scale) {
  using detail::spec_of;
  MlaWrite w;
  const int64_t latent = v.kv_c.shape.rank() == 2 ? v.kv_c.shape[1] : 0;
  w.cache = detail::mla_cache_geometry(spec_of(v.cache.mla_cache), spec_of(v.cache.ckv_cache),
                                       spec_of(v.cache.kpe_cache), latent);
  w.tokens = detail::check_mla_token_inputs(w.cache, spec_of(v.kv_c), spec_of(v.k_pe), spec_of(v.slot_mapping));
  detail::check_scale("scale", scale, w.cache.dtype);  // every cache dtype; only fp8 uses it
  if (is_fp8_dtype(w.cache.dtype)) w.inv_scale = 1.0f / scale;
  // MLA's views are contiguous (its kernels do not take strides yet: docs/api.md, "Strided views").
  for (const auto& [name, view] : {std::pair{"kv_c", &v.kv_c}, std::pair{"k_pe", &v.k_pe}})
    if (!view->contiguous())
      throw Error(ErrorCode::invalid_argument,
                  fmt::format("{}: strides [{}] are not a contiguous {} view's; record_mla_reshape_and_cache takes "
                              "contiguous views only (docs/api.md, \"Strided views\")",
                              name, fmt::join(view->strides.begin(), view->strides.begin() + view->shape.rank(), ", "),
                              view->shape.str()));
  detail::check_contiguous("slot_mapping", v.slot_mapping);
  detail::check_contiguous("mla_cache", v.cache.mla_cache);
  detail::check_contiguous("ckv_cache", v.cache.ckv_cache);
  detail::check_contiguous("kpe_cache", v.cache.kpe_cache);
  detail::check_buffer(impl, "kv_c", v.kv_c.memory, v.kv_c.bytes(), 4);
  detail::check_buffer(impl, "k_pe", v.k_pe.memory, v.k_pe.bytes(), 4);
  detail::check_buffer(impl, "slot_mapping", v.slot_mapping.memory, v.slot_mapping.bytes(), 4);
  // The pools are written 16 bytes at a time, bound as descriptors, or by device address where
  // one is past maxStorageBufferRange (cache_pool_access.hpp).
  const uint64_t element = dtype_size(w.cache.dtype), B = uint64_t(w.cache.block_size);
  auto pool = [&](const char* name, const TensorView& t, int64_t width) {
    return detail::PoolView{name, &t.memory, t.bytes(), B * uint64_t(width) * element};
  };
  if (w.cache.form == MlaCacheForm::one_pool) {
    const std::array pools{pool("mla_cache", v.cache.mla_cache, w.cache.row_size())};
    w.pools = detail::pool_reach(impl, pools);
  } else {
    const std::array pools{pool("ckv_cache", v.cache.ckv_cache, w.cache.latent_size),
                           pool("kpe_cache", v.cache.kpe_cache, w.cache.rope_size)};
    w.pools = detail::pool_reach(impl, pools);
  }
  if (!v.status.empty()) detail::check_buffer(impl, "status", v.status, 4, 4);
  return w;
}

bool overlap(const BufferView& a, const BufferView& b) {
  return a.buffer == b.buffer && a.offset < b.offset + b.size && b.offset < a.offset + a.size;
}

}  // namespace

void record_mla_reshape_and_cache(Context& context, VkCommandBuffer cmd, const MlaReshapeAndCacheViews& v,
                                  float scale, const MlaRopeViews* rope) {
  auto& impl = context.impl();
  const MlaWrite w = check_write(impl, v, scale);
  const bool two = w.cache.form == MlaCacheForm::two_pools;
  if (two && overlap(v.cache.ckv_cache.memory, v.cache.kpe_cache.memory))
    throw Error(ErrorCode::invalid_argument, "kpe_cache: its view overlaps ckv_cache's in one buffer");
  detail::RotaryGeometry g;
  if (rope) {
    g = detail::check_mla_rope(rope->style, detail::spec_of(v.k_pe), detail::spec_of(rope->positions),
                               detail::spec_of(rope->cos_sin_cache));
    detail::check_contiguous("positions", rope->positions);
    detail::check_contiguous("cos_sin_cache", rope->cos_sin_cache);
    detail::check_buffer(impl, "positions", rope->positions.memory, rope->positions.bytes(), 4);
    detail::check_buffer(impl, "cos_sin_cache", rope->cos_sin_cache.memory, rope->cos_sin_cache.bytes(), 4);
  }
  if (w.tokens == 0) return;

  const detail::MlaCacheWritePipeline described{.token_dtype = v.kv_c.dtype,
                                               .cache_dtype = w.cache.dtype,
                                               .slot_i64 = v.slot_mapping.dtype == DType::i64,
                                               .two_pools = two,
                                               .address = w.pools.address,
                                               .rope = rope ? &g : nullptr,
                                               .rope_style = rope ? rope->style : RotaryStyle::neox};
  const auto& pipeline = impl.pipeline(detail::mla_cache_write_request(described));
  std::array<detail::BoundView, MLA_RESHAPE_ROPE_BINDING_COUNT> bound;
  bound[MLA_RESHAPE_BINDING_KV_C] = impl.bind_view(v.kv_c.memory);
  bound[MLA_RESHAPE_BINDING_K_PE] = impl.bind_view(v.k_pe.memory);
  bound[MLA_RESHAPE_BINDING_SLOT_MAPPING] = impl.bind_view(v.slot_mapping.memory);
  bound[MLA_RESHAPE_BINDING_CACHE] = w.pools.bound[0];
  // One pool: the pool again, never written through this binding (the dummy buffer here would
  // be a write that the synchronization validation sees between dispatches). The address
  // variants declare neither binding: both hold the dummy.
  bound[MLA_RESHAPE_BINDING_KPE_CACHE] = two ? w.pools.bound[1] : w.pools.bound[0];
  bound[MLA_RESHAPE_BINDING_STATUS] = impl.bind_view(v.status);

  struct Push {
    shader::MlaReshapePush cache;
    shader::RotaryPush rotary;
  };
  Push push{};
  push.cache.num_tokens = uint32_t(w.tokens);  // fits: kv_c was checked against maxStorageBufferRange
  push.cache.latent_size = uint32_t(w.cache.latent_size);
  push.cache.rope_size = uint32_t(w.cache.rope_size);
  push.cache.block_size = uint32_t(w.cache.block_size);
  push.cache.num_slots = uint32_t(w.cache.num_slots());
  push.cache.kv_c_offset = bound[MLA_RESHAPE_BINDING_KV_C].word_offset;
  push.cache.k_pe_offset = bound[MLA_RESHAPE_BINDING_K_PE].word_offset;
  push.cache.slot_offset = bound[MLA_RESHAPE_BINDING_SLOT_MAPPING].word_offset;
  push.cache.cache_offset = bound[MLA_RESHAPE_BINDING_CACHE].word_offset;
  push.cache.kpe_cache_offset = bound[MLA_RESHAPE_BINDING_KPE_CACHE].word_offset;
  if (w.pools.address) {  // the addresses' low words in the offsets' (mla_interface.h)
    const shader::uvec2 cache = w.pools.addresses[0], kpe = two ? w.pools.addresses[1] : cache;
    push.cache.cache_offset = cache.x;
    push.cache.cache_address_high = cache.y;
    push.cache.kpe_cache_offset = kpe.x;
    push.cache.kpe_cache_address_high = kpe.y;
  }
  push.cache.status_offset = bound[MLA_RESHAPE_BINDING_STATUS].word_offset;
  push.cache.inv_scale = w.inv_scale;

  if (!rope) {
    const uint64_t chunks = uint64_t(w.cache.row_size() / int64_t(cache_pack_factor(w.cache.dtype)));
    const auto grid = detail::linear_grid(uint64_t(w.tokens) * chunks, CACHE_OP_WORKGROUP);
    push.cache.groups_x = grid.x;
    impl.dispatch(cmd, pipeline, std::span(bound.data(), MLA_RESHAPE_BINDING_COUNT), &push.cache, grid.x, grid.y, 1);
    return;
  }
  bound[MLA_RESHAPE_BINDING_POSITIONS] = impl.bind_view(rope->positions.memory);
  bound[MLA_RESHAPE_BINDING_COS_SIN] = impl.bind_view(rope->cos_sin_cache.memory);
  const detail::RotaryTiles tiles = detail::rotary_tiles(g);  // key tiles only: no query
  const auto grid = detail::linear_grid(uint64_t(tiles.key_tiles) * CACHE_OP_WORKGROUP, CACHE_OP_WORKGROUP);
  push.cache.groups_x = grid.x;
  push.rotary = detail::rotary_push(g, tiles);
  push.rotary.groups_x = grid.x;
  // k_pe [T, R] as the rotary code's key rows: one row of R contiguous elements per token.
  push.rotary.key_rows.token_stride = uint32_t(uint64_t(g.head_size) * dtype_size(g.dtype) / 4);
  push.rotary.key_rows.head_and_offset = push.cache.k_pe_offset;
  push.rotary.positions_offset = bound[MLA_RESHAPE_BINDING_POSITIONS].word_offset;
  push.rotary.cos_sin_offset = bound[MLA_RESHAPE_BINDING_COS_SIN].word_offset;
  push.rotary.status_offset = push.cache.status_offset;
  // mla_cache_write_request's push size.
  static_assert(offsetof(Push, rotary) == sizeof(shader::MlaReshapePush) &&
                sizeof(Push) == sizeof(shader::MlaReshapePush) + sizeof(shader::RotaryPush));
  impl.dispatch(cmd, pipeline, bound, &push, grid.x, grid.y, 1);
}

}  // namespace vkpaged
