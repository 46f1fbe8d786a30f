// SPDX-License-Identifier: Apache-2.0
#pragma once
// How a paged KV cache is laid out in memory (docs/contract.md, "Layouts" and "Other cache
// layouts"). One layout per cache, the same for its keys and values; every operator accepts each.
#include <cstdint>
#include <optional>
#include <string_view>

namespace vkpaged {

// Values match the shaders' KV_LAYOUT_* constants (shaders/common/shader_interface.h).
enum class KvLayout : uint32_t {
  vllm = 0,  // K [N, Hkv, D/x, B, x], V [N, Hkv, D, B] (vLLM's paged_attention, hanzo-engine, mistral.rs)
  nhd = 1,   // K and V [N, B, Hkv, D] (vLLM V1's flash layout, FlashInfer NHD)
  hnd = 2,   // K and V [N, Hkv, B, D] (FlashInfer HND)
};

constexpr std::string_view kv_layout_name(KvLayout layout) noexcept {
  switch (layout) {
    case KvLayout::vllm: return "vllm";
    case KvLayout::nhd: return "nhd";
    case KvLayout::hnd: return "hnd";
  }
  return "?";
}

constexpr std::optional<KvLayout> parse_kv_layout(std::string_view name) noexcept {
  if (name == "vllm") return KvLayout::vllm;
  if (name == "nhd") return KvLayout::nhd;
  if (name == "hnd") return KvLayout::hnd;
  return std::nullopt;
}

// Where element (kv head g, dim d, in-block offset o) of one block sits, counted in elements
// from the block's start; a block holds Hkv * D * B elements in every layout. x is the cache's
// pack factor (16 / element bytes), used by the vllm key layout only.
struct KvBlockGeometry {
  uint32_t num_kv_heads = 0;  // Hkv
  uint32_t head_size = 0;     // D
  uint32_t block_size = 0;    // B
  uint32_t pack = 0;          // x

  constexpr uint64_t key_offset(KvLayout layout, uint32_t g, uint32_t d, uint32_t o) const noexcept {
    switch (layout) {
      case KvLayout::vllm: return ((uint64_t(g) * (head_size / pack) + d / pack) * block_size + o) * pack + d % pack;
      case KvLayout::nhd: return (uint64_t(o) * num_kv_heads + g) * head_size + d;
      case KvLayout::hnd: return (uint64_t(g) * block_size + o) * head_size + d;
    }
    return 0;
  }
  constexpr uint64_t value_offset(KvLayout layout, uint32_t g, uint32_t d, uint32_t o) const noexcept {
    if (layout == KvLayout::vllm) return (uint64_t(g) * head_size + d) * block_size + o;
    return key_offset(layout, g, d, o);
  }
  constexpr uint64_t block_elements() const noexcept { return uint64_t(num_kv_heads) * head_size * block_size; }
};

}  // namespace vkpaged
