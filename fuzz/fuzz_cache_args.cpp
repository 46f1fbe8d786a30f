// SPDX-License-Identifier: Apache-2.0
// The cache operations' argument checks (src/ops/cache_geometry.cpp, shared with the GPU
// paths) and CPU references on pools (in each layout, and in none), tokens, slot mappings,
// block pairs and block tables built from the bytes. Each call either succeeds or throws vkpaged::Error, and then:
//   refused                 -> no pool changed (the contract's "no cache is left half updated")
//   reshape_and_cache       -> only the slots in slot_mapping changed; each holds its last
//                              token's value rounded to the cache dtype (f32/f16/bf16 caches)
//   copy_blocks/swap_blocks -> only destination blocks changed, each now equal to its source
//   gather                  -> outputs of [T, Hkv, D], T = seq_starts[S]
#include <cstring>
#include <map>
#include <random>
#include <set>

#include "fuzz_support.hpp"
#include "vkpaged/error.hpp"
#include "vkpaged/reference.hpp"

namespace vkpaged::fuzz {
namespace {

struct Pools {
  HostTensor key, value;
};

std::vector<int64_t> mutate(FuzzedDataProvider& p, std::vector<int64_t> dims, bool mutating) {
  if (!mutating) return dims;
  if (p.ConsumeIntegralInRange<int>(0, 15) == 0) {
    if (!dims.empty() && p.ConsumeBool()) dims.pop_back();
    else dims.push_back(pick_dim(p, 1));
  }
  for (int64_t& d : dims) d = pick_dim(p, d);
  return dims;
}

void fill_bytes(HostTensor& t, std::minstd_rand& rng) {
  auto* b = static_cast<uint8_t*>(t.data());
  for (size_t i = 0; i < t.bytes(); ++i) b[i] = uint8_t(rng());
}

bool same(const HostTensor& a, const HostTensor& b) {
  return a.bytes() == b.bytes() && (a.bytes() == 0 || std::memcmp(a.data(), b.data(), a.bytes()) == 0);
}

// Bytes [block * block_bytes, (block + 1) * block_bytes) of a pool.
bool block_equal(const HostTensor& a, int64_t block_a, const HostTensor& b, int64_t block_b, size_t block_bytes) {
  return std::memcmp(static_cast<const uint8_t*>(a.data()) + size_t(block_a) * block_bytes,
                     static_cast<const uint8_t*>(b.data()) + size_t(block_b) * block_bytes, block_bytes) == 0;
}

// Index values of an i32/i64/u32 tensor, as int64 (nothing for other dtypes).
std::vector<int64_t> values_of(const HostTensor& t) {
  if (t.dtype() != DType::i32 && t.dtype() != DType::u32 && t.dtype() != DType::i64) return {};
  std::vector<int64_t> v(size_t(t.numel()));
  for (size_t i = 0; i < v.size(); ++i) {
    if (t.dtype() == DType::i32) v[i] = t.as<int32_t>()[i];
    else if (t.dtype() == DType::u32) v[i] = t.as<uint32_t>()[i];
    else v[i] = t.as<int64_t>()[i];
  }
  return v;
}

void set_index(HostTensor& t, size_t i, int64_t v) {
  if (t.dtype() == DType::i32) t.as<int32_t>()[i] = int32_t(v);
  else if (t.dtype() == DType::u32) t.as<uint32_t>()[i] = uint32_t(v);
  else if (t.dtype() == DType::i64) t.as<int64_t>()[i] = v;
}

// An index: mostly in [low, high], sometimes anything 32-bit.
int64_t pick_index(FuzzedDataProvider& p, int64_t low, int64_t high) {
  if (p.ConsumeIntegralInRange<int>(0, 15) == 0) return p.ConsumeIntegral<int32_t>();
  return p.ConsumeIntegralInRange<int64_t>(low, std::max(low, high));
}

std::vector<BlockCopy> pick_pairs(FuzzedDataProvider& p, int64_t src_blocks, int64_t dst_blocks) {
  std::vector<BlockCopy> pairs(p.ConsumeIntegralInRange<size_t>(0, 6));
  for (auto& pair : pairs) {
    pair.src = int32_t(pick_index(p, -1, src_blocks));
    pair.dst = int32_t(pick_index(p, -1, dst_blocks));
  }
  return pairs;
}

// The pools' shapes in a layout (vllm's key is [N, Hkv, D/x, B, x]).
std::vector<int64_t> value_dims(KvLayout layout, int64_t n, int64_t hkv, int64_t d, int64_t b) {
  if (layout == KvLayout::nhd) return {n, b, hkv, d};
  if (layout == KvLayout::hnd) return {n, hkv, b, d};
  return {n, hkv, d, b};
}
std::vector<int64_t> key_dims(KvLayout layout, int64_t n, int64_t hkv, int64_t d, int64_t b, int64_t x) {
  if (layout == KvLayout::vllm) return {n, hkv, x > 0 ? d / x : 0, b, x};
  return value_dims(layout, n, hkv, d, b);
}

// Where Hkv, D and B sit in a layout's value shape (N is dimension 0).
struct ValueDims {
  int hkv, d, b;
};
ValueDims dims_of(KvLayout layout) {
  if (layout == KvLayout::nhd) return {2, 3, 1};
  if (layout == KvLayout::hnd) return {1, 3, 2};
  return {1, 2, 3};
}

// (block, kv head, dim, in-block offset) of element i of a pool, straight from the shapes of
// docs/contract.md's layout table.
struct Coord {
  int64_t block, h, d, offset;
};
Coord coord_of(KvLayout layout, bool key, int64_t i, int64_t Hkv, int64_t D, int64_t B, int64_t x) {
  const int64_t block = i / (Hkv * D * B);
  switch (layout) {
    case KvLayout::nhd: return {block, (i / D) % Hkv, i % D, (i / (D * Hkv)) % B};
    case KvLayout::hnd: return {block, (i / (D * B)) % Hkv, i % D, (i / D) % B};
    case KvLayout::vllm: break;
  }
  if (key) return {block, (i / (D * B)) % Hkv, ((i / (x * B)) % (D / x)) * x + i % x, (i / x) % B};
  return {block, (i / (D * B)) % Hkv, (i / B) % D, i % B};
}

void check_reshape(const Pools& before, const Pools& after, const HostTensor& key, const HostTensor& value,
                   const HostTensor& slot_mapping, KvLayout layout) {
  const Shape& vs = after.value.shape();
  const ValueDims dims = dims_of(layout);
  const int64_t N = vs[0], Hkv = vs[dims.hkv], D = vs[dims.d], B = vs[dims.b];
  const DType dt = after.value.dtype();
  const int64_t x = int64_t(cache_pack_factor(dt));
  // The last token written to each slot (the reference writes in token order).
  std::map<int64_t, int64_t> last;
  const auto slots = values_of(slot_mapping);
  for (size_t t = 0; t < slots.size(); ++t) {
    FUZZ_CHECK(slots[t] < N * B, "accepted slot " + std::to_string(slots[t]) + " >= N * B");
    if (slots[t] >= 0) last[slots[t]] = int64_t(t);
  }
  const size_t esize = dtype_size(dt);
  for (int64_t i = 0; i < after.value.numel(); ++i) {
    const auto [block, h, d, offset] = coord_of(layout, false, i, Hkv, D, B, x);
    const auto it = last.find(block * B + offset);
    const auto* got = static_cast<const uint8_t*>(after.value.data()) + size_t(i) * esize;
    if (it == last.end()) {
      FUZZ_CHECK(std::memcmp(got, static_cast<const uint8_t*>(before.value.data()) + size_t(i) * esize, esize) == 0,
                 "value cache element " + std::to_string(i) + " changed, its slot was not in slot_mapping");
    } else if (!is_fp8_dtype(dt)) {
      uint8_t want[4];
      store_element(want, dt, 0, load_element(value.data(), value.dtype(), size_t((it->second * Hkv + h) * D + d)));
      FUZZ_CHECK(std::memcmp(got, want, esize) == 0, "value cache element " + std::to_string(i) + " is not its token's value");
    }
  }
  for (int64_t i = 0; i < after.key.numel(); ++i) {
    const auto [block, h, d, offset] = coord_of(layout, true, i, Hkv, D, B, x);
    const auto it = last.find(block * B + offset);
    const auto* got = static_cast<const uint8_t*>(after.key.data()) + size_t(i) * esize;
    if (it == last.end()) {
      FUZZ_CHECK(std::memcmp(got, static_cast<const uint8_t*>(before.key.data()) + size_t(i) * esize, esize) == 0,
                 "key cache element " + std::to_string(i) + " changed, its slot was not in slot_mapping");
    } else if (!is_fp8_dtype(dt)) {
      uint8_t want[4];
      store_element(want, dt, 0, load_element(key.data(), key.dtype(), size_t((it->second * Hkv + h) * D + d)));
      FUZZ_CHECK(std::memcmp(got, want, esize) == 0, "key cache element " + std::to_string(i) + " is not its token's value");
    }
  }
}

// After an accepted copy or swap: destinations equal their sources as they were, all else is unchanged.
void check_blocks(const Pools& src_before, const Pools& dst_before, const Pools& dst_after,
                  const std::vector<BlockCopy>& pairs, bool copy) {
  const Shape& vs = dst_after.value.shape();
  const int64_t N = vs[0];
  const size_t block_bytes = N > 0 ? dst_after.value.bytes() / size_t(N) : 0;
  std::set<int32_t> written;
  for (const BlockCopy& c : pairs) {
    if (copy && c.src == c.dst) continue;
    FUZZ_CHECK(c.dst >= 0 && c.dst < N, "accepted dst " + std::to_string(c.dst));
    FUZZ_CHECK(written.insert(c.dst).second, "accepted a dst twice: " + std::to_string(c.dst));
    FUZZ_CHECK(block_equal(dst_after.key, c.dst, src_before.key, c.src, block_bytes) &&
                   block_equal(dst_after.value, c.dst, src_before.value, c.src, block_bytes),
               "block " + std::to_string(c.dst) + " does not hold block " + std::to_string(c.src));
  }
  for (int64_t b = 0; b < N; ++b)
    if (!written.contains(int32_t(b)))
      FUZZ_CHECK(block_equal(dst_after.key, b, dst_before.key, b, block_bytes) &&
                     block_equal(dst_after.value, b, dst_before.value, b, block_bytes),
                 "block " + std::to_string(b) + " changed but was no destination");
}

int run(FuzzedDataProvider& p) {
  static constexpr int64_t kHeadSizes[] = {16, 32, 64, 8, 12, 0, 24};
  static constexpr int64_t kBlockSizes[] = {1, 2, 4, 8, 16, 3, 0};
  static constexpr DType kDtypes[] = {DType::f32, DType::f16, DType::bf16, DType::fp8_e4m3, DType::fp8_e5m2, DType::u8};
  const int64_t N = p.ConsumeIntegralInRange<int64_t>(0, 6);
  const int64_t Hkv = p.ConsumeIntegralInRange<int64_t>(1, 3);
  const int64_t D = kHeadSizes[p.ConsumeIntegralInRange<size_t>(0, std::size(kHeadSizes) - 1)];
  const int64_t B = kBlockSizes[p.ConsumeIntegralInRange<size_t>(0, std::size(kBlockSizes) - 1)];
  const DType dt = pick_dtype(p, kDtypes[p.ConsumeIntegralInRange<size_t>(0, std::size(kDtypes) - 1)]);
  const int64_t x = int64_t(16 / dtype_size(dt));
  // The three layouts, and now and then a value that is none.
  const bool no_layout = p.ConsumeIntegralInRange<uint32_t>(0, 15) == 0;
  const KvLayout layout = KvLayout(no_layout ? 3 : p.ConsumeIntegralInRange<uint32_t>(0, 2));
  const bool mutating = p.ConsumeIntegralInRange<int>(0, 3) == 0;
  auto key_cache = make_tensor(dt, mutate(p, key_dims(layout, N, Hkv, D, B, x), mutating));
  auto value_cache = make_tensor(pick_dtype(p, dt), mutate(p, value_dims(layout, N, Hkv, D, B), mutating));
  if (!key_cache || !value_cache) return 0;
  std::minstd_rand rng(p.ConsumeIntegral<uint32_t>());
  fill_bytes(*key_cache, rng);
  fill_bytes(*value_cache, rng);
  Pools pools{std::move(*key_cache), std::move(*value_cache)};
  const Pools before = pools;

  switch (p.ConsumeIntegralInRange<int>(0, 3)) {
    case 0: {  // reshape_and_cache
      const int64_t T = p.ConsumeIntegralInRange<int64_t>(0, 8);
      static constexpr DType kTokenDtypes[] = {DType::f32, DType::f16, DType::bf16};
      const DType tdt = pick_dtype(p, kTokenDtypes[p.ConsumeIntegralInRange<size_t>(0, 2)]);
      auto key = make_tensor(tdt, mutate(p, {T, Hkv, D}, mutating));
      auto value = make_tensor(pick_dtype(p, tdt), mutate(p, {T, Hkv, D}, mutating));
      auto slots = make_tensor(pick_dtype(p, p.ConsumeBool() ? DType::i64 : DType::i32), mutate(p, {T}, mutating));
      if (!key || !value || !slots) return 0;
      fill_bytes(*key, rng);
      fill_bytes(*value, rng);
      for (int64_t i = 0; i < slots->numel(); ++i) set_index(*slots, size_t(i), pick_index(p, -2, N * B));
      CacheScales scales{pick_float(p, 0.5f), pick_float(p, 2.0f)};
      try {
        reference::reshape_and_cache(*key, *value, *slots, pools.key, pools.value, scales, layout);
      } catch (const Error&) {
        FUZZ_CHECK(same(pools.key, before.key) && same(pools.value, before.value), "a refused reshape_and_cache wrote");
        return 0;
      }
      check_reshape(before, pools, *key, *value, *slots, layout);
      break;
    }
    case 1: {  // copy_blocks
      const auto pairs = pick_pairs(p, N, N);
      try {
        reference::copy_blocks(pools.key, pools.value, pairs, layout);
      } catch (const Error&) {
        FUZZ_CHECK(same(pools.key, before.key) && same(pools.value, before.value), "a refused copy_blocks wrote");
        return 0;
      }
      check_blocks(before, before, pools, pairs, true);
      break;
    }
    case 2: {  // swap_blocks into a second cache
      const int64_t N2 = p.ConsumeIntegralInRange<int64_t>(0, 6);
      auto key2 = make_tensor(pick_dtype(p, dt), mutate(p, key_dims(layout, N2, Hkv, D, B, x), mutating));
      auto value2 = make_tensor(pick_dtype(p, dt), mutate(p, value_dims(layout, N2, Hkv, D, B), mutating));
      if (!key2 || !value2) return 0;
      fill_bytes(*key2, rng);
      fill_bytes(*value2, rng);
      Pools dst{std::move(*key2), std::move(*value2)};
      const Pools dst_before = dst;
      const auto pairs = pick_pairs(p, N, N2);
      try {
        reference::swap_blocks(pools.key, pools.value, dst.key, dst.value, pairs, layout);
      } catch (const Error&) {
        FUZZ_CHECK(same(dst.key, dst_before.key) && same(dst.value, dst_before.value), "a refused swap_blocks wrote");
        return 0;
      }
      FUZZ_CHECK(same(pools.key, before.key) && same(pools.value, before.value), "swap_blocks wrote its source");
      check_blocks(before, dst_before, dst, pairs, false);
      break;
    }
    default: {  // gather
      const int64_t S = p.ConsumeIntegralInRange<int64_t>(0, 3), M = p.ConsumeIntegralInRange<int64_t>(0, 4);
      auto tables = make_tensor(pick_dtype(p, p.ConsumeBool() ? DType::i32 : DType::u32), mutate(p, {S, M}, mutating));
      auto starts = make_tensor(pick_dtype(p, p.ConsumeBool() ? DType::i32 : DType::u32), mutate(p, {S + 1}, mutating));
      if (!tables || !starts) return 0;
      for (int64_t i = 0; i < tables->numel(); ++i) set_index(*tables, size_t(i), pick_index(p, -1, N));
      int64_t row = pick_index(p, 0, 4);
      for (int64_t i = 0; i < starts->numel(); ++i) {
        set_index(*starts, size_t(i), row);
        row += pick_index(p, -1, M * std::max<int64_t>(B, 0) + 1);
      }
      const DType out = pick_dtype(p, p.ConsumeBool() ? DType::f32 : DType::f16);
      // The reference allocates T = seq_starts[S] rows before it can tell that no sequence uses
      // most of them (docs/reliability.md, "Known issues"): keep T within bounds here.
      const auto ends = values_of(*starts);
      const int64_t T = ends.empty() ? 0 : ends.back();
      const Shape& vs = pools.value.shape();
      const ValueDims dims = dims_of(layout);  // (no layout: refused anyway)
      const int64_t Hkv_got = vs.rank() == 4 ? vs[dims.hkv] : Hkv, D_got = vs.rank() == 4 ? vs[dims.d] : D;
      if (T > 0 && !bounded_numel({T, std::max<int64_t>(Hkv_got, 1), std::max<int64_t>(D_got, 1)})) return 0;
      reference::GatherResult r;
      try {
        r = reference::gather(pools.key, pools.value, *tables, *starts, out, {pick_float(p, 1.0f), pick_float(p, 1.0f)},
                              layout);
      } catch (const Error&) {
        return 0;
      }
      FUZZ_CHECK(r.key.shape() == (Shape{T, Hkv_got, D_got}) && r.value.shape() == r.key.shape() && r.key.dtype() == out,
                 "gather output " + r.key.shape().str());
      break;
    }
  }
  return 0;
}

}  // namespace
}  // namespace vkpaged::fuzz

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  FuzzedDataProvider p(data, size);
  return vkpaged::fuzz::run(p);
}
