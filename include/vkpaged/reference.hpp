#pragma once
// CPU reference implementations of every operator: double accumulation, straight from the
// contract, written for clarity and not speed. Tests and `--device cpu` use them.
#include "vkpaged/decode.hpp"
#include "vkpaged/export.hpp"
#include "vkpaged/tensor.hpp"

namespace vkpaged::reference {

// Decode attention over host inputs. Validates as decode_shape_of does.
VKPAGED_API DecodeResult decode_attention(const DecodeInputs& inputs, const DecodeOptions& options = {},
                                          bool want_lse = false);

}  // namespace vkpaged::reference
