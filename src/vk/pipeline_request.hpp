// SPDX-License-Identifier: Apache-2.0
#pragma once
// What one pipeline is made of: a shader, its specialization values, its bindings and its push
// constants. Plans and cache writes describe theirs this way, so that ContextImpl::pipeline
// finds or builds one, and Context::prepare builds many at once before any is recorded.
#include <cstdint>
#include <string>
#include <vector>

#include "vk/shader_registry.hpp"

namespace vkpaged::vk {

struct PipelineRequest {
  const ShaderRegistration* shader = nullptr;
  std::vector<uint32_t> spec;  // specialization constants 0 .. spec.size() - 1
  uint32_t num_bindings = 0;   // storage buffers pushed as descriptors
  uint32_t push_bytes = 0;

  // The registry's key: the shader's name and every specialization value.
  std::string key() const;
};

}  // namespace vkpaged::vk
