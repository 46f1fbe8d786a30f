// SPDX-License-Identifier: Apache-2.0
// C API: errors, version, element types and scalar conversions.
#include <fmt/format.h>

#include <string>

#include "c_api/c_api_convert.hpp"
#include "c_api/c_api_guard.hpp"
#include "vkpaged/dtype.hpp"
#include "vkpaged/vkpaged.h"

using namespace vkpaged;
using namespace vkpaged::c_api;

#define VKP_STRINGIFY2(x) #x
#define VKP_STRINGIFY(x) VKP_STRINGIFY2(x)

extern "C" {

VKP_API const char* VKP_CALL vkp_last_error(void) { return last_error_message(); }

VKP_API const char* VKP_CALL vkp_status_name(vkp_status status) {
  const auto value = std::underlying_type_t<vkp_status>(status);
  if (value == VKP_OK) return "ok";
  if (value < VKP_ERROR_INVALID_ARGUMENT || value > VKP_ERROR_INTERNAL) return "unknown";
  return to_string(ErrorCode(value));
}

VKP_API uint32_t VKP_CALL vkp_version(void) { return VKPAGED_VERSION; }

VKP_API const char* VKP_CALL vkp_version_string(void) {
  return VKP_STRINGIFY(VKPAGED_VERSION_MAJOR) "." VKP_STRINGIFY(VKPAGED_VERSION_MINOR) "." VKP_STRINGIFY(
      VKPAGED_VERSION_PATCH);
}

// An unknown dtype gives 0, "unknown" or 0.0f, with the reason in vkp_last_error().
VKP_API size_t VKP_CALL vkp_dtype_size(vkp_dtype dtype) {
  return guarded_value("vkp_dtype_size", size_t(0), [&] { return dtype_size(to_dtype(dtype, "dtype")); });
}

// dtype_name's views are views of string literals, so their data is NUL-terminated.
VKP_API const char* VKP_CALL vkp_dtype_name(vkp_dtype dtype) {
  return guarded_value("vkp_dtype_name", "unknown", [&] { return dtype_name(to_dtype(dtype, "dtype")).data(); });
}

VKP_API vkp_status VKP_CALL vkp_dtype_parse(const char* name, vkp_dtype* out) {
  return guarded("vkp_dtype_parse", [&] {
    require(name, "name");
    require(out, "out");
    const auto parsed = parse_dtype(name);
    if (!parsed) throw Error(ErrorCode::invalid_argument, std::string("name: \"") + name + "\" is not a dtype name");
    *out = to_c(*parsed);
  });
}

VKP_API float VKP_CALL vkp_dtype_max(vkp_dtype dtype) {
  return guarded_value("vkp_dtype_max", 0.0f, [&] { return dtype_max(to_dtype(dtype, "dtype")); });
}

VKP_API float VKP_CALL vkp_f16_to_f32(uint16_t bits) { return f16_to_f32(bits); }
VKP_API uint16_t VKP_CALL vkp_f32_to_f16(float value) { return f32_to_f16(value); }
VKP_API float VKP_CALL vkp_bf16_to_f32(uint16_t bits) { return bf16_to_f32(bits); }
VKP_API uint16_t VKP_CALL vkp_f32_to_bf16(float value) { return f32_to_bf16(value); }
VKP_API float VKP_CALL vkp_fp8_e4m3_to_f32(uint8_t bits) { return fp8_e4m3_to_f32(bits); }
VKP_API uint8_t VKP_CALL vkp_f32_to_fp8_e4m3(float value) { return f32_to_fp8_e4m3(value); }
VKP_API float VKP_CALL vkp_fp8_e5m2_to_f32(uint8_t bits) { return fp8_e5m2_to_f32(bits); }
VKP_API uint8_t VKP_CALL vkp_f32_to_fp8_e5m2(float value) { return f32_to_fp8_e5m2(value); }

}  // extern "C"
