// SPDX-License-Identifier: Apache-2.0
#pragma once
// Draws that the decode and attention cases share: cache pools of reproducible values, and the
// optional ALiBi slopes and sinks.
#include <cmath>
#include <cstdint>
#include <random>

#include "vkpaged/dtype.hpp"
#include "vkpaged/tensor.hpp"

namespace vkpaged::test {

// Fills the key pool, then the value pool, from uniform draws u in [-1, 1): fp8 pools (u8 bytes)
// with the encoding of fp8_input(u), the others with u.
template <class Fp8Input>
void fill_cache_pools(HostTensor& key, HostTensor& value, DType cache_dtype, std::mt19937& rng, Fp8Input fp8_input) {
  std::uniform_real_distribution<float> uni(-1.0f, 1.0f);
  const bool fp8 = is_fp8_dtype(cache_dtype);
  for (HostTensor* t : {&key, &value}) {
    for (int64_t i = 0; i < t->numel(); ++i) {
      if (fp8) {
        const float v = fp8_input(uni(rng));
        t->as<uint8_t>()[i] = cache_dtype == DType::fp8_e4m3 ? f32_to_fp8_e4m3(v) : f32_to_fp8_e5m2(v);
      } else {
        t->set(size_t(i), uni(rng));
      }
    }
  }
}

// Where `alibi`, the slopes 2^(-8 (h + 1) / H); then, where `sinks`, H sinks drawn in [-2, 2).
inline void draw_alibi_and_sinks(int64_t H, bool alibi, bool sinks, std::mt19937& rng, HostTensor& alibi_slopes,
                                 HostTensor& sink_values) {
  std::uniform_real_distribution<float> uni(-1.0f, 1.0f);
  if (alibi) {
    alibi_slopes = HostTensor(DType::f32, Shape{H});
    for (int64_t h = 0; h < H; ++h) alibi_slopes.set(size_t(h), std::pow(2.0, -8.0 * double(h + 1) / double(H)));
  }
  if (sinks) {
    sink_values = HostTensor(DType::f32, Shape{H});
    for (int64_t h = 0; h < H; ++h) sink_values.set(size_t(h), 2.0 * uni(rng));
  }
}

}  // namespace vkpaged::test
