// SPDX-License-Identifier: Apache-2.0
#pragma once
// What the free record_reshape_and_cache and KvCache's share: the optional rotary inputs, given
// as positions and cos_sin_cache together (and the queries to rotate with them, or none).
#include <optional>
#include <string>

#include "record_args.hpp"
#include "vkpaged/rotary.hpp"

namespace vkpaged::python {

std::optional<RotaryInputs> rotary_inputs(PyCommandBuffer& cmd, View query, View positions, View cos_sin_cache,
                                          const std::string& style);

}  // namespace vkpaged::python
