// SPDX-License-Identifier: Apache-2.0
#pragma once
// Argument checks of reshape_and_cache for MLA (mla_cache_ops.hpp), shared by the GPU path and
// its CPU reference: the pools in either form, the token inputs, the rope inputs. Host only.
// Failures throw vkpaged::Error(invalid_argument) naming the argument and the value.
#include <cstdint>

#include "ops/rotary_checks.hpp"  // TensorSpec, RotaryGeometry
#include "vkpaged/mla.hpp"

namespace vkpaged::detail {

// One layer's MLA pools: [N, B, Dv + R], or [N, B, Dv] and [N, B, R].
struct MlaCacheGeometry {
  MlaCacheForm form = MlaCacheForm::one_pool;
  int64_t num_blocks = 0;
  int64_t block_size = 0;
  int64_t latent_size = 0;  // Dv
  int64_t rope_size = 0;    // R
  DType dtype = DType::f16;
  int64_t row_size() const noexcept { return latent_size + rope_size; }
  int64_t num_slots() const noexcept { return num_blocks * block_size; }
};

// The pools (mla_cache, or ckv_cache and kpe_cache: exactly one form) of one cache dtype, N,
// B >= 1, Dv and R positive multiples of x. With one pool the width is Dv + R and
// `latent_size` gives Dv (the caller's Dv: kv_c's width).
MlaCacheGeometry mla_cache_geometry(const TensorSpec& mla_cache, const TensorSpec& ckv_cache,
                                    const TensorSpec& kpe_cache, int64_t latent_size);

// kv_c [T, Dv] and k_pe [T, R] of one float dtype, slot_mapping [T] i64 or i32. Returns T.
int64_t check_mla_token_inputs(const MlaCacheGeometry& cache, const TensorSpec& kv_c, const TensorSpec& k_pe,
                               const TensorSpec& slot_mapping);

// The rope inputs over k_pe [T, R] (rotary_checks' rules, k_pe as a key of one head).
RotaryGeometry check_mla_rope(RotaryStyle style, const TensorSpec& k_pe, const TensorSpec& positions,
                              const TensorSpec& cos_sin_cache);

}  // namespace vkpaged::detail
