// SPDX-License-Identifier: Apache-2.0
// Non-finite inputs are not hidden (docs/contract.md, Decode step 9), on every path and in the
// CPU reference alike: a NaN or an infinity in a query, or in the key or value of an attended
// position, makes exactly the outputs it reaches NaN (never 0, never Inf); NaN in positions not
// attended (past a length, before a window, in unused block-table entries) changes nothing.
// The outputs that must be NaN are worked out from the rule (support/non_finite_case.hpp);
// every other output must match the reference of the same inputs without the non-finite ones.
// The scalar kernel runs everywhere; the matrix kernel where the device has it (an NVIDIA
// GPU), else those tests skip. Merges (merge_attention) follow the same rule.
#include <gtest/gtest.h>

#include <cmath>
#include <limits>
#include <random>
#include <span>
#include <string>

#include "support/decode_case.hpp"
#include "support/non_finite_case.hpp"
#include "support/test_context.hpp"
#include "vkpaged/error.hpp"
#include "vkpaged/merge.hpp"
#include "vkpaged/reference.hpp"

namespace vkpaged::test {
namespace {

constexpr double kNaN = std::numeric_limits<double>::quiet_NaN();
constexpr double kInf = std::numeric_limits<double>::infinity();

struct Path {
  const char* name;
  DecodeKernel kernel;
  SplitMode split;
  uint32_t partition_tokens;
  DecodeMerge merge;
};

// Feature mixes, each with LSE: the soft cap (whose tanh would make an infinity finite), sinks,
// ALiBi and a sliding window of 24 (which leaves some of the elements unattended).
struct Mix {
  const char* name;
  float softcap;
  bool sinks;
  bool alibi;
  uint32_t window;
};
constexpr Mix kMixes[] = {{"plain", 0.0f, false, false, 0},
                          {"softcap+sinks", 5.0f, true, false, 0},
                          {"alibi+window", 0.0f, false, true, 24}};

// The reference (exactly) and each path (within the tolerance) against the rule, for every mix.
void check_paths(Context* ctx, DType query, DType cache, std::span<const Path> paths) {
  const auto elements = non_finite_elements();
  for (const Mix& mix : kMixes) {
    DecodeCase c = non_finite_case(query, cache);
    c.sinks = mix.sinks;
    c.alibi = mix.alibi;
    const auto [clean, dirty] = make_non_finite_inputs(c, elements);
    DecodeOptions o;
    o.sliding_window = mix.window;
    DecodeParams params = default_params(c);
    params.softcap = mix.softcap;
    const NanMask mask = nan_mask(c, dirty, elements, mix.window);
    const std::string label = c.str() + " " + mix.name;
    const DecodeResult want = reference::decode_attention(clean, o, params, true);
    expect_nan_exactly_where(reference::decode_attention(dirty, o, params, true), want, mask, 0.0, true, label + ", reference");
    if (ctx == nullptr) continue;
    for (const Path& p : paths) {
      o.kernel = p.kernel;
      o.split = p.split;
      o.partition_tokens = p.partition_tokens;
      o.merge = p.merge;
      const DecodeResult got = decode_attention(*ctx, dirty, o, params, true);
      expect_nan_exactly_where(got, want, mask, tolerance(query, cache), true, label + ", " + p.name);
    }
  }
}

constexpr Path kScalarPaths[] = {
    {"scalar one pass", DecodeKernel::scalar, SplitMode::single_pass, 0, DecodeMerge::reduce_pass},
    {"scalar split (reduce pass)", DecodeKernel::scalar, SplitMode::split, 256, DecodeMerge::reduce_pass},
};
constexpr Path kMatrixPaths[] = {
    {"matrix one pass", DecodeKernel::matrix, SplitMode::single_pass, 0, DecodeMerge::reduce_pass},
    {"matrix split (reduce pass)", DecodeKernel::matrix, SplitMode::split, 256, DecodeMerge::reduce_pass},
    {"matrix split (merged in the dispatch)", DecodeKernel::matrix, SplitMode::split, 256, DecodeMerge::in_dispatch},
};
constexpr Path kMatrixKhrPaths[] = {
    {"matrix_khr one pass", DecodeKernel::matrix_khr, SplitMode::single_pass, 0, DecodeMerge::reduce_pass},
    {"matrix_khr split (reduce pass)", DecodeKernel::matrix_khr, SplitMode::split, 256, DecodeMerge::reduce_pass},
    {"matrix_khr split (merged in the dispatch)", DecodeKernel::matrix_khr, SplitMode::split, 256, DecodeMerge::in_dispatch},
};

// ---- the reference alone (no device) ----

TEST(NonFiniteReference, NanAndInfReachExactlyTheOutputsTheRuleNames) {
  for (auto [q, cache] : {std::pair{DType::f32, DType::f32}, {DType::f16, DType::fp8_e5m2}, {DType::f16, DType::fp8_e4m3}})
    check_paths(nullptr, q, cache, {});
}

// Before: a NaN key gave 0 in the reference (a NaN denominator failed "den > 0"), a NaN query
// silent zeros.
TEST(NonFiniteReference, ANanKeyOrQueryIsNanNotZero) {
  DecodeCase c = non_finite_case(DType::f32, DType::f32);
  std::mt19937 rng(3);
  DecodeInputs in = make_decode_inputs(c, rng);
  place(c, in, {NonFinite::Where::key, 2, 0, 10, 0, kNaN});
  place(c, in, {NonFinite::Where::query, 3, 3, 0, 0, kNaN});
  const DecodeResult r = reference::decode_attention(in, {}, {}, true);
  const int64_t D = c.head_size;
  for (int64_t h : {0, 1}) EXPECT_TRUE(std::isnan(r.output.get(size_t((2 * c.heads + h) * D)))) << "key, head " << h;
  EXPECT_TRUE(std::isnan(r.output.get(size_t((3 * c.heads + 3) * D + 5)))) << "query";
  EXPECT_TRUE(std::isnan(r.lse.get(size_t(3 * c.heads + 3))));
  EXPECT_FALSE(std::isnan(r.output.get(size_t((2 * c.heads + 2) * D)))) << "kv group 1 does not attend kv head 0's key";
}

// ---- the scalar kernel (every device) ----

class NonFiniteTest : public GpuTest {};

TEST_F(NonFiniteTest, F32) { check_paths(&ctx(), DType::f32, DType::f32, kScalarPaths); }
TEST_F(NonFiniteTest, F16) { check_paths(&ctx(), DType::f16, DType::f16, kScalarPaths); }
TEST_F(NonFiniteTest, Bf16) { check_paths(&ctx(), DType::bf16, DType::bf16, kScalarPaths); }
TEST_F(NonFiniteTest, Fp8E5m2) { check_paths(&ctx(), DType::f16, DType::fp8_e5m2, kScalarPaths); }
TEST_F(NonFiniteTest, Fp8E4m3) { check_paths(&ctx(), DType::f16, DType::fp8_e4m3, kScalarPaths); }

// ---- the matrix kernel (matrix units; skipped elsewhere) ----

// Skips where `kernel` cannot run a plain f16 case, with the refusal.
void skip_unless_planned(Context& ctx, DecodeKernel kernel) {
  DecodeCase c = non_finite_case(DType::f16, DType::f16);
  std::mt19937 rng(1);
  DecodeOptions o;
  o.kernel = kernel;
  try {
    DecodePlan::create(ctx, decode_shape_of(make_decode_inputs(c, rng)), o);
  } catch (const Error& e) {
    GTEST_SKIP() << e.what();
  }
}

class NonFiniteMatrixTest : public GpuTest {
 protected:
  void SetUp() override {
    GpuTest::SetUp();
    const DeviceInfo& dev = ctx().device_info();
    if (!dev.cooperative_matrix && !dev.cooperative_matrix_khr) GTEST_SKIP() << dev.name << " has no matrix units";
    skip_unless_planned(ctx(), DecodeKernel::matrix);
  }
};

// The matrix kernel through VK_KHR_cooperative_matrix (DecodeKernel::matrix_khr): skipped where
// the Context has no such extension (under a validation layer older than it, among others).
class NonFiniteMatrixKhrTest : public GpuTest {
 protected:
  void SetUp() override {
    GpuTest::SetUp();
    if (!ctx().device_info().cooperative_matrix_khr)
      GTEST_SKIP() << "this Context has no VK_KHR_cooperative_matrix (run with VKPAGED_VALIDATION=0 on a device that has it)";
    skip_unless_planned(ctx(), DecodeKernel::matrix_khr);
  }
};

TEST_F(NonFiniteMatrixTest, F16) { check_paths(&ctx(), DType::f16, DType::f16, kMatrixPaths); }
TEST_F(NonFiniteMatrixTest, Bf16) { check_paths(&ctx(), DType::bf16, DType::bf16, kMatrixPaths); }
TEST_F(NonFiniteMatrixTest, Bf16QueryF16Cache) { check_paths(&ctx(), DType::bf16, DType::f16, kMatrixPaths); }
TEST_F(NonFiniteMatrixTest, Fp8E5m2) { check_paths(&ctx(), DType::f16, DType::fp8_e5m2, kMatrixPaths); }
TEST_F(NonFiniteMatrixTest, Fp8E4m3) { check_paths(&ctx(), DType::f16, DType::fp8_e4m3, kMatrixPaths); }

TEST_F(NonFiniteMatrixKhrTest, F16) { check_paths(&ctx(), DType::f16, DType::f16, kMatrixKhrPaths); }
TEST_F(NonFiniteMatrixKhrTest, Bf16) { check_paths(&ctx(), DType::bf16, DType::bf16, kMatrixKhrPaths); }
TEST_F(NonFiniteMatrixKhrTest, Bf16QueryF16Cache) { check_paths(&ctx(), DType::bf16, DType::f16, kMatrixKhrPaths); }
TEST_F(NonFiniteMatrixKhrTest, Fp8E5m2) { check_paths(&ctx(), DType::f16, DType::fp8_e5m2, kMatrixKhrPaths); }
TEST_F(NonFiniteMatrixKhrTest, Fp8E4m3) { check_paths(&ctx(), DType::f16, DType::fp8_e4m3, kMatrixKhrPaths); }

// ---- merges ----

// States [S = 1, H = 7, D = 4]: rows with a NaN or +Inf LSE (all NaN), a NaN or infinite
// output element with a finite LSE (that element NaN), an empty side holding NaN outputs (not
// read), and a plain row.
struct MergeStates {
  DecodeResult a, b;
  std::vector<bool> nan_output, nan_lse;
};

MergeStates merge_states_with_non_finite(DType dtype) {
  const int64_t H = 7, D = 4;
  MergeStates m;
  for (DecodeResult* r : {&m.a, &m.b}) {
    r->output = HostTensor(dtype, Shape{1, H, D});
    r->lse = HostTensor(DType::f32, Shape{1, H});
    for (int64_t i = 0; i < H * D; ++i) r->output.set(size_t(i), 0.25 * double(i % 5) - 0.5 + (r == &m.b ? 0.1 : 0.0));
    for (int64_t h = 0; h < H; ++h) r->lse.set(size_t(h), 0.5 * double(h) - 1.0);
  }
  m.nan_output.assign(size_t(H * D), false);
  m.nan_lse.assign(size_t(H), false);
  auto whole_row = [&](int64_t h) {
    m.nan_lse[size_t(h)] = true;
    for (int64_t d = 0; d < D; ++d) m.nan_output[size_t(h * D + d)] = true;
  };
  m.a.lse.set(0, kNaN);  // row 0: a NaN state
  whole_row(0);
  m.b.lse.set(1, kInf);  // row 1: +Inf LSE
  whole_row(1);
  m.a.output.set(size_t(2 * D + 1), kNaN);  // row 2, dim 1: a NaN output element
  m.nan_output[size_t(2 * D + 1)] = true;
  m.b.output.set(size_t(3 * D + 3), -kInf);  // row 3, dim 3: an infinite one gives NaN, not Inf
  m.nan_output[size_t(3 * D + 3)] = true;
  m.a.lse.set(4, -kInf);  // row 4: side a empty, its NaN output not read
  for (int64_t d = 0; d < D; ++d) m.a.output.set(size_t(4 * D + d), kNaN);
  m.a.lse.set(5, -kInf);  // row 5: both empty: zeros, LSE -Inf
  m.b.lse.set(5, -kInf);
  for (int64_t d = 0; d < D; ++d) m.a.output.set(size_t(5 * D + d), 0.0), m.b.output.set(size_t(5 * D + d), 0.0);
  return m;  // row 6: plain
}

void expect_merge_follows_the_rule(const DecodeResult& got, const MergeStates& m, const std::string& label) {
  for (size_t i = 0; i < m.nan_output.size(); ++i) {
    const double g = got.output.get(i);
    if (m.nan_output[i]) EXPECT_TRUE(std::isnan(g)) << label << " output " << i << " = " << g;
    else EXPECT_TRUE(std::isfinite(g)) << label << " output " << i << " = " << g;
  }
  for (size_t h = 0; h < m.nan_lse.size(); ++h) {
    const double g = got.lse.get(h);
    if (m.nan_lse[h]) EXPECT_TRUE(std::isnan(g)) << label << " lse " << h;
    else if (h == 5) EXPECT_TRUE(std::isinf(g) && g < 0) << label << " lse " << h;
    else EXPECT_TRUE(std::isfinite(g)) << label << " lse " << h << " = " << g;
  }
  // The empty side is not read: row 4 is b's.
  for (int64_t d = 0; d < 4; ++d) EXPECT_NEAR(got.output.get(size_t(16 + d)), m.b.output.get(size_t(16 + d)), 1e-2) << label;
}

TEST(NonFiniteMergeReference, ANanStateMergesToNan) {
  for (DType dt : {DType::f32, DType::f16, DType::bf16}) {
    const MergeStates m = merge_states_with_non_finite(dt);
    expect_merge_follows_the_rule(reference::merge_attention(m.a, m.b), m, "reference " + std::string(dtype_name(dt)));
  }
}

TEST_F(NonFiniteTest, ANanStateMergesToNanOnTheDevice) {
  for (DType dt : {DType::f32, DType::f16, DType::bf16}) {
    const MergeStates m = merge_states_with_non_finite(dt);
    const DecodeResult want = reference::merge_attention(m.a, m.b);
    const DecodeResult got = merge_attention(ctx(), m.a, m.b);
    expect_merge_follows_the_rule(got, m, "device " + std::string(dtype_name(dt)));
    for (int64_t i = 0; i < want.output.numel(); ++i)
      if (!std::isnan(want.output.get(size_t(i))))
        EXPECT_NEAR(got.output.get(size_t(i)), want.output.get(size_t(i)), tolerance(dt, dt)) << dtype_name(dt) << " " << i;
  }
}

}  // namespace
}  // namespace vkpaged::test
