#pragma once
// Whether the device's cooperative-matrix fragments keep their elements where
// shaders/common/decode_coopmat_kernel.glsl writes them (shaders/fragment_layout.comp finds out once per
// context).
#include <string>

#include "vkpaged/context.hpp"

namespace vkpaged::detail {

// "" when the layout matches, else what differs. Runs the probe on the first call only.
const std::string& matrix_fragment_mismatch(Context& context);

}  // namespace vkpaged::detail
