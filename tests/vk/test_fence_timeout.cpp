// SPDX-License-Identifier: Apache-2.0
// The conveniences' fence timeout (ContextOptions::fence_timeout_ms): work that runs past it
// gives Error(device_error) instead of hanging the caller, stays in flight with everything it
// uses (the validation layer would report a buffer freed under it), and the next call waits
// for it first; once one returns normally, the work is done and the Context goes on. How each
// wait result maps to an answer, a lost device included (no test can lose a device), is checked
// on vk::fence_wait_outcome, which every wait goes through.
#include <gtest/gtest.h>

#include <chrono>
#include <cstring>
#include <functional>
#include <string>
#include <vector>

#include "support/expect_error.hpp"
#include "support/test_context.hpp"
#include "vk/context_impl.hpp"
#include "vk/fence_wait.hpp"
#include "vkpaged/error.hpp"

namespace vkpaged::test {
namespace {

// Runs `call` until it returns normally; each failure must be the timeout's device_error.
// Returns how many failed.
int retry_until_done(const std::function<void()>& call) {
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::minutes(2);
  for (int failures = 0;; ++failures) {
    try {
      call();
      return failures;
    } catch (const Error& e) {
      EXPECT_EQ(e.code(), ErrorCode::device_error) << e.what();
      EXPECT_NE(std::string(e.what()).find("ms (ContextOptions::fence_timeout_ms)"), std::string::npos) << e.what();
      if (e.code() != ErrorCode::device_error || std::chrono::steady_clock::now() > deadline) {
        ADD_FAILURE() << "the timed-out work never finished";
        return failures;
      }
    }
  }
}

// Fills `buffer` with `value` after the transfers before it (a barrier between them).
void fill(Context& c, VkCommandBuffer cmd, VkBuffer buffer, uint32_t value) {
  VkMemoryBarrier barrier{VK_STRUCTURE_TYPE_MEMORY_BARRIER};
  barrier.srcAccessMask = VK_ACCESS_TRANSFER_WRITE_BIT;
  barrier.dstAccessMask = VK_ACCESS_TRANSFER_WRITE_BIT;
  c.impl().d.vkCmdPipelineBarrier(cmd, VK_PIPELINE_STAGE_TRANSFER_BIT, VK_PIPELINE_STAGE_TRANSFER_BIT, 0, 1, &barrier, 0,
                                  nullptr, 0, nullptr);
  c.impl().d.vkCmdFillBuffer(cmd, buffer, 0, VK_WHOLE_SIZE, value);
}

// Submits rounds of fills of `buffers` (the last round writes 0x2a2a2a2a into the first),
// twice as many each time one finishes within the Context's timeout, until one does not: a
// handful of rounds times out on lavapipe's CPU, a few thousand on a fast GPU. Returns the
// timeout's error message ("" when even the most rounds finished in time).
std::string run_past_the_timeout(Context& c, const std::vector<VkBuffer>& buffers) {
  for (int rounds = 8; rounds <= 8192; rounds *= 2) {
    try {
      c.run_and_wait([&](VkCommandBuffer cmd) {
        for (int i = 0; i < rounds; ++i)
          for (VkBuffer b : buffers) fill(c, cmd, b, 0x01010101u * uint32_t(i % 200));
        fill(c, cmd, buffers.front(), 0x2a2a2a2au);
      });
    } catch (const Error& e) {
      EXPECT_EQ(e.code(), ErrorCode::device_error) << e.what();
      return e.what();
    }
  }
  return "";
}

class FenceTimeoutTest : public GpuTest {};

TEST_F(FenceTimeoutTest, WorkPastTheTimeoutIsAnErrorAndFinishesSafely) {
  ContextOptions o = test_context_options();
  o.fence_timeout_ms = 1;
  Context c(o);
  constexpr size_t kBytes = size_t(64) << 20;
  DeviceBuffer target = c.create_buffer(kBytes);
  std::optional<DeviceBuffer> victim(c.create_buffer(kBytes));  // destroyed while the work may use it
  const std::string error = run_past_the_timeout(c, {target.handle(), victim->handle()});
  ASSERT_NE(error, "") << "a terabyte of fills finished within 1 ms";
  EXPECT_NE(error.find("did not finish the work within 1 ms"), std::string::npos) << error;
  victim.reset();  // kept alive by the Context until the work is done
  EXPECT_FALSE(c.impl().retired.empty()) << "a buffer the timed-out work uses was freed";
  // The next calls wait for it first; once one returns, the work has finished, all of it.
  retry_until_done([&] { c.run_and_wait([](VkCommandBuffer) {}); });
  uint32_t first = 0, last = 0;
  retry_until_done([&] { c.download(target.view(0, 4), &first, 4); });
  retry_until_done([&] { c.download(target.view(kBytes - 4, 4), &last, 4); });
  EXPECT_EQ(first, 0x2a2a2a2au);
  EXPECT_EQ(last, 0x2a2a2a2au);
  EXPECT_EQ(c.validation_message_count(), 0u) << "the validation layer reported the timed-out work's handling";
}

// Work past the timeout, then the Context destroyed at once: its destructor waits for the work
// before it frees what the work uses (the validation layer, on while the Context lives, would
// report otherwise on stderr; here it must not crash).
TEST_F(FenceTimeoutTest, DestroyingTheContextWaitsForTimedOutWork) {
  ContextOptions o = test_context_options();
  o.fence_timeout_ms = 1;
  auto c = std::make_unique<Context>(o);
  DeviceBuffer target = c->create_buffer(size_t(64) << 20);
  ASSERT_NE(run_past_the_timeout(*c, {target.handle()}), "");
  EXPECT_TRUE(c->impl().has_pending.load());
  target = DeviceBuffer();
  const uint32_t messages = c->validation_message_count();
  EXPECT_EQ(messages, 0u);
  c.reset();
}

// Every wait's VkResult and what the conveniences make of it.
TEST(FenceWait, EachResultMapsToItsAnswer) {
  EXPECT_EQ(vk::fence_wait_outcome(VK_SUCCESS, "wait"), vk::FenceWait::signaled);
  EXPECT_EQ(vk::fence_wait_outcome(VK_TIMEOUT, "wait"), vk::FenceWait::timed_out);
  expect_refused([] { vk::fence_wait_outcome(VK_ERROR_DEVICE_LOST, "vkWaitForFences"); }, ErrorCode::device_error,
                 {"vkWaitForFences: VK_ERROR_DEVICE_LOST", "create a new one"});
  expect_refused([] { vk::fence_wait_outcome(VK_ERROR_OUT_OF_DEVICE_MEMORY, "vkWaitForFences"); },
                 ErrorCode::out_of_memory, {"vkWaitForFences", "VK_ERROR_OUT_OF_DEVICE_MEMORY"});
  EXPECT_EQ(vk::fence_timeout_ns(0), UINT64_MAX) << "0 = no limit";
  EXPECT_EQ(vk::fence_timeout_ns(1500), 1500000000u);
  EXPECT_EQ(ContextOptions{}.fence_timeout_ms, 60000u) << "the documented default";
}

}  // namespace
}  // namespace vkpaged::test
