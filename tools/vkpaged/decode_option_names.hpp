// SPDX-License-Identifier: Apache-2.0
#pragma once
// The names `vkpaged attend` and `vkpaged bench` take for DecodeOptions::split, ::kernel and
// ::order.
// Each command words its own refusal of an unknown name.
#include <optional>
#include <string_view>

#include "vkpaged/decode.hpp"

namespace vkpaged::cli {

inline std::optional<SplitMode> split_mode_named(std::string_view name) {
  if (name == "auto") return SplitMode::automatic;
  if (name == "single") return SplitMode::single_pass;
  if (name == "split") return SplitMode::split;
  return std::nullopt;
}

inline std::optional<DecodeKernel> decode_kernel_named(std::string_view name) {
  if (name == "auto") return DecodeKernel::automatic;
  if (name == "scalar") return DecodeKernel::scalar;
  if (name == "matrix") return DecodeKernel::matrix;
  if (name == "matrix-khr") return DecodeKernel::matrix_khr;
  return std::nullopt;
}

inline std::optional<DecodeOrder> decode_order_named(std::string_view name) {
  if (name == "auto") return DecodeOrder::automatic;
  if (name == "grid") return DecodeOrder::grid;
  if (name == "longest-first") return DecodeOrder::longest_first;
  return std::nullopt;
}

}  // namespace vkpaged::cli
