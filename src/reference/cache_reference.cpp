// SPDX-License-Identifier: Apache-2.0
// CPU references of the cache operations, straight from docs/contract.md. They share the GPU
// paths' argument checks (ops/cache_geometry.hpp) and their element conversions
// (src/dtype.cpp), so tests can ask for bit-exact agreement.
#include <fmt/format.h>

#include <cmath>
#include <cstring>

#include "ops/cache_geometry.hpp"
#include "ops/decode_validation.hpp"
#include "ops/scale_validation.hpp"
#include "reference/cache_store.hpp"
#include "vkpaged/reference.hpp"

namespace vkpaged::reference {

namespace {

using detail::CacheGeometry;
using detail::refuse_cache_argument;
using detail::store_cache_element;

CacheGeometry geometry_of(const char* prefix, KvLayout layout, const HostTensor& key_cache,
                          const HostTensor& value_cache, std::initializer_list<DType> dtypes = detail::kCacheDtypes) {
  return detail::cache_geometry(prefix, layout, key_cache.dtype(), key_cache.shape(), value_cache.dtype(),
                                value_cache.shape(), dtypes);
}

void copy_block(const HostTensor& src, HostTensor& dst, int32_t src_block, int32_t dst_block, uint64_t block_bytes) {
  std::memmove(static_cast<std::byte*>(dst.data()) + dst_block * block_bytes,
               static_cast<const std::byte*>(src.data()) + src_block * block_bytes, block_bytes);
}

}  // namespace

void reshape_and_cache(const HostTensor& key, const HostTensor& value, const HostTensor& slot_mapping,
                       HostTensor& key_cache, HostTensor& value_cache, const CacheScales& scales, KvLayout layout) {
  const auto g = geometry_of("", layout, key_cache, value_cache);
  const int64_t tokens = detail::check_token_inputs(g, key.dtype(), key.shape(), value.dtype(), value.shape(),
                                                    slot_mapping.dtype(), slot_mapping.shape());
  const bool fp8 = is_fp8_dtype(g.dtype);
  detail::check_scale("k_scale", scales.k_scale, g.dtype);  // every cache dtype; only fp8 uses them
  detail::check_scale("v_scale", scales.v_scale, g.dtype);
  const float inv_k = fp8 ? 1.0f / scales.k_scale : 1.0f;
  const float inv_v = fp8 ? 1.0f / scales.v_scale : 1.0f;
  const auto slots = detail::host_index_values(slot_mapping, "slot_mapping");
  detail::check_slots(slots, g.num_slots());  // before anything is written
  for (int64_t t = 0; t < tokens; ++t) {
    const int64_t slot = slots[size_t(t)];
    if (slot < 0) continue;  // padding
    const int64_t block = slot / g.block_size, offset = slot % g.block_size;
    for (int64_t h = 0; h < g.num_kv_heads; ++h)
      for (int64_t d = 0; d < g.head_size; ++d) {
        const size_t in = size_t((t * g.num_kv_heads + h) * g.head_size + d);
        store_cache_element(key_cache, size_t(g.key_index(block, h, d, offset)),
                            load_element(key.data(), key.dtype(), in), inv_k);
        store_cache_element(value_cache, size_t(g.value_index(block, h, d, offset)),
                            load_element(value.data(), value.dtype(), in), inv_v);
      }
  }
}

void copy_blocks(HostTensor& key_cache, HostTensor& value_cache, Span<const BlockCopy> pairs, KvLayout layout) {
  const auto g = geometry_of("", layout, key_cache, value_cache, detail::kRawCacheDtypes);
  detail::check_block_pairs(pairs, g.num_blocks, g.num_blocks, true);
  for (const BlockCopy& p : pairs) {
    copy_block(key_cache, key_cache, p.src, p.dst, g.block_bytes());
    copy_block(value_cache, value_cache, p.src, p.dst, g.block_bytes());
  }
}

void swap_blocks(const HostTensor& src_key_cache, const HostTensor& src_value_cache, HostTensor& dst_key_cache,
                 HostTensor& dst_value_cache, Span<const BlockCopy> pairs, KvLayout layout) {
  const auto s = geometry_of("src.", layout, src_key_cache, src_value_cache, detail::kRawCacheDtypes);
  const auto d = geometry_of("dst.", layout, dst_key_cache, dst_value_cache, detail::kRawCacheDtypes);
  if (s.dtype != d.dtype || s.block_bytes() != d.block_bytes() || s.block_size != d.block_size ||
      s.head_size != d.head_size)
    refuse_cache_argument(fmt::format("dst.value_cache: shape {} ({}) has blocks unlike src's {} ({})",
                                      d.value_shape().str(), dtype_name(d.dtype), s.value_shape().str(),
                                      dtype_name(s.dtype)));
  detail::check_block_pairs(pairs, s.num_blocks, d.num_blocks, false);
  for (const BlockCopy& p : pairs) {
    copy_block(src_key_cache, dst_key_cache, p.src, p.dst, s.block_bytes());
    copy_block(src_value_cache, dst_value_cache, p.src, p.dst, s.block_bytes());
  }
}

GatherResult gather(const HostTensor& key_cache, const HostTensor& value_cache, const HostTensor& block_tables,
                    const HostTensor& seq_starts, DType output_dtype, const CacheScales& scales, KvLayout layout) {
  const auto g = geometry_of("", layout, key_cache, value_cache);
  const auto starts = detail::host_index_values(seq_starts, "seq_starts");
  const int64_t rows = starts.empty() ? 0 : starts.back();
  if (rows < 0) refuse_cache_argument(fmt::format("seq_starts[{}]: {} is negative", starts.size() - 1, rows));
  const Shape out_shape{rows, g.num_kv_heads, g.head_size};
  const auto gg = detail::check_gather_inputs(g, block_tables.dtype(), block_tables.shape(), seq_starts.dtype(),
                                              seq_starts.shape(), output_dtype, out_shape, output_dtype, out_shape);
  const bool fp8 = is_fp8_dtype(g.dtype);
  detail::check_scale("k_scale", scales.k_scale, g.dtype);
  detail::check_scale("v_scale", scales.v_scale, g.dtype);
  const auto tables = detail::host_index_values(block_tables, "block_tables");
  const int64_t M = gg.max_blocks_per_seq;
  for (int64_t s = 0; s < gg.num_seqs; ++s) {
    const int64_t begin = starts[size_t(s)], end = starts[size_t(s) + 1];
    if (begin < 0 || end < begin)
      refuse_cache_argument(fmt::format("seq_starts[{}]: {} is not in [0, seq_starts[{}] = {}]", s, begin, s + 1, end));
    if (end - begin > M * g.block_size)
      refuse_cache_argument(fmt::format("seq_starts[{}]: sequence {} has {} positions, more than M * B = {}", s + 1, s,
                                        end - begin, M * g.block_size));
    for (int64_t j = 0; j * g.block_size < end - begin; ++j) {
      const int64_t id = tables[size_t(s * M + j)];
      if (id < 0 || id >= g.num_blocks)
        refuse_cache_argument(
            fmt::format("block_tables[{}][{}]: block id {} is outside [0, N = {})", s, j, id, g.num_blocks));
    }
  }

  GatherResult r{HostTensor(output_dtype, out_shape), HostTensor(output_dtype, out_shape)};
  for (int64_t s = 0; s < gg.num_seqs; ++s)
    for (int64_t row = starts[size_t(s)]; row < starts[size_t(s) + 1]; ++row) {
      const int64_t pos = row - starts[size_t(s)];
      const int64_t block = tables[size_t(s * M + pos / g.block_size)], offset = pos % g.block_size;
      for (int64_t h = 0; h < g.num_kv_heads; ++h)
        for (int64_t d = 0; d < g.head_size; ++d) {
          float k = load_element(key_cache.data(), g.dtype, size_t(g.key_index(block, h, d, offset)));
          float v = load_element(value_cache.data(), g.dtype, size_t(g.value_index(block, h, d, offset)));
          if (fp8) {
            k *= scales.k_scale;
            v *= scales.v_scale;
          }
          const size_t out = size_t((row * g.num_kv_heads + h) * g.head_size + d);
          store_element(r.key.data(), output_dtype, out, k);
          store_element(r.value.data(), output_dtype, out, v);
        }
    }
  return r;
}

float absmax(const HostTensor& x) {
  if (!is_float_dtype(x.dtype()))
    refuse_cache_argument(fmt::format("x: dtype {} is not f32, f16 or bf16", dtype_name(x.dtype())));
  // As the shader: the max of the f32 bit patterns of |x| (NaN sorts above Inf).
  uint32_t m = 0;
  for (int64_t i = 0; i < x.numel(); ++i) {
    const float v = load_element(x.data(), x.dtype(), size_t(i));
    uint32_t bits;
    std::memcpy(&bits, &v, 4);
    m = std::max(m, bits & 0x7fffffffu);
  }
  float out;
  std::memcpy(&out, &m, 4);
  return out;
}

}  // namespace vkpaged::reference
