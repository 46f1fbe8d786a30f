// SPDX-License-Identifier: Apache-2.0
#pragma once
// The attention kernels, for test suites parameterized over them (tests/ops/test_attention*.cpp):
// a kernel added to kAttentionKernels gets every such suite. A suite skips where the device
// cannot run the kernel at all (the matrix kernel: no VK_KHR_cooperative_matrix, as on lavapipe
// or under a validation layer older than the extension); a case the kernel refuses (the matrix
// kernel takes f16 and bf16 queries, no f32 cache, pools within one descriptor's range) is
// skipped with the reason, and a test all of whose cases were refused is reported skipped.
#include <gtest/gtest.h>

#include <optional>
#include <ostream>
#include <string>
#include <vector>

#include "support/attention_case.hpp"
#include "support/test_context.hpp"
#include "vkpaged/attention.hpp"

namespace vkpaged {
// How GoogleTest prints a kernel parameter (ctest's test list shows it).
void PrintTo(AttentionKernel kernel, std::ostream* os);
}  // namespace vkpaged

namespace vkpaged::test {

inline constexpr AttentionKernel kAttentionKernels[] = {AttentionKernel::scalar, AttentionKernel::matrix};

// "scalar", "matrix": test name suffixes.
std::string attention_kernel_name(AttentionKernel kernel);
inline std::string attention_kernel_param_name(const ::testing::TestParamInfo<AttentionKernel>& info) {
  return attention_kernel_name(info.param);
}

// The multi-query kernel that AttentionKernel::automatic picks for a shape that is not a batch
// of single tokens: the matrix kernel where this context can run it on the shape, else the
// scalar kernel. Tests that expect a kernel ask this rather than assume the device.
AttentionKernel automatic_multi_query_kernel(Context& ctx, const AttentionShape& shape,
                                             std::span<const int32_t> query_starts);

class AttentionKernelTest : public GpuTest, public ::testing::WithParamInterface<AttentionKernel> {
 protected:
  // Skips the test where the device cannot run the kernel at all; on an NVIDIA device with
  // VK_KHR_cooperative_matrix enabled the matrix kernel must run.
  void SetUp() override;
  // Lists the cases the kernel refused, and reports the test skipped when it took none.
  void TearDown() override;

  AttentionKernel kernel() const { return GetParam(); }
  std::string kernel_name() const { return attention_kernel_name(GetParam()); }
  // Options that ask for this kernel.
  AttentionOptions options(SplitMode split = SplitMode::automatic, uint32_t partition_tokens = 0) const;

  // This kernel's plan, or std::nullopt when the kernel refuses the shape (noted with its
  // reason). Any other error fails the test.
  std::optional<AttentionPlan> plan_or_refused(const AttentionShape& shape, std::span<const int32_t> query_starts,
                                               const AttentionOptions& options);

  // Runs the case's inputs on this kernel (the plan asserted to be this kernel's) and the
  // reference; checks output and LSE within the contract's tolerance. False when refused.
  bool check_inputs(const AttentionCase& c, const AttentionInputs& in, const AttentionParams& params,
                    const AttentionOptions& options, bool lse = true);
  // The same on the case's random inputs.
  bool check(const AttentionCase& c, const AttentionParams& params, const AttentionOptions& options, uint32_t seed = 1,
             bool lse = true);

 private:
  int taken_ = 0;
  std::vector<std::string> refused_;
};

}  // namespace vkpaged::test
