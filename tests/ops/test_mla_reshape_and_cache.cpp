// SPDX-License-Identifier: Apache-2.0
// reshape_and_cache for MLA on the GPU against the CPU reference, bit for bit: every cache
// dtype, both cache forms, DeepSeek's Dv = 512 and R = 64 and smaller rows, block sizes 1 to
// 64, ragged token counts, shuffled slots with padding; with RoPE (neox and GPT-J) bit for bit
// against rotary_embedding on the GPU then the write, and against the double reference within
// a rounding step; device-side bad slots and positions; host-side refusals.
#include <fmt/format.h>

#include <algorithm>
#include <deque>
#include <numeric>
#include <optional>

#include "ops/cache_test_helpers.hpp"
#include "vkpaged/mla_cache_ops.hpp"
#include "vkpaged/rotary.hpp"

namespace vkpaged::test {
namespace {

using namespace cache_helpers;

struct MlaWriteCase {
  DType input;
  DType cache;
  MlaCacheForm form;
  int64_t block_size, latent, rope, blocks, tokens;
  DType slot_dtype = DType::i64;
  float scale = 1.0f;
  std::optional<RotaryStyle> style{};  // RoPE on k_pe when given
  int64_t rotary_dim = 0;              // 0: R
};

void PrintTo(const MlaWriteCase& c, std::ostream* os) {
  *os << dtype_name(c.input) << " -> " << dtype_name(c.cache) << (c.form == MlaCacheForm::one_pool ? ", one pool" : ", two pools")
      << ", B " << c.block_size << ", Dv " << c.latent << ", R " << c.rope << ", N " << c.blocks << ", T " << c.tokens
      << ", scale " << c.scale << (c.style ? ", rope " + std::string(rotary_style_name(*c.style)) : "");
}

std::string case_name(const ::testing::TestParamInfo<MlaWriteCase>& info) {
  const auto& c = info.param;
  return fmt::format("{}_to_{}_{}_B{}_Dv{}_R{}_T{}_{}{}", dtype_name(c.input), dtype_name(c.cache),
                     c.form == MlaCacheForm::one_pool ? "one" : "two", c.block_size, c.latent, c.rope, c.tokens,
                     dtype_name(c.slot_dtype), c.style ? "_" + std::string(rotary_style_name(*c.style)) : "");
}

// T distinct slots in shuffled order, about one in five replaced by padding (-1 or the most
// negative value).
HostTensor shuffled_slots(const MlaWriteCase& c, std::mt19937& rng) {
  std::vector<int64_t> all(size_t(c.blocks * c.block_size));
  std::iota(all.begin(), all.end(), 0);
  std::shuffle(all.begin(), all.end(), rng);
  HostTensor slots(c.slot_dtype, Shape{c.tokens});
  const double most_negative = c.slot_dtype == DType::i64 ? -9.2e18 : -2147483648.0;
  for (int64_t t = 0; t < c.tokens; ++t)
    slots.set(size_t(t), rng() % 5 == 0 ? (rng() % 2 ? -1.0 : most_negative) : double(all[size_t(t)]));
  return slots;
}

// The host pools of the case, random, and their device copies.
struct Pools {
  reference::MlaHostCache host;
  DeviceTensor one, ckv, kpe;
  MlaCacheViews views() const { return {one.view, ckv.view, kpe.view}; }
  reference::MlaHostCache download_all(Context& ctx) const {
    reference::MlaHostCache h;
    if (!host.mla_cache.empty()) h.mla_cache = download(ctx, one);
    if (!host.ckv_cache.empty()) h.ckv_cache = download(ctx, ckv);
    if (!host.kpe_cache.empty()) h.kpe_cache = download(ctx, kpe);
    return h;
  }
};
Pools make_pools(Context& ctx, const MlaWriteCase& c, std::mt19937& rng) {
  Pools p;
  if (c.form == MlaCacheForm::one_pool) {
    p.host.mla_cache = random_tensor(c.cache, Shape{c.blocks, c.block_size, c.latent + c.rope}, rng());
    p.one = upload(ctx, p.host.mla_cache);
  } else {
    p.host.ckv_cache = random_tensor(c.cache, Shape{c.blocks, c.block_size, c.latent}, rng());
    p.host.kpe_cache = random_tensor(c.cache, Shape{c.blocks, c.block_size, c.rope}, rng());
    p.ckv = upload(ctx, p.host.ckv_cache);
    p.kpe = upload(ctx, p.host.kpe_cache);
  }
  return p;
}

void expect_pools_equal(const reference::MlaHostCache& got, const reference::MlaHostCache& want, const char* what) {
  if (!want.mla_cache.empty()) EXPECT_TRUE(bytes_equal(got.mla_cache, want.mla_cache)) << what << ": mla_cache";
  if (!want.ckv_cache.empty()) EXPECT_TRUE(bytes_equal(got.ckv_cache, want.ckv_cache)) << what << ": ckv_cache";
  if (!want.kpe_cache.empty()) EXPECT_TRUE(bytes_equal(got.kpe_cache, want.kpe_cache)) << what << ": kpe_cache";
}

// Positions in [0, max_position) at random, and the cos/sin cache.
struct Rope {
  HostTensor positions, cos_sin;
  DeviceTensor d_positions, d_cos_sin;
};
Rope make_rope(Context& ctx, const MlaWriteCase& c, std::mt19937& rng) {
  Rope r;
  const uint32_t max_position = 300;
  r.positions = HostTensor(DType::i64, Shape{c.tokens});
  for (int64_t t = 0; t < c.tokens; ++t) r.positions.set(size_t(t), double(rng() % max_position));
  r.cos_sin = rotary_cos_sin_cache(max_position, uint32_t(c.rotary_dim ? c.rotary_dim : c.rope), 10000.0,
                                   c.input == DType::f32 ? DType::f32 : c.input);
  r.d_positions = upload(ctx, r.positions);
  r.d_cos_sin = upload(ctx, r.cos_sin);
  return r;
}

class MlaReshapeAndCacheTest : public GpuTest, public ::testing::WithParamInterface<MlaWriteCase> {};

TEST_P(MlaReshapeAndCacheTest, MatchesReferenceBitExactly) {
  const MlaWriteCase c = GetParam();
  std::mt19937 rng(uint32_t(c.block_size * 131 + c.latent * 7 + c.tokens + uint32_t(c.cache)));
  // Inputs within the fp8 range once divided by the scale.
  HostTensor kv_c = random_tensor(c.input, Shape{c.tokens, c.latent}, rng());
  HostTensor k_pe = random_tensor(c.input, Shape{c.tokens, c.rope}, rng());
  for (HostTensor* t : {&kv_c, &k_pe})
    for (int64_t i = 0; i < t->numel(); ++i) t->set(size_t(i), t->get(size_t(i)) * 4.0 * c.scale);
  const HostTensor slots = shuffled_slots(c, rng);
  Pools pools = make_pools(ctx(), c, rng);
  auto d_kv_c = upload(ctx(), kv_c), d_k_pe = upload(ctx(), k_pe), d_slots = upload(ctx(), slots);
  auto status = ctx().create_buffer(16);
  const uint32_t zero = 0;
  ctx().upload(status.view(0, 4), &zero, 4);
  const MlaReshapeAndCacheViews v{d_kv_c.view, d_k_pe.view, d_slots.view, pools.views(), status.view(0, 4)};

  if (!c.style) {
    ctx().run_and_wait([&](VkCommandBuffer cmd) { record_mla_reshape_and_cache(ctx(), cmd, v, c.scale); });
    reference::MlaHostCache want = pools.host;
    reference::mla_reshape_and_cache(kv_c, k_pe, slots, want, c.scale);
    expect_pools_equal(pools.download_all(ctx()), want, "pools");
    EXPECT_EQ(read_status(ctx(), status), 0u);
    return;
  }
  const Rope rope = make_rope(ctx(), c, rng);
  const MlaRopeViews rope_views{rope.d_positions.view, rope.d_cos_sin.view, *c.style};
  ctx().run_and_wait([&](VkCommandBuffer cmd) { record_mla_reshape_and_cache(ctx(), cmd, v, c.scale, &rope_views); });
  EXPECT_EQ(read_status(ctx(), status), 0u);
  const reference::MlaHostCache got = pools.download_all(ctx());
  EXPECT_TRUE(bytes_equal(download(ctx(), d_k_pe), k_pe)) << "k_pe is read, not written";
  // 1. Bit for bit what rotary_embedding on the GPU, then the write, stores.
  HostTensor rotated(k_pe.dtype(), Shape{c.tokens, 1, c.rope}), no_query;
  std::memcpy(rotated.data(), k_pe.data(), k_pe.bytes());
  rotary_embedding(ctx(), no_query, rotated, rope.positions, rope.cos_sin, *c.style);
  HostTensor rotated_rows(k_pe.dtype(), k_pe.shape());
  std::memcpy(rotated_rows.data(), rotated.data(), rotated.bytes());
  reference::MlaHostCache want = pools.host;
  reference::mla_reshape_and_cache(kv_c, rotated_rows, slots, want, c.scale);
  expect_pools_equal(got, want, "against rotary_embedding then the write");
  // 2. Against the double-precision reference: one rounding step of the coarser of the input and
  // cache dtypes (the latent bit for bit, nothing rotated there).
  reference::MlaHostCache ref = pools.host;
  const reference::MlaHostRope host_rope{rope.positions, rope.cos_sin, *c.style};
  reference::mla_reshape_and_cache(kv_c, k_pe, slots, ref, c.scale, &host_rope);
  const DType coarser = mantissa_bits(c.cache) < mantissa_bits(c.input) ? c.cache : c.input;
  const double floor = c.cache == DType::fp8_e4m3 ? 0x1p-9 : c.cache == DType::fp8_e5m2 ? 0x1p-16 : 1e-6;
  if (c.form == MlaCacheForm::one_pool) {
    EXPECT_TRUE(values_close(got.mla_cache, ref.mla_cache, coarser, floor)) << "mla_cache against the double reference";
  } else {
    EXPECT_TRUE(bytes_equal(got.ckv_cache, ref.ckv_cache)) << "ckv_cache (nothing rotated)";
    EXPECT_TRUE(values_close(got.kpe_cache, ref.kpe_cache, coarser, floor)) << "kpe_cache against the double reference";
  }
}

std::vector<MlaWriteCase> write_cases() {
  using F = MlaCacheForm;
  std::vector<MlaWriteCase> cases;
  for (F form : {F::one_pool, F::two_pools}) {
    // DeepSeek's rows in every cache dtype.
    cases.push_back({DType::f16, DType::f16, form, 64, 512, 64, 3, 150});
    cases.push_back({DType::bf16, DType::bf16, form, 16, 512, 64, 5, 61, DType::i32});
    cases.push_back({DType::bf16, DType::fp8_e4m3, form, 64, 512, 64, 2, 100, DType::i64, 0.05f});
    cases.push_back({DType::f32, DType::f32, form, 8, 512, 64, 4, 17});
    cases.push_back({DType::f16, DType::fp8_e5m2, form, 16, 512, 64, 4, 33, DType::i32, 0.7f});
    // Small rows, block size 1, one token, no token.
    cases.push_back({DType::f32, DType::f16, form, 1, 32, 16, 40, 37});
    cases.push_back({DType::f16, DType::fp8_e4m3, form, 1, 32, 16, 9, 1, DType::i32, 2.0f});
    cases.push_back({DType::f16, DType::bf16, form, 4, 16, 8, 3, 0});
    // RoPE: neox and GPT-J, every dtype, all of R or part of it.
    cases.push_back({DType::f16, DType::f16, form, 16, 512, 64, 4, 45, DType::i64, 1.0f, RotaryStyle::neox});
    cases.push_back({DType::bf16, DType::bf16, form, 64, 512, 64, 2, 70, DType::i32, 1.0f, RotaryStyle::gptj});
    cases.push_back({DType::bf16, DType::fp8_e4m3, form, 16, 512, 64, 4, 50, DType::i64, 0.05f, RotaryStyle::neox});
    cases.push_back({DType::f32, DType::f32, form, 8, 32, 16, 5, 29, DType::i64, 1.0f, RotaryStyle::gptj, 8});
    cases.push_back({DType::f16, DType::fp8_e5m2, form, 2, 48, 32, 7, 11, DType::i32, 0.3f, RotaryStyle::neox});
  }
  return cases;
}
INSTANTIATE_TEST_SUITE_P(Shapes, MlaReshapeAndCacheTest, ::testing::ValuesIn(write_cases()), case_name);

class MlaReshapeAndCacheDeviceTest : public GpuTest {};

// A slot at or past N * B met on the device is skipped and flagged; a position outside
// [0, max_position) leaves its token alone, slot included, and is flagged.
TEST_F(MlaReshapeAndCacheDeviceTest, BadSlotsAndPositionsAreFlaggedAndSkipped) {
  const MlaWriteCase c{DType::f16, DType::f16, MlaCacheForm::two_pools, 4, 32, 16, 3, 6};
  std::mt19937 rng(5);
  const HostTensor kv_c = random_tensor(c.input, Shape{c.tokens, c.latent}, rng());
  const HostTensor k_pe = random_tensor(c.input, Shape{c.tokens, c.rope}, rng());
  HostTensor slots(DType::i64, Shape{c.tokens});
  for (int64_t t = 0; t < c.tokens; ++t) slots.set(size_t(t), double(t));
  slots.set(2, double(c.blocks * c.block_size));  // one past the last slot
  for (bool with_rope : {false, true}) {
    Pools pools = make_pools(ctx(), c, rng);
    auto d_kv_c = upload(ctx(), kv_c), d_k_pe = upload(ctx(), k_pe), d_slots = upload(ctx(), slots);
    auto status = ctx().create_buffer(16);
    const uint32_t zero = 0;
    ctx().upload(status.view(0, 4), &zero, 4);
    const MlaReshapeAndCacheViews v{d_kv_c.view, d_k_pe.view, d_slots.view, pools.views(), status.view(0, 4)};
    Rope rope = make_rope(ctx(), c, rng);
    rope.positions.set(4, 300.0);  // = max_position
    rope.d_positions = upload(ctx(), rope.positions);
    const MlaRopeViews rope_views{rope.d_positions.view, rope.d_cos_sin.view, RotaryStyle::neox};
    ctx().run_and_wait([&](VkCommandBuffer cmd) {
      record_mla_reshape_and_cache(ctx(), cmd, v, 1.0f, with_rope ? &rope_views : nullptr);
    });
    EXPECT_EQ(read_status(ctx(), status), with_rope ? kStatusBadSlot | kStatusBadPosition : kStatusBadSlot);
    // The reference with the bad tokens as padding.
    HostTensor good_slots = slots;
    good_slots.set(2, -1.0);
    if (with_rope) good_slots.set(4, -1.0);
    HostTensor good_positions = rope.positions;
    good_positions.set(4, 0.0);
    reference::MlaHostCache want = pools.host;
    if (with_rope) {
      HostTensor rotated(k_pe.dtype(), Shape{c.tokens, 1, c.rope}), no_query;
      std::memcpy(rotated.data(), k_pe.data(), k_pe.bytes());
      rotary_embedding(ctx(), no_query, rotated, good_positions, rope.cos_sin, RotaryStyle::neox);
      HostTensor rows(k_pe.dtype(), k_pe.shape());
      std::memcpy(rows.data(), rotated.data(), rotated.bytes());
      reference::mla_reshape_and_cache(kv_c, rows, good_slots, want);
    } else {
      reference::mla_reshape_and_cache(kv_c, k_pe, good_slots, want);
    }
    expect_pools_equal(pools.download_all(ctx()), want, with_rope ? "rope" : "no rope");
    // The host refuses what the device flags, naming it, before writing.
    reference::MlaHostCache untouched = pools.host;
    expect_refused([&] { reference::mla_reshape_and_cache(kv_c, k_pe, slots, untouched); },
                   "slot_mapping[2]: slot 12 is not below N * B = 12");
    const reference::MlaHostRope bad_rope{rope.positions, rope.cos_sin, RotaryStyle::neox};
    expect_refused([&] { reference::mla_reshape_and_cache(kv_c, k_pe, good_slots, untouched, 1.0f, &bad_rope); },
                   "positions[4]: 300 is outside [0, max_position = 300)");
    expect_pools_equal(untouched, pools.host, "refused: nothing written");
  }
}

TEST_F(MlaReshapeAndCacheDeviceTest, RefusesBadArgumentsNamingThem) {
  std::mt19937 rng(9);
  std::deque<DeviceTensor> keep;  // every buffer a view names lives to the end of the test
  auto tensor = [&](DType t, Shape s) -> const DeviceTensor& {
    return keep.emplace_back(upload(ctx(), random_tensor(t, s, rng())));
  };
  const DeviceTensor &kv_c = tensor(DType::f16, Shape{5, 32}), &k_pe = tensor(DType::f16, Shape{5, 16});
  const auto& slots = keep.emplace_back(upload(ctx(), HostTensor(DType::i64, Shape{5})));
  const DeviceTensor& one = tensor(DType::f16, Shape{4, 8, 48});
  const DeviceTensor &ckv = tensor(DType::f16, Shape{4, 8, 32}), &kpe = tensor(DType::f16, Shape{4, 8, 16});
  const MlaReshapeAndCacheViews good{kv_c.view, k_pe.view, slots.view, {one.view, {}, {}}, {}};
  auto refused = [&](const MlaReshapeAndCacheViews& v, const std::string& needle, float scale = 1.0f,
                     const MlaRopeViews* rope = nullptr) {
    expect_refused_recording(
        ctx(), [&](VkCommandBuffer cmd) { record_mla_reshape_and_cache(ctx(), cmd, v, scale, rope); }, needle);
  };
  MlaReshapeAndCacheViews v = good;
  v.cache.ckv_cache = ckv.view;
  refused(v, "mla_cache: given together with ckv_cache or kpe_cache");
  v = good;
  v.cache = {{}, ckv.view, {}};
  refused(v, "kpe_cache: not given");
  v = good;
  v.cache = {{}, ckv.view, tensor(DType::bf16, Shape{4, 8, 16}).view};
  refused(v, "kpe_cache: dtype bf16 differs from ckv_cache's f16");
  v.cache = {{}, ckv.view, tensor(DType::f16, Shape{4, 4, 16}).view};
  refused(v, "kpe_cache: shape [4, 4, 16] does not have ckv_cache's N and B ([4, 8, 32])");
  v.cache = {{}, ckv.view, tensor(DType::f16, Shape{4, 8, 12}).view};
  refused(v, "kpe_cache: R = 12 is not a positive multiple of x = 8 for the f16 cache");
  v = good;
  v.kv_c = tensor(DType::f16, Shape{5, 40}).view;
  refused(v, "k_pe: shape [5, 16] is not [T, R] = [5, 8]");  // Dv 40 leaves R 8 of mla_cache's 48
  v.kv_c = tensor(DType::f16, Shape{5, 48}).view;
  refused(v, "kv_c: Dv = 48 leaves no rotary part in mla_cache's rows of 48");
  v = good;
  v.cache = {{}, ckv.view, kpe.view};
  v.k_pe = tensor(DType::f16, Shape{5, 32}).view;
  refused(v, "k_pe: shape [5, 32] is not [T, R] = [5, 16]");
  v.k_pe = tensor(DType::f32, Shape{5, 16}).view;
  refused(v, "k_pe: dtype f32 differs from kv_c's f16");
  v = good;
  v.cache = {{}, ckv.view, kpe.view};
  v.kv_c = tensor(DType::f16, Shape{5, 1, 32}).view;
  refused(v, "kv_c: shape [5, 1, 32] is not [T, Dv]");
  v = good;
  v.slot_mapping = keep.emplace_back(upload(ctx(), HostTensor(DType::f32, Shape{5}))).view;
  refused(v, "slot_mapping: dtype f32 is not i64 or i32");
  v.slot_mapping = keep.emplace_back(upload(ctx(), HostTensor(DType::i32, Shape{4}))).view;
  refused(v, "slot_mapping: shape [4] is not [T] = [5]");
  v = good;
  v.cache = {tensor(DType::fp8_e4m3, Shape{4, 8, 40}).view, {}, {}};
  refused(v, "mla_cache: R = 8 is not a positive multiple of x = 16 for the fp8_e4m3 cache");
  v.cache = {{}, tensor(DType::fp8_e4m3, Shape{4, 8, 32}).view, tensor(DType::fp8_e4m3, Shape{4, 8, 32}).view};
  v.k_pe = tensor(DType::f16, Shape{5, 32}).view;
  refused(v, "scale: 0 is not a finite scale > 0", 0.0f);
  refused(v, "scale: inf", std::numeric_limits<float>::infinity());
  v = good;
  v.cache = {{}, ckv.view, ckv.buffer.tensor(DType::f16, Shape{4, 8, 16}, 16)};
  refused(v, "kpe_cache: its view overlaps ckv_cache's in one buffer");
  // RoPE: rotary_dim past R, bad positions' dtype.
  const auto& positions = keep.emplace_back(upload(ctx(), HostTensor(DType::i64, Shape{5})));
  const auto& wide = keep.emplace_back(upload(ctx(), rotary_cos_sin_cache(64, 32)));
  MlaRopeViews rope{positions.view, wide.view, RotaryStyle::neox};
  refused(good, "cos_sin_cache: rotary_dim = 32 is more than the head size D = 16", 1.0f, &rope);
  rope.cos_sin_cache = keep.emplace_back(upload(ctx(), rotary_cos_sin_cache(64, 16))).view;
  rope.positions = keep.emplace_back(upload(ctx(), HostTensor(DType::f32, Shape{5}))).view;
  refused(good, "positions: dtype f32 is not i64 or i32", 1.0f, &rope);
}

}  // namespace
}  // namespace vkpaged::test
