#pragma once
// Whether the device's cooperative-matrix fragments keep their elements where
// shaders/decode_coopmat.comp writes them (shaders/fragment_layout.comp finds out once per
// context).
#include <string>

#include "vkpaged/context.hpp"

namespace vkpaged::detail {

// "" when the layout matches, else what differs. Runs the probe on the first call only.
const std::string& matrix_fragment_mismatch(Context& context);

}  // namespace vkpaged::detail
