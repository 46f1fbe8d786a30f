// SPDX-License-Identifier: Apache-2.0
// The cascade merge through the C API: recorded with C views, over host arrays, and the
// reference, which agree; refusals name the argument.
#include <cstring>
#include <random>

#include "c_api/c_api_test_helpers.hpp"
#include "ops/cache_test_helpers.hpp"
#include "support/decode_case.hpp"

namespace vkpaged::test {
namespace {

using namespace c_api_helpers;
using cache_helpers::bytes_equal;
using cache_helpers::random_tensor;

class CApiMergeTest : public GpuTest {};

TEST_F(CApiMergeTest, RecordedHostAndReferenceMergesAgree) {
  const int64_t S = 3, H = 4, D = 64;
  const HostTensor out_a = random_tensor(DType::f16, Shape{S, H, D}, 1);
  const HostTensor out_b = random_tensor(DType::f16, Shape{S, H, D}, 2);
  HostTensor lse_a = random_tensor(DType::f32, Shape{S, H}, 3), lse_b = random_tensor(DType::f32, Shape{S, H}, 4);
  for (int64_t i = 0; i < lse_a.numel(); ++i) lse_a.as<float>()[i] *= 4.0f;  // states of unequal weight

  HostTensor want(DType::f16, Shape{S, H, D}), want_lse(DType::f32, Shape{S, H});
  const vkp_host_tensor a = host_view(out_a), la = host_view(lse_a), b = host_view(out_b), lb = host_view(lse_b);
  vkp_host_tensor w = host_view(want), wl = host_view(want_lse);
  ASSERT_VKP_OK(vkp_reference_merge_attention(&a, &la, &b, &lb, &w, &wl));

  HostTensor host(DType::f16, Shape{S, H, D}), host_lse(DType::f32, Shape{S, H});
  vkp_host_tensor h = host_view(host), hl = host_view(host_lse);
  ASSERT_VKP_OK(vkp_merge_attention(c_context(), &a, &la, &b, &lb, &h, &hl));
  EXPECT_LE(max_abs_diff(host, want), 3e-3);
  EXPECT_LE(max_abs_diff(host_lse, want_lse), 1e-5);

  // Recorded with views, the merged output written over output_a's memory, no lse.
  const CTensor d_a = upload(c_context(), out_a), d_la = upload(c_context(), lse_a);
  const CTensor d_b = upload(c_context(), out_b), d_lb = upload(c_context(), lse_b);
  vkp_merge_views views;
  vkp_merge_views_init(&views);
  views.output_a = d_a.view;
  views.lse_a = d_la.view;
  views.output_b = d_b.view;
  views.lse_b = d_lb.view;
  views.output = d_a.view;
  ASSERT_VKP_OK(run(c_context(), [&](VkCommandBuffer cmd) { return vkp_record_merge_attention(c_context(), cmd, &views); }));
  EXPECT_TRUE(bytes_equal(download(c_context(), d_a), host));

  vkp_host_tensor bad = host_view(lse_a);
  bad.shape[1] = 5;
  expect_refused(vkp_merge_attention(c_context(), &a, &bad, &b, &lb, &h, nullptr), "a.lse: shape [3, 5]");
  vkp_host_tensor wrong_output = h;
  wrong_output.dtype = VKP_DTYPE_F32;
  expect_refused(vkp_reference_merge_attention(&a, &la, &b, &lb, &wrong_output, nullptr), "output: f32");
  vkp_merge_views odd = views;
  odd.lse_b.dtype = VKP_DTYPE_F16;
  EXPECT_VKP_OK(run(c_context(), [&](VkCommandBuffer cmd) {
    expect_refused(vkp_record_merge_attention(c_context(), cmd, &odd), "lse_b");
    return VKP_OK;
  }));
}

}  // namespace
}  // namespace vkpaged::test
