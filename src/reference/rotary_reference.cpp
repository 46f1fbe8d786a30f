// SPDX-License-Identifier: Apache-2.0
// CPU references of the rotary embedding and its fused cache write (rotary.hpp), in double
// precision from the stored values. They share the GPU paths' argument checks
// (ops/rotary_checks.hpp, ops/cache_geometry.hpp) and refuse what the device would flag.
#include <vector>

#include "ops/cache_geometry.hpp"
#include "ops/scale_validation.hpp"
#include "ops/decode_validation.hpp"  // host_index_values
#include "ops/rotary_checks.hpp"
#include "vkpaged/reference.hpp"

namespace vkpaged::reference {

namespace {

using detail::RotaryGeometry;

// Rotates the first rotary_dim elements of every row ([T, heads, D]) of `t` in place.
void rotate_rows(HostTensor& t, const RotaryGeometry& g, const std::vector<int64_t>& positions,
                 const HostTensor& cos_sin, RotaryStyle style) {
  if (t.empty()) return;
  const int64_t heads = t.shape()[1], rot = g.rotary_dim, half = rot / 2;
  std::vector<double> row(static_cast<size_t>(rot));
  for (int64_t token = 0; token < g.tokens; ++token) {
    const int64_t p = positions[size_t(token)];
    for (int64_t h = 0; h < heads; ++h) {
      const size_t base = size_t((token * heads + h) * g.head_size);
      for (int64_t d = 0; d < rot; ++d) row[size_t(d)] = t.get(base + size_t(d));
      for (int64_t i = 0; i < half; ++i) {
        const double c = cos_sin.get(size_t(p * rot + i)), s = cos_sin.get(size_t(p * rot + half + i));
        const int64_t xi = style == RotaryStyle::neox ? i : 2 * i;
        const int64_t yi = style == RotaryStyle::neox ? i + half : 2 * i + 1;
        const double x = row[size_t(xi)], y = row[size_t(yi)];
        t.set(base + size_t(xi), x * c - y * s);
        t.set(base + size_t(yi), y * c + x * s);
      }
    }
  }
}

// Checks everything rotary_embedding needs; returns the geometry and the positions.
std::pair<RotaryGeometry, std::vector<int64_t>> checked(const HostTensor& query, const HostTensor& key,
                                                        const HostTensor& positions, const HostTensor& cos_sin_cache,
                                                        RotaryStyle style) {
  const auto g = detail::check_rotary_inputs(style, detail::spec_of(query), detail::spec_of(key),
                                             detail::spec_of(positions), detail::spec_of(cos_sin_cache));
  auto values = detail::host_index_values(positions, "positions");
  detail::check_positions(values, g.max_position);
  return {g, std::move(values)};
}

}  // namespace

void rotary_embedding(HostTensor& query, HostTensor& key, const HostTensor& positions, const HostTensor& cos_sin_cache,
                      RotaryStyle style) {
  const auto [g, values] = checked(query, key, positions, cos_sin_cache, style);
  rotate_rows(query, g, values, cos_sin_cache, style);
  rotate_rows(key, g, values, cos_sin_cache, style);
}

void reshape_and_cache_rotary(HostTensor& query, HostTensor& key, const HostTensor& value,
                              const HostTensor& slot_mapping, const HostTensor& positions,
                              const HostTensor& cos_sin_cache, RotaryStyle style, HostTensor& key_cache,
                              HostTensor& value_cache, const CacheScales& scales, KvLayout layout) {
  // Every check of both steps before anything is written.
  const auto cache = detail::cache_geometry("", layout, key_cache.dtype(), key_cache.shape(), value_cache.dtype(),
                                            value_cache.shape());
  detail::check_token_inputs(cache, key.dtype(), key.shape(), value.dtype(), value.shape(), slot_mapping.dtype(),
                             slot_mapping.shape());
  detail::check_scale("k_scale", scales.k_scale, cache.dtype);
  detail::check_scale("v_scale", scales.v_scale, cache.dtype);
  detail::check_slots(detail::host_index_values(slot_mapping, "slot_mapping"), cache.num_slots());
  const auto [g, values] = checked(query, key, positions, cos_sin_cache, style);

  rotate_rows(query, g, values, cos_sin_cache, style);
  rotate_rows(key, g, values, cos_sin_cache, style);
  reshape_and_cache(key, value, slot_mapping, key_cache, value_cache, scales, layout);
}

}  // namespace vkpaged::reference
