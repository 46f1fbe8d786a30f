// SPDX-License-Identifier: Apache-2.0
// Where a cache element sits in one block, for each KvLayout (include/vkpaged/kv_layout.hpp,
// whose KvBlockGeometry is the host's twin of these functions). Offsets count elements from the
// block's start; a block holds hkv * d_size * b_size elements in every layout; x is the cache's
// pack factor (16 / element bytes), used by the vllm key layout only.
#ifndef VKPAGED_KV_LAYOUT_GLSL
#define VKPAGED_KV_LAYOUT_GLSL

uint kv_key_offset(uint kv_layout, uint hkv, uint d_size, uint b_size, uint x, uint g, uint d, uint o) {
  if (kv_layout == KV_LAYOUT_NHD) return (o * hkv + g) * d_size + d;
  if (kv_layout == KV_LAYOUT_HND) return (g * b_size + o) * d_size + d;
  return ((g * (d_size / x) + d / x) * b_size + o) * x + d % x;
}

uint kv_value_offset(uint kv_layout, uint hkv, uint d_size, uint b_size, uint x, uint g, uint d, uint o) {
  if (kv_layout == KV_LAYOUT_VLLM) return (g * d_size + d) * b_size + o;
  return kv_key_offset(kv_layout, hkv, d_size, b_size, x, g, d, o);
}

#endif
