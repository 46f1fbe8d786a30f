// SPDX-License-Identifier: Apache-2.0
#include "support/mla_kernels.hpp"

#include <algorithm>
#include <iostream>

#include "ops/attention_validation.hpp"
#include "support/decode_case.hpp"
#include "vkpaged/error.hpp"
#include "vkpaged/reference.hpp"

namespace vkpaged::test {

namespace {

std::string label_of(const MlaCase& c, const MlaOptions& o) {
  return c.attention.str() + " Dv " + std::to_string(c.value_head_size) + " R " + std::to_string(c.rope_head_size) +
         (c.form == MlaCacheForm::one_pool ? " one pool" : " two pools") +
         (o.split == SplitMode::split ? " split" : o.split == SplitMode::single_pass ? " one pass" : " auto") + " on " +
         attention_kernel_name(o.kernel);
}

}  // namespace

void MlaKernelTest::SetUp() {
  GpuTest::SetUp();
  if (kernel() != AttentionKernel::matrix) return;
  // A case every kernel takes (f16 queries and cache): what refuses it is the device.
  MlaCase c;
  std::mt19937 rng(1);
  const MlaInputs in = make_mla_inputs(c, rng).mla;
  std::string refusal;
  try {
    MlaPlan::create(ctx(), mla_shape_of(in), detail::host_query_starts(in.query_starts), options());
  } catch (const Error& e) {
    refusal = e.what();
  }
  const DeviceInfo& dev = ctx().device_info();
  if (dev.vendor_id == 0x10de && dev.cooperative_matrix_khr) ASSERT_EQ(refusal, "");
  if (!refusal.empty()) GTEST_SKIP() << refusal;
}

void MlaKernelTest::TearDown() {
  if (!refused_.empty()) {
    std::vector<std::string> reasons = refused_;
    std::sort(reasons.begin(), reasons.end());
    reasons.erase(std::unique(reasons.begin(), reasons.end()), reasons.end());
    std::cout << "[ REFUSED  ] the " << attention_kernel_name(kernel()) << " MLA kernel refused " << refused_.size()
              << " case(s), took " << taken_ << ":\n";
    for (const auto& r : reasons) std::cout << "             " << r << "\n";
    RecordProperty("refused_cases", int(refused_.size()));
  }
  GpuTest::TearDown();
  if (taken_ == 0 && !refused_.empty() && !HasFailure())
    GTEST_SKIP() << "the " << attention_kernel_name(kernel()) << " MLA kernel refused every case: " << refused_.front();
}

MlaOptions MlaKernelTest::options(SplitMode split, uint32_t partition_tokens) const {
  MlaOptions o;
  o.kernel = kernel();
  o.split = split;
  o.partition_tokens = partition_tokens;
  return o;
}

bool MlaKernelTest::check_inputs(const MlaInputs& in, const MlaCase& c, const AttentionParams& params,
                                 const MlaOptions& o) {
  const std::string label = label_of(c, o);
  try {
    const MlaPlan plan = MlaPlan::create(ctx(), mla_shape_of(in, params, true), detail::host_query_starts(in.query_starts), o);
    EXPECT_EQ(plan.kernel(), o.kernel) << plan.describe();
    ++taken_;
  } catch (const Error& e) {
    // Only what the kernel cannot run is a reason to skip; anything else fails the test.
    const std::string what = e.what(), prefix = "kernel: " + attention_kernel_name(o.kernel) + ": ";
    if (e.code() != ErrorCode::unsupported || what.rfind(prefix, 0) != 0) throw;
    EXPECT_NE(what.rfind(prefix + "device ", 0), 0u) << "SetUp admitted a device the kernel refuses: " << what;
    refused_.push_back(what);
    return false;
  }
  const AttentionResult want = reference::mla_attention(in, params, true);
  const AttentionResult got = mla_attention(ctx(), in, params, o, true);
  expect_attention_near(got, want, tolerance(c.attention.query_dtype, c.attention.cache_dtype), true, label);
  return true;
}

bool MlaKernelTest::check(const MlaCase& c, const AttentionParams& params, const MlaOptions& o, uint32_t seed) {
  std::mt19937 rng(seed);
  return check_inputs(make_mla_inputs(c, rng).mla, c, params, o);
}

}  // namespace vkpaged::test
