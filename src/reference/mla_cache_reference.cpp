// SPDX-License-Identifier: Apache-2.0
// CPU reference of reshape_and_cache for MLA (mla_cache_ops.hpp): the GPU path's checks
// (ops/mla_cache_checks.hpp), the rope by the rotary reference (double, rounded to k_pe's
// dtype), and the element stores of reshape_and_cache's reference (reference/cache_store.hpp).
#include <cstring>

#include "ops/cache_geometry.hpp"  // check_slots
#include "ops/decode_validation.hpp"  // host_index_values
#include "ops/mla_cache_checks.hpp"
#include "ops/scale_validation.hpp"
#include "reference/cache_store.hpp"
#include "vkpaged/reference.hpp"

namespace vkpaged::reference {

void mla_reshape_and_cache(const HostTensor& kv_c, const HostTensor& k_pe, const HostTensor& slot_mapping,
                           MlaHostCache& cache, float scale, const MlaHostRope* rope) {
  using vkpaged::detail::spec_of;
  const int64_t latent = kv_c.shape().rank() == 2 ? kv_c.shape()[1] : 0;
  const auto g = vkpaged::detail::mla_cache_geometry(spec_of(cache.mla_cache), spec_of(cache.ckv_cache),
                                                     spec_of(cache.kpe_cache), latent);
  const int64_t T = vkpaged::detail::check_mla_token_inputs(g, spec_of(kv_c), spec_of(k_pe), spec_of(slot_mapping));
  vkpaged::detail::check_scale("scale", scale, g.dtype);
  const float inv = is_fp8_dtype(g.dtype) ? 1.0f / scale : 1.0f;
  const auto slots = vkpaged::detail::host_index_values(slot_mapping, "slot_mapping");
  vkpaged::detail::check_slots(slots, g.num_slots());
  // k_pe as the key rows [T, 1, R] of the rotary reference, rotated (positions checked) before
  // anything is written.
  HostTensor pe(k_pe.dtype(), Shape{T, 1, g.rope_size});
  std::memcpy(pe.data(), k_pe.data(), k_pe.bytes());
  if (rope) {
    vkpaged::detail::check_mla_rope(rope->style, spec_of(k_pe), spec_of(rope->positions), spec_of(rope->cos_sin_cache));
    HostTensor no_query;
    rotary_embedding(no_query, pe, rope->positions, rope->cos_sin_cache, rope->style);
  }
  const bool two = g.form == MlaCacheForm::two_pools;
  HostTensor& latent_pool = two ? cache.ckv_cache : cache.mla_cache;
  HostTensor& rope_pool = two ? cache.kpe_cache : cache.mla_cache;
  const int64_t Dv = g.latent_size, R = g.rope_size;
  const int64_t latent_row = two ? Dv : Dv + R, rope_row = two ? R : Dv + R, rope_at = two ? 0 : Dv;
  for (int64_t t = 0; t < T; ++t) {
    const int64_t slot = slots[size_t(t)];
    if (slot < 0) continue;  // padding
    for (int64_t d = 0; d < Dv; ++d)
      vkpaged::detail::store_cache_element(latent_pool, size_t(slot * latent_row + d),
                                           load_element(kv_c.data(), kv_c.dtype(), size_t(t * Dv + d)), inv);
    for (int64_t d = 0; d < R; ++d)
      vkpaged::detail::store_cache_element(rope_pool, size_t(slot * rope_row + rope_at + d),
                                           load_element(pe.data(), pe.dtype(), size_t(t * R + d)), inv);
  }
}

}  // namespace vkpaged::reference
