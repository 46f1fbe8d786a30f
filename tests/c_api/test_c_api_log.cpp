// SPDX-License-Identifier: Apache-2.0
// The log callback through the C API: levels, the filter, the user pointer, replacement and the
// default restored; a callback that tries to replace itself refused; and the promise that lets
// a caller free the previous user data: once vkp_set_log_callback returns, the previous
// callback is neither running nor called again, while another thread sends messages.
#include <gtest/gtest.h>

#include <atomic>
#include <string>
#include <thread>
#include <vector>

#include "c_api/c_api_test_helpers.hpp"
#include "log_message.hpp"
#include "vkpaged/log.hpp"

namespace vkpaged::test {
namespace {

using namespace c_api_helpers;

struct Received {
  uint32_t level;
  std::string message;
};

struct Recorder {
  std::vector<Received> messages;
  static void VKP_CALL callback(uint32_t level, const char* message, void* user_data) {
    static_cast<Recorder*>(user_data)->messages.push_back({level, message});
  }
};

// Every test leaves the default writer in place (which frees the C API's last callback record).
class CApiLogTest : public ::testing::Test {
 protected:
  void TearDown() override { EXPECT_VKP_OK(vkp_set_log_callback(nullptr, nullptr, VKP_LOG_INFO)); }
};

TEST_F(CApiLogTest, CallbackGetsLevelMessageAndUserDataAboveItsMinimum) {
  static_assert(VKP_LOG_DEBUG == 0 && VKP_LOG_INFO == 1 && VKP_LOG_WARNING == 2 && VKP_LOG_ERROR == 3);
  Recorder a, b;
  ASSERT_VKP_OK(vkp_set_log_callback(&Recorder::callback, &a, VKP_LOG_DEBUG));
  detail::log_message(LogLevel::debug, "one");
  detail::log_message(LogLevel::error, "two");
  ASSERT_VKP_OK(vkp_set_log_callback(&Recorder::callback, &b, VKP_LOG_WARNING));
  EXPECT_FALSE(detail::log_enabled(LogLevel::info));
  detail::log_message(LogLevel::info, "below the minimum");
  detail::log_message(LogLevel::warning, "three");
  ASSERT_EQ(a.messages.size(), 2u);
  EXPECT_EQ(a.messages[0].level, uint32_t(VKP_LOG_DEBUG));
  EXPECT_EQ(a.messages[0].message, "one");
  EXPECT_EQ(a.messages[1].level, uint32_t(VKP_LOG_ERROR));
  EXPECT_EQ(a.messages[1].message, "two");
  ASSERT_EQ(b.messages.size(), 1u);
  EXPECT_EQ(b.messages[0].level, uint32_t(VKP_LOG_WARNING));
  EXPECT_EQ(b.messages[0].message, "three");

  // NULL restores the default writer, with the level given: neither recorder hears more.
  ASSERT_VKP_OK(vkp_set_log_callback(nullptr, &a, VKP_LOG_ERROR));
  EXPECT_FALSE(detail::log_enabled(LogLevel::warning));
  EXPECT_TRUE(detail::log_enabled(LogLevel::error));
  detail::log_message(LogLevel::warning, "to nobody");
  EXPECT_EQ(a.messages.size(), 2u);
  EXPECT_EQ(b.messages.size(), 1u);
  // A refused call changes nothing.
  ASSERT_VKP_OK(vkp_set_log_callback(&Recorder::callback, &b, VKP_LOG_DEBUG));
  expect_refused(vkp_set_log_callback(&Recorder::callback, &a, vkp_log_level(9)), "min_level: 9 is not a vkp_log_level");
  detail::log_message(LogLevel::debug, "four");
  EXPECT_EQ(a.messages.size(), 2u);
  ASSERT_EQ(b.messages.size(), 2u);
  EXPECT_EQ(b.messages[1].message, "four");
}

// The callback cannot replace itself: refused with a message, and it stays installed.
TEST_F(CApiLogTest, TheCallbackCannotReplaceItself) {
  struct Attempt {
    vkp_status status = VKP_OK;
    std::string error;
    int calls = 0;
  } attempt;
  const vkp_log_fn replace_me = [](uint32_t, const char*, void* user_data) {
    auto* a = static_cast<Attempt*>(user_data);
    ++a->calls;
    a->status = vkp_set_log_callback(nullptr, nullptr, VKP_LOG_INFO);
    a->error = vkp_last_error();
  };
  ASSERT_VKP_OK(vkp_set_log_callback(replace_me, &attempt, VKP_LOG_DEBUG));
  detail::log_message(LogLevel::info, "first");
  EXPECT_EQ(attempt.status, VKP_ERROR_INVALID_ARGUMENT);
  EXPECT_EQ(attempt.error, "vkp_set_log_callback: called from inside the log callback, which it would replace");
  detail::log_message(LogLevel::info, "second");
  EXPECT_EQ(attempt.calls, 2) << "the callback was replaced from inside itself";
}

// What makes freeing the previous user data safe: after vkp_set_log_callback returns, no call of
// the previous callback is under way or still to come, while another thread logs all along.
TEST_F(CApiLogTest, ThePreviousCallbackIsDoneWhenReplacementReturns) {
  struct Target {
    std::atomic<bool> retired{false};
    std::atomic<int> calls{0};
  };
  static std::atomic<int> calls_after_retirement{0};
  calls_after_retirement = 0;
  const vkp_log_fn count = [](uint32_t, const char*, void* user_data) {
    auto* t = static_cast<Target*>(user_data);
    if (t->retired.load()) ++calls_after_retirement;
    ++t->calls;
  };
  std::vector<std::unique_ptr<Target>> targets;
  targets.push_back(std::make_unique<Target>());
  ASSERT_VKP_OK(vkp_set_log_callback(count, targets.back().get(), VKP_LOG_DEBUG));
  std::atomic<bool> stop{false};
  std::thread sender([&] {
    while (!stop.load()) detail::log_message(LogLevel::debug, "tick");
  });
  for (int i = 0; i < 50; ++i) {
    while (targets.back()->calls.load() == 0) std::this_thread::yield();  // the sender reaches it
    targets.push_back(std::make_unique<Target>());
    ASSERT_VKP_OK(vkp_set_log_callback(count, targets.back().get(), VKP_LOG_DEBUG));
    targets[targets.size() - 2]->retired = true;  // where a caller would free it
  }
  stop = true;
  sender.join();
  EXPECT_EQ(calls_after_retirement.load(), 0);
}

}  // namespace
}  // namespace vkpaged::test
