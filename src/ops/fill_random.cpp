// SPDX-License-Identifier: Apache-2.0
// Host side of shaders/fill_random.comp.
#include <fmt/format.h>

#include <algorithm>

#include "common/shader_interface.h"
#include "embedded_shaders.hpp"
#include "ops/view_checks.hpp"
#include "vkpaged/error.hpp"
#include "vkpaged/utilities.hpp"

namespace vkpaged {

void record_fill_random(Context& context, VkCommandBuffer cmd, const TensorView& view, uint32_t seed) {
  auto& impl = context.impl();
  detail::check_contiguous("fill_random", view);  // fills whole words from the first to the last
  const size_t bytes = view.bytes();
  if (bytes % 4 != 0)
    throw Error(ErrorCode::invalid_argument, fmt::format("fill_random: {} bytes is not a whole number of 32-bit words", bytes));
  detail::check_buffer(impl, "fill_random", view.memory, bytes, 4);
  if (bytes == 0) return;
  const auto& pipeline = impl.pipeline(vk::shader_fill_random(), {}, 1, sizeof(shader::FillRandomPush));
  const detail::BoundView bound = impl.bind_view(view.memory);
  shader::FillRandomPush push{};
  push.words = uint32_t(bytes / 4);
  push.word_offset = bound.word_offset;
  push.seed = seed;
  push.dtype = is_float_dtype(view.dtype) || is_fp8_dtype(view.dtype) ? uint32_t(view.dtype) : DT_FP8_E4M3 + 100u;
  const uint32_t groups = uint32_t(std::min<size_t>((push.words + 255) / 256, 65535));
  impl.dispatch(cmd, pipeline, std::span(&bound, 1), &push, groups, 1, 1);
}

}  // namespace vkpaged
