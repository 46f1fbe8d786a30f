// SPDX-License-Identifier: Apache-2.0
#pragma once
// What a matrix kernel needs from the device beyond its cooperative-matrix extension, checked
// against what the context enabled: a kernel that needs a feature the context lacks is refused
// with a message naming the feature, and the portable kernels run instead.
#include <string>

#include "vk/context_impl.hpp"

namespace vkpaged::detail {

// The VK_NV_cooperative_matrix kernels (the decode matrix modules, fragment_layout.comp): their
// SPIR-V declares the VulkanMemoryModel capability and their atomics use QueueFamily scope, so
// they need vulkanMemoryModel. "" when nothing is missing, else what is and why.
std::string missing_matrix_features(const ContextImpl& impl);

// The VK_KHR_cooperative_matrix kernels (shaders/*_khr.comp): the extension with
// computeFullSubgroups, the memory model, f16 arithmetic and 16-bit storage.
std::string missing_khr_matrix_features(const ContextImpl& impl);

}  // namespace vkpaged::detail
