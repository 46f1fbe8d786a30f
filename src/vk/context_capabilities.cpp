// SPDX-License-Identifier: Apache-2.0
// DeviceCapabilities from a Context: what it enabled (src/context.cpp) and what this build holds.
#include "embedded_shaders.hpp"
#include "vk/context_impl.hpp"
#include "vk/device_capabilities.hpp"

namespace vkpaged::detail {

namespace {

// Every shaders/*_khr.comp is built or none is (cmake/ShaderCompilers.cmake).
bool khr_shaders_built() { return vk::shader_attention_matrix_khr().words != 0 && vk::shader_decode_matrix_khr().words != 0; }

}  // namespace

DeviceCapabilities device_capabilities(const ContextImpl& impl) {
  DeviceCapabilities c;
  c.name = impl.info.name;
  c.compute_units = impl.info.compute_units;
  c.subgroup_size = impl.info.subgroup_size;
  c.subgroup_arithmetic = impl.info.subgroup_arithmetic;
  c.subgroup_shuffle = impl.info.subgroup_shuffle;
  c.max_workgroup_invocations = impl.info.max_workgroup_invocations;
  c.max_shared_memory = impl.info.max_shared_memory;
  c.max_storage_buffer_range = impl.info.max_storage_buffer_range;
  c.buffer_device_address = impl.buffer_device_address;
  c.shader_float16 = impl.shader_float16;
  c.decode_timeline = impl.decode_timeline;
  c.cooperative_matrix = impl.cooperative_matrix;
  c.khr_matrix_refusal = !impl.cooperative_matrix_khr ? impl.cooperative_matrix_khr_absent
                         : !khr_shaders_built()
                             ? "vkpaged was built without a GLSL compiler that knows GL_KHR_cooperative_matrix "
                               "(shaders/*_khr.comp are left out; docs/toolchain.md)"
                             : "";
  c.max_subgroup_size = impl.max_subgroup_size;
  c.cooperative_matrix_khr_shapes = impl.info.cooperative_matrix_khr_shapes;
  // Mesa's llvmpipe (lavapipe) runs every control barrier as a workgroup barrier.
  c.workgroup_sync = impl.info.vendor_id == 0x10005 && impl.info.type == "cpu";
  return c;
}

}  // namespace vkpaged::detail
