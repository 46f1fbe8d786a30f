// SPDX-License-Identifier: Apache-2.0
#pragma once
// The decode kernels, for test suites parameterized over them (tests/ops/test_decode.cpp,
// test_decode_order.cpp), each on the cache layouts (KvLayout): a kernel added to
// kDecodeKernels gets every such suite, and kDecodeVariants runs it on every layout. A suite
// skips where the device has no such kernel; a case the kernel refuses (the matrix kernel takes
// 16-bit queries, head sizes that are multiples of 32, 64 on nhd and hnd, ...) is skipped with
// the reason, and a test all of whose cases were refused is reported skipped. The cases are made
// in the vllm layout (decode_case.hpp) and moved to the variant's layout just before they run
// (with_layout); the reference reads them in the vllm layout.
// matrix_khr is the matrix kernel forced through VK_KHR_cooperative_matrix. A Context under a
// Khronos validation layer older than the extension leaves it off (docs/toolchain.md), so its
// tests skip, saying so, in the validated run (ctest sets VKPAGED_VALIDATION=1) and run where
// the validation is off (VKPAGED_VALIDATION=0, as scripts/gpu-test.sh's second pass on a GPU)
// or the layer knows the extension.
#include <gtest/gtest.h>

#include <optional>
#include <ostream>
#include <string>
#include <vector>

#include "ops/decode_tuning.hpp"
#include "support/decode_case.hpp"
#include "support/test_context.hpp"
#include "vkpaged/decode.hpp"

namespace vkpaged {
// How GoogleTest prints a kernel parameter (ctest's test list shows it).
void PrintTo(DecodeKernel kernel, std::ostream* os);
}  // namespace vkpaged

namespace vkpaged::test {

// A decode kernel on a cache layout.
struct DecodeVariant {
  DecodeKernel kernel = DecodeKernel::scalar;
  KvLayout layout = KvLayout::vllm;
};
void PrintTo(const DecodeVariant& variant, std::ostream* os);

// Every kernel on the vllm layout, and every kernel on every layout.
inline constexpr DecodeVariant kDecodeKernels[] = {{DecodeKernel::scalar}, {DecodeKernel::matrix}, {DecodeKernel::matrix_khr}};
inline constexpr DecodeVariant kDecodeVariants[] = {
    {DecodeKernel::scalar, KvLayout::vllm},     {DecodeKernel::scalar, KvLayout::nhd},
    {DecodeKernel::scalar, KvLayout::hnd},      {DecodeKernel::matrix, KvLayout::vllm},
    {DecodeKernel::matrix, KvLayout::nhd},      {DecodeKernel::matrix, KvLayout::hnd},
    {DecodeKernel::matrix_khr, KvLayout::vllm}, {DecodeKernel::matrix_khr, KvLayout::nhd},
    {DecodeKernel::matrix_khr, KvLayout::hnd}};

// "scalar", "matrix", "matrix_khr": test name suffixes (and the name in the kernel's refusals);
// "scalar_nhd", "matrix_hnd" on the other layouts.
std::string decode_kernel_name(DecodeKernel kernel);
std::string decode_variant_name(const DecodeVariant& variant);
inline std::string decode_kernel_param_name(const ::testing::TestParamInfo<DecodeVariant>& info) {
  return decode_variant_name(info.param);
}

// What each kernel is expected to do beyond the shared contract (decode.hpp): the tests check
// that plans agree, so that a kernel which stops doing it fails instead of skipping.
bool merges_in_dispatch(DecodeKernel kernel);  // takes DecodeMerge::in_dispatch (small enough merges)
bool records_timeline(const DecodeVariant& variant);  // DecodeOptions::timeline

class DecodeKernelTest : public GpuTest, public ::testing::WithParamInterface<DecodeVariant> {
 protected:
  // Skips the test where the device has no such kernel (the matrix kernel: no matrix units, or
  // a fragment layout it does not know; on NVIDIA the layout must be known; matrix_khr: no
  // VK_KHR_cooperative_matrix in this Context, and on NVIDIA it must run where the Context has it).
  void SetUp() override;
  // Lists the cases the kernel refused, and reports the test skipped when it took none.
  void TearDown() override;

  DecodeKernel kernel() const { return GetParam().kernel; }
  KvLayout layout() const { return GetParam().layout; }
  // Either matrix kernel (matrix or matrix_khr): what a plan's choice.kernel says for both.
  bool matrix_family() const { return kernel() == DecodeKernel::matrix || kernel() == DecodeKernel::matrix_khr; }
  std::string kernel_name() const { return decode_kernel_name(kernel()); }
  // `o` with this kernel asked for.
  DecodeOptions with_kernel(DecodeOptions o) const;

  // This kernel's plan for the shape (in this variant's layout, whatever shape.kv_layout says)
  // and options (the kernel set here), or std::nullopt when the kernel refuses the shape (noted
  // with its reason). Any other error fails the test. A test none of whose cases the kernel
  // took, and some of which it refused, is reported skipped.
  std::optional<DecodePlan> plan_or_refused(const DecodeShape& shape, DecodeOptions o);

  // decode_attention on inputs made in the vllm layout, moved to this variant's layout first;
  // the options' kernel is left as given.
  DecodeResult run(const DecodeInputs& vllm_inputs, const DecodeOptions& o, const DecodeParams& p = {},
                   bool lse = false);

  // Runs the case on this kernel (its plan asserted to be this kernel's) and the reference,
  // and checks the output (and LSE) within the contract's tolerance. False when refused.
  bool check(const DecodeCase& c, DecodeOptions o, const DecodeParams& p, uint32_t seed = 1, bool lse = false);

 private:
  int taken_ = 0;  // plans the kernel took
  std::vector<std::string> refused_;
};

// The decode planner's tuning of `context` set to `text` (VKPAGED_DECODE_TUNE's form) while the
// object lives, then put back: a knob's other side tested on the shared context.
class DecodeTuningScope {
 public:
  DecodeTuningScope(Context& context, const char* text);
  ~DecodeTuningScope();
  DecodeTuningScope(const DecodeTuningScope&) = delete;
  DecodeTuningScope& operator=(const DecodeTuningScope&) = delete;

 private:
  Context& context_;
  detail::DecodeTuning saved_;
};

// The shape decode_attention plans for these inputs and params (shape.softcap from the params).
DecodeShape shape_for(const DecodeInputs& in, const DecodeParams& params, bool lse = false);

}  // namespace vkpaged::test
