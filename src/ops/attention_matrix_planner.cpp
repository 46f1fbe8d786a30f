// SPDX-License-Identifier: Apache-2.0
// The attention planner's matrix family (shaders/attention_matrix_khr.comp): which of the
// device's f16 products the kernel takes, how many rows a workgroup holds, how long its key
// tiles are, and where the query's fragments live, all from what the device reports; and why
// the kernel cannot run a shape where it cannot. Pure, as the rest of the planner.
#include <fmt/format.h>
#include <fmt/ranges.h>

#include <algorithm>
#include <optional>
#include <vector>

#include "ops/attention_planner.hpp"
#include "ops/cache_geometry.hpp"
#include "ops/integer_math.hpp"
#include "ops/pool_address_rule.hpp"
#include "vkpaged/error.hpp"

namespace vkpaged::detail {

namespace {

bool usable(const MatrixProductShape& p) {
  return (p.m == 8 || p.m == 16 || p.m == 32) && (p.n == 8 || p.n == 16) && (p.k == 8 || p.k == 16);
}

}  // namespace

// The largest usable product (fewest instructions per FLOP), the first listed among equals.
std::optional<MatrixProductShape> choose_matrix_product(const DeviceCapabilities& d) {
  const auto products = usable_matrix_products(d);
  if (products.empty()) return std::nullopt;
  return products.front();
}

std::vector<MatrixProductShape> usable_matrix_products(const DeviceCapabilities& d) {
  std::vector<MatrixProductShape> products;
  for (const auto& p : d.f16_products())
    if (usable(p)) products.push_back(p);
  std::stable_sort(products.begin(), products.end(), [](const MatrixProductShape& a, const MatrixProductShape& b) {
    return a.m * a.n * a.k > b.m * b.n * b.k;
  });
  return products;
}

std::string matrix_product_refusal(const DeviceCapabilities& d) {
  if (!choose_matrix_product(d)) {
    std::vector<std::string> listed;
    for (const auto& p : d.f16_products()) listed.push_back(fmt::format("{}x{}x{}", p.m, p.n, p.k));
    return fmt::format("device {} lists no f16 x f16 + f32 product at subgroup scope with M of 8, 16 or 32 and N and K "
                       "of 8 or 16 (it lists [{}])",
                       d.name, fmt::join(listed, ", "));
  }
  if (d.max_subgroup_size == 0 || d.max_subgroup_size > d.max_workgroup_invocations)
    return fmt::format("device {}: subgroups of up to {} invocations in workgroups of at most {}", d.name,
                       d.max_subgroup_size, d.max_workgroup_invocations);
  if (!d.subgroup_arithmetic)
    return fmt::format("device {}: no subgroup arithmetic in compute shaders (or ContextOptions::"
                       "disable_subgroup_arithmetic); the matrix kernels take a bf16 tile's range with subgroupMax",
                       d.name);
  return "";
}

std::string matrix_dtype_refusal(const DeviceCapabilities& d, const AttentionShape& s, const char* kernel) {
  if (!d.khr_matrix_refusal.empty()) return d.khr_matrix_refusal;
  if (s.query_dtype != DType::f16 && s.query_dtype != DType::bf16)
    return fmt::format("query: dtype {} ({} takes f16 and bf16 queries; the scalar kernel takes f32)",
                       dtype_name(s.query_dtype), kernel);
  if (s.cache_dtype == DType::f32)
    return fmt::format("kv_dtype: f32 ({} takes f16, bf16 and fp8 caches; the scalar kernel takes f32)", kernel);
  return "";
}

std::optional<MatrixTileFit> fit_matrix_tiles(const DeviceCapabilities& d, const MatrixProductShape& p,
                                              uint64_t wanted_rows, uint32_t max_row_blocks,
                                              std::span<const uint32_t> key_tiles,
                                              const std::function<uint64_t(uint32_t)>& workgroup_of,
                                              const std::function<size_t(uint32_t, uint32_t, uint32_t)>& shared_bytes_of) {
  uint32_t blocks = 1;
  while (blocks < max_row_blocks && uint64_t(blocks) * p.m < wanted_rows) blocks *= 2;
  for (; blocks >= 1; blocks /= 2) {
    const uint64_t workgroup = workgroup_of(blocks);
    if (workgroup > d.max_workgroup_invocations) continue;
    for (uint32_t tk : key_tiles) {
      if (tk % p.n != 0 || tk % p.k != 0) continue;
      const size_t bytes = shared_bytes_of(blocks, tk, uint32_t(workgroup));
      if (bytes > d.max_shared_memory) continue;
      return MatrixTileFit{blocks, tk, uint32_t(workgroup), bytes};
    }
  }
  return std::nullopt;
}

void take_matrix_tiles(AttentionChoice& c, const DeviceCapabilities& d, const MatrixProductShape& product,
                       const MatrixTileFit& t, uint32_t group) {
  c.kernel = AttentionKernel::matrix;
  c.product = product;
  c.key_tile = t.key_tile;
  c.workgroup_sync = d.workgroup_sync;
  c.workgroup = t.workgroup;
  c.rows = t.row_blocks * product.m;
  c.shared_bytes = t.shared_bytes;
  slice_heads(c, group);
  c.row_parts = 1;
}

namespace {

// Subgroups that compute (row blocks of m rows): 4 blocks of 16 rows share each staged key and
// value among 64 rows, as FlashAttention-2's 4 warps do; more rows need more shared memory than
// the 48 KiB a workgroup gets on NVIDIA.
constexpr uint32_t kMaxRowBlocks = 4;
// Key positions per tile, longest first: fewer barriers per position. A multiple of 16 (a vllm
// value chunk holds 16 fp8 positions) and of the product's n and k.
constexpr uint32_t kKeyTiles[] = {64, 32, 16};
// Invocations that stage a tile, at least, whatever the rows: a workgroup of few rows (decode
// requests, speculative verification) is bound by its loads.
constexpr uint32_t kMinWorkgroup = 128;
// Query fragments stay in registers up to this many dims (with the output's accumulators they
// take 12 registers per 16 dims and lane on NVIDIA); past it they are read from shared memory.
constexpr uint32_t kMaxRegisterDims = 128;

bool query_in_registers(const AttentionShape& s) { return round_up(s.head_size, 16) <= kMaxRegisterDims; }

// The most rows the request needs (up to kMaxRowBlocks blocks), then the longest key tile, that
// fit the device's shared memory and workgroup; the query's fragments in registers where the
// head size allows.
std::optional<MatrixTileFit> fit_tiles(const DeviceCapabilities& d, const AttentionShape& s,
                                       const MatrixProductShape& p, uint64_t wanted_rows) {
  const uint32_t sg = d.max_subgroup_size;
  const bool query_registers = query_in_registers(s);
  auto workgroup_of = [&](uint32_t blocks) {
    const uint64_t computing = uint64_t(blocks) * sg;
    const uint64_t workgroup = d.workgroup_sync ? computing : std::max<uint64_t>(computing, round_up(kMinWorkgroup, sg));
    return workgroup <= d.max_workgroup_invocations ? workgroup : computing;
  };
  auto shared_bytes_of = [&](uint32_t blocks, uint32_t key_tile, uint32_t workgroup) {
    return attention_matrix_shared_bytes(blocks * p.m, p, s.head_size, key_tile, s.kv_layout, query_registers,
                                         workgroup);
  };
  return fit_matrix_tiles(d, p, wanted_rows, kMaxRowBlocks, kKeyTiles, workgroup_of, shared_bytes_of);
}

}  // namespace

size_t attention_matrix_shared_bytes(uint32_t rows, const MatrixProductShape& product, uint32_t head_size,
                                     uint32_t key_tile, KvLayout layout, bool query_registers, uint32_t workgroup) {
  // In 16-byte words, as the shader declares s_mem.
  const uint64_t dpad = round_up(head_size, 16), ds = dpad + 8, ts = uint64_t(key_tile) + 8, ss = uint64_t(key_tile) + 4;
  const uint64_t q_words = uint64_t(rows) * ds / 8;
  const uint64_t k_words = uint64_t(key_tile) * ds / 8;
  const uint64_t v_words = layout == KvLayout::vllm ? dpad * ts / 8 : uint64_t(key_tile) * ds / 8;
  const uint64_t block_words = uint64_t(product.m) * ss / 4 + uint64_t(product.m) * ts / 8;
  const uint64_t loop_end = (query_registers ? 0 : q_words) + k_words + v_words + uint64_t(rows / product.m) * block_words;
  const uint64_t mem_words = std::max(loop_end, q_words);
  // Five per-row arrays, three per-invocation arrays, the mask base, two flags, three maxima.
  return size_t(16 * mem_words + 4 * (5ull * rows + 3ull * workgroup + 6));
}

std::string matrix_attention_refusal(const DeviceCapabilities& d, const AttentionShape& s) {
  if (std::string refusal = matrix_dtype_refusal(d, s, "the matrix kernel"); !refusal.empty()) return refusal;
  if (s.head_size > 256)
    return fmt::format("head_size: {} (the matrix kernel takes multiples of 8 from 32 to 256)", s.head_size);
  const uint64_t pool_bytes = cache_geometry_of(s).pool_bytes();
  if (pool_past_range(d, pool_bytes))
    return fmt::format("num_blocks: a pool of {} blocks is {} bytes, past device {}'s maxStorageBufferRange of {} bytes "
                       "(the matrix kernel reads each pool through one descriptor; the scalar kernel reads such pools "
                       "by device address)",
                       s.num_blocks, pool_bytes, d.name, d.max_storage_buffer_range);
  if (const std::string refusal = matrix_product_refusal(d); !refusal.empty()) return refusal;
  const auto product = choose_matrix_product(d);
  if (!fit_tiles(d, s, *product, product->m))
    return fmt::format("head_size: {} needs {} bytes of shared memory per workgroup on the matrix kernel (one row block, "
                       "key tiles of 16), more than device {} has ({})",
                       s.head_size,
                       attention_matrix_shared_bytes(product->m, *product, s.head_size, 16, s.kv_layout,
                                                     query_in_registers(s),
                                                     uint32_t(round_up(kMinWorkgroup, d.max_subgroup_size))),
                       d.name, d.max_shared_memory);
  return "";
}

void plan_matrix_attention(AttentionChoice& c, const DeviceCapabilities& d, const AttentionShape& s) {
  const MatrixProductShape product = *choose_matrix_product(d);
  const uint32_t group = s.num_heads / s.num_kv_heads;
  take_matrix_tiles(c, d, product, *fit_tiles(d, s, product, uint64_t(c.max_query_tokens) * group), group);
  c.query_registers = query_in_registers(s);
}

}  // namespace vkpaged::detail
