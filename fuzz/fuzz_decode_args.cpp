// SPDX-License-Identifier: Apache-2.0
// Decode attention's host-side checks and CPU reference on inputs built from the bytes:
// shapes, dtypes, block tables, context lengths and options, mostly consistent and then
// mutated. decode_shape_of (the checks every decode entry point shares) and
// reference::decode_attention must either refuse with vkpaged::Error or succeed; on success
// the shape must describe the tensors exactly, and finite, moderate inputs must give a
// finite output of the query's shape and dtype (the contract's "no NaN or Inf").
#include <cmath>
#include <random>

#include "fuzz_support.hpp"
#include "vkpaged/error.hpp"
#include "vkpaged/reference.hpp"

namespace vkpaged::fuzz {
namespace {

// Most multiply-adds the reference may do per input (S * H * tokens * D), and most elements
// per tensor: shapes matter here, not sizes, and small inputs keep the runs fast.
constexpr uint64_t kMaxWork = uint64_t(1) << 18;
constexpr int64_t kMaxDecodeElements = int64_t(1) << 13;

struct Dims {
  int64_t S, H, Hkv, D, B, N, M;
};

// Fills a float tensor: moderate values in [-2, 2] (bounded) or raw bit patterns.
void fill_floats(HostTensor& t, std::minstd_rand& rng, bool bounded) {
  auto* bytes = static_cast<uint8_t*>(t.data());
  if (!bounded) {
    for (size_t i = 0; i < t.bytes(); ++i) bytes[i] = uint8_t(rng());
    return;
  }
  std::uniform_real_distribution<float> u(-2.0f, 2.0f);
  for (int64_t i = 0; i < t.numel(); ++i) {
    if (is_fp8_dtype(t.dtype()) || t.dtype() == DType::u8) {
      // Raw fp8 codes that are finite in both formats' readings: clear the exponent's top bit.
      bytes[i] = uint8_t(rng()) & 0xbf;
    } else {
      store_element(t.data(), t.dtype(), size_t(i), u(rng));
    }
  }
}

void fill_indices(HostTensor& t, std::minstd_rand& rng, int64_t valid_below, FuzzedDataProvider& p) {
  const int mode = p.ConsumeIntegralInRange<int>(0, 7);
  for (int64_t i = 0; i < t.numel(); ++i) {
    int64_t v = valid_below > 0 ? int64_t(rng() % uint64_t(valid_below + 1)) : 0;  // up to and including the edge
    if (mode == 0 && rng() % 8 == 0) v = int64_t(int32_t(rng()));                      // anything 32-bit
    if (mode == 1 && rng() % 8 == 0) v = -int64_t(rng() % 3) - 1;                      // negative
    if (mode == 2 && rng() % 8 == 0) v = int64_t(rng()) << 20;                          // past 32 bits
    switch (t.dtype()) {
      case DType::i32: t.as<int32_t>()[i] = int32_t(v); break;
      case DType::u32: t.as<uint32_t>()[i] = uint32_t(v); break;
      case DType::i64: t.as<int64_t>()[i] = v; break;
      default: static_cast<uint8_t*>(t.data())[size_t(i) * dtype_size(t.dtype())] = uint8_t(v); break;  // not an index dtype
    }
  }
}

// A dims vector of `rank` entries, each mutated with a small probability.
std::vector<int64_t> mutate(FuzzedDataProvider& p, std::vector<int64_t> dims, bool mutating) {
  if (!mutating) return dims;
  if (p.ConsumeIntegralInRange<int>(0, 15) == 0) {  // a wrong rank
    if (!dims.empty() && p.ConsumeBool()) dims.pop_back();
    else dims.push_back(pick_dim(p, 1));
  }
  for (int64_t& d : dims) d = pick_dim(p, d);
  return dims;
}

// Known issue (docs/reliability.md): decode_shape_of narrows every dimension to uint32, so an
// empty tensor (another dimension is 0) with a dimension past 2^32 - 1 is read as a smaller
// shape and accepted. Skipped until it refuses such dimensions itself.
bool hits_known_issue(const HostTensor& q, const HostTensor& k, const HostTensor& v, const HostTensor& tables) {
  for (const HostTensor* t : {&q, &k, &v, &tables})
    for (int64_t dim : t->shape().dims())
      if (dim > int64_t(std::numeric_limits<uint32_t>::max())) return true;
  return false;
}

bool all_finite(const HostTensor& t) {
  if (t.empty()) return true;  // an absent optional input (numel() is 1 for it: rank 0)
  for (int64_t i = 0; i < t.numel(); ++i)
    if (!std::isfinite(t.get(size_t(i)))) return false;
  return true;
}

int run(FuzzedDataProvider& p) {
  static constexpr int64_t kHeadSizes[] = {32, 40, 64, 72, 80, 96, 112, 128, 256, 512, 8, 16, 60, 264};
  static constexpr int64_t kBlockSizes[] = {1, 2, 4, 8, 16, 32, 64, 128, 3, 24, 256, 0};
  Dims d;
  d.S = p.ConsumeIntegralInRange<int64_t>(0, 4);
  d.Hkv = p.ConsumeIntegralInRange<int64_t>(1, 4);
  d.H = d.Hkv * p.ConsumeIntegralInRange<int64_t>(1, 4);
  d.D = kHeadSizes[p.ConsumeIntegralInRange<size_t>(0, std::size(kHeadSizes) - 1)];
  d.B = kBlockSizes[p.ConsumeIntegralInRange<size_t>(0, std::size(kBlockSizes) - 1)];
  d.N = p.ConsumeIntegralInRange<int64_t>(0, 8);
  d.M = p.ConsumeIntegralInRange<int64_t>(0, 6);

  static constexpr DType kQueryDtypes[] = {DType::f32, DType::f16, DType::bf16};
  static constexpr DType kCacheDtypes[] = {DType::f32, DType::f16, DType::bf16, DType::fp8_e4m3, DType::fp8_e5m2};
  const DType qdt = pick_dtype(p, kQueryDtypes[p.ConsumeIntegralInRange<size_t>(0, 2)]);
  DecodeInputs in;
  in.cache_dtype = pick_dtype(p, p.ConsumeBool() ? qdt : kCacheDtypes[p.ConsumeIntegralInRange<size_t>(0, 4)]);
  const bool fp8 = is_fp8_dtype(in.cache_dtype);
  const DType stored = pick_dtype(p, fp8 && p.ConsumeBool() ? DType::u8 : in.cache_dtype);
  const int64_t x = 16 / int64_t(fp8 ? 1 : dtype_size(in.cache_dtype));

  const bool mutating = p.ConsumeIntegralInRange<int>(0, 3) == 0;
  const bool bounded = p.ConsumeIntegralInRange<int>(0, 3) != 0;
  const bool alibi = p.ConsumeBool(), sinks = p.ConsumeBool(), want_lse = p.ConsumeBool();

  auto query = make_tensor(qdt, mutate(p, {d.S, d.H, d.D}, mutating), kMaxDecodeElements);
  auto key = make_tensor(stored, mutate(p, {d.N, d.Hkv, x > 0 ? d.D / x : 0, d.B, x}, mutating), kMaxDecodeElements);
  auto value = make_tensor(pick_dtype(p, stored), mutate(p, {d.N, d.Hkv, d.D, d.B}, mutating), kMaxDecodeElements);
  static constexpr DType kIndexDtypes[] = {DType::i32, DType::u32, DType::i64};
  auto tables = make_tensor(pick_dtype(p, kIndexDtypes[p.ConsumeIntegralInRange<size_t>(0, 2)]),
                            mutate(p, {d.S, d.M}, mutating));
  auto lens = make_tensor(pick_dtype(p, kIndexDtypes[p.ConsumeIntegralInRange<size_t>(0, 2)]),
                          mutate(p, {d.S}, mutating));
  if (!query || !key || !value || !tables || !lens) return 0;
  if (hits_known_issue(*query, *key, *value, *tables)) return 0;
  std::optional<HostTensor> slopes, sink_logits;
  if (alibi && !(slopes = make_tensor(pick_dtype(p, DType::f32), mutate(p, {d.H}, mutating)))) return 0;
  if (sinks && !(sink_logits = make_tensor(pick_dtype(p, DType::f32), mutate(p, {d.H}, mutating)))) return 0;

  std::minstd_rand rng(p.ConsumeIntegral<uint32_t>());
  fill_floats(*query, rng, bounded);
  fill_floats(*key, rng, bounded);
  fill_floats(*value, rng, bounded);
  fill_indices(*tables, rng, d.N - 1, p);
  fill_indices(*lens, rng, d.M * d.B, p);
  if (slopes) fill_floats(*slopes, rng, bounded);
  if (sink_logits) fill_floats(*sink_logits, rng, bounded);
  in.query = std::move(*query);
  in.key_cache = std::move(*key);
  in.value_cache = std::move(*value);
  in.block_tables = std::move(*tables);
  in.context_lens = std::move(*lens);
  if (slopes) in.alibi_slopes = std::move(*slopes);
  if (sink_logits) in.sinks = std::move(*sink_logits);

  DecodeOptions o;
  DecodeParams params;
  if (p.ConsumeBool()) params.scale = bounded ? p.ConsumeFloatingPointInRange<float>(-4.0f, 4.0f) : pick_float(p, 0.125f);
  if (p.ConsumeBool()) params.softcap = bounded ? p.ConsumeFloatingPointInRange<float>(0.0f, 50.0f) : pick_float(p, 30.0f);
  if (p.ConsumeBool()) o.sliding_window = p.ConsumeIntegral<uint32_t>() % (p.ConsumeBool() ? 64 : UINT32_MAX);
  // Moderate fp8 scales keep every value inside f16's range: |decode(byte)| <= 57344.
  params.k_scale = bounded ? p.ConsumeFloatingPointInRange<float>(1e-3f, 1e3f) : pick_float(p, 1.0f);
  params.v_scale = bounded ? p.ConsumeFloatingPointInRange<float>(1e-3f, 1.0f) : pick_float(p, 1.0f);
  o.split = SplitMode(p.ConsumeIntegralInRange<int>(0, 2));
  if (p.ConsumeBool()) o.partition_tokens = p.ConsumeBool() ? 256 * p.ConsumeIntegralInRange<uint32_t>(0, 8) : p.ConsumeIntegral<uint32_t>();

  DecodeShape s;
  try {
    s = decode_shape_of(in, want_lse);
  } catch (const Error&) {
    return 0;
  }
  // An accepted shape describes the tensors exactly (no narrowed or misread dimension).
  const Shape& q = in.query.shape();
  const Shape& k = in.key_cache.shape();
  FUZZ_CHECK(q.rank() == 3 && k.rank() == 5 && in.value_cache.shape().rank() == 4, "accepted ranks");
  FUZZ_CHECK(int64_t(s.num_seqs) == q[0] && int64_t(s.num_heads) == q[1] && int64_t(s.head_size) == q[2],
             "shape " + q.str() + " read as S=" + std::to_string(s.num_seqs) + " H=" + std::to_string(s.num_heads) +
                 " D=" + std::to_string(s.head_size));
  FUZZ_CHECK(int64_t(s.num_blocks) == k[0] && int64_t(s.num_kv_heads) == k[1] && int64_t(s.block_size) == k[3],
             "key cache " + k.str() + " read as N=" + std::to_string(s.num_blocks) +
                 " Hkv=" + std::to_string(s.num_kv_heads) + " B=" + std::to_string(s.block_size));
  FUZZ_CHECK(int64_t(s.max_blocks_per_seq) == in.block_tables.shape()[1],
             "block tables " + in.block_tables.shape().str() + " read as M=" + std::to_string(s.max_blocks_per_seq));
  FUZZ_CHECK(s.num_heads % s.num_kv_heads == 0 && s.head_size % cache_pack_factor(s.cache_dtype) == 0, "accepted H, D");
  FUZZ_CHECK(uint64_t(s.max_context_len) <= uint64_t(s.max_blocks_per_seq) * s.block_size, "max_context_len");

  const uint64_t work = uint64_t(s.num_seqs) * s.num_heads * s.max_context_len * s.head_size;
  if (work > kMaxWork) return 0;
  DecodeResult r;
  try {
    r = reference::decode_attention(in, o, params, want_lse);
  } catch (const Error&) {
    return 0;
  }
  FUZZ_CHECK(r.output.dtype() == in.query.dtype() && r.output.shape() == in.query.shape(),
             "output " + r.output.shape().str() + " for query " + in.query.shape().str());
  if (want_lse)
    FUZZ_CHECK(r.lse.dtype() == DType::f32 && r.lse.shape() == (Shape{q[0], q[1]}), "lse shape " + r.lse.shape().str());
  // Finite, moderate inputs and options give a finite output, whatever the lengths.
  const bool finite_options = std::isfinite(params.scale.value_or(0.0f)) && std::isfinite(params.softcap);
  if (bounded && finite_options && all_finite(in.query) && all_finite(in.alibi_slopes) && all_finite(in.sinks))
    FUZZ_CHECK(all_finite(r.output), "non-finite output from finite inputs");
  return 0;
}

}  // namespace
}  // namespace vkpaged::fuzz

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  FuzzedDataProvider p(data, size);
  return vkpaged::fuzz::run(p);
}
