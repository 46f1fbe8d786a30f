// SPDX-License-Identifier: Apache-2.0
#pragma once
// Element types of queries, outputs and caches, and their bit-exact conversions.
#include <cstddef>
#include <cstdint>
#include <optional>
#include <string_view>

#include "vkpaged/export.hpp"

namespace vkpaged {

// Values match the shaders' DT_* constants (shaders/common/shader_interface.h).
enum class DType : uint32_t {
  f32 = 0,
  f16 = 1,
  bf16 = 2,
  fp8_e4m3 = 3,  // OCP E4M3FN: max 448, no infinities, 0x7f/0xff are NaN
  fp8_e5m2 = 4,  // max 57344
  i32 = 5,
  u32 = 6,
  i64 = 7,
  u8 = 8,
};

VKPAGED_API size_t dtype_size(DType t) noexcept;
VKPAGED_API std::string_view dtype_name(DType t) noexcept;
VKPAGED_API std::optional<DType> parse_dtype(std::string_view name) noexcept;
inline bool is_float_dtype(DType t) noexcept { return t == DType::f32 || t == DType::f16 || t == DType::bf16; }
inline bool is_fp8_dtype(DType t) noexcept { return t == DType::fp8_e4m3 || t == DType::fp8_e5m2; }
// x of the contract: how many cache elements make 16 bytes.
inline uint32_t cache_pack_factor(DType cache) noexcept { return uint32_t(16 / dtype_size(cache)); }

// Bit-exact scalar conversions (round to nearest even; fp8 saturates at the format's max and
// never produces Inf or NaN from finite input; NaN stays NaN).
VKPAGED_API float f16_to_f32(uint16_t bits) noexcept;
VKPAGED_API uint16_t f32_to_f16(float value) noexcept;
VKPAGED_API float bf16_to_f32(uint16_t bits) noexcept;
VKPAGED_API uint16_t f32_to_bf16(float value) noexcept;
VKPAGED_API float fp8_e4m3_to_f32(uint8_t bits) noexcept;
VKPAGED_API uint8_t f32_to_fp8_e4m3(float value) noexcept;
VKPAGED_API float fp8_e5m2_to_f32(uint8_t bits) noexcept;
VKPAGED_API uint8_t f32_to_fp8_e5m2(float value) noexcept;
// Largest finite value of a format (448 for e4m3, 57344 for e5m2, ...).
VKPAGED_API float dtype_max(DType t) noexcept;

// Reads element i of a packed array of dtype t as a float (float types only).
VKPAGED_API float load_element(const void* data, DType t, size_t i) noexcept;
// Writes value to element i, rounding as the conversions above (float types only).
VKPAGED_API void store_element(void* data, DType t, size_t i, float value) noexcept;

}  // namespace vkpaged
