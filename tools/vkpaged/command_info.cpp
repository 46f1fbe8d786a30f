// SPDX-License-Identifier: Apache-2.0
// `vkpaged info`: what vkpaged sees on each Vulkan device.
#include <fmt/format.h>
#include <fmt/ostream.h>

#include <cstdlib>

#include "commands.hpp"
#include "vkpaged/context.hpp"
#include "vkpaged/error.hpp"
#include "vkpaged/vkpaged.h"

namespace vkpaged::cli {

namespace {

const char* yes_no(bool v) { return v ? "yes" : "no"; }

std::string bytes_text(uint64_t bytes) {
  if (bytes >= (uint64_t(1) << 30)) return fmt::format("{} bytes ({:.1f} GiB)", bytes, double(bytes) / double(1 << 30));
  if (bytes >= (uint64_t(1) << 20)) return fmt::format("{} bytes ({:.1f} MiB)", bytes, double(bytes) / double(1 << 20));
  if (bytes >= 1024) return fmt::format("{} bytes ({} KiB)", bytes, bytes / 1024);
  return fmt::format("{} bytes", bytes);
}

void print_device(std::ostream& out, const DeviceInfo& d, bool is_default) {
  fmt::print(out, "[{}] {}{}\n", d.index, d.name, is_default ? "   (default)" : "");
  fmt::print(out, "    type {}, Vulkan {}.{}.{}, vendor {:#06x}\n", d.type, VK_API_VERSION_MAJOR(d.api_version),
             VK_API_VERSION_MINOR(d.api_version), VK_API_VERSION_PATCH(d.api_version), d.vendor_id);
  if (!d.driver.empty()) fmt::print(out, "    driver: {}\n", d.driver);
  fmt::print(out, "    subgroup size {}, subgroup arithmetic in compute: {}\n", d.subgroup_size, yes_no(d.subgroup_arithmetic));
  fmt::print(out, "    16-bit storage: {}, 8-bit storage: {}, float16 arithmetic: {}, int64: {}\n", yes_no(d.storage_16bit),
             yes_no(d.storage_8bit), yes_no(d.shader_float16), yes_no(d.shader_int64));
  fmt::print(out, "    buffer device address: {}, push descriptor: {}{}\n", yes_no(d.buffer_device_address),
             yes_no(d.push_descriptor), d.push_descriptor ? "" : " (vkpaged needs it: this device cannot be used)");
  fmt::print(out, "    Vulkan memory model: {} (device scope: {}), VK_NV_cooperative_matrix for the matrix kernel: {}\n",
             yes_no(d.vulkan_memory_model), yes_no(d.vulkan_memory_model_device_scope), yes_no(d.cooperative_matrix));
  if (d.cooperative_matrix_khr_shapes.empty()) {
    fmt::print(out, "    VK_KHR_cooperative_matrix: {}\n", yes_no(d.cooperative_matrix_khr));
  } else {
    fmt::print(out, "    VK_KHR_cooperative_matrix: {}, {} shapes (A x B + C -> result):\n", yes_no(d.cooperative_matrix_khr),
               d.cooperative_matrix_khr_shapes.size());
    for (const auto& shape : d.cooperative_matrix_khr_shapes) fmt::print(out, "      {}\n", to_string(shape));
  }
  fmt::print(out, "    maxStorageBufferRange: {}, maxMemoryAllocationSize: {}\n", bytes_text(d.max_storage_buffer_range),
             bytes_text(d.max_memory_allocation_size));
  fmt::print(out, "    shared memory per workgroup: {}, workgroup invocations: {}, push constants: {} bytes\n",
             bytes_text(d.max_shared_memory), d.max_workgroup_invocations, d.max_push_constants);
  fmt::print(out, "    compute units: {}{}\n", d.compute_units, d.compute_units_reported ? "" : " (estimate)");
  if (d.timestamps)
    fmt::print(out, "    timestamps: yes ({} ns per tick, {} valid bits)\n", d.timestamp_period_ns, d.timestamp_valid_bits);
  else
    fmt::print(out, "    timestamps: no\n");
  fmt::print(out, "    device-local memory: {}\n", bytes_text(d.device_local_bytes));
  if (d.memory_budget)
    fmt::print(out, "    free device-local memory (VK_EXT_memory_budget): {}\n", bytes_text(d.device_local_free_bytes));
  else
    fmt::print(out, "    free device-local memory: not reported (no VK_EXT_memory_budget; sizing uses the heaps' size)\n");
}

}  // namespace

int run_info(std::ostream& out) {
  fmt::print(out, "vkpaged {}\n", vkp_version_string());
  DeviceList list;
  try {
    list = list_devices();
  } catch (const Error& e) {
    // No Vulkan at all is worth reporting, not failing: the CPU reference still works.
    fmt::print(out, "Vulkan devices: none ({})\n", e.what());
    fmt::print(out, "cpu: the CPU reference (--device cpu)\n");
    return 0;
  }
  fmt::print(out, "Vulkan devices: {}\n", list.devices.size());
  for (const auto& d : list.devices) print_device(out, d, d.index == list.default_index);
  if (list.devices.empty()) {
    fmt::print(out, "default: none\n");
  } else {
    fmt::print(out, "default: [{}] {} (discrete, then integrated, virtual, cpu)\n", list.default_index,
               list.devices[list.default_index].name);
  }
  const char* env = std::getenv("VKPAGED_DEVICE");
  if (env != nullptr && *env != '\0')
    fmt::print(out, "VKPAGED_DEVICE=\"{}\" is set and overrides the default (an index or a name substring)\n", env);
  else
    fmt::print(out, "VKPAGED_DEVICE (an index or a name substring) overrides the default; --device overrides both\n");
  fmt::print(out, "cpu: the CPU reference (--device cpu)\n");
  return 0;
}

}  // namespace vkpaged::cli
