// SPDX-License-Identifier: Apache-2.0
#include "support/decode_kernels.hpp"

#include <algorithm>
#include <iostream>
#include <random>

#include "ops/attention_plan.hpp"
#include "support/decode_check.hpp"
#include "vk/matrix_features.hpp"
#include "vkpaged/error.hpp"
#include "vkpaged/reference.hpp"

namespace vkpaged {
void PrintTo(DecodeKernel kernel, std::ostream* os) { *os << test::decode_kernel_name(kernel); }
}  // namespace vkpaged

namespace vkpaged::test {

void PrintTo(const DecodeVariant& variant, std::ostream* os) { *os << decode_variant_name(variant); }

std::string decode_variant_name(const DecodeVariant& variant) {
  const std::string kernel = decode_kernel_name(variant.kernel);
  return variant.layout == KvLayout::vllm ? kernel : kernel + "_" + std::string(kv_layout_name(variant.layout));
}

std::string decode_kernel_name(DecodeKernel kernel) {
  switch (kernel) {
    case DecodeKernel::automatic: return "automatic";
    case DecodeKernel::scalar: return "scalar";
    case DecodeKernel::matrix: return "matrix";
    case DecodeKernel::matrix_khr: return "matrix_khr";
  }
  return "unknown";
}

bool merges_in_dispatch(DecodeKernel kernel) { return kernel == DecodeKernel::matrix || kernel == DecodeKernel::matrix_khr; }
// NV's module on the vllm layout only (the planner refuses the others: "the matrix kernel records
// one on the vllm layout only").
bool records_timeline(const DecodeVariant& variant) {
  return variant.kernel == DecodeKernel::matrix && variant.layout == KvLayout::vllm;
}

DecodeTuningScope::DecodeTuningScope(Context& context, const char* text)
    : context_(context), saved_(detail::decode_tuning(context)) {
  detail::set_decode_tuning(context, detail::parse_decode_tuning(text));
}
DecodeTuningScope::~DecodeTuningScope() { detail::set_decode_tuning(context_, saved_); }

DecodeShape shape_for(const DecodeInputs& in, const DecodeParams& params, bool lse) {
  DecodeShape s = decode_shape_of(in, lse);
  s.softcap = params.softcap != 0.0f;
  return s;
}

void DecodeKernelTest::SetUp() {
  GpuTest::SetUp();
  const DeviceInfo& dev = ctx().device_info();
  if (kernel() == DecodeKernel::matrix_khr && !dev.cooperative_matrix_khr)
    GTEST_SKIP() << "this Context has no VK_KHR_cooperative_matrix ("
                 << detail::missing_khr_matrix_features(ctx().impl())
                 << "); the KHR matrix kernel's tests run with VKPAGED_VALIDATION=0 on a device that has it";
  if (kernel() == DecodeKernel::matrix && !dev.cooperative_matrix && !dev.cooperative_matrix_khr)
    GTEST_SKIP() << dev.name << " has no matrix units for the decode";
  std::string refusal;
  try {
    std::mt19937 rng(1);
    DecodeShape shape = decode_shape_of(make_decode_inputs(DecodeCase{}, rng));
    shape.kv_layout = layout();
    DecodePlan::create(ctx(), shape, with_kernel({}));
  } catch (const Error& e) {
    refusal = e.what();
  }
  // The scalar kernel runs everywhere, on every layout. NVIDIA's fragments have the layout the
  // matrix kernel writes through VK_NV_cooperative_matrix (fragment_layout.cpp), and it reads
  // every cache layout at this head size. Through KHR, NVIDIA's driver keeps B [16 x 8] in
  // another order (measured on the H200, driver 580.159.04): there the KHR path is refused
  // naming that fragment. Elsewhere a different fragment layout is a reason to fall back, not a
  // failure.
  const bool nvidia = dev.vendor_id == 0x10de;
  if (kernel() == DecodeKernel::scalar || (nvidia && kernel() != DecodeKernel::matrix_khr)) ASSERT_EQ(refusal, "");
  if (nvidia && kernel() == DecodeKernel::matrix_khr && !refusal.empty())
    ASSERT_NE(refusal.find("fragment B [16 x 8]"), std::string::npos) << refusal;
  if (!refusal.empty()) GTEST_SKIP() << refusal;
}

void DecodeKernelTest::TearDown() {
  if (!refused_.empty()) {
    std::vector<std::string> reasons = refused_;
    std::sort(reasons.begin(), reasons.end());
    reasons.erase(std::unique(reasons.begin(), reasons.end()), reasons.end());
    std::cout << "[ REFUSED  ] the " << kernel_name() << " kernel refused " << refused_.size() << " case(s), took "
              << taken_ << ":\n";
    for (const auto& r : reasons) std::cout << "             " << r << "\n";
    RecordProperty("refused_cases", int(refused_.size()));
  }
  GpuTest::TearDown();
  if (taken_ == 0 && !refused_.empty() && !HasFailure())
    GTEST_SKIP() << "the " << kernel_name() << " kernel refused every case: " << refused_.front();
}

DecodeOptions DecodeKernelTest::with_kernel(DecodeOptions o) const {
  o.kernel = kernel();
  return o;
}

std::optional<DecodePlan> DecodeKernelTest::plan_or_refused(const DecodeShape& shape, DecodeOptions o) {
  o.kernel = kernel();
  DecodeShape in_layout = shape;
  in_layout.kv_layout = layout();
  try {
    DecodePlan plan = DecodePlan::create(ctx(), in_layout, o);
    EXPECT_EQ(plan.data().choice().kernel, matrix_family() ? DecodeKernel::matrix : kernel()) << plan.describe();
    if (kernel() == DecodeKernel::matrix_khr) EXPECT_TRUE(plan.data().choice().khr) << plan.describe();
    // DecodeKernel::matrix takes NV where the device has it.
    if (kernel() == DecodeKernel::matrix && ctx().device_info().cooperative_matrix)
      EXPECT_FALSE(plan.data().choice().khr) << plan.describe();
    ++taken_;
    return plan;
  } catch (const Error& e) {
    // Only what the kernel cannot run is a reason to skip; a device limit, a refused option or
    // anything else fails the test.
    const std::string what = e.what(), prefix = "kernel: " + kernel_name() + ": ";
    if (e.code() != ErrorCode::unsupported || what.rfind(prefix, 0) != 0) throw;
    EXPECT_NE(what.rfind(prefix + "device ", 0), 0u) << "SetUp admitted a device the kernel refuses: " << what;
    refused_.push_back(what);
    return std::nullopt;
  }
}

DecodeResult DecodeKernelTest::run(const DecodeInputs& vllm_inputs, const DecodeOptions& o, const DecodeParams& p,
                                   bool lse) {
  return decode_attention(ctx(), with_layout(vllm_inputs, layout()), o, p, lse);
}

bool DecodeKernelTest::check(const DecodeCase& c, DecodeOptions o, const DecodeParams& p, uint32_t seed, bool lse) {
  o.kernel = kernel();
  std::mt19937 rng(seed);
  const DecodeInputs in = make_decode_inputs(c, rng);
  if (!plan_or_refused(shape_for(in, p, lse), o)) return false;
  const DecodeResult want = reference::decode_attention(in, o, p, lse);
  const DecodeResult got = run(in, o, p, lse);
  expect_decode_near(got, want, tolerance(c.query_dtype, c.cache_dtype), lse, c.str());
  return true;
}

}  // namespace vkpaged::test
