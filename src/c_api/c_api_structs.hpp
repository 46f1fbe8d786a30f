// SPDX-License-Identifier: Apache-2.0
#pragma once
// The ABI of the C API's extensible structs (docs/api.md, "The C ABI"). Each begins with
// `uint32_t struct_size`, the caller's sizeof; StructAbi<T> lists every size a released header
// gave it. The helpers here are the only place that reads or writes one:
// - read_struct: a caller's input, its fields up to struct_size and the defaults past it;
// - StructOut: a caller's output, written up to its struct_size and no further;
// - init_struct: what vkp_<struct>_init_sized does;
// - read_struct_array / StructArrayOut: arrays at the stride of their first element's size.
// A size no release had is refused naming the argument, the struct and the value.
//
// A new field is appended to its struct; the size the struct had in the last release goes
// into its VKP_EXTENSIBLE_STRUCTS line (oldest first), and defaults_of<T> gives the field's default.
#include <cstddef>
#include <cstdint>
#include <cstring>
#include <span>
#include <string>
#include <vector>

#include "c_api/c_api_guard.hpp"
#include "vkpaged/error.hpp"
#include "vkpaged/vkpaged.h"

namespace vkpaged::c_api {

template <typename T>
struct StructAbi;

// VKP_STRUCT_ABI(type, sizes of earlier releases...): the current sizeof is always known.
#define VKP_STRUCT_ABI(type, ...)                                                        \
  template <>                                                                            \
  struct StructAbi<type> {                                                               \
    static constexpr const char* name = #type;                                           \
    static constexpr uint32_t sizes[] = {__VA_ARGS__ __VA_OPT__(, ) uint32_t(sizeof(type))}; \
  };

// Every extensible struct, X(type, sizes of earlier releases...): the sizes (StructAbi, below)
// and the vkp_<struct>_init_sized functions (c_api_init.cpp) come from this one list. 0.2.0 is
// the first release with struct_size: each struct has one known size.
#define VKP_EXTENSIBLE_STRUCTS(X) \
  X(vkp_device_info) \
  X(vkp_cooperative_matrix_shape) \
  X(vkp_context_options) \
  X(vkp_external_device) \
  X(vkp_vulkan_handles) \
  X(vkp_decode_shape) \
  X(vkp_decode_options) \
  X(vkp_decode_params) \
  X(vkp_decode_plan_info) \
  X(vkp_decode_views) \
  X(vkp_decode_inputs) \
  X(vkp_attention_shape) \
  X(vkp_attention_options) \
  X(vkp_attention_plan_info) \
  X(vkp_attention_views) \
  X(vkp_attention_inputs) \
  X(vkp_cache_scales) \
  X(vkp_reshape_and_cache_views) \
  X(vkp_layer_cache_views) \
  X(vkp_gather_views) \
  X(vkp_rotary_views) \
  X(vkp_rotary_inputs) \
  X(vkp_bandwidth) \
  X(vkp_merge_views) \
  X(vkp_kv_cache_shape) \
  X(vkp_kv_cache_options) \
  X(vkp_kv_cache_sizing) \
  X(vkp_kv_cache_info) \
  X(vkp_new_tokens) \
  X(vkp_mla_cache_views) \
  X(vkp_mla_reshape_and_cache_views) \
  X(vkp_mla_rope_views) \
  X(vkp_mla_new_tokens) \
  X(vkp_mla_options) \
  X(vkp_mla_plan_info) \
  X(vkp_mla_views) \
  X(vkp_block_manager_options) \
  X(vkp_append_result) \
  X(vkp_block_usage) \
  X(vkp_prefix_cache_stats) \
  X(vkp_cache_write_kind) \
  X(vkp_prepare_report)

VKP_EXTENSIBLE_STRUCTS(VKP_STRUCT_ABI)

// Sizes strictly increase and end at sizeof(T) (a field that fits an older size's tail padding
// would make two versions indistinguishable); struct_size comes first.
template <typename T>
constexpr bool sizes_well_formed() {
  const auto& s = StructAbi<T>::sizes;
  for (size_t i = 1; i < std::size(s); ++i)
    if (s[i - 1] >= s[i]) return false;
  return s[std::size(s) - 1] == sizeof(T) && offsetof(T, struct_size) == 0;
}

// Throws "<arg>: <type>.struct_size: <value> is not a size this library knows (<sizes>)"
// (without "<arg>: " when arg is NULL).
[[noreturn]] void refuse_struct_size(const char* arg, const char* type, uint32_t value,
                                     std::span<const uint32_t> known);
// Throws "<name>: <value> is not 0 or 1" unless it is; returns it as a bool.
bool to_bool(vkp_bool32 value, const std::string& name);
inline vkp_bool32 to_c_bool(bool value) noexcept { return value ? VKP_TRUE : VKP_FALSE; }

// All bytes zero (reserved fields, absent views, padding) but struct_size = sizeof(T).
template <typename T>
T zeroed() {
  T value;
  std::memset(&value, 0, sizeof(T));
  value.struct_size = uint32_t(sizeof(T));
  return value;
}

// The defaults of an input (what vkp_<struct>_init fills in), with struct_size = sizeof(T).
// Zero for structs without a specialization (views: absent; outputs: nothing yet).
template <typename T>
T defaults_of() {
  static_assert(sizes_well_formed<T>());
  return zeroed<T>();
}

// The structs with defaults of their own (c_api_convert.cpp; vkp_cache_write_kind:
// c_api_prepare.cpp).
#define VKP_STRUCTS_WITH_DEFAULTS(X)                                                                             \
  X(vkp_context_options) X(vkp_external_device) X(vkp_decode_shape) X(vkp_decode_options) X(vkp_decode_params)   \
  X(vkp_decode_inputs) X(vkp_attention_shape) X(vkp_attention_options) X(vkp_attention_inputs) X(vkp_cache_scales) \
  X(vkp_kv_cache_shape) X(vkp_block_manager_options) X(vkp_cache_write_kind)
#define VKP_DECLARE_DEFAULTS(type) template <> type defaults_of<type>();
VKP_STRUCTS_WITH_DEFAULTS(VKP_DECLARE_DEFAULTS)
#undef VKP_DECLARE_DEFAULTS

// The caller's struct_size, refused unless a release had it. `s` is not NULL.
template <typename T>
uint32_t checked_size(const T* s, const char* arg) {
  static_assert(sizes_well_formed<T>());
  uint32_t size;
  std::memcpy(&size, s, sizeof(size));  // the first field of every version
  for (uint32_t known : StructAbi<T>::sizes)
    if (size == known) return size;
  refuse_struct_size(arg, StructAbi<T>::name, size, StructAbi<T>::sizes);
}

// An input struct: the caller's fields up to its struct_size, the defaults past it.
template <typename T>
T read_struct(const T* s, const char* arg) {
  const uint32_t size = checked_size(require(s, arg), arg);
  T value = defaults_of<T>();
  std::memcpy(&value, s, size);
  value.struct_size = uint32_t(sizeof(T));
  return value;
}

// An optional input struct: NULL means the defaults.
template <typename T>
T read_optional_struct(const T* s, const char* arg) {
  return s == nullptr ? defaults_of<T>() : read_struct(s, arg);
}

// A caller's output struct, checked when made (before any work), written by set().
template <typename T>
class StructOut {
 public:
  StructOut(T* out, const char* arg) : out_(require(out, arg)), size_(checked_size(out, arg)) {}
  // A value to fill in: zero (reserved fields stay 0), struct_size set.
  static T blank() { return defaults_of<T>(); }
  void set(T value) const noexcept {
    value.struct_size = size_;
    std::memcpy(out_, &value, size_);
  }

 private:
  T* out_;
  uint32_t size_;
};

// vkp_<struct>_init_sized: the defaults up to struct_size; nothing written for a size no
// release had (the library cannot know how large the caller's struct is).
template <typename T>
vkp_status init_struct(const char* function, T* s, uint32_t struct_size) noexcept {
  return guarded(function, [&] {
    require(s, StructAbi<T>::name);
    bool known = false;
    for (uint32_t size : StructAbi<T>::sizes) known = known || size == struct_size;
    if (!known) refuse_struct_size(nullptr, StructAbi<T>::name, struct_size, StructAbi<T>::sizes);
    T value = defaults_of<T>();
    value.struct_size = struct_size;
    std::memcpy(s, &value, struct_size);
  });
}

// An array's element stride: the first element's struct_size, which every element repeats.
template <typename T>
uint32_t array_stride(const T* first, size_t count, const char* arg) {
  const std::string first_name = std::string(arg) + "[0]";
  const uint32_t stride = checked_size(first, first_name.c_str());
  const auto* bytes = reinterpret_cast<const unsigned char*>(first);
  for (size_t i = 1; i < count; ++i) {
    uint32_t size;
    std::memcpy(&size, bytes + i * stride, sizeof(size));
    if (size != stride) {
      const std::string name = std::string(arg) + "[" + std::to_string(i) + "]";
      throw Error(ErrorCode::invalid_argument, name + ": " + StructAbi<T>::name + ".struct_size: " +
                                                   std::to_string(size) + " differs from " + arg + "[0]'s " +
                                                   std::to_string(stride) + " (one array, one struct size)");
    }
  }
  return stride;
}

// An input array of extensible structs, each read as read_struct reads one.
template <typename T>
std::vector<T> read_struct_array(const T* first, size_t count, const char* arg) {
  std::vector<T> values;
  if (count == 0) return values;
  if (first == nullptr)
    throw Error(ErrorCode::invalid_argument, std::string(arg) + " is NULL with a count of " + std::to_string(count));
  const uint32_t stride = array_stride(first, count, arg);
  const auto* bytes = reinterpret_cast<const unsigned char*>(first);
  values.reserve(count);
  for (size_t i = 0; i < count; ++i) {
    T value = defaults_of<T>();
    std::memcpy(&value, bytes + i * stride, stride);
    value.struct_size = uint32_t(sizeof(T));
    values.push_back(value);
  }
  return values;
}

// An output array of extensible structs, checked when made, written element by element.
template <typename T>
class StructArrayOut {
 public:
  StructArrayOut(T* first, size_t count, const char* arg)
      : bytes_(reinterpret_cast<unsigned char*>(first)), stride_(count > 0 ? array_stride(first, count, arg) : 0) {}
  void set(size_t i, T value) const noexcept {
    value.struct_size = stride_;
    std::memcpy(bytes_ + i * stride_, &value, stride_);
  }

 private:
  unsigned char* bytes_;
  uint32_t stride_;
};

}  // namespace vkpaged::c_api
