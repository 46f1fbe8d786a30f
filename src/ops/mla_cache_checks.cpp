// SPDX-License-Identifier: Apache-2.0
#include "ops/mla_cache_checks.hpp"

#include <fmt/format.h>

#include <limits>

#include "vkpaged/error.hpp"

namespace vkpaged::detail {

namespace {

[[noreturn]] void refuse(const std::string& message) { throw Error(ErrorCode::invalid_argument, message); }

bool is_cache_dtype(DType t) { return is_float_dtype(t) || is_fp8_dtype(t); }

void check_pool(const char* name, const TensorSpec& t) {
  if (!is_cache_dtype(t.dtype))
    refuse(fmt::format("{}: dtype {} is not a cache dtype (f32, f16, bf16, fp8_e4m3, fp8_e5m2)", name,
                       dtype_name(t.dtype)));
  if (t.shape.rank() != 3) refuse(fmt::format("{}: shape {} is not [N, B, width]", name, t.shape.str()));
  if (t.shape[1] == 0) refuse(fmt::format("{}: shape {} has block size B = 0", name, t.shape.str()));
}

// A part's width: a positive multiple of x, the chunk the shader writes.
void check_width(const char* name, const char* what, int64_t width, DType dtype) {
  const int64_t x = int64_t(cache_pack_factor(dtype));
  if (width <= 0 || width % x != 0)
    refuse(fmt::format("{}: {} = {} is not a positive multiple of x = {} for the {} cache", name, what, width, x,
                       dtype_name(dtype)));
}

}  // namespace

MlaCacheGeometry mla_cache_geometry(const TensorSpec& one, const TensorSpec& ckv, const TensorSpec& kpe,
                                    int64_t latent_size) {
  MlaCacheGeometry g;
  if (one.present && (ckv.present || kpe.present))
    refuse("mla_cache: given together with ckv_cache or kpe_cache: give one pool, or the two");
  if (one.present) {
    check_pool("mla_cache", one);
    g.form = MlaCacheForm::one_pool;
    g.dtype = one.dtype;
    g.num_blocks = one.shape[0];
    g.block_size = one.shape[1];
    if (latent_size <= 0 || latent_size >= one.shape[2])
      refuse(fmt::format("kv_c: Dv = {} leaves no rotary part in mla_cache's rows of {} (0 < Dv < Dv + R)",
                         latent_size, one.shape[2]));
    g.latent_size = latent_size;
    g.rope_size = one.shape[2] - latent_size;
  } else {
    if (!ckv.present || !kpe.present)
      refuse(fmt::format("{}: not given: give mla_cache, or ckv_cache and kpe_cache", ckv.present ? "kpe_cache" : "ckv_cache"));
    check_pool("ckv_cache", ckv);
    check_pool("kpe_cache", kpe);
    if (kpe.dtype != ckv.dtype)
      refuse(fmt::format("kpe_cache: dtype {} differs from ckv_cache's {}", dtype_name(kpe.dtype), dtype_name(ckv.dtype)));
    if (kpe.shape[0] != ckv.shape[0] || kpe.shape[1] != ckv.shape[1])
      refuse(fmt::format("kpe_cache: shape {} does not have ckv_cache's N and B ({})", kpe.shape.str(), ckv.shape.str()));
    g.form = MlaCacheForm::two_pools;
    g.dtype = ckv.dtype;
    g.num_blocks = ckv.shape[0];
    g.block_size = ckv.shape[1];
    g.latent_size = ckv.shape[2];
    g.rope_size = kpe.shape[2];
  }
  const bool two = g.form == MlaCacheForm::two_pools;
  check_width(two ? "ckv_cache" : "mla_cache", "Dv", g.latent_size, g.dtype);
  check_width(two ? "kpe_cache" : "mla_cache", "R", g.rope_size, g.dtype);
  if (uint64_t(g.num_slots()) > std::numeric_limits<uint32_t>::max())
    refuse(fmt::format("{}: N * B = {} slots is more than the shader's 32-bit slots hold", two ? "ckv_cache" : "mla_cache",
                       g.num_slots()));
  return g;
}

int64_t check_mla_token_inputs(const MlaCacheGeometry& g, const TensorSpec& kv_c, const TensorSpec& k_pe,
                               const TensorSpec& slot_mapping) {
  if (!is_float_dtype(kv_c.dtype)) refuse(fmt::format("kv_c: dtype {} is not f32, f16 or bf16", dtype_name(kv_c.dtype)));
  if (k_pe.dtype != kv_c.dtype)
    refuse(fmt::format("k_pe: dtype {} differs from kv_c's {}", dtype_name(k_pe.dtype), dtype_name(kv_c.dtype)));
  if (kv_c.shape.rank() != 2) refuse(fmt::format("kv_c: shape {} is not [T, Dv]", kv_c.shape.str()));
  const int64_t T = kv_c.shape[0];
  if (!(kv_c.shape == Shape{T, g.latent_size}))
    refuse(fmt::format("kv_c: shape {} is not [T, Dv] = [{}, {}] of the cache", kv_c.shape.str(), T, g.latent_size));
  if (!(k_pe.shape == Shape{T, g.rope_size}))
    refuse(fmt::format("k_pe: shape {} is not [T, R] = [{}, {}] of kv_c and the cache", k_pe.shape.str(), T,
                       g.rope_size));
  if (slot_mapping.dtype != DType::i64 && slot_mapping.dtype != DType::i32)
    refuse(fmt::format("slot_mapping: dtype {} is not i64 or i32", dtype_name(slot_mapping.dtype)));
  if (!(slot_mapping.shape == Shape{T}))
    refuse(fmt::format("slot_mapping: shape {} is not [T] = [{}] of kv_c", slot_mapping.shape.str(), T));
  return T;
}

RotaryGeometry check_mla_rope(RotaryStyle style, const TensorSpec& k_pe, const TensorSpec& positions,
                              const TensorSpec& cos_sin_cache) {
  // k_pe [T, R] (checked by check_mla_token_inputs) as the key rows [T, 1, R] of the rotary checks.
  const TensorSpec rows{k_pe.present, k_pe.dtype, Shape{k_pe.shape[0], 1, k_pe.shape[1]}};
  return check_rotary_inputs(style, TensorSpec{}, rows, positions, cos_sin_cache);
}

}  // namespace vkpaged::detail
