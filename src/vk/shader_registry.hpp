#pragma once
// An embedded SPIR-V module (see cmake/EmbedShaders.cmake).
#include <cstddef>
#include <cstdint>

namespace vkpaged::vk {

struct ShaderRegistration {
  const char* name;
  const uint32_t* code;
  size_t words;
};

}  // namespace vkpaged::vk
