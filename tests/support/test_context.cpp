// SPDX-License-Identifier: Apache-2.0
#include "support/test_context.hpp"

#include <gtest/gtest.h>

#include <cstdlib>
#include <functional>
#include <memory>
#include <mutex>
#include <vector>

namespace vkpaged::test {

bool validation_wanted() {
  // Tests run with validation unless the environment says otherwise (VKPAGED_VALIDATION=0).
  const char* v = std::getenv("VKPAGED_VALIDATION");
  return v == nullptr || std::string(v) != "0";
}

ContextOptions test_context_options() {
  ContextOptions o;
  o.validation = validation_wanted();
  o.read_environment = true;
  // A software device running the tensor-core kernels on a loaded CPU can take longer than the
  // default minute for one submission: VKPAGED_TEST_FENCE_TIMEOUT_MS raises the limit.
  if (const char* ms = std::getenv("VKPAGED_TEST_FENCE_TIMEOUT_MS")) o.fence_timeout_ms = uint32_t(std::strtoul(ms, nullptr, 10));
  return o;
}

namespace {

std::mutex shared_mutex;
std::unique_ptr<Context> shared;
std::vector<std::function<void()>> dependents;  // destroyed first, the last made first

// The shared Context is destroyed when the tests end, before exit() runs the static destructors
// and the handlers the driver registered: a device destroyed among those crashed the test binary
// on the H200 after its last test.
class SharedContextTearDown : public ::testing::Environment {
 public:
  void TearDown() override {
    std::lock_guard lock(shared_mutex);
    while (!dependents.empty()) {
      dependents.back()();
      dependents.pop_back();
    }
    shared.reset();
  }
};

[[maybe_unused]] const ::testing::Environment* const shared_context_teardown =
    ::testing::AddGlobalTestEnvironment(new SharedContextTearDown);

}  // namespace

void destroy_before_shared_context(std::function<void()> destroy) {
  std::lock_guard lock(shared_mutex);
  dependents.push_back(std::move(destroy));
}

Context& shared_context() {
  std::lock_guard lock(shared_mutex);
  if (!shared) shared = std::make_unique<Context>(test_context_options());
  return *shared;
}

ExternalDevice shared_device_without_addresses() {
  ExternalDevice ext;
  ext.instance = shared_context().instance();
  ext.physical_device = shared_context().physical_device();
  ext.device = shared_context().device();
  ext.queue_family = shared_context().queue_family();
  ext.buffer_device_address = false;
  return ext;
}

}  // namespace vkpaged::test
