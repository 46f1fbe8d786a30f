// SPDX-License-Identifier: Apache-2.0
// Host side of shaders/absmax.comp, and the fp8 scale that follows from an absmax.
#include <fmt/format.h>

#include <algorithm>
#include <array>
#include <cmath>

#include "common/shader_interface.h"
#include "embedded_shaders.hpp"
#include "ops/scale_validation.hpp"
#include "ops/view_checks.hpp"
#include "vkpaged/cache_ops.hpp"
#include "vkpaged/error.hpp"

namespace vkpaged {

void record_absmax(Context& context, VkCommandBuffer cmd, const TensorView& x, const BufferView& amax_out) {
  auto& impl = context.impl();
  if (!is_float_dtype(x.dtype))
    throw Error(ErrorCode::invalid_argument, fmt::format("x: dtype {} is not f32, f16 or bf16", dtype_name(x.dtype)));
  detail::check_contiguous("x", x);  // streamed as whole words from the first to the last
  // The shader reads whole words: an odd count of 16-bit elements needs the padding word.
  const size_t words = (x.bytes() + 3) / 4;
  detail::check_buffer(impl, "x", x.memory, words * 4, 4);
  detail::check_buffer(impl, "amax_out", amax_out, 4, 4);
  if (x.shape.numel() == 0) return;

  const std::array<uint32_t, ABSMAX_SC_COUNT> spec{uint32_t(x.dtype)};
  const auto& pipeline = impl.pipeline(vk::shader_absmax(), spec, ABSMAX_BINDING_COUNT, sizeof(shader::AbsmaxPush));
  std::array<detail::BoundView, ABSMAX_BINDING_COUNT> bound;
  bound[ABSMAX_BINDING_X] = impl.bind_view(x.memory);
  bound[ABSMAX_BINDING_AMAX] = impl.bind_view(amax_out);
  shader::AbsmaxPush push{};
  push.num_elements = uint32_t(x.shape.numel());
  push.num_words = uint32_t(words);
  push.x_offset = bound[ABSMAX_BINDING_X].word_offset;
  push.amax_offset = bound[ABSMAX_BINDING_AMAX].word_offset;
  // Grid-stride: enough workgroups to fill a large GPU, few enough that the atomics are cheap.
  const uint32_t groups = uint32_t(std::min<size_t>((words + CACHE_OP_WORKGROUP - 1) / CACHE_OP_WORKGROUP, 1024));
  impl.dispatch(cmd, pipeline, bound, &push, groups, 1, 1);
}

float fp8_scale_from_amax(float amax, DType fp8_format) {
  if (!is_fp8_dtype(fp8_format))
    throw Error(ErrorCode::invalid_argument,
                fmt::format("fp8_format: {} is not fp8_e4m3 or fp8_e5m2", dtype_name(fp8_format)));
  if (!std::isfinite(amax) || amax < 0.0f)
    throw Error(ErrorCode::invalid_argument, fmt::format("amax: {} is not a finite value >= 0", amax));
  // An all-zero tensor still gets a usable scale: positive, normal, with a finite reciprocal.
  constexpr float kTinyAmax = 1e-12f;
  float scale = std::max(amax, kTinyAmax) / dtype_max(fp8_format);
  // The quotient is rounded: near FLT_MAX it can land a step past the largest scale the
  // operators take (docs/contract.md, "Scales"); the next float down is then within it.
  if (!detail::scale_problem(scale, fp8_format).empty()) scale = std::nextafter(scale, 0.0f);
  detail::check_scale("scale", scale, fp8_format);
  return scale;
}

}  // namespace vkpaged
