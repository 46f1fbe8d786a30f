// SPDX-License-Identifier: Apache-2.0
// KvCache's sizing (KvCache::plan and the functions it is built from) with any shape, any
// device description and any options read from the bytes. Accepted outcomes: vkpaged::Error,
// or a sizing that keeps every promise of include/vkpaged/kv_cache.hpp:
//   - the sizes multiply out exactly: block = Hkv * D * B * element bytes, a block over every
//     layer = 2 * L * block, pool = block * blocks, cache = block over every layer * blocks;
//   - between 1 and 2^31 - 1 blocks (block ids are int32), exactly num_blocks when it is given;
//   - the cache fits the device-local memory where the device reports it, and the budget or
//     the fraction of the memory it was sized from (and says which memory that was);
//   - a pool past maxStorageBufferRange only where buffer device addresses reach it.
#include <cmath>

#include "fuzz_support.hpp"
#include "vkpaged/error.hpp"
#include "vkpaged/kv_cache.hpp"

namespace vkpaged::fuzz {
namespace {

std::string str(uint64_t v) { return std::to_string(v); }

// A count: mostly small, sometimes an edge (0, 1, a power of two, the top of 32 bits) or anything.
uint32_t pick_count(FuzzedDataProvider& p, uint32_t usual) {
  switch (p.ConsumeIntegralInRange<int>(0, 15)) {
    case 0: return 0;
    case 1: return 1;
    case 2: return uint32_t(1) << p.ConsumeIntegralInRange<int>(0, 31);
    case 3: return p.ConsumeIntegral<uint32_t>();
    case 4: return std::numeric_limits<uint32_t>::max() - p.ConsumeIntegralInRange<uint32_t>(0, 2);
    case 5: return p.ConsumeIntegralInRange<uint32_t>(0, 600);
    default: return usual;
  }
}

// A byte count: an ordinary GPU's, an edge, or anything.
uint64_t pick_bytes(FuzzedDataProvider& p, uint64_t usual) {
  switch (p.ConsumeIntegralInRange<int>(0, 15)) {
    case 0: return 0;
    case 1: return 1;
    case 2: return uint64_t(1) << p.ConsumeIntegralInRange<int>(0, 63);
    case 3: return p.ConsumeIntegral<uint64_t>();
    case 4: return std::numeric_limits<uint64_t>::max() - p.ConsumeIntegralInRange<uint64_t>(0, 2);
    case 5: return p.ConsumeIntegralInRange<uint64_t>(0, uint64_t(1) << 20);
    default: return usual;
  }
}

double pick_fraction(FuzzedDataProvider& p) {
  switch (p.ConsumeIntegralInRange<int>(0, 7)) {
    case 0: return std::numeric_limits<double>::quiet_NaN();
    case 1: return std::numeric_limits<double>::infinity();
    case 2: return -0.5;
    case 3: return 1.0;
    case 4: return std::numeric_limits<double>::denorm_min();
    case 5: return p.ConsumeFloatingPoint<double>();
    default: return p.ConsumeFloatingPointInRange<double>(0.0, 1.0);
  }
}

int run(FuzzedDataProvider& p) {
  KvCacheShape shape;
  shape.num_layers = pick_count(p, 4);
  shape.num_kv_heads = pick_count(p, 8);
  shape.head_size = pick_count(p, 128);
  shape.block_size = pick_count(p, 16);
  shape.dtype = pick_dtype(p, DType::f16);

  DeviceInfo device;
  device.name = "fuzzed";
  device.device_local_bytes = pick_bytes(p, uint64_t(80) << 30);
  device.memory_budget = p.ConsumeBool();
  device.device_local_free_bytes = pick_bytes(p, uint64_t(70) << 30);
  device.max_storage_buffer_range = pick_bytes(p, (uint64_t(1) << 32) - 1);
  device.buffer_device_address = p.ConsumeBool();

  KvCacheOptions o;
  switch (p.ConsumeIntegralInRange<int>(0, 7)) {
    case 0: break;  // nothing given
    case 1: o.num_blocks = pick_count(p, 4096); o.budget_bytes = pick_bytes(p, 1 << 30); break;  // two given
    case 2: case 3: o.budget_bytes = pick_bytes(p, uint64_t(8) << 30); break;
    case 4: case 5: o.budget_fraction = pick_fraction(p); break;
    default: o.num_blocks = pick_count(p, 4096); break;
  }

  // The pieces plan is built from: each either refuses or answers.
  try {
    KvCache::validate(shape);
  } catch (const Error&) {
  }
  uint64_t per_block = 0;
  try {
    per_block = KvCache::bytes_per_block(shape);
    const uint32_t for_budget = KvCache::blocks_for_budget(shape, o.budget_bytes);
    FUZZ_CHECK(uint64_t(for_budget) * per_block <= o.budget_bytes,
               "blocks_for_budget " + str(for_budget) + " of " + str(per_block) + " bytes past " + str(o.budget_bytes));
    const uint32_t per_pool = KvCache::max_blocks_per_pool(shape, device.max_storage_buffer_range);
    FUZZ_CHECK(uint64_t(per_pool) * (per_block / (2ull * shape.num_layers)) <= device.max_storage_buffer_range,
               "max_blocks_per_pool " + str(per_pool) + " past the range " + str(device.max_storage_buffer_range));
  } catch (const Error&) {
  }

  KvCacheSizing z;
  try {
    z = KvCache::plan(device, shape, o);
  } catch (const Error&) {
    return 0;
  }
  // Accepted: a valid shape, so the sizes below fit 64 bits (plan checked every product).
  const uint64_t block = uint64_t(shape.num_kv_heads) * shape.head_size * shape.block_size * dtype_size(shape.dtype);
  FUZZ_CHECK(z.block_bytes == block, "block_bytes " + str(z.block_bytes) + " != " + str(block));
  FUZZ_CHECK(z.bytes_per_block == 2 * uint64_t(shape.num_layers) * block, "bytes_per_block " + str(z.bytes_per_block));
  FUZZ_CHECK(z.bytes_per_block == per_block, "plan and bytes_per_block disagree");
  FUZZ_CHECK(z.num_blocks >= 1 && z.num_blocks <= uint32_t(std::numeric_limits<int32_t>::max()),
             "num_blocks " + str(z.num_blocks));
  FUZZ_CHECK(z.num_tokens == uint64_t(z.num_blocks) * shape.block_size, "num_tokens " + str(z.num_tokens));
  FUZZ_CHECK(z.pool_bytes == block * z.num_blocks, "pool_bytes " + str(z.pool_bytes));
  FUZZ_CHECK(z.total_bytes == z.bytes_per_block * z.num_blocks, "total_bytes " + str(z.total_bytes));
  if (device.device_local_bytes > 0)
    FUZZ_CHECK(z.total_bytes <= device.device_local_bytes,
               str(z.total_bytes) + " bytes on a device of " + str(device.device_local_bytes));
  if (o.num_blocks > 0) FUZZ_CHECK(z.num_blocks == o.num_blocks, "num_blocks given " + str(o.num_blocks));
  if (o.budget_bytes > 0)
    FUZZ_CHECK(z.total_bytes <= o.budget_bytes, str(z.total_bytes) + " bytes past a budget of " + str(o.budget_bytes));
  if (o.budget_fraction != 0.0) {
    FUZZ_CHECK(o.budget_fraction > 0.0 && o.budget_fraction <= 1.0, "fraction " + std::to_string(o.budget_fraction));
    const uint64_t source = device.memory_budget ? device.device_local_free_bytes : device.device_local_bytes;
    FUZZ_CHECK(z.fraction_of == (device.memory_budget ? MemorySource::memory_budget : MemorySource::heap_size),
               "fraction_of");
    FUZZ_CHECK(z.fraction_of_bytes == source, "fraction_of_bytes " + str(z.fraction_of_bytes));
    FUZZ_CHECK(double(z.total_bytes) <= std::floor(o.budget_fraction * double(source)),
               str(z.total_bytes) + " bytes past " + std::to_string(o.budget_fraction) + " of " + str(source));
  } else {
    FUZZ_CHECK(z.fraction_of == MemorySource::none, "fraction_of without a fraction");
  }
  if (!device.buffer_device_address)
    FUZZ_CHECK(z.pool_bytes <= device.max_storage_buffer_range,
               "a pool of " + str(z.pool_bytes) + " bytes past the range without device addresses");
  return 0;
}

}  // namespace
}  // namespace vkpaged::fuzz

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  FuzzedDataProvider p(data, size);
  return vkpaged::fuzz::run(p);
}
