// SPDX-License-Identifier: Apache-2.0
// The scalar kernel's variants that VKPAGED_DECODE_TUNE asks for (decode_kernel.glsl's header:
// fp8conv, f16math, vloads; and vbytes on the nhd and hnd layouts) against the CPU reference on this
// device, each with the shared Context's decode tuning set to it (DecodeTuningScope,
// support/decode_kernels.hpp): block sizes whose value loads take 1 to 16 bytes, head
// sizes, every layout, one pass and split, every feature, and the non-finite rule (NaN and
// infinities in queries, keys and values; E4M3's NaN byte; NaN in every slot a decode must not
// read). Each plan is checked to carry its variant, so that a variant that stops applying fails
// here instead of passing untested.
#include <gtest/gtest.h>

#include <optional>
#include <ostream>
#include <random>
#include <string>
#include <vector>

#include "ops/attention_plan.hpp"
#include "support/decode_case.hpp"
#include "support/decode_check.hpp"
#include "support/decode_kernels.hpp"
#include "support/non_finite_case.hpp"
#include "vkpaged/reference.hpp"

namespace vkpaged::test {
namespace {

// What a plan's choice says of the variants (DecodeChoice::fp8_pairs, f16_keys, f16_values,
// value_loads).
struct Bits {
  bool fp8_pairs = false, f16_keys = false, f16_values = false;
  uint32_t value_loads = 1;
  bool operator==(const Bits&) const = default;
};
constexpr Bits kNone{}, kFp8Pairs{true, false, false}, kF16Both{false, true, true}, kPairsLoads4{true, false, false, 4},
    kF16ValuesLoads8{false, false, true, 8};
std::ostream& operator<<(std::ostream& os, const Bits& b) {
  return os << "{fp8_pairs " << b.fp8_pairs << ", f16_keys " << b.f16_keys << ", f16_values " << b.f16_values
            << ", value_loads " << b.value_loads << "}";
}

struct Variant {
  const char* tune;     // VKPAGED_DECODE_TUNE
  DType query, cache;   // the dtypes it applies to
  Bits bits;            // what its plans carry (on the vllm layout, blocks of 8 tokens or more)
  bool needs_float16;   // shaderFloat16
  bool token_major_only;  // a knob of the nhd and hnd layouts' value loads (vbytes): not run on vllm
};

// How GoogleTest prints the parameter (ctest's test list shows it).
void PrintTo(const Variant& v, std::ostream* os) {
  *os << "VKPAGED_DECODE_TUNE=" << v.tune << ", " << dtype_name(v.query) << " query, " << dtype_name(v.cache) << " cache";
}

std::string variant_name(const ::testing::TestParamInfo<Variant>& info) {
  std::string name = info.param.tune;
  for (char& ch : name)
    if (ch == '=' || ch == ',') ch = '_';
  return name + "_" + std::string(dtype_name(info.param.query)) + "_" + std::string(dtype_name(info.param.cache));
}

class DecodeVariantTest : public GpuTest, public ::testing::WithParamInterface<Variant> {
 protected:
  void SetUp() override {
    GpuTest::SetUp();
    if (GetParam().needs_float16 && !ctx().device_info().shader_float16)
      GTEST_SKIP() << ctx().device_info().name << " has no shaderFloat16";
    tuning_.emplace(ctx(), GetParam().tune);
  }
  void TearDown() override {
    tuning_.reset();
    GpuTest::TearDown();
  }

  // The variant's bits where they apply: the fp8 pairs on every layout, packed f16 keys on every
  // layout, packed f16 values on the vllm layout with blocks of 8 tokens or more.
  Bits expected_bits(KvLayout layout, uint32_t block_size) const {
    Bits bits = GetParam().bits;
    if (layout != KvLayout::vllm || block_size < 8) bits.f16_values = false;
    return bits;
  }
  static Bits bits_of(const DecodePlan& plan) {
    const auto& c = plan.data().choice();
    return Bits{c.fp8_pairs, c.f16_keys, c.f16_values, c.value_loads};
  }

  // The case on this variant's context in `layout`, against the reference.
  void check(DecodeCase c, KvLayout layout, DecodeOptions o, DecodeParams p, uint32_t seed, bool lse = true) {
    c.query_dtype = GetParam().query;
    c.cache_dtype = GetParam().cache;
    if (is_fp8_dtype(c.cache_dtype)) p.k_scale = p.v_scale = c.fp8_scale;
    o.kernel = DecodeKernel::scalar;
    std::mt19937 rng(seed);
    const DecodeInputs vllm = make_decode_inputs(c, rng);
    const DecodeInputs in = with_layout(vllm, layout);
    DecodeShape shape = decode_shape_of(in, lse);
    shape.softcap = p.softcap != 0.0f;
    const DecodePlan plan = DecodePlan::create(ctx(), shape, o);
    const std::string label = c.str() + " " + std::string(kv_layout_name(layout)) + ", " + plan.describe();
    EXPECT_EQ(bits_of(plan), expected_bits(layout, c.block_size)) << label;
    expect_decode_near(decode_attention(ctx(), in, o, p, lse), reference::decode_attention(vllm, o, p, lse),
                       tolerance(c.query_dtype, c.cache_dtype), lse, label);
  }

  // The layouts the variant changes: every one, or nhd and hnd for their value loads' knob.
  std::vector<KvLayout> layouts() const {
    if (GetParam().token_major_only) return {KvLayout::nhd, KvLayout::hnd};
    return {KvLayout::vllm, KvLayout::nhd, KvLayout::hnd};
  }

  std::optional<DecodeTuningScope> tuning_;
};


// Blocks of 1 to 16 tokens (value loads of 1 to 16 bytes on the vllm layout), lengths around
// their edges, head sizes 64 and 256, one pass and split into 256-token partitions. (Each case
// is a pipeline lavapipe compiles: the cases are what the variants' loads and products differ
// on, the features and the rest are the default kernel's, tested in test_decode.cpp.)
TEST_P(DecodeVariantTest, ShapesAndLayoutsMatchTheReference) {
  uint32_t seed = 1;
  for (const KvLayout layout : layouts())
    for (const uint32_t B : {1u, 2u, 8u, 16u}) {
      DecodeCase c;
      c.heads = 8;
      c.kv_heads = 2;
      c.head_size = 64;
      c.block_size = B;
      c.lens = {0, 1, B - 1, B, B + 1, 77, 300};
      DecodeOptions o;
      o.split = B == 8 ? SplitMode::split : SplitMode::automatic;
      o.partition_tokens = B == 8 ? 256 : 0;
      check(c, layout, o, {}, ++seed);
    }
  for (const KvLayout layout : layouts())
    for (const uint32_t D : {256u}) {
      DecodeCase c;
      c.heads = 4;
      c.kv_heads = 1;
      c.head_size = D;
      c.lens = {3, 129, 520};
      check(c, layout, {}, {}, ++seed);
    }
}

// The feature mixes that reach the variants' code (a sliding window masks the loads of its
// first tokens), with none and all of the others, on each layout.
TEST_P(DecodeVariantTest, FeaturesMatchTheReference) {
  for (const FeatureMix& m : feature_mixes())
    for (const KvLayout layout : layouts())
      if (m.seed == 0 || m.seed == 8 || m.seed == 15) check(m.c, layout, m.options, m.params, m.seed);
}

// NaN and infinities in queries, keys and values (E4M3: its NaN byte), and NaN in every slot a
// decode must not read: NaN exactly where the rule says, one pass and split.
TEST_P(DecodeVariantTest, NonFiniteInputsAreNanExactlyWhereTheRuleSays) {
  const Variant& v = GetParam();
  const auto elements = non_finite_elements();
  for (const KvLayout layout : layouts())
    for (const uint32_t window : {0u, 24u}) {
      DecodeCase c = non_finite_case(v.query, v.cache);
      c.sinks = window == 0;
      const auto [clean, dirty] = make_non_finite_inputs(c, elements);
      DecodeOptions o;
      o.sliding_window = window;
      o.kernel = DecodeKernel::scalar;
      const DecodeParams params = default_params(c);
      const NanMask mask = nan_mask(c, dirty, elements, window);
      const DecodeResult want = reference::decode_attention(clean, o, params, true);
      for (const SplitMode split : {SplitMode::single_pass, SplitMode::split}) {
        o.split = split;
        o.partition_tokens = split == SplitMode::split ? 256 : 0;
        const DecodeInputs in = with_layout(dirty, layout);
        const DecodePlan plan = DecodePlan::create(ctx(), decode_shape_of(in, true), o);
        const std::string label = c.str() + " " + std::string(kv_layout_name(layout)) + ", " + plan.describe();
        EXPECT_EQ(bits_of(plan), expected_bits(layout, c.block_size)) << label;
        expect_nan_exactly_where(decode_attention(ctx(), in, o, params, true), want, mask,
                                 tolerance(c.query_dtype, c.cache_dtype), true, label);
      }
    }
}

INSTANTIATE_TEST_SUITE_P(
    Tuned, DecodeVariantTest,
    // Each code path of the variants once: f16math=3 takes both packed-f16 paths, the batched
    // loads run with the fp8 pairs (E4M3's probe) and with packed-f16 values (and, on blocks of
    // fewer than 8 tokens and the nhd/hnd layouts, their plain loads), vbytes takes 4 and 16.
    ::testing::Values(Variant{"fp8conv=1", DType::f16, DType::fp8_e4m3, kFp8Pairs, false, false},
                      Variant{"fp8conv=1", DType::f16, DType::fp8_e5m2, kFp8Pairs, false, false},
                      Variant{"f16math=3", DType::f16, DType::f16, kF16Both, true, false},
                      Variant{"vloads=4,fp8conv=1", DType::f16, DType::fp8_e4m3, kPairsLoads4, false, false},
                      Variant{"vloads=8,f16math=2", DType::f16, DType::f16, kF16ValuesLoads8, true, false},
                      Variant{"vbytes=4", DType::bf16, DType::bf16, kNone, false, true},
                      Variant{"vbytes=16,fp8conv=1", DType::f16, DType::fp8_e4m3, kFp8Pairs, false, true}),
    variant_name);

}  // namespace
}  // namespace vkpaged::test
