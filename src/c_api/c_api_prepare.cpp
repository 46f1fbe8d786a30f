// SPDX-License-Identifier: Apache-2.0
// C API: start-up (vkpaged/prepare.hpp): the pipeline set an engine's steps will record,
// Context::prepare, and the context's pipeline cache saved and loaded.
#include <fmt/format.h>

#include <cstring>
#include <memory>

#include "c_api/c_api_convert.hpp"
#include "c_api/c_api_guard.hpp"
#include "c_api/c_api_handles.hpp"
#include "c_api/c_api_mla.hpp"
#include "vkpaged/prepare.hpp"
#include "vkpaged/vkpaged.h"

using namespace vkpaged;
using namespace vkpaged::c_api;

namespace {

vkp_cache_write_kind to_c(const CacheWriteKind& k) {
  vkp_cache_write_kind c;
  std::memset(&c, 0, sizeof(c));
  c.struct_size = uint32_t(sizeof(c));
  c.num_kv_heads = k.cache.num_kv_heads;
  c.head_size = k.cache.head_size;
  c.block_size = k.cache.block_size;
  c.cache_dtype = c_api::to_c(k.cache.dtype);
  c.layout = c_api::to_c(k.cache.layout);
  c.num_blocks = k.num_blocks;
  c.token_dtype = c_api::to_c(k.token_dtype);
  c.slot_dtype = c_api::to_c(k.slot_dtype);
  const RotaryWrite r = k.rotary.value_or(RotaryWrite{});
  c.rotary = to_c_bool(k.rotary.has_value());
  c.rotary_style = vkp_rotary_style(r.style);
  c.rotary_dim = r.rotary_dim;
  c.cos_sin_dtype = c_api::to_c(r.cos_sin_dtype);
  c.position_dtype = c_api::to_c(r.position_dtype);
  c.cache_kind = c_api::to_c(k.cache.kind);
  c.rope_head_size = k.cache.rope_head_size;
  return c;
}

CacheWriteKind to_cpp(const vkp_cache_write_kind& c) {
  CacheWriteKind k;
  k.cache.num_kv_heads = c.num_kv_heads;
  k.cache.head_size = c.head_size;
  k.cache.block_size = c.block_size;
  k.cache.dtype = to_dtype(c.cache_dtype, "kind.cache_dtype");
  k.cache.layout = to_kv_layout(c.layout, "kind.layout");
  k.cache.kind = to_kv_cache_kind(c.cache_kind, "kind.cache_kind");
  k.cache.rope_head_size = c.rope_head_size;
  k.num_blocks = c.num_blocks;
  k.token_dtype = to_dtype(c.token_dtype, "kind.token_dtype");
  k.slot_dtype = to_dtype(c.slot_dtype, "kind.slot_dtype");
  if (to_bool(c.rotary, "kind.rotary"))
    k.rotary = RotaryWrite{to_rotary_style(c.rotary_style, "kind.rotary_style"), c.rotary_dim,
                           to_dtype(c.cos_sin_dtype, "kind.cos_sin_dtype"), to_dtype(c.position_dtype, "kind.position_dtype")};
  return k;
}

}  // namespace

namespace vkpaged::c_api {
template <>
vkp_cache_write_kind defaults_of<vkp_cache_write_kind>() {
  return ::to_c(CacheWriteKind{});
}
}  // namespace vkpaged::c_api

static_assert(uint32_t(VKP_ROTARY_NEOX) == uint32_t(RotaryStyle::neox) && uint32_t(VKP_ROTARY_GPTJ) == uint32_t(RotaryStyle::gptj));

extern "C" {

VKP_API vkp_status VKP_CALL vkp_pipeline_set_create(vkp_pipeline_set** out) {
  return guarded("vkp_pipeline_set_create", [&] {
    require(out, "out");
    *out = nullptr;
    *out = adopt(new vkp_pipeline_set{});
  });
}

VKP_API void VKP_CALL vkp_pipeline_set_destroy(vkp_pipeline_set* set) {
  destroy_handle("vkp_pipeline_set_destroy", set, "set");
}

VKP_API vkp_status VKP_CALL vkp_pipeline_set_add_attention(vkp_pipeline_set* set, const vkp_attention_shape* shape,
                                                           uint32_t max_query_tokens,
                                                           const vkp_attention_options* options) {
  return guarded("vkp_pipeline_set_add_attention", [&] {
    auto& s = require(set, "set")->set;
    AttentionBucket b{to_cpp(read_struct(shape, "shape"), "shape"), max_query_tokens,
                      to_cpp(read_optional_struct(options, "options"), "options")};
    s.attention.push_back(b);
  });
}

VKP_API vkp_status VKP_CALL vkp_pipeline_set_add_decode(vkp_pipeline_set* set, const vkp_decode_shape* shape,
                                                        const vkp_decode_options* options) {
  return guarded("vkp_pipeline_set_add_decode", [&] {
    auto& s = require(set, "set")->set;
    DecodeBucket b{to_cpp(read_struct(shape, "shape"), "shape"), to_cpp(read_optional_struct(options, "options"), "options")};
    s.decode.push_back(b);
  });
}

VKP_API vkp_status VKP_CALL vkp_pipeline_set_add_mla(vkp_pipeline_set* set, const vkp_attention_shape* shape,
                                                     uint32_t value_head_size, vkp_mla_cache_form cache_form,
                                                     uint32_t max_query_tokens, const vkp_mla_options* options) {
  return guarded("vkp_pipeline_set_add_mla", [&] {
    auto& s = require(set, "set")->set;
    MlaBucket b{to_mla_shape(shape, value_head_size, cache_form), max_query_tokens,
                to_cpp(read_optional_struct(options, "options"), "options")};
    s.mla.push_back(b);
  });
}

VKP_API vkp_status VKP_CALL vkp_kv_cache_write_kind(const vkp_kv_cache* cache, vkp_cache_write_kind* kind) {
  return guarded("vkp_kv_cache_write_kind", [&] {
    const KvCache& c = require(cache, "cache")->cache;
    const StructOut result(kind, "kind");
    vkp_cache_write_kind k = read_struct(kind, "kind");  // the fields the cache does not know stay
    const vkp_cache_write_kind geometry = ::to_c(CacheWriteKind::of(c, DType::f16));
    k.num_kv_heads = geometry.num_kv_heads;
    k.head_size = geometry.head_size;
    k.block_size = geometry.block_size;
    k.cache_dtype = geometry.cache_dtype;
    k.layout = geometry.layout;
    k.num_blocks = geometry.num_blocks;
    k.cache_kind = geometry.cache_kind;
    k.rope_head_size = geometry.rope_head_size;
    result.set(k);
  });
}

VKP_API vkp_status VKP_CALL vkp_pipeline_set_add_cache_write(vkp_pipeline_set* set, const vkp_cache_write_kind* kind) {
  return guarded("vkp_pipeline_set_add_cache_write", [&] {
    auto& s = require(set, "set")->set;
    s.cache_writes.push_back(::to_cpp(read_struct(kind, "kind")));
  });
}

VKP_API vkp_status VKP_CALL vkp_prepare(vkp_context* context, const vkp_pipeline_set* set, vkp_prepare_report* report) {
  return guarded("vkp_prepare", [&] {
    auto& ctx = require(context, "context")->context;
    const PipelineSet& s = require(set, "set")->set;
    std::unique_ptr<StructOut<vkp_prepare_report>> out;
    if (report != nullptr) out = std::make_unique<StructOut<vkp_prepare_report>>(report, "report");
    const PrepareReport r = ctx.prepare(s);
    if (out) {
      vkp_prepare_report c = StructOut<vkp_prepare_report>::blank();
      c.pipelines = uint32_t(r.pipelines);
      c.created = uint32_t(r.created);
      out->set(c);
    }
  });
}

VKP_API vkp_status VKP_CALL vkp_context_pipeline_cache_data(const vkp_context* context, void* data, size_t* size) {
  return guarded("vkp_context_pipeline_cache_data", [&] {
    const auto& ctx = require(context, "context")->context;
    require(size, "size");
    const std::vector<uint8_t> blob = ctx.pipeline_cache_data();
    if (data == nullptr) {
      *size = blob.size();
      return;
    }
    if (*size < blob.size())
      throw Error(ErrorCode::invalid_argument,
                  fmt::format("size: {} is less than the cache's {} bytes (it grows as pipelines are built: ask again)",
                              *size, blob.size()));
    std::memcpy(data, blob.data(), blob.size());
    *size = blob.size();
  });
}

VKP_API vkp_status VKP_CALL vkp_context_load_pipeline_cache(vkp_context* context, const void* data, size_t size) {
  return guarded("vkp_context_load_pipeline_cache", [&] {
    auto& ctx = require(context, "context")->context;
    if (size > 0) require(data, "data");
    const auto* bytes = static_cast<const uint8_t*>(data);
    ctx.load_pipeline_cache(std::vector<uint8_t>(bytes, bytes + size));
  });
}

}  // extern "C"
