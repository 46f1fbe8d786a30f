// SPDX-License-Identifier: Apache-2.0
#pragma once
// An embedded SPIR-V module (see cmake/EmbedShaders.cmake).
#include <cstddef>
#include <cstdint>

namespace vkpaged::vk {

struct ShaderRegistration {
  const char* name;
  const uint32_t* code;
  size_t words;  // 0: the build had no compiler for it (a *_khr.comp shader, see EmbedShaders.cmake)
  // Pipelines are full-subgroup dispatches (VK_PIPELINE_SHADER_STAGE_CREATE_REQUIRE_FULL_SUBGROUPS_BIT):
  // what a VK_KHR_cooperative_matrix module below SPIR-V 1.6 needs.
  bool full_subgroups = false;
};

}  // namespace vkpaged::vk
