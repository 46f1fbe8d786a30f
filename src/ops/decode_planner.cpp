// SPDX-License-Identifier: Apache-2.0
// The decode planner (decode_planner.hpp): pure functions from a device's properties, the
// shape, the options and the tuning to a DecodeChoice. Each rule says what it chooses and names
// the experiment that chose it (bench/experiments/); the measurements live there.
#include "ops/decode_planner.hpp"

#include <fmt/format.h>

#include <algorithm>

#include "common/shader_interface.h"
#include "common/split_scratch.h"
#include "ops/attention_problem.hpp"
#include "ops/cache_geometry.hpp"
#include "ops/decode_validation.hpp"
#include "ops/integer_math.hpp"
#include "ops/pool_address_rule.hpp"
#include "vk/cooperative_matrix_khr.hpp"
#include "vkpaged/error.hpp"

namespace vkpaged::detail {

namespace {

struct ScalarModuleRow {
  DecodeModule module;
  bool subgroup, address, f16_math;
};
constexpr ScalarModuleRow kScalarModules[] = {
#define VKP_DECODE_SCALAR_VARIANT(name, subgroup, address, f16_math) {DecodeModule::name, subgroup, address, f16_math},
#define VKP_DECODE_MATRIX_VARIANT(...)
#include "decode_variants.def"
#undef VKP_DECODE_SCALAR_VARIANT
#undef VKP_DECODE_MATRIX_VARIANT
};

struct MatrixModuleRow {
  DecodeModule module;
  bool khr, token_major, head_slices, timeline, e4m3_nan;
};
constexpr MatrixModuleRow kMatrixModules[] = {
#define VKP_DECODE_SCALAR_VARIANT(...)
#define VKP_DECODE_MATRIX_VARIANT(name, khr, token_major, head_slices, timeline, e4m3_nan) \
  {DecodeModule::name, khr, token_major, head_slices, timeline, e4m3_nan},
#include "decode_variants.def"
#undef VKP_DECODE_SCALAR_VARIANT
#undef VKP_DECODE_MATRIX_VARIANT
};

}  // namespace

DecodeModule decode_scalar_module(bool subgroup, bool address, bool f16_math) {
  for (const ScalarModuleRow& r : kScalarModules)
    if (r.subgroup == subgroup && r.address == address && r.f16_math == f16_math) return r.module;
  throw Error(ErrorCode::internal, fmt::format("decode: shaders/decode_variants.def has no scalar module with subgroup {}, "
                                               "address {}, f16_math {}",
                                               subgroup, address, f16_math));
}

DecodeModule decode_matrix_module(bool khr, bool token_major, bool head_slices, bool timeline, bool e4m3_nan) {
  // The timeline's module carries the NaN search for every dtype.
  const bool nan_search = e4m3_nan || timeline;
  for (const MatrixModuleRow& r : kMatrixModules)
    if (r.khr == khr && r.token_major == token_major && r.head_slices == head_slices && r.timeline == timeline &&
        r.e4m3_nan == nan_search)
      return r.module;
  throw Error(ErrorCode::internal,
              fmt::format("decode: shaders/decode_variants.def has no matrix module with khr {}, token_major {}, "
                          "head_slices {}, timeline {}, e4m3_nan {}",
                          khr, token_major, head_slices, timeline, nan_search));
}

namespace {

// ---- shared by both kernel families ----

// The longest context the plan must cover: DecodeShape::max_context_len, else M * B.
uint32_t longest_context(const DecodeShape& s) {
  return s.max_context_len ? s.max_context_len : s.max_blocks_per_seq * s.block_size;
}

// Items decode_order.comp's one workgroup lists at most.
constexpr uint64_t kOrderCapacity = uint64_t(ORDER_WORKGROUP) * ORDER_ITEMS_PER_INVOCATION;

// Whether the plan asks for its items longest first (DecodeOrder).
bool wants_longest_first(const DecodeOptions& o, const DecodeTuning& tuning) {
  return o.order == DecodeOrder::longest_first || (o.order == DecodeOrder::automatic && tuning.order == 1);
}

// Workgroups of a one-pass grid, and how many the device wants: DecodeTuning::units per compute unit.
uint64_t one_pass_workgroups(const DecodeShape& s, uint32_t groups_per_kv_head) {
  return uint64_t(s.num_seqs) * s.num_kv_heads * groups_per_kv_head;
}
uint64_t wanted_workgroups(const DeviceCapabilities& dev, const DecodeTuning& tuning) {
  return uint64_t(tuning.units) * std::max(1u, dev.compute_units);
}

// Whether a one-pass grid would fill less than half of the wanted workgroups: the batch is then
// too small to keep the device's memory busy without help.
bool small_batch(uint64_t one_pass, const DeviceCapabilities& dev, const DecodeTuning& tuning) {
  return one_pass * 2 < wanted_workgroups(dev, tuning);
}

// The split's scratch: each partition's unnormalised output, max and sum per (sequence, head).
uint64_t split_scratch_bytes(const DecodeShape& s, uint32_t partitions) {
  return shader::split_scratch_bytes(uint64_t(s.num_seqs) * s.num_heads, partitions, s.head_size);
}

struct Split {
  bool split = false;
  uint32_t num_partitions = 1;
  uint32_t partition_tokens = 0;
  uint64_t scratch_bytes = 0;
};

// A split into partitions of `tokens` (or none) over the shape's longest context.
Split split_of(const DecodeShape& s, bool split, uint32_t tokens) {
  if (!split) return {};
  const uint32_t partitions = uint32_t(std::max<uint64_t>(1, ceil_div(longest_context(s), tokens)));
  return {true, partitions, tokens, split_scratch_bytes(s, partitions)};
}

// The split the options ask for, where they decide it: single pass (or nothing to cover), a
// forced split (partition_tokens, else a quarter of the context in multiples of 256), or
// partition_tokens alone (a split where partitions are shorter than the context).
std::optional<Split> split_asked(const DecodeShape& s, const DecodeOptions& o) {
  const uint32_t max_len = longest_context(s);
  if (o.split == SplitMode::single_pass || max_len == 0) return split_of(s, false, 0);
  if (o.split == SplitMode::split) {
    const uint32_t tokens = o.partition_tokens ? o.partition_tokens : std::max<uint32_t>(256, ceil_div(ceil_div(max_len, 4), 256) * 256);
    return split_of(s, true, tokens);
  }
  if (o.partition_tokens != 0) return split_of(s, o.partition_tokens < max_len, o.partition_tokens);
  return std::nullopt;
}

// A small batch's partitions (a multiple of 256 tokens) that bring the grid's workgroups up to
// about the wanted count: decode is bound by memory latency as much as bandwidth.
uint32_t small_batch_partition_tokens(const DecodeShape& s, uint64_t one_pass, const DeviceCapabilities& dev,
                                      const DecodeTuning& tuning) {
  const uint32_t parts = ceil_div(wanted_workgroups(dev, tuning), std::max<uint64_t>(one_pass, 1));
  return std::max<uint32_t>(256, ceil_div(ceil_div(longest_context(s), parts), 256) * 256);
}

struct Order {
  bool longest_first = false;
  size_t order_bytes = 0;
};

// Longest first, once the split is known: the list holds every (sequence, partition) item.
Order order_of(const DecodeShape& s, const DecodeOptions& o, const DecodeTuning& tuning, uint32_t partitions) {
  if (!wants_longest_first(o, tuning)) return {};
  const uint64_t items = uint64_t(s.num_seqs) * partitions;
  if (items > kOrderCapacity)
    throw Error(ErrorCode::unsupported,
                fmt::format("order: longest_first lists at most {} items (sequences x partitions), and this plan has "
                            "{} x {} = {}",
                            kOrderCapacity, s.num_seqs, partitions, items));
  return {true, size_t(4 * items)};
}

// What both families fill alike once the split is chosen: the split, the order (longest first
// lists every item of it), the reduce pass (none where the split merges in the dispatch) and the
// feature bits, the problem's (attention_problem.hpp) and decode's own.
void finish_choice(DecodeChoice& c, const DeviceCapabilities& dev, const DecodeShape& s, const DecodeOptions& o,
                   const DecodeTuning& tuning, const Split& split, bool merge_in_dispatch) {
  c.split = split.split;
  c.num_partitions = split.num_partitions;
  c.partition_tokens = split.partition_tokens;
  c.scratch_bytes = split.scratch_bytes;
  const Order order = order_of(s, o, tuning, split.num_partitions);
  c.longest_first = order.longest_first;
  c.order_bytes = order.order_bytes;
  c.merge_in_dispatch = merge_in_dispatch;
  // The merge pass's invocations, side by side over the output words and the partitions
  // (partition_merge.comp).
  c.reduce_workgroup = c.split && !merge_in_dispatch ? std::min(256u, dev.max_workgroup_invocations) : 0u;
  c.features = problem_feature_bits(decode_problem(s, o.sliding_window), c.split) |
               (c.longest_first ? FEATURE_ORDERED : 0u) | (merge_in_dispatch ? FEATURE_MERGE_IN_DISPATCH : 0u);
}

// ---- the scalar kernel (shaders/common/decode_kernel.glsl) ----

// The scalar kernel's variants (decode_kernel.glsl's header).
struct ScalarVariant {
  bool fp8_pairs = false;
  bool f16_keys = false;
  bool f16_values = false;
};

size_t scalar_shared_bytes(uint32_t wg, uint32_t heads, uint32_t d, uint32_t b, const ScalarVariant& v) {
  const size_t f16_keys = v.f16_keys ? 2ull * heads * d : 0;       // s_query16
  const size_t f16_values = v.f16_values ? 2ull * heads * wg : 0;  // s_prob16
  // queries, probabilities and reduction (heads x wg each), tile blocks, query and output row words
  return 4ull * (size_t(heads) * d + 2ull * heads * wg + wg / b + 2ull * heads) + f16_keys + f16_values;
}

// The variants the tuning asks for, where they apply: fp8 pairs for fp8 caches; packed f16 for
// an f16 query and cache on a device with shaderFloat16, caches not read by address (no module
// has both), values on the vllm layout with blocks of 8 tokens or more.
ScalarVariant scalar_variant(const DeviceCapabilities& dev, const DecodeShape& s, const DecodeTuning& tuning,
                             bool address) {
  ScalarVariant v;
  v.fp8_pairs = tuning.fp8conv != 0 && is_fp8_dtype(s.cache_dtype);
  const bool f16 = tuning.f16math != 0 && dev.shader_float16 && !address && s.query_dtype == DType::f16 &&
                   s.cache_dtype == DType::f16;
  v.f16_keys = f16 && (tuning.f16math & 1);
  v.f16_values = f16 && (tuning.f16math & 2) && s.kv_layout == KvLayout::vllm && s.block_size >= 8;
  return v;
}

struct ScalarWorkgroup {
  uint32_t workgroup = 256;
  uint32_t heads_per_workgroup = 1;
  uint32_t groups_per_kv_head = 1;
  uint32_t lanes_per_row = 1;
};

// The workgroup shape: heads per workgroup (a GQA group or a slice of it), invocations, lanes
// per value row. A tile is one token per invocation.
ScalarWorkgroup scalar_workgroup(const DeviceCapabilities& dev, const DecodeShape& s, const DecodeTuning& tune,
                                 const ScalarVariant& variant) {
  ScalarWorkgroup w;
  const uint32_t group = s.num_heads / s.num_kv_heads;
  // At most 4 heads' accumulators: measured faster than 8 for a GQA group of 8 on an H200
  // (bench/experiments/scalar-kernel.md).
  const uint32_t max_heads = tune.heads ? tune.heads : 4;
  w.groups_per_kv_head = ceil_div(group, max_heads);
  w.heads_per_workgroup = ceil_div(group, w.groups_per_kv_head);
  w.workgroup = std::min(tune.workgroup ? tune.workgroup : 256u, dev.max_workgroup_invocations);
  auto shared = [&] { return scalar_shared_bytes(w.workgroup, w.heads_per_workgroup, s.head_size, s.block_size, variant); };
  while (w.workgroup > 128 && shared() > dev.max_shared_memory) w.workgroup /= 2;
  while (w.heads_per_workgroup > 1 && shared() > dev.max_shared_memory) {
    ++w.groups_per_kv_head;
    w.heads_per_workgroup = ceil_div(group, w.groups_per_kv_head);
  }
  if (w.workgroup < s.block_size || 256 % w.workgroup != 0 || shared() > dev.max_shared_memory)
    throw Error(ErrorCode::unsupported,
                fmt::format("head_size {} with block_size {} needs more shared memory or invocations than device {} has",
                            s.head_size, s.block_size, dev.name));

  // Value phase: lanes of a dim row; start at one lane per 16-byte load of a block row and
  // widen while more rows than dims would leave invocations idle. (More lanes, so that each
  // probability serves several dims, measured slower: more accumulators, lower occupancy;
  // bench/experiments/scalar-kernel.md.)
  const uint32_t x = cache_pack_factor(s.cache_dtype);
  const uint32_t vec = std::min(s.block_size, x);
  const uint32_t tile_loads = w.workgroup / vec;
  w.lanes_per_row = std::min(s.block_size / vec, tile_loads);
  while (w.workgroup / w.lanes_per_row > s.head_size && w.lanes_per_row * 2 <= tile_loads) w.lanes_per_row *= 2;
  if (tune.lanes && is_power_of_two(tune.lanes) && tune.lanes <= tile_loads) w.lanes_per_row = tune.lanes;
  return w;
}

// The scalar kernel splits full batches past this many tokens, into at most
// kLongContextParts partitions (scalar_split).
constexpr uint32_t kLongContextTokens = 4096;
constexpr uint32_t kLongContextParts = 8;

Split scalar_split(const DeviceCapabilities& dev, const DecodeShape& s, const DecodeOptions& o,
                   const DecodeTuning& tuning, uint64_t one_pass) {
  if (auto asked = split_asked(s, o)) return *asked;
  const uint32_t max_len = longest_context(s);
  if (small_batch(one_pass, dev, tuning)) {
    const uint32_t tokens = small_batch_partition_tokens(s, one_pass, dev, tuning);
    return split_of(s, tokens < max_len, tokens);
  }
  if (max_len > kLongContextTokens) {
    // A full batch, but each workgroup would walk more than 4K tokens alone: when the lengths
    // vary, the longest sequences' workgroups run on after the rest have finished. Partitions
    // of 1024 tokens or more measured faster on an H200 for MHA with lengths spread to 8K and
    // no slower for uniform ones
    // (bench/experiments/split-and-merge.md#the-scalar-kernel-splits-full-batches-past-4096-tokens).
    // At most kLongContextParts partitions, so that the scratch stays small, and none where it
    // would not fit one descriptor.
    const uint32_t tokens = std::max<uint32_t>(1024, ceil_div(ceil_div(max_len, kLongContextParts), 256) * 256);
    return split_of(s, split_scratch_bytes(s, ceil_div(max_len, tokens)) <= dev.max_storage_buffer_range, tokens);
  }
  return split_of(s, false, 0);
}

// nhd and hnd: dims per value load along a token's row (the invocations of a token lane read
// the row in one sweep). 8 bytes by default: a 128-dim f16 row is one 32-wide sweep, and each
// invocation keeps 4 dims' accumulators per head (16-byte loads hold twice as many).
uint32_t scalar_value_dims(const DecodeShape& s, const DecodeTuning& tuning) {
  if (s.kv_layout == KvLayout::vllm) return 0;
  const uint32_t bytes = tuning.vbytes ? tuning.vbytes : 8;
  return uint32_t(bytes / dtype_size(s.cache_dtype));
}

DecodeModule scalar_module(bool address, bool subgroup_reduce, const ScalarVariant& variant) {
  // The address modules have no packed-f16 variant.
  return decode_scalar_module(subgroup_reduce, address, !address && (variant.f16_keys || variant.f16_values));
}

// ---- the matrix kernel (shaders/common/decode_coopmat_kernel.glsl) ----

constexpr uint32_t kMatrixHeads = 8;        // heads of its value products
constexpr uint32_t kMatrixSubgroup = 32;    // the subgroup size it is written for
constexpr uint32_t kMatrixUnitTokens = 32;  // tokens a subgroup takes per step (UNIT in the shader)

// The matrix kernel's shared memory: the f16 query rows of its 8 heads per slice and each
// subgroup's outputs (in the same words when the plan shares them and the query's fragments go
// to registers), then each subgroup's max, sum and weight, the output factor, query fix and
// row maximum per head, and the in-dispatch merge's arrival word.
size_t matrix_shared_bytes(uint32_t subgroups, uint32_t d, bool share_query, const DecodeTuning& tuning,
                           uint32_t slices = 1) {
  const size_t heads = size_t(kMatrixHeads) * slices;
  const size_t query = heads * d * 2;
  const size_t outputs = size_t(subgroups) * kMatrixHeads * d * 4;
  const size_t shared_words = share_query && tuning.qregs != 0 ? std::max(query, outputs) : query + outputs;
  return shared_words + subgroups * kMatrixHeads * 3 * 4 + heads * 4 * 3 + 4;
}

// Whether the matrix kernel can run `walkers` subgroups per slice of heads (`slices` x 8 heads
// per workgroup) on this device.
bool matrix_subgroups_fit(uint32_t walkers, uint32_t head_size, const DeviceCapabilities& dev,
                          const DecodeTuning& tuning, uint32_t slices = 1) {
  return matrix_shared_bytes(walkers * slices, head_size, false, tuning, slices) <= dev.max_shared_memory &&
         walkers * slices * kMatrixSubgroup <= dev.max_workgroup_invocations;
}

// Whether the matrix kernel issues a unit's value loads with its key loads: where the cache's
// elements are converted (bf16, fp8), the conversions between the loads and the products give
// the early values time to arrive. Measured on an H200: faster for E4M3 (most), E5M2 and bf16,
// slower for f16 (bench/experiments/load-scheduling.md#values-with-keys-for-bf16-and-fp8).
bool matrix_early_values(const DecodeShape& s, const DecodeTuning& tuning) {
  if (tuning.prefetch != 2) return tuning.prefetch != 0;
  return s.cache_dtype != DType::f16;
}

// Whether the matrix kernel issues the next unit's loads before this unit's products (two
// units in flight per subgroup, twice the load registers): measured on an H200 faster for fp8
// caches, slower for f16 and much slower for bf16, which runs out of registers
// (bench/experiments/load-scheduling.md#the-next-unit-ahead-for-fp8).
bool matrix_pipeline(const DecodeShape& s, const DecodeTuning& tuning) {
  if (tuning.pipeline != 2) return tuning.pipeline != 0;
  return is_fp8_dtype(s.cache_dtype);
}

// Whether the matrix kernel's outputs reuse the query's shared words (smaller workgroups: on an
// H200, 5 resident per SM instead of 4 for 2 subgroups at D = 128). Measured on an H200 faster
// where workgroups come and go in many waves or out of step (contexts up to 512 tokens, lengths
// that vary taken longest first), slower for uniform batches of 1024 to 2048 tokens, whose
// waves then leave a short last one, and for E4M3 caches, whose residency their registers bound
// (bench/experiments/residency.md#the-query-as-f16-pairs-and-the-outputs-over-its-words).
constexpr uint32_t kShareQueryTokens = 512;

bool matrix_share_query(const DecodeShape& s, const DecodeOptions& o, const DecodeTuning& tuning) {
  if (tuning.share != 2) return tuning.share != 0;
  return s.cache_dtype != DType::fp8_e4m3 && (wants_longest_first(o, tuning) || longest_context(s) <= kShareQueryTokens);
}

// A small batch runs in one pass with more subgroups per workgroup (4 or 8) when that gives the
// grid at least kMatrixWideSubgroupsPerComputeUnit subgroups per compute unit and each subgroup
// kMatrixWideUnits units of 32 tokens or more: no split, no reduce pass. Measured on an H200
// faster than a split and than fewer subgroups for 16 x 16384 and 32 x 8192 tokens and for
// gqa8x (suite `lengths` and the small standard shapes:
// bench/experiments/matrix-kernel-subgroups.md#one-pass-on-more-subgroups-for-small-batches).
constexpr uint32_t kMatrixWideSubgroupsPerComputeUnit = 7;
constexpr uint32_t kMatrixWideUnits = 8;

// The subgroups of such a one pass (0: none fits, or the tuning moved DecodeTuning::units).
uint32_t wide_one_pass_subgroups(const DeviceCapabilities& dev, const DecodeShape& s, const DecodeTuning& tuning,
                                 uint64_t one_pass, uint32_t slices) {
  if (tuning.units != DecodeTuning{}.units) return 0;
  const uint64_t wanted = uint64_t(kMatrixWideSubgroupsPerComputeUnit) * std::max(1u, dev.compute_units);
  for (uint32_t subgroups : {4u, 8u}) {
    const bool enough = one_pass * subgroups >= wanted;
    const bool long_enough = longest_context(s) >= subgroups * kMatrixWideUnits * kMatrixUnitTokens;
    if (enough && long_enough && matrix_subgroups_fit(subgroups, s.head_size, dev, tuning, slices)) return subgroups;
  }
  return 0;
}

// The matrix kernel's longest automatic partition (matrix_split).
constexpr uint32_t kMatrixLongestPartition = 8192;

struct MatrixSplit {
  Split split;
  uint32_t wide_subgroups = 0;  // a small batch's one pass on 4 or 8 subgroups (wide_one_pass_subgroups); 0: no
};

MatrixSplit matrix_split(const DeviceCapabilities& dev, const DecodeShape& s, const DecodeOptions& o,
                         const DecodeTuning& tuning, uint64_t one_pass, uint32_t slices) {
  if (auto asked = split_asked(s, o)) return {*asked, 0};
  if (!small_batch(one_pass, dev, tuning)) return {split_of(s, false, 0), 0};
  if (const uint32_t wide = wide_one_pass_subgroups(dev, s, tuning, one_pass, slices)) return {split_of(s, false, 0), wide};
  const uint32_t max_len = longest_context(s);
  uint32_t tokens = small_batch_partition_tokens(s, one_pass, dev, tuning);
  if (tuning.units == DecodeTuning{}.units) {
    // The matrix kernel streams a partition faster than it starts one: partitions of 1024 to
    // 8192 tokens (the longest measured), 512 only below 4096 tokens when the batch leaves
    // most compute units idle. Measured on an H200: shorter partitions lose, 1024 beat one pass
    // from 2048 tokens, and longer contexts gain from longer partitions up to 8192
    // (bench/experiments/split-and-merge.md#partition-sizes-for-the-matrix-kernel and the earlier
    // sweeps it links).
    const bool tiny = one_pass * 4 < std::max(1u, dev.compute_units);
    tokens = max_len < 4096 && tiny ? 512 : std::clamp<uint32_t>(tokens, 1024, kMatrixLongestPartition);
  }
  return {split_of(s, tokens < max_len, tokens), 0};
}

// A full batch longest first (lengths that vary) runs in one pass on 4 subgroups past this many
// tokens, so that its longest sequences, started first, finish sooner. Measured on an H200 for
// 64 sequences of 1 to 4096 tokens (4 beat 2 and 8) and 256 of 1 to 1024 (2 beat 4)
// (bench/experiments/longest-first.md).
constexpr uint32_t kOrderedFourSubgroupsTokens = 2048;

// Subgroups per workgroup of the matrix kernel (per slice of heads), once the split is known.
// Measured on an H200: 2 for large batches in one pass and with 512-token partitions, 4 with
// partitions of 1024 tokens or more and for small batches in one pass
// (bench/experiments/matrix-kernel-history.md#what-was-tried-on-the-rebuilt-kernel; later
// sweeps in bench/experiments/matrix-kernel-subgroups.md); small batches that reach enough
// subgroups in one pass take what matrix_split found.
uint32_t matrix_subgroups(const DeviceCapabilities& dev, const DecodeShape& s, const DecodeOptions& o,
                          const DecodeTuning& tuning, const MatrixSplit& ms, uint64_t one_pass, uint32_t slices) {
  const bool long_ordered = wants_longest_first(o, tuning) && longest_context(s) > kOrderedFourSubgroupsTokens;
  const bool four = ms.split.split ? ms.split.partition_tokens >= 1024 : small_batch(one_pass, dev, tuning) || long_ordered;
  uint32_t subgroups = four ? 4 : 2;
  if (ms.wide_subgroups != 0) subgroups = ms.wide_subgroups;
  if (tuning.subgroups != 0) subgroups = tuning.subgroups;
  while (subgroups > 1 && !matrix_subgroups_fit(subgroups, s.head_size, dev, tuning, slices)) subgroups /= 2;
  return subgroups;
}

// Head slices (DecodeTuning::slices): a GQA group of more than 8 heads runs in one workgroup of
// up to kMatrixMostSlices slices of 8 heads, each slice's subgroups reading the same keys and
// values (once from memory, the SM's L1 serving the rest), where without them each 8 heads'
// workgroup reads them all. Not measured yet: off unless the tuning asks. The vllm layout's
// modules only, and not with the timeline.
constexpr uint32_t kMatrixMostSlices = 4;

uint32_t matrix_head_slices(const DecodeShape& s, const DecodeOptions& o, const DecodeTuning& tuning,
                            const DeviceCapabilities& dev) {
  const uint32_t group = s.num_heads / s.num_kv_heads;
  if (tuning.slices == 0 || group <= kMatrixHeads || s.kv_layout != KvLayout::vllm || o.timeline) return 1;
  uint32_t slices = uint32_t(std::min<uint64_t>(ceil_div(group, kMatrixHeads), kMatrixMostSlices));
  while (slices > 1 && !matrix_subgroups_fit(1, s.head_size, dev, tuning, slices)) --slices;
  return slices;
}

// DecodeMerge::in_dispatch: the most partial outputs (partitions x heads x head size, f32) one
// workgroup merges. Its 2 to 8 subgroups load 8 partitions at a time, one memory latency per
// round. Measured on an H200: merges of up to 4096 floats beat the reduce pass (mid8, d64),
// larger ones lost to it (long1)
// (bench/experiments/in-dispatch-merge.md#landed-counters-of-their-own-small-merges-only).
constexpr uint64_t kMergeInDispatchFloats = 4096;

}  // namespace

namespace {

// Why the device cannot run the matrix kernel through the extension, its fragment layout aside
// ("" when it can).
std::string matrix_extension_refusal(const DeviceCapabilities& dev, bool khr) {
  if (!khr) {
    if (!dev.cooperative_matrix)
      return fmt::format("device {} has no VK_NV_cooperative_matrix enabled with 16x8x16 f16 products, f16 "
                         "storage and 32-wide subgroups",
                         dev.name);
    return "";
  }
  if (!dev.khr_matrix()) {
    const std::string& why = dev.khr_matrix_refusal;  // the Context's words, which name the device
    return why.rfind("device ", 0) == 0 ? why : fmt::format("device {}: {}", dev.name, why);
  }
  // The kernel's products are 16x8x16 with f16 operands and f32 accumulators: the tile shape it
  // is written for, which the device must list.
  if (!dev.lists_f16_product(16, 8, 16))
    return fmt::format("device {} does not list the 16x8x16 product with f16 A and B and f32 accumulators at "
                       "subgroup scope (VK_KHR_cooperative_matrix), the matrix kernel's tile",
                       dev.name);
  // A full-subgroup dispatch is a multiple of the largest subgroup wide, and the kernel's
  // workgroups are multiples of 32 from 32 up.
  if (dev.max_subgroup_size != kMatrixSubgroup)
    return fmt::format("device {} has subgroups of up to {}, and the KHR matrix kernel runs full subgroups of {}",
                       dev.name, dev.max_subgroup_size, kMatrixSubgroup);
  return "";
}

// Why the shape cannot run on the matrix kernel, on a device that has its extension ("" when it can).
std::string matrix_shape_refusal(const DeviceCapabilities& dev, const DecodeShape& s, bool address) {
  if (dev.subgroup_size != kMatrixSubgroup)
    return fmt::format("device {} has subgroups of {}, and the matrix kernel is written for {}", dev.name,
                       dev.subgroup_size, kMatrixSubgroup);
  const bool fp8 = is_fp8_dtype(s.cache_dtype);
  const bool sixteen_bit_query = s.query_dtype == DType::f16 || s.query_dtype == DType::bf16;
  if (!sixteen_bit_query || s.cache_dtype == DType::f32)
    return fmt::format("query_dtype {} and cache_dtype {}: the matrix kernel takes an f16 or bf16 query with an f16, "
                       "bf16 or fp8 cache",
                       dtype_name(s.query_dtype), dtype_name(s.cache_dtype));
  // Each lane feeds 4 dims of a row per dim step from one 16-byte key chunk: 2 steps of an
  // f16 chunk, 4 of an fp8 one, and the 4 lanes of a row take 4 chunks side by side. On a
  // token-major layout (nhd, hnd) each lane also loads 8 dims of a token per 64 of its values.
  const bool token_major = s.kv_layout != KvLayout::vllm;
  const uint32_t dims_per_load = fp8 || token_major ? 64 : 32;
  if (s.head_size % dims_per_load != 0)
    return token_major ? fmt::format("head_size: {} is not a multiple of 64 (kv_layout {})", s.head_size,
                                     kv_layout_name(s.kv_layout))
                       : fmt::format("head_size: {} is not a multiple of {} (cache_dtype {})", s.head_size,
                                     dims_per_load, dtype_name(s.cache_dtype));
  if (s.block_size % 8 != 0) return fmt::format("block_size: {} is not a multiple of 8", s.block_size);
  if (address) return "num_blocks: the caches are past maxStorageBufferRange (read by device address)";
  if (matrix_shared_bytes(1, s.head_size, false, DecodeTuning{}) > dev.max_shared_memory)
    return fmt::format("head_size: {} needs more shared memory than device {} has", s.head_size, dev.name);
  return "";
}

// The fragment layout's verdict for the extension: std::nullopt before the probe, "" where the
// layout is the kernel's, else the difference.
const std::optional<std::string>& layout_mismatch(const DeviceCapabilities& dev, bool khr) {
  return khr ? dev.khr_fragment_layout_mismatch : dev.fragment_layout_mismatch;
}

std::string layout_refusal(const DeviceCapabilities& dev, bool khr) {
  const auto& mismatch = layout_mismatch(dev, khr);
  const char* which = khr ? "VK_KHR_cooperative_matrix's 16x8x16" : "its";
  if (!mismatch) return fmt::format("device {}: the layout of {} matrix fragments has not been checked", dev.name, which);
  if (mismatch->empty()) return "";
  return khr ? fmt::format("device {}: VK_KHR_cooperative_matrix's 16x8x16 fragments: {}", dev.name, *mismatch)
             : fmt::format("device {}: {}", dev.name, *mismatch);
}

}  // namespace

std::string matrix_kernel_refusal(const DeviceCapabilities& dev, const DecodeShape& s, bool address, bool khr) {
  if (std::string why = matrix_extension_refusal(dev, khr); !why.empty()) return why;
  if (std::string why = matrix_shape_refusal(dev, s, address); !why.empty()) return why;
  return layout_refusal(dev, khr);
}

DecodeKernelChoice choose_decode_kernel(const DeviceCapabilities& dev, const DecodeShape& shape,
                                        const DecodeOptions& options, const DecodeTuning& tuning) {
  validate_decode_shape(shape);
  validate_decode_options(options);
  DecodeKernelChoice k;
  k.address = pool_read_by_address(dev, cache_geometry_of(decode_problem(shape)).pool_bytes(), shape.num_blocks, "a pool");
  const bool force_khr = options.kernel == DecodeKernel::matrix_khr;
  const bool forced = options.kernel == DecodeKernel::matrix || force_khr;
  const bool want_matrix =
      forced || (options.kernel == DecodeKernel::automatic && tuning.matrix != 0 && shape.num_heads > shape.num_kv_heads);
  if (!want_matrix) return k;
  // NV where it runs (the module the kernel was tuned on), else KHR; matrix_khr takes KHR only.
  // Each extension is judged on everything but its fragment layout first: a layout is probed
  // (a dispatch) only for the extension that would run the plan.
  std::string refusal;
  for (const bool khr : {false, true}) {
    if (!khr && force_khr) continue;
    std::string why = matrix_extension_refusal(dev, khr);
    if (why.empty()) {
      // The shape's refusal is the same on either extension: no need to try the other.
      if (std::string shape_why = matrix_shape_refusal(dev, shape, k.address); !shape_why.empty()) {
        refusal = refusal.empty() ? shape_why : refusal + "; and on VK_KHR_cooperative_matrix: " + shape_why;
        break;
      }
      if (!layout_mismatch(dev, khr)) {
        (khr ? k.needs_khr_fragment_layout : k.needs_fragment_layout) = true;
        return k;
      }
      why = layout_refusal(dev, khr);
      if (why.empty()) {
        k.matrix = true;
        k.khr = khr;
        return k;
      }
    }
    refusal = refusal.empty() ? why : refusal + "; and on VK_KHR_cooperative_matrix: " + why;
  }
  k.matrix_refusal = refusal;
  if (forced)
    throw Error(ErrorCode::unsupported,
                fmt::format("kernel: {}: {}", force_khr ? "matrix_khr" : "matrix", k.matrix_refusal));
  return k;
}

DecodeChoice plan_scalar_decode(const DeviceCapabilities& dev, const DecodeShape& s, const DecodeOptions& o,
                                const DecodeTuning& tuning, bool address) {
  const ScalarVariant variant = scalar_variant(dev, s, tuning, address);
  const ScalarWorkgroup w = scalar_workgroup(dev, s, tuning, variant);
  DecodeChoice c{.kernel = DecodeKernel::scalar,
                 .module = scalar_module(address, dev.subgroup_arithmetic, variant),
                 .address = address,
                 .workgroup = w.workgroup,
                 .heads_per_workgroup = w.heads_per_workgroup,
                 .groups_per_kv_head = w.groups_per_kv_head,
                 .lanes_per_row = w.lanes_per_row,
                 .value_dims = scalar_value_dims(s, tuning),
                 .fp8_pairs = variant.fp8_pairs,
                 .f16_keys = variant.f16_keys,
                 .f16_values = variant.f16_values,
                 .value_loads = tuning.vloads ? tuning.vloads : 1,
                 .subgroup_reduce = dev.subgroup_arithmetic,
                 .query_registers = tuning.qregs != 0};
  // DecodeMerge::in_dispatch is the matrix kernel's: the scalar kernel's split keeps its reduce pass.
  finish_choice(c, dev, s, o, tuning, scalar_split(dev, s, o, tuning, one_pass_workgroups(s, w.groups_per_kv_head)),
                false);
  return c;
}

DecodeChoice plan_matrix_decode(const DeviceCapabilities& dev, const DecodeShape& s, const DecodeOptions& o,
                                const DecodeTuning& tuning, bool khr) {
  DecodeChoice c;
  c.kernel = DecodeKernel::matrix;
  c.khr = khr;
  c.address = false;
  c.value_loads = 0;
  const uint32_t group = s.num_heads / s.num_kv_heads;
  const uint32_t slices = matrix_head_slices(s, o, tuning, dev);
  c.groups_per_kv_head = ceil_div(group, kMatrixHeads * slices);
  c.heads_per_workgroup = ceil_div(group, c.groups_per_kv_head);
  c.head_slices = ceil_div(c.heads_per_workgroup, kMatrixHeads);  // <= slices
  c.lanes_per_row = 0;
  c.early_values = matrix_early_values(s, tuning);
  c.pipeline = matrix_pipeline(s, tuning);
  c.share_query = matrix_share_query(s, o, tuning);
  c.query_registers = tuning.qregs != 0;
  // E4M3 caches take a module with the NaN search compiled in; the other dtypes' go without it.
  // Token-major layouts take their own modules, head slices are the vllm layout's, and the
  // timeline is recorded by NV's module of the vllm layout without slices.
  const bool token_major = s.kv_layout != KvLayout::vllm;
  const bool sliced = !token_major && c.head_slices > 1;
  c.module = decode_matrix_module(khr, token_major, sliced, o.timeline && !khr && !token_major && !sliced,
                                  s.cache_dtype == DType::fp8_e4m3);

  const uint64_t one_pass = one_pass_workgroups(s, c.groups_per_kv_head);
  const MatrixSplit ms = matrix_split(dev, s, o, tuning, one_pass, c.head_slices);
  c.subgroups = matrix_subgroups(dev, s, o, tuning, ms, one_pass, c.head_slices) * c.head_slices;
  c.workgroup = c.subgroups * kMatrixSubgroup;
  // DecodeMerge::in_dispatch: the split merges itself (split_merge.glsl) where that merge is
  // small enough to win; larger ones keep the reduce pass.
  const bool merge_in_dispatch = o.merge == DecodeMerge::in_dispatch && ms.split.split &&
                                 uint64_t(ms.split.num_partitions) * c.heads_per_workgroup * s.head_size <=
                                     kMergeInDispatchFloats;
  finish_choice(c, dev, s, o, tuning, ms.split, merge_in_dispatch);
  c.merge_counter_bytes = c.merge_in_dispatch ? 4ull * s.num_seqs * s.num_heads : 0;
  if (o.timeline)
    c.timeline_bytes = size_t(s.num_kv_heads) * c.groups_per_kv_head * s.num_seqs * c.num_partitions * c.subgroups *
                       DECODE_TIMELINE_WORDS * 4;
  return c;
}

DecodeChoice plan_decode(const DeviceCapabilities& dev, const DecodeShape& shape, const DecodeOptions& options,
                         const DecodeTuning& tuning) {
  const DecodeKernelChoice k = choose_decode_kernel(dev, shape, options, tuning);
  if (k.needs_fragment_layout || k.needs_khr_fragment_layout)
    throw Error(ErrorCode::internal,
                fmt::format("kernel: device {}: the matrix kernel's fragment layout must be probed before planning "
                            "(DeviceCapabilities::{})",
                            dev.name, k.needs_khr_fragment_layout ? "khr_fragment_layout_mismatch" : "fragment_layout_mismatch"));
  if (options.timeline && !k.matrix)
    throw Error(ErrorCode::unsupported,
                "timeline: only the matrix kernel records one, and this plan runs the scalar kernel" +
                    (k.matrix_refusal.empty() ? std::string(" (kernel: scalar, or an MHA shape)")
                                              : " (" + k.matrix_refusal + ")"));
  if (options.timeline && shape.kv_layout != KvLayout::vllm)
    throw Error(ErrorCode::unsupported, fmt::format("timeline: the matrix kernel records one on the vllm layout only, and "
                                                    "the caches are {}",
                                                    kv_layout_name(shape.kv_layout)));
  if (options.timeline && k.khr)
    throw Error(ErrorCode::unsupported,
                "timeline: the matrix kernel records one through VK_NV_cooperative_matrix only, and this plan runs it "
                "through VK_KHR_cooperative_matrix");
  if (options.timeline && !dev.decode_timeline)
    throw Error(ErrorCode::unsupported,
                fmt::format("timeline: device {} lacks VK_KHR_shader_clock's device clock, VK_NV_shader_sm_builtins or "
                            "buffer device addresses (DeviceInfo::decode_timeline)",
                            dev.name));
  const DecodeChoice c = k.matrix ? plan_matrix_decode(dev, shape, options, tuning, k.khr)
                                  : plan_scalar_decode(dev, shape, options, tuning, k.address);
  // The grid is (kv-head groups, S, partitions) and the scratch one descriptor: refuse what no
  // device launches or binds, before anything is allocated or recorded. 65535 is the
  // maxComputeWorkGroupCount every device has.
  if (shape.num_seqs > 65535)
    throw Error(ErrorCode::unsupported,
                fmt::format("num_seqs: {} sequences exceed the 65535 workgroups a dispatch may have in y", shape.num_seqs));
  if (c.num_partitions > 65535 || c.scratch_bytes > dev.max_storage_buffer_range)
    throw Error(ErrorCode::unsupported,
                fmt::format("partition_tokens: {} partitions of {} tokens need {} bytes of scratch (at most 65535 "
                            "partitions within the device's maxStorageBufferRange of {} bytes)",
                            c.num_partitions, c.partition_tokens, c.scratch_bytes, dev.max_storage_buffer_range));
  return c;
}

}  // namespace vkpaged::detail
