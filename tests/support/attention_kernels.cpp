// SPDX-License-Identifier: Apache-2.0
#include "support/attention_kernels.hpp"

#include <algorithm>
#include <iostream>
#include <random>

#include "ops/attention_validation.hpp"
#include "support/decode_case.hpp"
#include "vkpaged/error.hpp"
#include "vkpaged/reference.hpp"

namespace vkpaged {
void PrintTo(AttentionKernel kernel, std::ostream* os) { *os << test::attention_kernel_name(kernel); }
}  // namespace vkpaged

namespace vkpaged::test {

std::string attention_kernel_name(AttentionKernel kernel) {
  switch (kernel) {
    case AttentionKernel::automatic: return "automatic";
    case AttentionKernel::decode: return "decode";
    case AttentionKernel::scalar: return "scalar";
    case AttentionKernel::matrix: return "matrix";
  }
  return "unknown";
}

void AttentionKernelTest::SetUp() {
  GpuTest::SetUp();
  if (kernel() != AttentionKernel::matrix) return;
  // A case every kernel takes: what refuses it is the device.
  AttentionCase c;
  std::mt19937 rng(1);
  const AttentionInputs in = make_attention_inputs(c, rng);
  std::string refusal;
  try {
    AttentionPlan::create(ctx(), attention_shape_of(in), detail::host_query_starts(in.query_starts), options());
  } catch (const Error& e) {
    refusal = e.what();
  }
  const DeviceInfo& dev = ctx().device_info();
  if (dev.vendor_id == 0x10de && dev.cooperative_matrix_khr) ASSERT_EQ(refusal, "");
  if (!refusal.empty()) GTEST_SKIP() << refusal;
}

void AttentionKernelTest::TearDown() {
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

AttentionKernel automatic_multi_query_kernel(Context& ctx, const AttentionShape& shape,
                                             std::span<const int32_t> query_starts) {
  AttentionOptions matrix;
  matrix.kernel = AttentionKernel::matrix;
  try {
    (void)AttentionPlan::create(ctx, shape, query_starts, matrix);
    return AttentionKernel::matrix;
  } catch (const Error& e) {
    if (e.code() != ErrorCode::unsupported) throw;
    return AttentionKernel::scalar;
  }
}

AttentionOptions AttentionKernelTest::options(SplitMode split, uint32_t partition_tokens) const {
  AttentionOptions o;
  o.kernel = kernel();
  o.split = split;
  o.partition_tokens = partition_tokens;
  return o;
}

std::optional<AttentionPlan> AttentionKernelTest::plan_or_refused(const AttentionShape& shape,
                                                                  std::span<const int32_t> query_starts,
                                                                  const AttentionOptions& o) {
  try {
    AttentionPlan plan = AttentionPlan::create(ctx(), shape, query_starts, o);
    EXPECT_EQ(plan.kernel(), o.kernel) << plan.describe();
    ++taken_;
    return plan;
  } catch (const Error& e) {
    // Only what the kernel cannot run is a reason to skip; anything else fails the test.
    const std::string what = e.what(), prefix = "kernel: " + attention_kernel_name(o.kernel) + ": ";
    if (e.code() != ErrorCode::unsupported || what.rfind(prefix, 0) != 0) throw;
    EXPECT_NE(what.rfind(prefix + "device ", 0), 0u) << "SetUp admitted a device the kernel refuses: " << what;
    refused_.push_back(what);
    return std::nullopt;
  }
}

bool AttentionKernelTest::check_inputs(const AttentionCase& c, const AttentionInputs& in, const AttentionParams& params,
                                       const AttentionOptions& o, bool lse) {
  if (!plan_or_refused(attention_shape_of(in, params, lse), detail::host_query_starts(in.query_starts), o)) return false;
  const AttentionResult want = reference::batch_attention(in, params, lse);
  const AttentionResult got = batch_attention(ctx(), in, params, o, lse);
  expect_attention_near(got, want, tolerance(c.query_dtype, c.cache_dtype), lse, c.str() + " on " + kernel_name());
  return true;
}

bool AttentionKernelTest::check(const AttentionCase& c, const AttentionParams& params, const AttentionOptions& o,
                                uint32_t seed, bool lse) {
  std::mt19937 rng(seed);
  return check_inputs(c, make_attention_inputs(c, rng), params, o, lse);
}

}  // namespace vkpaged::test
