// SPDX-License-Identifier: Apache-2.0
#pragma once
// One vkpaged::Context for the whole test binary, with the validation layer on (the ctest
// environment sets VKPAGED_VALIDATION=1). Tests that use the GPU derive from GpuTest, which
// fails the test when the validation layer printed anything while it ran.
#include <gtest/gtest.h>

#include <functional>
#include <random>

#include "vkpaged/context.hpp"

namespace vkpaged::test {

// Whether tests turn the validation layer on: yes unless VKPAGED_VALIDATION=0 (a machine
// without the layer).
bool validation_wanted();

// The options of every Context the tests create: validation as above, and vkpaged's
// environment variables read (VKPAGED_DEVICE, VKPAGED_VALIDATION=sync, VKPAGED_DECODE_TUNE...),
// as the library does only when told (ContextOptions::read_environment).
ContextOptions test_context_options();

// Destroyed when the tests end, before exit (a gtest environment's TearDown): at exit a
// device's teardown may meet a driver already torn down.
Context& shared_context();

// What holds the shared context's device beyond one test (a context adopting it) registers how
// to destroy itself here: it runs at the end of the tests, before the shared context goes.
void destroy_before_shared_context(std::function<void()> destroy);

// The shared context's instance, device and queue as an engine would hand them over, with
// buffer device addresses not enabled: for a Context that adopts them and must refuse what
// needs addresses.
ExternalDevice shared_device_without_addresses();

class GpuTest : public ::testing::Test {
 protected:
  void SetUp() override { messages_before_ = shared_context().validation_message_count(); }
  void TearDown() override {
    EXPECT_EQ(shared_context().validation_message_count(), messages_before_)
        << "the Vulkan validation layer reported messages during this test (see stderr)";
  }
  Context& ctx() { return shared_context(); }

 private:
  uint32_t messages_before_ = 0;
};

}  // namespace vkpaged::test
