// SPDX-License-Identifier: Apache-2.0
// C API: reshape_and_cache for MLA (mla_cache_ops.hpp), its structs' init functions and the
// conversions the KvCache and MLA attention calls share (c_api_mla.hpp).
#include "c_api/c_api_mla.hpp"

#include <fmt/format.h>

#include "c_api/c_api_convert.hpp"
#include "c_api/c_api_guard.hpp"
#include "c_api/c_api_handles.hpp"

using namespace vkpaged;
using namespace vkpaged::c_api;

static_assert(int(KvCacheKind::key_value) == VKP_KV_CACHE_KEY_VALUE &&
              int(KvCacheKind::mla_one_pool) == VKP_KV_CACHE_MLA_ONE_POOL &&
              int(KvCacheKind::mla_two_pools) == VKP_KV_CACHE_MLA_TWO_POOLS);

namespace vkpaged::c_api {

KvCacheKind to_kv_cache_kind(vkp_kv_cache_kind kind, const std::string& name) {
  const auto value = int64_t(kind);
  if (value < VKP_KV_CACHE_KEY_VALUE || value > VKP_KV_CACHE_MLA_TWO_POOLS)
    throw Error(ErrorCode::invalid_argument, fmt::format("{}: {} is not a vkp_kv_cache_kind", name, value));
  return KvCacheKind(value);
}

vkp_kv_cache_kind to_c(KvCacheKind kind) noexcept { return vkp_kv_cache_kind(kind); }

MlaRopeViews to_cpp(const vkp_mla_rope_views* rope) {
  const vkp_mla_rope_views r = read_struct(rope, "rope");
  MlaRopeViews d;
  d.positions = to_cpp(r.positions, "rope.positions");
  d.cos_sin_cache = to_cpp(r.cos_sin_cache, "rope.cos_sin_cache");
  d.style = to_rotary_style(r.style, "rope.style");
  return d;
}

vkp_mla_cache_views to_c(const MlaCacheViews& views, vkp_mla_cache_views blank) noexcept {
  blank.mla_cache = to_c(views.mla_cache);
  blank.ckv_cache = to_c(views.ckv_cache);
  blank.kpe_cache = to_c(views.kpe_cache);
  return blank;
}


MlaViews to_cpp(const vkp_mla_views& v) {
  MlaViews m;
  m.query = to_cpp(v.query, "query");
  m.mla_cache = to_cpp(v.mla_cache, "mla_cache");
  m.ckv_cache = to_cpp(v.ckv_cache, "ckv_cache");
  m.kpe_cache = to_cpp(v.kpe_cache, "kpe_cache");
  m.block_tables = to_cpp(v.block_tables, "block_tables");
  m.context_lens = to_cpp(v.context_lens, "context_lens");
  m.query_starts = to_cpp(v.query_starts, "query_starts");
  m.output = to_cpp(v.output, "output");
  m.lse = to_cpp(v.lse, "lse");
  m.tree_mask = to_cpp(v.tree_mask, "tree_mask");
  m.alibi_slopes = to_cpp(v.alibi_slopes, "alibi_slopes");
  m.sinks = to_cpp(v.sinks, "sinks");
  m.scratch = to_cpp(v.scratch);
  m.status = to_cpp(v.status);
  m.kv_indptr = to_cpp(v.kv_indptr, "kv_indptr");
  m.kv_indices = to_cpp(v.kv_indices, "kv_indices");
  m.kv_last_page_len = to_cpp(v.kv_last_page_len, "kv_last_page_len");
  return m;
}

}  // namespace vkpaged::c_api

extern "C" {

VKP_API vkp_status VKP_CALL vkp_record_mla_reshape_and_cache(vkp_context* context, VkCommandBuffer cmd,
                                                             const vkp_mla_reshape_and_cache_views* views,
                                                             float scale, const vkp_mla_rope_views* rope) {
  return guarded("vkp_record_mla_reshape_and_cache", [&] {
    auto& ctx = require(context, "context")->context;
    require(cmd, "cmd");
    const vkp_mla_reshape_and_cache_views v = read_struct(views, "views");
    MlaReshapeAndCacheViews d;
    d.kv_c = to_cpp(v.kv_c, "kv_c");
    d.k_pe = to_cpp(v.k_pe, "k_pe");
    d.slot_mapping = to_cpp(v.slot_mapping, "slot_mapping");
    d.cache = {to_cpp(v.mla_cache, "mla_cache"), to_cpp(v.ckv_cache, "ckv_cache"), to_cpp(v.kpe_cache, "kpe_cache")};
    d.status = to_cpp(v.status);
    if (!rope) {
      record_mla_reshape_and_cache(ctx, cmd, d, scale);
      return;
    }
    const MlaRopeViews r = to_cpp(rope);
    record_mla_reshape_and_cache(ctx, cmd, d, scale, &r);
  });
}

}  // extern "C"
