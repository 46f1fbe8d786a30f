// KvCache: the pools of an L-layer paged KV cache, sized and checked before anything is
// allocated. One buffer per pool (2 per layer). A pool within maxStorageBufferRange is bound
// whole as a descriptor by the operators; a larger one is reached through buffer device
// addresses (decode, reshape_and_cache and gather pick their address variants; copies have no
// limit), so such pools need a context with buffer device addresses.
#include "vkpaged/kv_cache.hpp"

#include <fmt/format.h>

#include <cmath>
#include <limits>
#include <string>
#include <vector>

#include "vk/context_impl.hpp"
#include "vk/memory_budget.hpp"
#include "vkpaged/error.hpp"

namespace vkpaged {

namespace {

[[noreturn]] void refuse(ErrorCode code, const std::string& message) { throw Error(code, "KvCache: " + message); }

std::string mib(uint64_t bytes) { return fmt::format("{:.1f} MiB", double(bytes) / double(1 << 20)); }

// a * b, refusing a product that does not fit 64 bits (absurd shapes or counts).
uint64_t checked_mul(uint64_t a, uint64_t b, const char* what) {
  uint64_t product = 0;
  if (__builtin_mul_overflow(a, b, &product))
    refuse(ErrorCode::invalid_argument, fmt::format("{} overflows 64 bits ({} x {})", what, a, b));
  return product;
}

constexpr uint32_t kMaxBlocks = uint32_t(std::numeric_limits<int32_t>::max());  // block ids are int32

bool is_cache_dtype(DType t) { return is_float_dtype(t) || is_fp8_dtype(t); }

// A pool past maxStorageBufferRange cannot be one descriptor: it is reached by device address,
// which the device must offer (the constructor passes whether its context enabled it). `what`
// names the size argument ("num_blocks", "num_host_blocks").
void check_pool_reach(const DeviceInfo& device, const char* what, const char* pool, const KvCacheSizing& z) {
  const uint64_t range = device.max_storage_buffer_range;
  if (z.pool_bytes <= range || device.buffer_device_address) return;
  refuse(ErrorCode::unsupported,
         fmt::format("{} {}: a layer's {} of {} blocks x {} bytes = {} bytes ({}) exceeds the device's "
                     "maxStorageBufferRange of {} bytes ({}), and buffer device addresses, which reach larger "
                     "pools, are not available on {} (no bufferDeviceAddress, or an adopted device did not enable "
                     "it); at most {} blocks fit one pool",
                     what, z.num_blocks, pool, z.num_blocks, z.block_bytes, z.pool_bytes, mib(z.pool_bytes), range,
                     mib(range), device.name, range / z.block_bytes));
}

// One pool's buffer. A failed allocation is rethrown naming the size argument (`what`) and,
// where the pool passes it, the device's maxMemoryAllocationSize: the driver may refuse one
// allocation past that size although the heap has the room.
DeviceBuffer allocate_pool(Context& context, const char* what, uint32_t blocks, uint64_t bytes, MemoryKind kind) {
  try {
    return context.create_buffer(bytes, kind);
  } catch (const Error& e) {
    if (e.code() != ErrorCode::out_of_memory) throw;
    const uint64_t limit = context.device_info().max_memory_allocation_size;
    throw Error(ErrorCode::out_of_memory,
                fmt::format("{} {}: a layer's pool of {} bytes ({}) could not be allocated{}: {}", what, blocks, bytes,
                            mib(bytes),
                            limit > 0 && bytes > limit
                                ? fmt::format(", past the device's maxMemoryAllocationSize of {} bytes ({}), up to "
                                              "which one allocation is sure to succeed",
                                              limit, mib(limit))
                                : "",
                            e.what()));
  }
}

// One pool: one buffer of num_blocks blocks.
struct Pool {
  DeviceBuffer buffer;
};

struct Layer {
  Pool key, value;
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

// ---- sizing ----

void KvCache::validate(const KvCacheShape& s) {
  if (s.num_layers == 0) refuse(ErrorCode::invalid_argument, "num_layers is 0");
  if (s.num_kv_heads == 0) refuse(ErrorCode::invalid_argument, "num_kv_heads is 0");
  if (s.block_size == 0) refuse(ErrorCode::invalid_argument, "block_size is 0");
  if (!is_cache_dtype(s.dtype))
    refuse(ErrorCode::invalid_argument,
           fmt::format("dtype {} is not a cache dtype (f32, f16, bf16, fp8_e4m3, fp8_e5m2)", dtype_name(s.dtype)));
  const uint32_t x = cache_pack_factor(s.dtype);
  if (s.head_size == 0 || s.head_size % x != 0)
    refuse(ErrorCode::invalid_argument,
           fmt::format("head size D = {} is not a positive multiple of x = {} for dtype {}", s.head_size, x,
                       dtype_name(s.dtype)));
}

namespace {

uint64_t block_bytes_of(const KvCacheShape& s) {
  const uint64_t elements = checked_mul(checked_mul(s.num_kv_heads, s.head_size, "a block"), s.block_size, "a block");
  return checked_mul(elements, dtype_size(s.dtype), "a block");
}

}  // namespace

uint64_t KvCache::bytes_per_block(const KvCacheShape& shape) {
  validate(shape);
  return checked_mul(block_bytes_of(shape), 2ull * shape.num_layers, "a block over every layer");
}

uint32_t KvCache::blocks_for_budget(const KvCacheShape& shape, uint64_t bytes) {
  const uint64_t blocks = bytes / bytes_per_block(shape);
  return uint32_t(std::min<uint64_t>(blocks, kMaxBlocks));
}

KvCacheSizing KvCache::sizing(const KvCacheShape& shape, uint32_t num_blocks) {
  KvCacheSizing z;
  z.bytes_per_block = bytes_per_block(shape);
  z.block_bytes = block_bytes_of(shape);
  z.num_blocks = num_blocks;
  z.num_tokens = uint64_t(num_blocks) * shape.block_size;
  z.pool_bytes = checked_mul(z.block_bytes, num_blocks, "a pool");
  z.total_bytes = checked_mul(z.bytes_per_block, num_blocks, "the cache");
  return z;
}

uint32_t KvCache::max_blocks_per_pool(const KvCacheShape& shape, uint64_t max_storage_buffer_range) {
  validate(shape);
  return uint32_t(std::min<uint64_t>(max_storage_buffer_range / block_bytes_of(shape), kMaxBlocks));
}

KvCacheSizing KvCache::plan(const DeviceInfo& device, const KvCacheShape& shape, const KvCacheOptions& o) {
  validate(shape);
  const int given = (o.num_blocks > 0) + (o.budget_bytes > 0) + (o.budget_fraction != 0.0);
  if (given == 0)
    refuse(ErrorCode::invalid_argument,
           "no size given: set one of num_blocks, budget_bytes or budget_fraction (a cache of 0 blocks holds nothing)");
  if (given > 1)
    refuse(ErrorCode::invalid_argument,
           fmt::format("num_blocks {}, budget_bytes {} and budget_fraction {}: give only one", o.num_blocks,
                       o.budget_bytes, o.budget_fraction));
  const uint64_t per_block = bytes_per_block(shape);
  const uint64_t memory = device.device_local_bytes;

  uint32_t blocks = o.num_blocks;
  MemorySource fraction_of = MemorySource::none;
  uint64_t fraction_of_bytes = 0;
  if (o.budget_fraction != 0.0) {
    if (!(o.budget_fraction > 0.0 && o.budget_fraction <= 1.0))
      refuse(ErrorCode::invalid_argument, fmt::format("budget_fraction {} is outside (0, 1]", o.budget_fraction));
    // Of what is free where the device says (VK_EXT_memory_budget), else of the heaps' size.
    fraction_of = device.memory_budget ? MemorySource::memory_budget : MemorySource::heap_size;
    fraction_of_bytes = device.memory_budget ? device.device_local_free_bytes : memory;
    const char* of = device.memory_budget ? "free device-local memory (VK_EXT_memory_budget)" : "device-local memory";
    if (fraction_of_bytes == 0)
      refuse(device.memory_budget ? ErrorCode::out_of_memory : ErrorCode::unsupported,
             fmt::format("budget_fraction {}: device {} reports no {}", o.budget_fraction, device.name, of));
    const uint64_t bytes = uint64_t(std::floor(o.budget_fraction * double(fraction_of_bytes)));
    blocks = blocks_for_budget(shape, bytes);
    if (blocks == 0)
      refuse(ErrorCode::invalid_argument,
             fmt::format("budget_fraction {} of {} bytes of {} is {} bytes, which holds no block of {} bytes",
                         o.budget_fraction, fraction_of_bytes, of, bytes, per_block));
  } else if (o.budget_bytes > 0) {
    if (memory > 0 && o.budget_bytes > memory)
      refuse(ErrorCode::out_of_memory,
             fmt::format("budget of {} bytes ({}) is larger than the {} bytes ({}) of device-local memory of {}",
                         o.budget_bytes, mib(o.budget_bytes), memory, mib(memory), device.name));
    blocks = blocks_for_budget(shape, o.budget_bytes);
    if (blocks == 0)
      refuse(ErrorCode::invalid_argument,
             fmt::format("budget of {} bytes holds no block: one block costs {} bytes over {} layers", o.budget_bytes,
                         per_block, shape.num_layers));
  }
  if (blocks > kMaxBlocks)
    refuse(ErrorCode::invalid_argument,
           fmt::format("num_blocks {} is above {} (block ids are int32)", blocks, kMaxBlocks));

  KvCacheSizing z = sizing(shape, blocks);
  z.fraction_of = fraction_of;
  z.fraction_of_bytes = fraction_of_bytes;
  if (memory > 0 && z.total_bytes > memory)
    refuse(ErrorCode::out_of_memory,
           fmt::format("{} blocks need {} bytes ({}), more than the {} bytes ({}) of device-local memory of {}", blocks,
                       z.total_bytes, mib(z.total_bytes), memory, mib(memory), device.name));
  check_pool_reach(device, "num_blocks", "key or value pool", z);
  return z;
}

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

  Shape key_shape(uint32_t blocks) const {
    const uint32_t x = cache_pack_factor(shape.dtype);
    return Shape{blocks, shape.num_kv_heads, shape.head_size / x, shape.block_size, x};
  }
  Shape value_shape(uint32_t blocks) const {
    return Shape{blocks, shape.num_kv_heads, shape.head_size, shape.block_size};
  }

  LayerCacheViews views_of(const Layer& layer, uint32_t blocks) const {
    return {layer.key.buffer.tensor(shape.dtype, key_shape(blocks)),
            layer.value.buffer.tensor(shape.dtype, value_shape(blocks))};
  }

  uint32_t check_layer(const char* what, uint32_t layer) const {
    if (layer >= shape.num_layers)
      refuse(ErrorCode::invalid_argument,
             fmt::format("{}: layer {} is outside [0, {}) layers", what, layer, shape.num_layers));
    return layer;
  }
  void check_host(const char* what) const {
    if (num_host_blocks == 0)
      refuse(ErrorCode::invalid_argument, fmt::format("{}: the cache has no host pool (num_host_blocks is 0)", what));
  }
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
    if (options.num_host_blocks > kMaxBlocks)
      refuse(ErrorCode::invalid_argument,
             fmt::format("num_host_blocks {} is above {} (block ids are int32)", options.num_host_blocks, kMaxBlocks));
    const KvCacheSizing h = sizing(shape, options.num_host_blocks);
    check_pool_reach(device, "num_host_blocks", "host key or value pool", h);
    const HostHeap heap = host_heap(context_impl.memory_properties);
    // Where host-visible memory is device-local too, both pools come out of that one heap.
    const uint64_t needed = h.total_bytes + (heap.device_local ? z.total_bytes : 0);
    if (heap.bytes > 0 && needed > heap.bytes)
      refuse(
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
    impl->device.push_back({{allocate_pool(context, "num_blocks", z.num_blocks, z.pool_bytes, MemoryKind::device)},
                            {allocate_pool(context, "num_blocks", z.num_blocks, z.pool_bytes, MemoryKind::device)}});
  if (options.num_host_blocks > 0) {
    const uint64_t pool = z.block_bytes * options.num_host_blocks;
    impl->host.reserve(shape.num_layers);
    for (uint32_t l = 0; l < shape.num_layers; ++l)
      impl->host.push_back(
          {{allocate_pool(context, "num_host_blocks", options.num_host_blocks, pool, MemoryKind::host_visible)},
           {allocate_pool(context, "num_host_blocks", options.num_host_blocks, pool, MemoryKind::host_visible)}});
  }
  for (const Layer& layer : impl->device) impl->device_views.push_back(impl->views_of(layer, z.num_blocks));
  for (const Layer& layer : impl->host) impl->host_views.push_back(impl->views_of(layer, options.num_host_blocks));
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
  return impl_->device_views[impl_->check_layer("key_cache", layer)].key_cache;
}
TensorView KvCache::value_cache(uint32_t layer) const {
  return impl_->device_views[impl_->check_layer("value_cache", layer)].value_cache;
}
TensorView KvCache::host_key_cache(uint32_t layer) const {
  impl_->check_host("host_key_cache");
  return impl_->host_views[impl_->check_layer("host_key_cache", layer)].key_cache;
}
TensorView KvCache::host_value_cache(uint32_t layer) const {
  impl_->check_host("host_value_cache");
  return impl_->host_views[impl_->check_layer("host_value_cache", layer)].value_cache;
}

std::span<const LayerCacheViews> KvCache::layers() const noexcept { return impl_->device_views; }
std::span<const LayerCacheViews> KvCache::host_layers() const noexcept { return impl_->host_views; }

void KvCache::record_copy_blocks(VkCommandBuffer cmd, std::span<const BlockCopy> pairs) const {
  vkpaged::record_copy_blocks(*impl_->context, cmd, impl_->device_views, pairs);
}

void KvCache::record_swap_out(VkCommandBuffer cmd, std::span<const BlockCopy> pairs) const {
  impl_->check_host("record_swap_out");
  record_swap_blocks(*impl_->context, cmd, impl_->device_views, impl_->host_views, pairs);
}

void KvCache::record_swap_in(VkCommandBuffer cmd, std::span<const BlockCopy> pairs) const {
  impl_->check_host("record_swap_in");
  record_swap_blocks(*impl_->context, cmd, impl_->host_views, impl_->device_views, pairs);
}

}  // namespace vkpaged
