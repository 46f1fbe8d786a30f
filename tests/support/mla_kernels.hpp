// SPDX-License-Identifier: Apache-2.0
#pragma once
// The MLA attention kernels, for test suites parameterized over them (tests/ops/test_mla_attention*.cpp),
// as attention_kernels.hpp is for the multi-query kernels: the portable kernel (scalar) always,
// the tensor-core kernel (matrix) where the device runs it. A suite skips on the matrix kernel
// where the device cannot run it at all (no VK_KHR_cooperative_matrix, as on Mesa 22.3's
// lavapipe); a case it refuses (f32 queries or caches) is skipped with the reason, and a test all
// of whose cases were refused is reported skipped.
#include <gtest/gtest.h>

#include <random>
#include <string>
#include <vector>

#include "support/attention_kernels.hpp"
#include "support/mla_case.hpp"
#include "support/test_context.hpp"
#include "vkpaged/mla_attention.hpp"

namespace vkpaged::test {

inline constexpr AttentionKernel kMlaKernels[] = {AttentionKernel::scalar, AttentionKernel::matrix};

class MlaKernelTest : public GpuTest, public ::testing::WithParamInterface<AttentionKernel> {
 protected:
  // Skips the test where the device cannot run the kernel at all; on an NVIDIA device with
  // VK_KHR_cooperative_matrix enabled the matrix kernel must run.
  void SetUp() override;
  // Lists the cases the kernel refused, and reports the test skipped when it took none.
  void TearDown() override;

  AttentionKernel kernel() const { return GetParam(); }
  // Options that ask for this kernel.
  MlaOptions options(SplitMode split = SplitMode::automatic, uint32_t partition_tokens = 0) const;
  MlaOptions single_pass() const { return options(SplitMode::single_pass); }
  MlaOptions split_by(uint32_t partition_tokens) const { return options(SplitMode::split, partition_tokens); }

  // Runs the inputs on this kernel (the plan asserted to be this kernel's) and the reference, and
  // checks output and LSE within the contract's tolerance. False when the kernel refused them.
  bool check_inputs(const MlaInputs& in, const MlaCase& c, const AttentionParams& params, const MlaOptions& options);
  // The same on the case's random inputs.
  bool check(const MlaCase& c, const AttentionParams& params, const MlaOptions& options, uint32_t seed);

 private:
  int taken_ = 0;
  std::vector<std::string> refused_;
};

}  // namespace vkpaged::test
