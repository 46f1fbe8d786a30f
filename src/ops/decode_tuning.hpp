// SPDX-License-Identifier: Apache-2.0
#pragma once
// The decode planner's tuning knobs: each default is the measured choice, and
// VKPAGED_DECODE_TUNE overrides them for experiments (e.g. "lanes=4,workgroup=128,units=8").
// The variable is parsed here and nowhere else, strictly: a bad item is an error that names it.
#include <cstdint>
#include <string_view>

namespace vkpaged::detail {

inline constexpr const char* kDecodeTuneVariable = "VKPAGED_DECODE_TUNE";

// 0 means "choose" where a knob has no other meaning for it.
struct DecodeTuning {
  uint32_t lanes = 0;      // scalar kernel: lanes per dim row in the value phase (a power of two)
  uint32_t workgroup = 0;  // scalar kernel: invocations per workgroup (a power of two up to 256)
  uint32_t units = 4;      // workgroups wanted per compute unit (sizes the split)
  uint32_t heads = 0;      // scalar kernel: most query heads per workgroup (GQA groups are sliced)
  // 1: automatic picks the matrix kernel for GQA groups where it can run (measured on an H200:
  // faster on every GQA shape, bench/experiments/matrix-kernel-history.md#the-rebuilt-kernel; on
  // MHA no faster than the scalar kernel, and slower where the lengths vary,
  // bench/experiments/split-and-merge.md#mha32s-partitions-and-kernels); 0: never.
  uint32_t matrix = 1;
  uint32_t subgroups = 0;  // matrix kernel: subgroups per workgroup
  uint32_t prefetch = 2;   // matrix kernel: value loads issued with the key loads (0 no, 1 yes, 2 by dtype)
  uint32_t qregs = 1;      // matrix kernel: query fragments kept in registers
  uint32_t pipeline = 2;   // matrix kernel: the next unit's loads issued before this unit's products (0 no, 1 yes, 2 by dtype)
  uint32_t order = 2;      // DecodeOrder::automatic: 0 grid, 1 longest first, 2 choose
  uint32_t share = 2;      // matrix kernel: outputs reuse the query's shared words (0 no, 1 yes, 2 choose)
  // Matrix kernel: a GQA group of more than 8 heads in one workgroup of slices of 8 heads that
  // read its keys and values once (1), or in workgroups of 8 heads that each read them (0, until
  // measured). decode_planner.cpp, "Head slices".
  uint32_t slices = 0;
  uint32_t vbytes = 0;     // scalar kernel, nhd and hnd caches: bytes per value load (4, 8 or 16; 0 choose)
  // Scalar kernel variants for the portable path's measurements (decode_kernel.glsl's header):
  uint32_t fp8conv = 0;    // fp8 caches: 1 = f16 pairs from alternate bytes, E4M3's NaN by a probe
  uint32_t f16math = 0;    // f16 query and cache, devices with shaderFloat16: bit 1 keys, bit 2 values (vllm) in packed f16
  uint32_t vloads = 0;     // value loads each invocation issues before using them (1, 2, 4, 8; 0 = 1)

  bool operator==(const DecodeTuning&) const = default;
};

// Parses VKPAGED_DECODE_TUNE's text: "key=value" items separated by commas, each key once, each
// value a decimal number in the knob's range; "" gives the defaults. Throws
// vkpaged::Error(invalid_argument) naming the variable, the key and the value.
DecodeTuning parse_decode_tuning(std::string_view text);

// The tuning VKPAGED_DECODE_TUNE asks for (the defaults when it is unset). Throws as
// parse_decode_tuning. DecodePlan::create reads it once per Context that reads the environment
// (ContextOptions::read_environment; ops/decode.cpp).
DecodeTuning decode_tuning_from_environment();

}  // namespace vkpaged::detail
