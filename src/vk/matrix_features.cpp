// SPDX-License-Identifier: Apache-2.0
#include "vk/matrix_features.hpp"

#include <fmt/format.h>

namespace vkpaged::detail {

std::string missing_matrix_features(const ContextImpl& impl) {
  if (impl.vulkan_memory_model) return "";
  return fmt::format("vulkanMemoryModel is not enabled ({}); the matrix kernels' SPIR-V declares the "
                     "VulkanMemoryModel capability",
                     impl.memory_model_absent);
}

std::string missing_khr_matrix_features(const ContextImpl& impl) { return impl.cooperative_matrix_khr_absent; }

}  // namespace vkpaged::detail
