// SPDX-License-Identifier: Apache-2.0
// ContextOptions::read_environment (docs/environment.md): vkpaged's variables reach a Context
// only when it asks for them; one created with the defaults, as an engine creates it, reads
// none. The loader's own variables still turn its layers on, and vkpaged sees that.
#include <gtest/gtest.h>

#include <cstring>
#include <string>
#include <vector>

#include "support/decode_case.hpp"
#include "support/expect_error.hpp"
#include "support/scoped_env.hpp"
#include "support/test_context.hpp"
#include "vk/context_impl.hpp"
#include "vk/physical_device.hpp"
#include "vkpaged/decode.hpp"

namespace vkpaged::test {
namespace {

constexpr const char* kValidationLayer = "VK_LAYER_KHRONOS_validation";

// Whether the loader put the validation layer on the Context's instance (it lists the
// instance's layers as device layers).
bool has_validation_layer(const Context& context) {
  uint32_t count = 0;
  vkEnumerateDeviceLayerProperties(context.physical_device(), &count, nullptr);
  std::vector<VkLayerProperties> layers(count);
  vkEnumerateDeviceLayerProperties(context.physical_device(), &count, layers.data());
  for (const auto& l : layers)
    if (std::strcmp(l.layerName, kValidationLayer) == 0) return true;
  return false;
}

class EnvironmentTest : public GpuTest {};

TEST_F(EnvironmentTest, DeviceAndDecodeTuningOnlyWhenAsked) {
  const ScopedEnv device("VKPAGED_DEVICE", "no such device at all");
  const ScopedEnv tune("VKPAGED_DECODE_TUNE", "bogus=1");
  const ScopedEnv stats("VKPAGED_PIPELINE_STATS", "1");
  const DecodeShape shape = plan_shape(2, 8, 2, 64, 100);

  ContextOptions engine;  // the defaults: read_environment off
  engine.validation = validation_wanted();
  EXPECT_FALSE(engine.read_environment) << "the documented default";
  Context quiet(engine);  // VKPAGED_DEVICE would have refused it
  EXPECT_NO_THROW(DecodePlan::create(quiet, shape, {}));  // VKPAGED_DECODE_TUNE would have refused it
  EXPECT_FALSE(quiet.impl().pipeline_statistics);

  ContextOptions told = engine;
  told.read_environment = true;
  expect_refused([&] { Context c(told); }, "VKPAGED_DEVICE: no Vulkan device name contains \"no such device at all\"");
  told.device = std::to_string(list_devices().default_index);  // the option wins over the variable
  Context reading(told);
  expect_refused([&] { DecodePlan::create(reading, shape, {}); }, "VKPAGED_DECODE_TUNE: unknown key \"bogus\"");
  EXPECT_EQ(reading.impl().pipeline_statistics,
            vk::has_device_extension(reading.impl().d, reading.physical_device(),
                                     VK_KHR_PIPELINE_EXECUTABLE_PROPERTIES_EXTENSION_NAME));
}

TEST_F(EnvironmentTest, ValidationOnlyWhenAskedAndTheLoadersLayersSeen) {
  if (!validation_wanted()) GTEST_SKIP() << "VKPAGED_VALIDATION=0: no validation layer";
  const ScopedEnv validation("VKPAGED_VALIDATION", "1");
  const ScopedEnv instance_layers("VK_INSTANCE_LAYERS", nullptr);
  const ScopedEnv loader_layers("VK_LOADER_LAYERS_ENABLE", nullptr);
  ContextOptions o;
  o.device = std::to_string(list_devices().default_index);
  {
    Context quiet(o);
    EXPECT_FALSE(has_validation_layer(quiet));
    EXPECT_EQ(quiet.impl().instance->validation_layer_version(), 0u);
  }
  o.read_environment = true;
  {
    Context reading(o);
    EXPECT_TRUE(has_validation_layer(reading));
    EXPECT_NE(reading.impl().instance->validation_layer_version(), 0u);
    EXPECT_EQ(reading.validation_message_count(), 0u);
  }
  // The loader's variable turns the layer on by itself: vkpaged asks the loader, and knows it is
  // there (an old layer keeps VK_KHR_cooperative_matrix off: vk/physical_device.hpp).
  o.read_environment = false;
  const ScopedEnv loader("VK_INSTANCE_LAYERS", kValidationLayer);
  Context layered(o);
  EXPECT_TRUE(has_validation_layer(layered));
  EXPECT_NE(layered.impl().instance->validation_layer_version(), 0u);
}

}  // namespace
}  // namespace vkpaged::test
