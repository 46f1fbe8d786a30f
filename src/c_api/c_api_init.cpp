// SPDX-License-Identifier: Apache-2.0
// vkp_<struct>_init_sized of every extensible struct (c_api_structs.hpp's
// VKP_EXTENSIBLE_STRUCTS): the defaults (defaults_of) for the caller's struct_size, which must be
// a size a release had.
#include "c_api/c_api_guard.hpp"
#include "c_api/c_api_structs.hpp"
#include "vkpaged/vkpaged.h"

using namespace vkpaged::c_api;

#define VKP_INIT_SIZED(type, ...)                                                            \
  VKP_API vkp_status VKP_CALL type##_init_sized(type* value, uint32_t struct_size) { \
    return init_struct(#type "_init_sized", value, struct_size);                           \
  }

extern "C" {

VKP_EXTENSIBLE_STRUCTS(VKP_INIT_SIZED)

}  // extern "C"
