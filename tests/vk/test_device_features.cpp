// SPDX-License-Identifier: Apache-2.0
// The device features the matrix kernels' SPIR-V needs (the Vulkan memory model), enabled at
// device creation where the device has them and taken from the engine for an adopted device;
// VK_KHR_cooperative_matrix's shapes in DeviceInfo and the reasons it stays off.
#include <gtest/gtest.h>

#include <cstring>

#include "ops/fragment_layout.hpp"
#include "support/decode_case.hpp"
#include "support/test_context.hpp"
#include "vk/context_impl.hpp"
#include "vk/cooperative_matrix_khr.hpp"
#include "vk/matrix_features.hpp"
#include "vk/physical_device.hpp"
#include "vkpaged/error.hpp"
#include "vkpaged/reference.hpp"
#include "vkpaged/utilities.hpp"

namespace vkpaged::test {
namespace {

class DeviceFeaturesTest : public GpuTest {};

ExternalDevice adopt_shared() {
  ExternalDevice ext;
  ext.instance = shared_context().instance();
  ext.physical_device = shared_context().physical_device();
  ext.device = shared_context().device();
  ext.queue_family = shared_context().queue_family();
  return ext;
}

// vkpaged's own device gets the memory model with device scope wherever the device has both,
// and the matrix kernels then miss nothing; where it does not, the refusal names the feature.
TEST_F(DeviceFeaturesTest, MemoryModelIsEnabledWhereTheDeviceHasIt) {
  const auto& impl = ctx().impl();
  const DeviceInfo& info = ctx().device_info();
  const bool both = info.vulkan_memory_model && info.vulkan_memory_model_device_scope;
  EXPECT_EQ(impl.vulkan_memory_model, both);
  EXPECT_EQ(impl.vulkan_memory_model_device_scope, both);
  if (both) {
    EXPECT_EQ(detail::missing_matrix_features(impl), "");
    EXPECT_EQ(impl.memory_model_absent, "");
  } else {
    EXPECT_NE(detail::missing_matrix_features(impl).find("vulkanMemoryModel"), std::string::npos);
  }
}

// An engine that does not say it enabled the memory model gets no matrix kernel: the refusal
// names the feature and the ExternalDevice field, and the NV layout probe is not even run.
// Told that both features are on, the adopted context uses them and the decode still matches.
TEST_F(DeviceFeaturesTest, AdoptedDeviceTakesTheMemoryModelFromTheEngine) {
  const DeviceInfo& info = ctx().device_info();
  {
    Context adopted(adopt_shared());
    EXPECT_FALSE(adopted.impl().vulkan_memory_model);
    const std::string missing = detail::missing_matrix_features(adopted.impl());
    EXPECT_NE(missing.find("vulkanMemoryModel"), std::string::npos) << missing;
    if (info.vulkan_memory_model)
      EXPECT_NE(missing.find("ExternalDevice::vulkan_memory_model"), std::string::npos) << missing;
    EXPECT_NE(detail::matrix_fragment_mismatch(adopted), "");
  }
  if (!info.vulkan_memory_model || !info.vulkan_memory_model_device_scope)
    GTEST_SKIP() << info.name << " lacks the memory model with device scope";
  ExternalDevice ext = adopt_shared();
  ext.vulkan_memory_model = ext.vulkan_memory_model_device_scope = true;
  Context adopted(ext);
  EXPECT_TRUE(adopted.impl().vulkan_memory_model);
  EXPECT_TRUE(adopted.impl().vulkan_memory_model_device_scope);
  EXPECT_EQ(detail::missing_matrix_features(adopted.impl()), "");
  DecodeCase c;
  c.lens = {1, 33, 200};
  std::mt19937 rng(29);
  const DecodeInputs in = make_decode_inputs(c, rng);
  const auto got = decode_attention(adopted, in);
  EXPECT_LE(max_abs_diff(got.output, reference::decode_attention(in).output), tolerance(c.query_dtype, c.cache_dtype));
}

// The memory model without device scope would make vkpaged's Device-scope atomics invalid: refused
// at adoption, naming the missing field.
TEST_F(DeviceFeaturesTest, AdoptionRefusesTheMemoryModelWithoutDeviceScope) {
  if (!ctx().device_info().vulkan_memory_model) GTEST_SKIP() << ctx().device_info().name << " lacks vulkanMemoryModel";
  ExternalDevice ext = adopt_shared();
  ext.vulkan_memory_model = true;
  try {
    Context adopted(ext);
    ADD_FAILURE() << "not refused";
  } catch (const Error& e) {
    EXPECT_EQ(e.code(), ErrorCode::invalid_argument);
    EXPECT_NE(std::string(e.what()).find("vulkan_memory_model_device_scope"), std::string::npos) << e.what();
  }
}

// What DeviceInfo says of VK_KHR_cooperative_matrix agrees with the device's extension list, and
// every listed shape is a real one; where the context left the extension off it says why.
TEST_F(DeviceFeaturesTest, KhrCooperativeMatrixShapesAndTheReasonItIsOff) {
  const DeviceInfo& info = ctx().device_info();
  const auto& impl = ctx().impl();
  const bool extension = vk::has_device_extension(impl.d, impl.physical_device, VK_KHR_COOPERATIVE_MATRIX_EXTENSION_NAME);
  if (!extension) {
    EXPECT_FALSE(info.cooperative_matrix_khr);
    EXPECT_TRUE(info.cooperative_matrix_khr_shapes.empty());
  }
  for (const auto& shape : info.cooperative_matrix_khr_shapes) {
    EXPECT_GT(shape.m * shape.n * shape.k, 0u) << to_string(shape);
    EXPECT_EQ(to_string(shape).find("type "), std::string::npos) << "an unknown component type: " << to_string(shape);
  }
  EXPECT_EQ(impl.cooperative_matrix_khr, impl.cooperative_matrix_khr_absent.empty());
  EXPECT_EQ(detail::missing_khr_matrix_features(impl), impl.cooperative_matrix_khr_absent);
  if (!extension)
    EXPECT_NE(impl.cooperative_matrix_khr_absent.find("no VK_KHR_cooperative_matrix"), std::string::npos)
        << impl.cooperative_matrix_khr_absent;
  if (impl.cooperative_matrix_khr) {
    EXPECT_TRUE(info.cooperative_matrix_khr);
    EXPECT_TRUE(impl.vulkan_memory_model);
    EXPECT_GT(impl.max_subgroup_size, 0u);
  }
  // An adopted device whose engine did not enable the extension is not queried for it at all.
  Context adopted(adopt_shared());
  EXPECT_FALSE(adopted.device_info().cooperative_matrix_khr);
  EXPECT_TRUE(adopted.device_info().cooperative_matrix_khr_shapes.empty());
  EXPECT_NE(detail::missing_khr_matrix_features(adopted.impl()).find("ExternalDevice::cooperative_matrix_khr"),
            std::string::npos);
}

// The Khronos validation layer's version is what decides whether the KHR structures may be
// passed: it is read from the layer vkpaged turned on.
TEST_F(DeviceFeaturesTest, ValidationLayerVersionIsKnown) {
  const auto& instance = *ctx().impl().instance;
  if (!validation_wanted()) GTEST_SKIP() << "validation is off (VKPAGED_VALIDATION=0)";
  uint32_t count = 0;
  vkEnumerateInstanceLayerProperties(&count, nullptr);
  std::vector<VkLayerProperties> layers(count);
  vkEnumerateInstanceLayerProperties(&count, layers.data());
  uint32_t installed = 0;
  for (const auto& l : layers)
    if (std::strcmp(l.layerName, "VK_LAYER_KHRONOS_validation") == 0) installed = l.specVersion;
  ASSERT_NE(installed, 0u);
  EXPECT_EQ(instance.validation_layer_version(), installed);
  EXPECT_EQ(vk::layers_accept_cooperative_matrix_khr(instance), installed >= vk::kFirstLayerKnowingCooperativeMatrixKhr);
}

TEST(CooperativeMatrixShapeText, NamesComponentTypesAndScopes) {
  EXPECT_EQ(cooperative_matrix_component_name(0), "f16");
  EXPECT_EQ(cooperative_matrix_component_name(1), "f32");
  EXPECT_EQ(cooperative_matrix_component_name(3), "s8");
  EXPECT_EQ(cooperative_matrix_component_name(7), "u8");
  EXPECT_EQ(cooperative_matrix_component_name(1000141000), "bf16");
  EXPECT_EQ(cooperative_matrix_component_name(1000491002), "e4m3");
  EXPECT_EQ(cooperative_matrix_component_name(1000491003), "e5m2");
  EXPECT_EQ(cooperative_matrix_component_name(12345), "type 12345");
  CooperativeMatrixShape s;
  s.m = 16;
  s.n = 8;
  s.k = 16;
  s.a_type = s.b_type = 0;
  s.c_type = s.result_type = 1;
  s.scope = 3;
  EXPECT_EQ(to_string(s), "16x8x16 f16 x f16 + f32 -> f32, subgroup");
  s.a_type = s.b_type = 3;
  s.c_type = s.result_type = 5;
  s.saturating_accumulation = true;
  EXPECT_EQ(to_string(s), "16x8x16 s8 x s8 + s32 -> s32, subgroup, saturating");
}

}  // namespace
}  // namespace vkpaged::test
