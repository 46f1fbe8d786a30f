// SPDX-License-Identifier: Apache-2.0
// The log callback (vkpaged/log.hpp): levels and their filter, the user pointer, removal back
// to the default stderr writer, calls that never overlap; and the library's own messages
// (a validation-layer report of a Context's instance, pipeline statistics) arriving there.
#include <gtest/gtest.h>

#include <atomic>
#include <cstdlib>
#include <cstring>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

#include "log_message.hpp"
#include "support/expect_error.hpp"
#include "support/test_context.hpp"
#include "vkpaged/context.hpp"
#include "vkpaged/log.hpp"
#include "vkpaged/utilities.hpp"

namespace vkpaged::test {
namespace {

struct Received {
  LogLevel level;
  std::string message;
};

// What a callback saw; the callback's user pointer points at one of these.
struct Recorder {
  std::vector<Received> messages;

  static void callback(LogLevel level, const char* message, void* user_data) {
    static_cast<Recorder*>(user_data)->messages.push_back({level, message});
  }
  std::vector<std::string> with_prefix(const std::string& prefix) const {
    std::vector<std::string> out;
    for (const auto& m : messages)
      if (m.message.rfind(prefix, 0) == 0) out.push_back(m.message);
    return out;
  }
};

// Every test leaves the default writer in place, whatever it asserted.
class LogTest : public ::testing::Test {
 protected:
  void TearDown() override { set_log_callback(nullptr, nullptr); }
};

TEST_F(LogTest, CallbackGetsLevelMessageAndItsUserPointer) {
  Recorder a, b;
  set_log_callback(&Recorder::callback, &a, LogLevel::debug);
  detail::log_message(LogLevel::debug, "one");
  detail::log_message(LogLevel::error, "two");
  set_log_callback(&Recorder::callback, &b, LogLevel::debug);
  detail::log_message(LogLevel::warning, "three");
  ASSERT_EQ(a.messages.size(), 2u);
  EXPECT_EQ(a.messages[0].level, LogLevel::debug);
  EXPECT_EQ(a.messages[0].message, "one");
  EXPECT_EQ(a.messages[1].level, LogLevel::error);
  EXPECT_EQ(a.messages[1].message, "two");
  ASSERT_EQ(b.messages.size(), 1u);
  EXPECT_EQ(b.messages[0].level, LogLevel::warning);
  EXPECT_EQ(b.messages[0].message, "three");
}

TEST_F(LogTest, LevelsBelowTheMinimumAreDropped) {
  Recorder r;
  set_log_callback(&Recorder::callback, &r, LogLevel::warning);
  EXPECT_FALSE(detail::log_enabled(LogLevel::debug));
  EXPECT_FALSE(detail::log_enabled(LogLevel::info));
  EXPECT_TRUE(detail::log_enabled(LogLevel::warning));
  EXPECT_TRUE(detail::log_enabled(LogLevel::error));
  for (LogLevel level : {LogLevel::debug, LogLevel::info, LogLevel::warning, LogLevel::error})
    detail::log_message(level, to_string(level));
  ASSERT_EQ(r.messages.size(), 2u);
  EXPECT_EQ(r.messages[0].message, "warning");
  EXPECT_EQ(r.messages[1].message, "error");
  EXPECT_EQ(r.messages[1].level, LogLevel::error);
}

// Removing the callback (null) restores the default writer: the message reaches stderr, as
// "vkpaged: <message>", and no longer the removed callback.
TEST_F(LogTest, RemovingTheCallbackRestoresTheStderrWriter) {
  Recorder r;
  set_log_callback(&Recorder::callback, &r);
  ::testing::internal::CaptureStderr();
  detail::log_message(LogLevel::warning, "to the callback");
  set_log_callback(nullptr, nullptr);
  detail::log_message(LogLevel::warning, "to stderr");
  detail::log_message(LogLevel::debug, "below the default level");
  const std::string err = ::testing::internal::GetCapturedStderr();
  ASSERT_EQ(r.messages.size(), 1u);
  EXPECT_EQ(r.messages[0].message, "to the callback");
  EXPECT_EQ(err, "vkpaged: to stderr\n");
}

TEST_F(LogTest, RefusesUnknownLevelsAndReplacingItselfFromInside) {
  expect_refused([] { set_log_callback(&Recorder::callback, nullptr, LogLevel(4)); }, "min_level: 4 is not a log level");
  static std::string refusal;
  refusal.clear();
  set_log_callback(
      [](LogLevel, const char*, void*) {
        try {
          set_log_callback(nullptr, nullptr);
        } catch (const Error& e) {
          refusal = e.what();
        }
      },
      nullptr);
  detail::log_message(LogLevel::error, "x");
  EXPECT_NE(refusal.find("called from inside the log callback"), std::string::npos) << refusal;
}

// A callback that throws loses its message; the caller sees nothing.
TEST_F(LogTest, WhatTheCallbackThrowsIsDropped) {
  static int calls = 0;
  calls = 0;
  set_log_callback([](LogLevel, const char*, void*) { ++calls, throw std::runtime_error("callback failed"); }, nullptr);
  EXPECT_NO_THROW(detail::log_message(LogLevel::error, "x"));
  EXPECT_NO_THROW(detail::log_message(LogLevel::error, "y"));
  EXPECT_EQ(calls, 2);
}

// Messages sent from several threads at once reach the callback one at a time, every one.
TEST_F(LogTest, CallsNeverOverlap) {
  struct Counter {
    std::atomic<int> inside{0};
    int overlaps = 0;  // written inside the callback only: needs no atomic when calls never overlap
    int calls = 0;
  } counter;
  set_log_callback(
      [](LogLevel, const char*, void* user) {
        auto* c = static_cast<Counter*>(user);
        if (c->inside.fetch_add(1) != 0) ++c->overlaps;
        ++c->calls;
        std::this_thread::yield();
        c->inside.fetch_sub(1);
      },
      &counter);
  constexpr int kThreads = 4, kMessages = 200;
  std::vector<std::thread> threads;
  for (int t = 0; t < kThreads; ++t)
    threads.emplace_back([] {
      for (int i = 0; i < kMessages; ++i) detail::log_message(LogLevel::info, "m");
    });
  for (auto& t : threads) t.join();
  set_log_callback(nullptr, nullptr);
  EXPECT_EQ(counter.overlaps, 0);
  EXPECT_EQ(counter.calls, kThreads * kMessages);
}

// A validation-layer report about a Context's device reaches the callback as an error and is
// still counted by that Context. A Context of its own: the shared test context fails any test
// during which its layer reported something.
TEST_F(LogTest, ValidationMessagesOfAContextReachTheCallback) {
  if (!validation_wanted()) GTEST_SKIP() << "VKPAGED_VALIDATION=0: no validation layer";
  ContextOptions options = test_context_options();
  options.validation = true;
  Context context(options);
  Recorder r;
  set_log_callback(&Recorder::callback, &r, LogLevel::warning);
  const uint32_t before = context.validation_message_count();
  // A buffer with no usage flags breaks VUID-VkBufferCreateInfo-usage-requiredbitmask; the
  // layer reports it (and may refuse the call).
  VkBufferCreateInfo info{VK_STRUCTURE_TYPE_BUFFER_CREATE_INFO};
  info.size = 256;
  info.usage = 0;
  info.sharingMode = VK_SHARING_MODE_EXCLUSIVE;
  VkBuffer buffer = VK_NULL_HANDLE;
  const VkResult result = vkCreateBuffer(context.device(), &info, nullptr, &buffer);
  if (result == VK_SUCCESS && buffer != VK_NULL_HANDLE) vkDestroyBuffer(context.device(), buffer, nullptr);
  set_log_callback(nullptr, nullptr);

  const uint32_t counted = context.validation_message_count() - before;
  EXPECT_GE(counted, 1u);
  EXPECT_EQ(r.messages.size(), counted);
  bool named = false;
  for (const auto& m : r.messages) {
    EXPECT_EQ(m.level, LogLevel::error) << m.message;
    EXPECT_EQ(m.message.rfind("validation error: ", 0), 0u) << m.message;
    named = named || m.message.find("VkBufferCreateInfo") != std::string::npos;
  }
  EXPECT_TRUE(named) << "no message names VkBufferCreateInfo";
}

bool has_device_extension(VkPhysicalDevice device, const char* name) {
  uint32_t count = 0;
  vkEnumerateDeviceExtensionProperties(device, nullptr, &count, nullptr);
  std::vector<VkExtensionProperties> extensions(count);
  vkEnumerateDeviceExtensionProperties(device, nullptr, &count, extensions.data());
  for (const auto& e : extensions)
    if (std::strcmp(e.extensionName, name) == 0) return true;
  return false;
}

// VKPAGED_PIPELINE_STATS=1: each new pipeline's compiler statistics, at level info, one message
// per executable; none with the level filter above info.
TEST_F(LogTest, PipelineStatisticsGoToTheCallbackAtLevelInfo) {
  if (!has_device_extension(shared_context().physical_device(), VK_KHR_PIPELINE_EXECUTABLE_PROPERTIES_EXTENSION_NAME))
    GTEST_SKIP() << "the device lacks VK_KHR_pipeline_executable_properties";
  const char* before = std::getenv("VKPAGED_PIPELINE_STATS");
  const std::string saved = before != nullptr ? before : "";
  // Everything up to the second callback creates pipelines (the Context's own, the fill's):
  // with the filter at warning, none of their statistics may arrive.
  Recorder filtered;
  set_log_callback(&Recorder::callback, &filtered, LogLevel::warning);
  ::setenv("VKPAGED_PIPELINE_STATS", "1", 1);
  Context context(test_context_options());
  if (before != nullptr)
    ::setenv("VKPAGED_PIPELINE_STATS", saved.c_str(), 1);
  else
    ::unsetenv("VKPAGED_PIPELINE_STATS");
  DeviceBuffer buffer = context.create_buffer(256);
  const TensorView view = buffer.tensor(DType::f32, Shape({64}));

  context.run_and_wait([&](VkCommandBuffer cmd) { record_fill_random(context, cmd, view, 1); });
  Recorder r;
  set_log_callback(&Recorder::callback, &r, LogLevel::info);
  // Another shader: its pipeline is created now (the fill it runs first reuses the one above).
  const StreamingRead read(context, 4096);
  context.run_and_wait([&](VkCommandBuffer cmd) { read.record(cmd); });
  set_log_callback(nullptr, nullptr);

  EXPECT_TRUE(filtered.messages.empty()) << filtered.messages.front().message;
  const auto stats = r.with_prefix("pipeline ");
  ASSERT_FALSE(stats.empty()) << "no pipeline statistics arrived";
  for (const auto& m : r.messages) EXPECT_EQ(m.level, LogLevel::info) << m.message;
  for (const auto& line : stats) EXPECT_NE(line.find('='), std::string::npos) << line;
  EXPECT_EQ(context.validation_message_count(), 0u);
}

}  // namespace
}  // namespace vkpaged::test
