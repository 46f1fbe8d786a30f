// SPDX-License-Identifier: Apache-2.0
// KvCache: the pools of an L-layer paged KV cache, sized and checked (kv_cache_sizing.cpp)
// before anything is allocated. One buffer per pool (2 per layer; MLA: 1 or 2). A pool within
// maxStorageBufferRange is bound whole as a descriptor by the operators; a larger one is
// reached through buffer device addresses (decode, reshape_and_cache, gather and the MLA cache
// write pick their address variants; copies have no limit), so such pools need a context with
// buffer device addresses.
#include "vkpaged/kv_cache.hpp"

#include <fmt/format.h>

#include <initializer_list>
#include <string>
#include <utility>
#include <vector>

#include "cache/kv_cache_sizing.hpp"
#include "ops/block_transfer.hpp"
#include "ops/cache_geometry.hpp"
#include "vk/context_impl.hpp"
#include "vk/memory_budget.hpp"
#include "vkpaged/error.hpp"

namespace vkpaged {

namespace {

using detail::check_pool_allocation;
using detail::check_pool_reach;
using detail::kMaxCacheBlocks;
using detail::mib;
using detail::refuse_cache;

// One pool's buffer. A failed allocation is rethrown naming the size argument (`what`); a pool
// past the device's maxMemoryAllocationSize never gets here (the sizing refuses it).
DeviceBuffer allocate_pool(Context& context, const char* what, uint32_t blocks, uint64_t bytes, MemoryKind kind) {
  try {
    return context.create_buffer(bytes, kind);
  } catch (const Error& e) {
    if (e.code() != ErrorCode::out_of_memory) throw;
    throw Error(ErrorCode::out_of_memory, fmt::format("{} {}: a layer's pool of {} bytes ({}) could not be allocated: {}",
                                                      what, blocks, bytes, mib(bytes), e.what()));
  }
}

// What a plan must agree on with the cache whose pools it reads.
struct PoolGeometry {
  uint32_t num_kv_heads, head_size, block_size, num_blocks;
  DType dtype;
  KvLayout layout;
};

// A layer's pools, one buffer of num_blocks blocks each: key and value, the one MLA pool, or
// ckv and kpe (detail::layer_pool_block_bytes's order).
struct Layer {
  std::vector<DeviceBuffer> pools;
};

// The memory heap behind host-visible, coherent memory (where the swap pool goes), as the
// context's buffer allocation chooses it; whether it is also the device-local heap (integrated
// GPUs, lavapipe), where both pools compete for the same memory.
struct HostHeap {
  uint64_t bytes = 0;
  bool device_local = false;
};

HostHeap host_heap(const VkPhysicalDeviceMemoryProperties& mem) {
  const VkMemoryPropertyFlags want = VK_MEMORY_PROPERTY_HOST_VISIBLE_BIT | VK_MEMORY_PROPERTY_HOST_COHERENT_BIT;
  int chosen = -1;  // the first cached type that fits, else the first that fits (Context::create_buffer's rule)
  for (uint32_t i = 0; i < mem.memoryTypeCount && chosen < 0; ++i)
    if ((mem.memoryTypes[i].propertyFlags & (want | VK_MEMORY_PROPERTY_HOST_CACHED_BIT)) ==
        (want | VK_MEMORY_PROPERTY_HOST_CACHED_BIT))
      chosen = int(i);
  for (uint32_t i = 0; i < mem.memoryTypeCount && chosen < 0; ++i)
    if ((mem.memoryTypes[i].propertyFlags & want) == want) chosen = int(i);
  if (chosen < 0) return {};
  const VkMemoryHeap& heap = mem.memoryHeaps[mem.memoryTypes[chosen].heapIndex];
  return {heap.size, (heap.flags & VK_MEMORY_HEAP_DEVICE_LOCAL_BIT) != 0};
}

}  // namespace

// ---- the cache ----

struct KvCache::Impl {
  Context* context = nullptr;
  KvCacheShape shape;
  KvCacheSizing sizing;
  uint32_t num_host_blocks = 0;
  uint64_t host_bytes = 0;
  std::vector<Layer> device;
  std::vector<Layer> host;
  std::vector<LayerCacheViews> device_views;
  std::vector<LayerCacheViews> host_views;

  // The pools' shapes in the cache's layout (the operators' geometry, ops/cache_geometry.hpp).
  detail::CacheGeometry geometry(uint32_t blocks) const {
    return {blocks, shape.num_kv_heads, shape.head_size, shape.block_size, shape.dtype, shape.layout};
  }

  bool mla() const noexcept { return shape.kind != KvCacheKind::key_value; }

  LayerCacheViews views_of(const Layer& layer, uint32_t blocks) const {
    const detail::CacheGeometry g = geometry(blocks);
    return {layer.pools[0].tensor(shape.dtype, g.key_shape()), layer.pools[1].tensor(shape.dtype, g.value_shape()),
            shape.layout};
  }

  MlaCacheViews mla_views_of(const Layer& layer, uint32_t blocks) const {
    const int64_t n = blocks, b = shape.block_size, dv = shape.head_size, r = shape.rope_head_size;
    if (shape.kind == KvCacheKind::mla_one_pool) return {layer.pools[0].tensor(shape.dtype, Shape{n, b, dv + r}), {}, {}};
    return {{}, layer.pools[0].tensor(shape.dtype, Shape{n, b, dv}), layer.pools[1].tensor(shape.dtype, Shape{n, b, r})};
  }

  // Allocates a layer's pools of `blocks` blocks each.
  Layer allocate_layer(Context& context, const char* what, uint32_t blocks, MemoryKind kind) const {
    Layer layer;
    for (uint64_t block_bytes : detail::layer_pool_block_bytes(shape))
      layer.pools.push_back(allocate_pool(context, what, blocks, block_bytes * blocks, kind));
    return layer;
  }

  // The key_value views, refused on an MLA cache; the MLA ones, refused on a key_value cache.
  void check_key_value(const char* what) const {
    if (mla())
      refuse_cache(ErrorCode::invalid_argument,
                   fmt::format("{}: the cache holds MLA pools (kind {}), not key and value pools: use mla_cache or "
                               "record_mla_reshape_and_cache",
                               what, uint32_t(shape.kind)));
  }
  void check_mla(const char* what) const {
    if (!mla())
      refuse_cache(ErrorCode::invalid_argument,
                   fmt::format("{}: the cache holds key and value pools (kind key_value), not MLA pools", what));
  }

  PoolGeometry pool_geometry() const {
    return {shape.num_kv_heads, shape.head_size, shape.block_size, sizing.num_blocks, shape.dtype, shape.layout};
  }

  uint32_t check_layer(const char* what, uint32_t layer) const {
    if (layer >= shape.num_layers)
      refuse_cache(ErrorCode::invalid_argument,
                   fmt::format("{}: layer {} is outside [0, {}) layers", what, layer, shape.num_layers));
    return layer;
  }
  void check_host(const char* what) const {
    if (num_host_blocks == 0)
      refuse_cache(ErrorCode::invalid_argument,
                   fmt::format("{}: the cache has no host pool (num_host_blocks is 0)", what));
  }

  // Whole blocks between the device pools and the host pools: to the host (swap out) or back.
  void record_swap(const char* what, VkCommandBuffer cmd, bool to_host, Span<const BlockCopy> pairs) const;
};

KvCache::KvCache(Context& context, const KvCacheShape& shape, const KvCacheOptions& options) {
  auto& context_impl = context.impl();
  // The free memory of now (a fraction is taken of it), and the context's own reach: an adopted
  // device may not have enabled buffer device addresses although the device has them.
  DeviceInfo device = context.device_info();
  vk::query_memory_budget(context_impl.d, context_impl.physical_device, device);
  device.buffer_device_address = context_impl.buffer_device_address;
  const KvCacheSizing z = plan(device, shape, options);

  uint64_t host_bytes = 0;
  if (options.num_host_blocks > 0) {
    if (options.num_host_blocks > kMaxCacheBlocks)
      refuse_cache(ErrorCode::invalid_argument, fmt::format("num_host_blocks {} is above {} (block ids are int32)",
                                                            options.num_host_blocks, kMaxCacheBlocks));
    const KvCacheSizing h = sizing(shape, options.num_host_blocks);
    if (shape.kind == KvCacheKind::key_value)
      check_pool_reach(device, "num_host_blocks", "host key or value pool", h);
    else  // MLA host pools are only copied to and from: no range applies to them, one allocation's limit does
      check_pool_allocation(device, "num_host_blocks", "largest host MLA pool", h);
    const HostHeap heap = host_heap(context_impl.memory_properties);
    // Where host-visible memory is device-local too, both pools come out of that one heap.
    const uint64_t needed = h.total_bytes + (heap.device_local ? z.total_bytes : 0);
    if (heap.bytes > 0 && needed > heap.bytes)
      refuse_cache(
          ErrorCode::out_of_memory,
          fmt::format("{} host blocks need {} bytes ({}){}, more than the {} bytes ({}) of the host-visible heap of {}",
                      h.num_blocks, h.total_bytes, mib(h.total_bytes),
                      heap.device_local ? fmt::format(" besides the device pools' {}", mib(z.total_bytes)) : "",
                      heap.bytes, mib(heap.bytes), device.name));
    host_bytes = h.total_bytes;
  }

  // Everything is checked; from here a failed allocation unwinds through the vectors' and
  // buffers' destructors, so the Error leaves nothing allocated.
  auto impl = std::make_unique<Impl>();
  impl->context = &context;
  impl->shape = shape;
  impl->sizing = z;
  impl->num_host_blocks = options.num_host_blocks;
  impl->host_bytes = host_bytes;
  impl->device.reserve(shape.num_layers);
  for (uint32_t l = 0; l < shape.num_layers; ++l)
    impl->device.push_back(impl->allocate_layer(context, "num_blocks", z.num_blocks, MemoryKind::device));
  if (options.num_host_blocks > 0) {
    impl->host.reserve(shape.num_layers);
    for (uint32_t l = 0; l < shape.num_layers; ++l)
      impl->host.push_back(
          impl->allocate_layer(context, "num_host_blocks", options.num_host_blocks, MemoryKind::host_visible));
  }
  if (!impl->mla()) {  // MLA pools are not key and value pools: mla_cache gives their views
    for (const Layer& layer : impl->device) impl->device_views.push_back(impl->views_of(layer, z.num_blocks));
    for (const Layer& layer : impl->host) impl->host_views.push_back(impl->views_of(layer, options.num_host_blocks));
  }
  impl_ = std::move(impl);
}

KvCache::~KvCache() = default;
KvCache::KvCache(KvCache&&) noexcept = default;
KvCache& KvCache::operator=(KvCache&&) noexcept = default;

const KvCacheShape& KvCache::shape() const noexcept { return impl_->shape; }
uint32_t KvCache::num_blocks() const noexcept { return impl_->sizing.num_blocks; }
uint32_t KvCache::num_host_blocks() const noexcept { return impl_->num_host_blocks; }
uint64_t KvCache::num_tokens() const noexcept { return impl_->sizing.num_tokens; }
const KvCacheSizing& KvCache::sizing() const noexcept { return impl_->sizing; }
uint64_t KvCache::host_bytes() const noexcept { return impl_->host_bytes; }

TensorView KvCache::key_cache(uint32_t layer) const {
  impl_->check_key_value("key_cache");
  return impl_->device_views[impl_->check_layer("key_cache", layer)].key_cache;
}
TensorView KvCache::value_cache(uint32_t layer) const {
  impl_->check_key_value("value_cache");
  return impl_->device_views[impl_->check_layer("value_cache", layer)].value_cache;
}
TensorView KvCache::host_key_cache(uint32_t layer) const {
  impl_->check_key_value("host_key_cache");
  impl_->check_host("host_key_cache");
  return impl_->host_views[impl_->check_layer("host_key_cache", layer)].key_cache;
}
TensorView KvCache::host_value_cache(uint32_t layer) const {
  impl_->check_key_value("host_value_cache");
  impl_->check_host("host_value_cache");
  return impl_->host_views[impl_->check_layer("host_value_cache", layer)].value_cache;
}

MlaCacheViews KvCache::mla_cache(uint32_t layer) const {
  impl_->check_mla("mla_cache");
  return impl_->mla_views_of(impl_->device[impl_->check_layer("mla_cache", layer)], impl_->sizing.num_blocks);
}
MlaCacheViews KvCache::host_mla_cache(uint32_t layer) const {
  impl_->check_mla("host_mla_cache");
  impl_->check_host("host_mla_cache");
  return impl_->mla_views_of(impl_->host[impl_->check_layer("host_mla_cache", layer)], impl_->num_host_blocks);
}

Span<const LayerCacheViews> KvCache::layers() const noexcept { return impl_->device_views; }
Span<const LayerCacheViews> KvCache::host_layers() const noexcept { return impl_->host_views; }

namespace {

// Whole blocks of every pool of every layer, src layers' to dst layers' (MLA caches; the
// key_value ones go through record_copy_blocks / record_swap_blocks and their view checks).
void copy_mla_blocks(const detail::ContextImpl& impl, VkCommandBuffer cmd, const KvCacheShape& shape,
                     const std::vector<Layer>& src, uint32_t src_blocks, const std::vector<Layer>& dst,
                     uint32_t dst_blocks, Span<const BlockCopy> pairs) {
  detail::check_block_pairs(pairs, src_blocks, dst_blocks, &src == &dst);
  const std::vector<uint64_t> block_bytes = detail::layer_pool_block_bytes(shape);
  std::vector<VkBufferCopy> regions;
  for (size_t l = 0; l < src.size(); ++l)
    for (size_t p = 0; p < block_bytes.size(); ++p)
      detail::record_block_copies(impl, cmd, src[l].pools[p].view(), dst[l].pools[p].view(), block_bytes[p], pairs,
                                  regions);
}

}  // namespace

void KvCache::record_copy_blocks(VkCommandBuffer cmd, Span<const BlockCopy> pairs) const {
  if (impl_->mla()) {
    copy_mla_blocks(impl_->context->impl(), cmd, impl_->shape, impl_->device, num_blocks(), impl_->device,
                    num_blocks(), pairs);
    return;
  }
  vkpaged::record_copy_blocks(*impl_->context, cmd, impl_->device_views, pairs);
}

void KvCache::Impl::record_swap(const char* what, VkCommandBuffer cmd, bool to_host, Span<const BlockCopy> pairs) const {
  check_host(what);
  struct Pools {
    const std::vector<Layer>& layers;
    uint32_t blocks;
    const std::vector<LayerCacheViews>& views;
  };
  const Pools on_device{device, sizing.num_blocks, device_views}, on_host{host, num_host_blocks, host_views};
  const Pools& src = to_host ? on_device : on_host;
  const Pools& dst = to_host ? on_host : on_device;
  if (mla())
    copy_mla_blocks(context->impl(), cmd, shape, src.layers, src.blocks, dst.layers, dst.blocks, pairs);
  else
    record_swap_blocks(*context, cmd, src.views, dst.views, pairs);
}

void KvCache::record_swap_out(VkCommandBuffer cmd, Span<const BlockCopy> pairs) const {
  impl_->record_swap("record_swap_out", cmd, true, pairs);
}

void KvCache::record_swap_in(VkCommandBuffer cmd, Span<const BlockCopy> pairs) const {
  impl_->record_swap("record_swap_in", cmd, false, pairs);
}

namespace {

ReshapeAndCacheViews cache_write_views(const LayerCacheViews& layer, const NewTokens& tokens) {
  return {tokens.key,       tokens.value,  tokens.slot_mapping, layer.key_cache,
          layer.value_cache, tokens.status, layer.layout};
}

}  // namespace

void KvCache::record_reshape_and_cache(VkCommandBuffer cmd, uint32_t layer, const NewTokens& tokens,
                                       const CacheScales& scales) const {
  impl_->check_key_value("record_reshape_and_cache");
  const LayerCacheViews& pools = impl_->device_views[impl_->check_layer("record_reshape_and_cache", layer)];
  vkpaged::record_reshape_and_cache(*impl_->context, cmd, cache_write_views(pools, tokens), scales);
}

void KvCache::record_reshape_and_cache(VkCommandBuffer cmd, uint32_t layer, const NewTokens& tokens,
                                       const RotaryInputs& rotary, const CacheScales& scales) const {
  impl_->check_key_value("record_reshape_and_cache");
  const LayerCacheViews& pools = impl_->device_views[impl_->check_layer("record_reshape_and_cache", layer)];
  record_reshape_and_cache_rotary(*impl_->context, cmd, cache_write_views(pools, tokens), rotary, scales);
}

void KvCache::record_mla_reshape_and_cache(VkCommandBuffer cmd, uint32_t layer, const MlaNewTokens& tokens,
                                           float scale, const MlaRopeViews* rope) const {
  impl_->check_mla("record_mla_reshape_and_cache");
  const MlaCacheViews pools = mla_cache(impl_->check_layer("record_mla_reshape_and_cache", layer));
  const MlaReshapeAndCacheViews views{tokens.kv_c, tokens.k_pe, tokens.slot_mapping, pools, tokens.status};
  vkpaged::record_mla_reshape_and_cache(*impl_->context, cmd, views, scale, rope);
}

namespace {

// `shape_call` names the cache's call that makes a fitting shape.
void check_plan_fits(const char* what, const PoolGeometry& plan, const PoolGeometry& cache, const char* shape_call) {
  auto refuse_field = [&](const char* field, const std::string& in_plan, const std::string& in_cache) {
    refuse_cache(ErrorCode::invalid_argument,
                 fmt::format("{}: the plan's shape has {} {}, the cache's is {} (make the plan's shape with the "
                             "cache's {})",
                             what, field, in_plan, in_cache, shape_call));
  };
  if (plan.num_kv_heads != cache.num_kv_heads)
    refuse_field("num_kv_heads", std::to_string(plan.num_kv_heads), std::to_string(cache.num_kv_heads));
  if (plan.head_size != cache.head_size)
    refuse_field("head_size", std::to_string(plan.head_size), std::to_string(cache.head_size));
  if (plan.block_size != cache.block_size)
    refuse_field("block_size", std::to_string(plan.block_size), std::to_string(cache.block_size));
  if (plan.num_blocks != cache.num_blocks)
    refuse_field("num_blocks", std::to_string(plan.num_blocks), std::to_string(cache.num_blocks));
  if (plan.dtype != cache.dtype)
    refuse_field("cache_dtype", std::string(dtype_name(plan.dtype)), std::string(dtype_name(cache.dtype)));
  if (plan.layout != cache.layout)
    refuse_field("kv_layout", std::string(kv_layout_name(plan.layout)), std::string(kv_layout_name(cache.layout)));
}

// The caller leaves the pools to the cache: a pool view given is a mistake (another cache's,
// or another layer's), refused rather than silently replaced.
void check_no_pools(const char* what, std::initializer_list<std::pair<const char*, const TensorView*>> pools) {
  for (const auto& [name, view] : pools)
    if (!view->empty())
      refuse_cache(ErrorCode::invalid_argument,
                   fmt::format("{}: views.{} is given, but the cache supplies the layer's pools: leave it empty", what,
                               name));
}

// The pool geometry a plan's shape (DecodeShape, AttentionShape) reads.
template <class PlanShape>
PoolGeometry geometry_read_by(const PlanShape& s) {
  return {s.num_kv_heads, s.head_size, s.block_size, s.num_blocks, s.cache_dtype, s.kv_layout};
}

// A plan's views with the layer's pools, after checking that the plan fits the cache and that
// the caller gave no pools of its own.
template <class Plan, class Views>
Views with_layer_pools(const char* what, const LayerCacheViews& pools, const PoolGeometry& cache, const Plan& plan,
                       const Views& views) {
  check_plan_fits(what, geometry_read_by(plan.shape()), cache, "decode_shape or attention_shape");
  check_no_pools(what, {{"key_cache", &views.key_cache}, {"value_cache", &views.value_cache}});
  Views v = views;
  v.key_cache = pools.key_cache;
  v.value_cache = pools.value_cache;
  return v;
}

}  // namespace

void KvCache::record_decode(VkCommandBuffer cmd, uint32_t layer, const DecodePlan& plan, const DecodeViews& views,
                            const DecodeParams& params) const {
  impl_->check_key_value("record_decode");
  const LayerCacheViews& pools = impl_->device_views[impl_->check_layer("record_decode", layer)];
  vkpaged::record_decode(*impl_->context, cmd, plan,
                         with_layer_pools("record_decode", pools, impl_->pool_geometry(), plan, views), params);
}

void KvCache::record_attention(VkCommandBuffer cmd, uint32_t layer, const AttentionPlan& plan,
                               const AttentionViews& views, const AttentionParams& params) const {
  impl_->check_key_value("record_attention");
  const LayerCacheViews& pools = impl_->device_views[impl_->check_layer("record_attention", layer)];
  vkpaged::record_attention(*impl_->context, cmd, plan,
                            with_layer_pools("record_attention", pools, impl_->pool_geometry(), plan, views), params);
}

namespace {

const char* cache_form_name(MlaCacheForm form) { return form == MlaCacheForm::one_pool ? "one_pool" : "two_pools"; }

}  // namespace

void KvCache::record_mla_attention(VkCommandBuffer cmd, uint32_t layer, const MlaPlan& plan, const MlaViews& views,
                                   const AttentionParams& params) const {
  const char* what = "record_mla_attention";
  impl_->check_mla(what);
  const MlaCacheViews pools = mla_cache(impl_->check_layer(what, layer));
  const MlaShape& p = plan.shape();
  const MlaShape cache = mla_shape(p.attention);
  check_plan_fits(what, geometry_read_by(p.attention), geometry_read_by(cache.attention), "mla_shape");
  // The same Dk split otherwise into Dv and R would read the wrong value width.
  if (p.value_head_size != cache.value_head_size)
    refuse_cache(ErrorCode::invalid_argument,
                 fmt::format("{}: the plan's shape has value_head_size {}, the cache's is {} (make the plan's shape "
                             "with the cache's mla_shape)",
                             what, p.value_head_size, cache.value_head_size));
  if (p.cache_form != cache.cache_form)
    refuse_cache(ErrorCode::invalid_argument,
                 fmt::format("{}: the plan's shape has cache_form {}, the cache's is {} (make the plan's shape with "
                             "the cache's mla_shape)",
                             what, cache_form_name(p.cache_form), cache_form_name(cache.cache_form)));
  check_no_pools(what,
                 {{"mla_cache", &views.mla_cache}, {"ckv_cache", &views.ckv_cache}, {"kpe_cache", &views.kpe_cache}});
  MlaViews v = views;
  v.mla_cache = pools.mla_cache;
  v.ckv_cache = pools.ckv_cache;
  v.kpe_cache = pools.kpe_cache;
  vkpaged::record_mla_attention(*impl_->context, cmd, plan, v, params);
}

namespace {

// A batch's shape with the cache's part filled in from the cache.
template <class BatchShape>
BatchShape with_cache_fields(BatchShape batch, const KvCacheShape& shape, uint32_t num_blocks) {
  batch.num_kv_heads = shape.num_kv_heads;
  batch.head_size = shape.head_size;
  batch.block_size = shape.block_size;
  batch.num_blocks = num_blocks;
  batch.cache_dtype = shape.dtype;
  batch.kv_layout = shape.layout;
  return batch;
}

}  // namespace

AttentionShape KvCache::attention_shape(const AttentionShape& batch) const noexcept {
  return with_cache_fields(batch, impl_->shape, impl_->sizing.num_blocks);
}

DecodeShape KvCache::decode_shape(const DecodeShape& batch) const noexcept {
  return with_cache_fields(batch, impl_->shape, impl_->sizing.num_blocks);
}

MlaShape KvCache::mla_shape(const AttentionShape& batch) const {
  impl_->check_mla("mla_shape");
  const KvCacheShape& s = impl_->shape;
  MlaShape m;
  m.attention = with_cache_fields(batch, s, impl_->sizing.num_blocks);  // Hkv 1 and nhd: an MLA cache's
  m.attention.head_size = s.head_size + s.rope_head_size;
  m.value_head_size = s.head_size;
  m.cache_form = s.kind == KvCacheKind::mla_one_pool ? MlaCacheForm::one_pool : MlaCacheForm::two_pools;
  return m;
}

}  // namespace vkpaged
