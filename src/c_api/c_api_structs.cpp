// SPDX-License-Identifier: Apache-2.0
// The messages of the extensible-struct checks (c_api_structs.hpp).
#include "c_api/c_api_structs.hpp"

#include <fmt/format.h>

namespace vkpaged::c_api {

void refuse_struct_size(const char* arg, const char* type, uint32_t value, std::span<const uint32_t> known) {
  std::string message = arg != nullptr ? fmt::format("{}: ", arg) : std::string();
  message += fmt::format("{}.struct_size: {} is not a size this library knows ({})", type, value, fmt::join(known, ", "));
  // "vkp_decode_options" -> "vkp_decode_options_init"
  if (value == 0) message += fmt::format("; {}_init sets it", type);
  throw Error(ErrorCode::invalid_argument, message);
}

bool to_bool(vkp_bool32 value, const std::string& name) {
  if (value > 1) throw Error(ErrorCode::invalid_argument, fmt::format("{}: {} is not 0 or 1", name, value));
  return value == 1;
}

}  // namespace vkpaged::c_api
