// SPDX-License-Identifier: Apache-2.0
// The MLA planner's tensor-core family (shaders/mla_attention_matrix_khr.comp): the device's f16
// product (choose_matrix_product), the row blocks, value parts and key tile that fit its shared
// memory and workgroup, and why the kernel cannot run a shape where it cannot. Pure, as the rest
// of the planner.
#include <fmt/format.h>

#include <algorithm>
#include <limits>
#include <optional>

#include "ops/integer_math.hpp"
#include "ops/mla_attention_planner.hpp"

namespace vkpaged::detail {

namespace {

// Row blocks of m rows per workgroup at most: 4 blocks share each staged row among 4m rows
// (FlashMLA's 64 heads), if shared memory holds their scores, P and factors beside the staged rows
// (their queries are in registers).
constexpr uint32_t kMaxRowBlocks = 4;
// Key positions per tile, longest first: fewer barriers per position. Multiples of n and k.
constexpr uint32_t kKeyTiles[] = {64, 32, 16, 8};
// Cache words one invocation stages per tile, all loaded before any is stored (the shader's
// STAGE_LOADS, held in registers across the barrier that publishes a bf16 tile's largest
// magnitude): a tile longer than kShortKeyTile is taken only while it stays within kMaxStageWords
// (32 positions of fp8 rows, 16 of bf16, over 128 invocations), so that the staging does not
// crowd out the queries' and outputs' registers. With the bf16 conversion in registers, tiles of
// 32 bf16 positions spilled and measured slower than 16 on the H100
// (bench/experiments/mla-tile-chain.md, the third lease).
constexpr uint32_t kShortKeyTile = 16;
constexpr uint64_t kMaxStageWords = 36;
// Output columns one subgroup keeps in f32 accumulators at most: 128 columns of 16 rows are 64
// registers per lane on a subgroup of 32. DeepSeek's Dv = 512 takes 4 value parts.
constexpr uint32_t kMaxUnitColumns = 128;

// Output columns per value part, as the shader's DVP.
uint64_t part_columns(uint32_t dv, uint32_t parts, uint32_t n) { return round_up((dv + parts - 1) / parts, n); }

// The value parts: enough to keep each subgroup within kMaxUnitColumns, their columns within the
// staged rows' padded width, and the softmax's lanes per row whole (WG / rows an integer).
std::optional<uint32_t> choose_value_parts(const DeviceCapabilities& d, const MlaShape& m, const MatrixProductShape& p) {
  const uint32_t dv = m.value_head_size, dkpad = uint32_t(round_up(m.attention.head_size, 16));
  uint32_t parts = 1;
  while ((dv + parts - 1) / parts > kMaxUnitColumns) parts *= 2;
  while (parts > 1 && parts * part_columns(dv, parts, p.n) > dkpad) parts /= 2;
  while ((uint64_t(parts) * d.max_subgroup_size) % p.m != 0 && part_columns(dv, parts * 2, p.n) * parts * 2 <= dkpad)
    parts *= 2;
  if ((uint64_t(parts) * d.max_subgroup_size) % p.m != 0) return std::nullopt;
  return parts;
}

// The most row blocks the step needs (up to kMaxRowBlocks), then the longest key tile, that fit
// the device's shared memory and workgroup, each row block's value parts side by side.
struct MlaMatrixTiles {
  MatrixTileFit fit;
  uint32_t value_parts = 0;
};
std::optional<MlaMatrixTiles> fit_tiles(const DeviceCapabilities& d, const MlaShape& m, const MatrixProductShape& p,
                                        uint64_t wanted_rows, size_t shared_limit) {
  const auto parts = choose_value_parts(d, m, p);
  if (!parts) return std::nullopt;
  auto workgroup_of = [&](uint32_t blocks) { return uint64_t(blocks) * *parts * d.max_subgroup_size; };
  const uint64_t row_words = round_up(m.attention.head_size, 16) * dtype_size(m.attention.cache_dtype) / 4;
  auto shared_bytes_of = [&](uint32_t blocks, uint32_t key_tile, uint32_t workgroup) {
    const uint64_t stage_words = (key_tile * row_words + workgroup - 1) / workgroup;
    if (key_tile > kShortKeyTile && stage_words > kMaxStageWords) return std::numeric_limits<size_t>::max();  // not taken
    const size_t bytes = mla_matrix_shared_bytes(blocks * p.m, p, m.attention.head_size, key_tile, *parts, workgroup);
    return bytes <= shared_limit ? bytes : std::numeric_limits<size_t>::max();
  };
  const auto fit = fit_matrix_tiles(d, p, wanted_rows, kMaxRowBlocks, kKeyTiles, workgroup_of, shared_bytes_of);
  if (!fit) return std::nullopt;
  return MlaMatrixTiles{*fit, *parts};
}

// The product and tiles of a step whose rows want `wanted_rows`, in at most `most_workgroups`
// workgroups: the largest product's most row blocks and longest tile (fit_tiles), except where
// that is one row block (decode of up to m heads: bound by its loads) too large for two
// workgroups to share the device's shared memory per workgroup, and the step has more workgroups
// than compute units: then the largest product and longest tile with which two do, where one
// exists. One workgroup on a compute unit waits out its own loads; a second one resident beside
// it works meanwhile (NVIDIA's driver gives an SM's compute pipeline about that limit in all),
// though each of that layout's workgroups alone takes 1.3 times as long on an H200: a step that
// cannot fill the compute units one each keeps the largest layout
// (bench/experiments/mla-two-resident.md).
struct MlaMatrixLayout {
  MatrixProductShape product;
  MlaMatrixTiles tiles;
  uint32_t resident_workgroups = 1;
};
std::optional<MlaMatrixLayout> choose_layout(const DeviceCapabilities& d, const MlaShape& m, uint64_t wanted_rows,
                                            uint64_t most_workgroups) {
  const auto product = choose_matrix_product(d);
  if (!product) return std::nullopt;
  const auto tiles = fit_tiles(d, m, *product, wanted_rows, d.max_shared_memory);
  if (!tiles) return std::nullopt;
  if (wanted_rows > product->m) return MlaMatrixLayout{*product, *tiles, 1};
  if (2 * tiles->fit.shared_bytes <= d.max_shared_memory) return MlaMatrixLayout{*product, *tiles, 2};
  if (most_workgroups <= d.compute_units) return MlaMatrixLayout{*product, *tiles, 1};
  for (const MatrixProductShape& p : usable_matrix_products(d)) {
    if (p.m < wanted_rows) continue;
    if (const auto shared = fit_tiles(d, m, p, wanted_rows, d.max_shared_memory / 2)) return MlaMatrixLayout{p, *shared, 2};
  }
  return MlaMatrixLayout{*product, *tiles, 1};
}

}  // namespace

size_t mla_matrix_shared_bytes(uint32_t rows, const MatrixProductShape& p, uint32_t key_head_size, uint32_t key_tile,
                               uint32_t value_parts, uint32_t workgroup) {
  // In 16-byte words, as the shader declares s_mem.
  const uint64_t ds = round_up(key_head_size, 16) + 8, ts = uint64_t(key_tile) + 8, ss = uint64_t(key_tile) + 4;
  const uint64_t column_blocks = key_tile / p.n;
  const uint64_t score_parts = value_parts > column_blocks ? value_parts / column_blocks : 1;
  const uint64_t units = uint64_t(rows / p.m) * value_parts;
  const uint64_t s_words = score_parts * rows * ss / 4, w_words = units * p.m * p.n / 4;
  // The queries live in registers; one row block's pass through the front once.
  const uint64_t tile_words = uint64_t(key_tile) * ds / 8 + std::max(s_words, w_words) + uint64_t(rows) * ts / 8 +
                              uint64_t(rows) * p.n / 4;
  const uint64_t words = std::max(tile_words, uint64_t(p.m) * ds / 8);
  // Key blocks of two tiles, four per-row arrays, one per-invocation array, the mask base, two
  // flags, two maxima and a bf16 tile's magnitude.
  return size_t(16 * words + 4 * (2ull * key_tile + 4ull * rows + uint64_t(workgroup) + 6));
}

std::string mla_matrix_refusal(const DeviceCapabilities& d, const MlaShape& m) {
  const AttentionShape& s = m.attention;
  if (std::string refusal = matrix_dtype_refusal(d, s, "the MLA matrix kernel"); !refusal.empty()) return refusal;
  if (const std::string refusal = matrix_product_refusal(d); !refusal.empty()) return refusal;
  if (!d.subgroup_shuffle)
    return fmt::format("device {}: no subgroup shuffles in compute shaders (or ContextOptions::"
                       "disable_subgroup_arithmetic); the MLA matrix kernel's softmax rows exchange their maxima with "
                       "subgroupShuffleXor",
                       d.name);
  const auto product = choose_matrix_product(d);
  if (!choose_value_parts(d, m, *product))
    return fmt::format("device {}: subgroups of {} cannot share the {}-row blocks of its {}x{}x{} product evenly",
                       d.name, d.max_subgroup_size, product->m, product->m, product->n, product->k);
  if (!fit_tiles(d, m, *product, product->m, d.max_shared_memory))
    return fmt::format("head_size: Dk = {} needs more shared memory per workgroup on the MLA matrix kernel (one block "
                       "of {} rows, the shortest key tile) than device {} has ({} bytes)",
                       s.head_size, product->m, d.name, d.max_shared_memory);
  return "";
}

void plan_mla_matrix(AttentionChoice& c, const DeviceCapabilities& d, const MlaShape& m, uint64_t most_workgroups) {
  const uint32_t heads = m.attention.num_heads;  // one kv head: its group is every head
  const MlaMatrixLayout layout = *choose_layout(d, m, uint64_t(c.max_query_tokens) * heads, most_workgroups);
  take_matrix_tiles(c, d, layout.product, layout.tiles.fit, heads);
  c.value_parts = layout.tiles.value_parts;
  c.resident_workgroups = layout.resident_workgroups;
}

}  // namespace vkpaged::detail
