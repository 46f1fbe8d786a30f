// SPDX-License-Identifier: Apache-2.0
#include "vk/instance.hpp"

#include <cstring>
#include <string>
#include <vector>

#include "log_message.hpp"
#include "vk/check.hpp"
#include "vkpaged/error.hpp"

namespace vkpaged::vk {

namespace {

// The layer's specVersion (the Vulkan header it was built from), 0 when it is not installed.
uint32_t layer_version(const char* name) {
  uint32_t count = 0;
  vkEnumerateInstanceLayerProperties(&count, nullptr);
  std::vector<VkLayerProperties> layers(count);
  vkEnumerateInstanceLayerProperties(&count, layers.data());
  for (const auto& l : layers)
    if (std::strcmp(l.layerName, name) == 0) return l.specVersion == 0 ? 1 : l.specVersion;
  return 0;
}

// The specVersion of the layer as active on the instance, 0 when it is not: asked of the loader,
// which lists every layer it put on the instance (the application's, and those its own
// environment, VK_INSTANCE_LAYERS or VK_LOADER_LAYERS_ENABLE, turned on) as device layers.
uint32_t active_layer_version(VkInstance instance, const char* name) {
  uint32_t count = 0;
  vkEnumeratePhysicalDevices(instance, &count, nullptr);
  if (count == 0) return 0;
  std::vector<VkPhysicalDevice> devices(count);
  vkEnumeratePhysicalDevices(instance, &count, devices.data());
  if (count == 0) return 0;
  uint32_t layer_count = 0;
  vkEnumerateDeviceLayerProperties(devices[0], &layer_count, nullptr);
  std::vector<VkLayerProperties> layers(layer_count);
  vkEnumerateDeviceLayerProperties(devices[0], &layer_count, layers.data());
  for (uint32_t i = 0; i < layer_count; ++i)
    if (std::strcmp(layers[i].layerName, name) == 0) return layers[i].specVersion == 0 ? 1 : layers[i].specVersion;
  return 0;
}

// Whether the loader's instance extensions (layer NULL), or the named layer's, include `name`.
bool has_instance_extension(const char* name, const char* layer = nullptr) {
  uint32_t count = 0;
  vkEnumerateInstanceExtensionProperties(layer, &count, nullptr);
  std::vector<VkExtensionProperties> exts(count);
  vkEnumerateInstanceExtensionProperties(layer, &count, exts.data());
  for (const auto& e : exts)
    if (std::strcmp(e.extensionName, name) == 0) return true;
  return false;
}

constexpr const char* kValidationLayer = "VK_LAYER_KHRONOS_validation";

}  // namespace

Instance::Instance(bool validation, bool require_sync_validation) {
  uint32_t loader_version = VK_API_VERSION_1_0;
  vkEnumerateInstanceVersion(&loader_version);
  if (loader_version < VK_API_VERSION_1_2)
    throw Error(ErrorCode::unsupported, "the Vulkan loader supports only Vulkan 1.0/1.1; vkpaged needs 1.2");

  VkApplicationInfo app{VK_STRUCTURE_TYPE_APPLICATION_INFO};
  app.pApplicationName = "vkpaged";
  app.pEngineName = "vkpaged";
  app.apiVersion = VK_API_VERSION_1_2;

  std::vector<const char*> layers;
  std::vector<const char*> extensions;
  const uint32_t validation_version = layer_version(kValidationLayer);
  if (validation) {
    if (validation_version == 0)
      throw Error(ErrorCode::unsupported,
                  "validation was asked for but VK_LAYER_KHRONOS_validation is not installed (Debian: vulkan-validationlayers)");
    layers.push_back(kValidationLayer);
  }
  const bool debug_utils = validation && has_instance_extension(VK_EXT_DEBUG_UTILS_EXTENSION_NAME);
  if (debug_utils) extensions.push_back(VK_EXT_DEBUG_UTILS_EXTENSION_NAME);
  // Lets the loader list portability drivers (MoltenVK) too.
  VkInstanceCreateFlags flags = 0;
  if (has_instance_extension(VK_KHR_PORTABILITY_ENUMERATION_EXTENSION_NAME)) {
    extensions.push_back(VK_KHR_PORTABILITY_ENUMERATION_EXTENSION_NAME);
    flags |= VK_INSTANCE_CREATE_ENUMERATE_PORTABILITY_BIT_KHR;
  }

  // With validation, synchronization validation too: hazards between dispatches, copies and
  // host access that no barrier orders (the layer provides VK_EXT_validation_features).
  const VkValidationFeatureEnableEXT sync = VK_VALIDATION_FEATURE_ENABLE_SYNCHRONIZATION_VALIDATION_EXT;
  VkValidationFeaturesEXT features{VK_STRUCTURE_TYPE_VALIDATION_FEATURES_EXT};
  features.enabledValidationFeatureCount = 1;
  features.pEnabledValidationFeatures = &sync;
  const bool sync_validation =
      validation && has_instance_extension(VK_EXT_VALIDATION_FEATURES_EXTENSION_NAME, kValidationLayer);
  // VKPAGED_VALIDATION=sync: synchronization validation must run (scripts/gpu-test.sh), not
  // silently stay off with a layer that cannot turn it on.
  if (validation && !sync_validation && require_sync_validation)
    throw Error(ErrorCode::unsupported,
                "VKPAGED_VALIDATION=sync: the validation layer has no VK_EXT_validation_features, so synchronization "
                "validation cannot be turned on");
  if (sync_validation) extensions.push_back(VK_EXT_VALIDATION_FEATURES_EXTENSION_NAME);

  VkInstanceCreateInfo info{VK_STRUCTURE_TYPE_INSTANCE_CREATE_INFO};
  if (sync_validation) info.pNext = &features;
  info.flags = flags;
  info.pApplicationInfo = &app;
  info.enabledLayerCount = uint32_t(layers.size());
  info.ppEnabledLayerNames = layers.data();
  info.enabledExtensionCount = uint32_t(extensions.size());
  info.ppEnabledExtensionNames = extensions.data();
  check(vkCreateInstance(&info, nullptr, &instance_), "vkCreateInstance");
  dispatch_.load_instance(vkGetInstanceProcAddr, instance_);
  validation_layer_version_ = validation ? validation_version : active_layer_version(instance_, kValidationLayer);

  if (debug_utils && dispatch_.vkCreateDebugUtilsMessengerEXT) {
    VkDebugUtilsMessengerCreateInfoEXT m{VK_STRUCTURE_TYPE_DEBUG_UTILS_MESSENGER_CREATE_INFO_EXT};
    m.messageSeverity = VK_DEBUG_UTILS_MESSAGE_SEVERITY_WARNING_BIT_EXT | VK_DEBUG_UTILS_MESSAGE_SEVERITY_ERROR_BIT_EXT;
    m.messageType = VK_DEBUG_UTILS_MESSAGE_TYPE_GENERAL_BIT_EXT | VK_DEBUG_UTILS_MESSAGE_TYPE_VALIDATION_BIT_EXT |
                    VK_DEBUG_UTILS_MESSAGE_TYPE_PERFORMANCE_BIT_EXT;
    m.pfnUserCallback = &Instance::on_message;
    m.pUserData = this;
    VkResult r = dispatch_.vkCreateDebugUtilsMessengerEXT(instance_, &m, nullptr, &messenger_);
    if (r != VK_SUCCESS) {
      dispatch_.vkDestroyInstance(instance_, nullptr);
      throw_vk_error(r, "vkCreateDebugUtilsMessengerEXT");
    }
  }
}

Instance::Instance(VkInstance instance, PFN_vkGetInstanceProcAddr get_instance_proc) : instance_(instance), owned_(false) {
  dispatch_.load_instance(get_instance_proc ? get_instance_proc : vkGetInstanceProcAddr, instance_);
}

Instance::~Instance() {
  if (messenger_ != VK_NULL_HANDLE) dispatch_.vkDestroyDebugUtilsMessengerEXT(instance_, messenger_, nullptr);
  if (owned_ && instance_ != VK_NULL_HANDLE) dispatch_.vkDestroyInstance(instance_, nullptr);
}

VKAPI_ATTR VkBool32 VKAPI_CALL Instance::on_message(VkDebugUtilsMessageSeverityFlagBitsEXT severity,
                                                    VkDebugUtilsMessageTypeFlagsEXT,
                                                    const VkDebugUtilsMessengerCallbackDataEXT* data, void* user) {
  auto* self = static_cast<Instance*>(user);
  self->messages_.fetch_add(1);
  const bool error = (severity & VK_DEBUG_UTILS_MESSAGE_SEVERITY_ERROR_BIT_EXT) != 0;
  const LogLevel level = error ? LogLevel::error : LogLevel::warning;
  if (!detail::log_enabled(level)) return VK_FALSE;
  try {
    detail::log_message(level, std::string(error ? "validation error: " : "validation warning: ") +
                                   (data && data->pMessage ? data->pMessage : "(no message)"));
  } catch (...) {
    // Out of memory for the text: the message is lost, never thrown through the layer.
  }
  return VK_FALSE;
}

}  // namespace vkpaged::vk
