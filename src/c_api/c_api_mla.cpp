// SPDX-License-Identifier: Apache-2.0
// C API: reshape_and_cache for MLA (mla_cache_ops.hpp) and the conversions the KvCache and MLA
// attention calls share (c_api_mla.hpp).
#include "c_api/c_api_mla.hpp"

#include <fmt/format.h>

#include "c_api/c_api_calls.hpp"
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

// The tensor views of these structs, in declaration order, each named bare after its field in
// errors ("kv_c", not "tokens.kv_c"): what these calls have always said. Buffer views (scratch,
// status) cannot be refused and are converted by hand.
#define VKP_NEW_TOKENS_TENSORS(X) X(key) X(value) X(slot_mapping)
#define VKP_MLA_NEW_TOKENS_TENSORS(X) X(kv_c) X(k_pe) X(slot_mapping)
#define VKP_MLA_VIEWS_TENSORS(X)                                                                                  \
  X(query) X(mla_cache) X(ckv_cache) X(kpe_cache) X(block_tables) X(context_lens) X(query_starts) X(output) X(lse) \
  X(tree_mask) X(alibi_slopes) X(sinks) X(kv_indptr) X(kv_indices) X(kv_last_page_len)
#define VKP_TENSOR_NAMED_BARE(f) d.f = to_cpp(c.f, #f);

#define VKP_TOKENS_TO_CPP(CType, CppType, TENSORS) \
  CppType to_cpp(const CType* tokens) {            \
    const CType c = read_struct(tokens, "tokens"); \
    CppType d;                                     \
    TENSORS(VKP_TENSOR_NAMED_BARE)                 \
    d.status = to_cpp(c.status);                   \
    return d;                                      \
  }
VKP_TOKENS_TO_CPP(vkp_new_tokens, NewTokens, VKP_NEW_TOKENS_TENSORS)
VKP_TOKENS_TO_CPP(vkp_mla_new_tokens, MlaNewTokens, VKP_MLA_NEW_TOKENS_TENSORS)

MlaViews to_cpp(const vkp_mla_views& c) {
  MlaViews d;
  VKP_MLA_VIEWS_TENSORS(VKP_TENSOR_NAMED_BARE)
  d.scratch = to_cpp(c.scratch);
  d.status = to_cpp(c.status);
  return d;
}

MlaViews to_cpp(const vkp_mla_views* views) { return to_cpp(read_struct(views, "views")); }

#undef VKP_TOKENS_TO_CPP
#undef VKP_TENSOR_NAMED_BARE
#undef VKP_MLA_VIEWS_TENSORS
#undef VKP_MLA_NEW_TOKENS_TENSORS
#undef VKP_NEW_TOKENS_TENSORS

}  // namespace vkpaged::c_api

extern "C" {

VKP_API vkp_status VKP_CALL vkp_record_mla_reshape_and_cache(vkp_context* context, VkCommandBuffer cmd,
                                                             const vkp_mla_reshape_and_cache_views* views,
                                                             float scale, const vkp_mla_rope_views* rope) {
  return record_with("vkp_record_mla_reshape_and_cache", context, "context", cmd, [&](vkp_context& c) {
    const vkp_mla_reshape_and_cache_views v = read_struct(views, "views");
    MlaReshapeAndCacheViews d;
    d.kv_c = to_cpp(v.kv_c, "kv_c");
    d.k_pe = to_cpp(v.k_pe, "k_pe");
    d.slot_mapping = to_cpp(v.slot_mapping, "slot_mapping");
    d.cache = {to_cpp(v.mla_cache, "mla_cache"), to_cpp(v.ckv_cache, "ckv_cache"), to_cpp(v.kpe_cache, "kpe_cache")};
    d.status = to_cpp(v.status);
    if (!rope) {
      record_mla_reshape_and_cache(c.context, cmd, d, scale);
      return;
    }
    const MlaRopeViews r = to_cpp(rope);
    record_mla_reshape_and_cache(c.context, cmd, d, scale, &r);
  });
}

}  // extern "C"
