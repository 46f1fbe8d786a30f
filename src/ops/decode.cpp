// Host side of shaders/decode*.comp and shaders/decode_reduce.comp: planning (variant, split,
// scratch), view checks, recording, and the run-and-wait convenience.
#include "vkpaged/decode.hpp"

#include <fmt/format.h>

#include <algorithm>
#include <cmath>
#include <cstdlib>
#include <string_view>

#include "embedded_shaders.hpp"
#include "ops/decode_plan.hpp"
#include "ops/fragment_layout.hpp"
#include "ops/decode_validation.hpp"
#include "ops/view_checks.hpp"
#include "vkpaged/error.hpp"

namespace vkpaged {

static_assert(decode_timeline::sm == DECODE_TIMELINE_SM && decode_timeline::workgroup == DECODE_TIMELINE_WORKGROUP &&
                  decode_timeline::subgroup == DECODE_TIMELINE_SUBGROUP && decode_timeline::units == DECODE_TIMELINE_UNITS &&
                  decode_timeline::stamps == DECODE_TIMELINE_STAMPS && decode_timeline::words == DECODE_TIMELINE_WORDS,
              "the timeline record of include/vkpaged/decode.hpp and shaders/common/shader_interface.h");

static_assert(kStatusBadBlockId == STATUS_BAD_BLOCK_ID && kStatusBadContextLen == STATUS_BAD_CONTEXT_LEN &&
                  kStatusBadOrder == STATUS_BAD_ORDER && kStatusBadMergeCounters == STATUS_BAD_MERGE_COUNTERS,
              "the status bits of include/vkpaged/decode.hpp and shaders/common/shader_interface.h");

using detail::DecodePlanData;
namespace sh = vkpaged::shader;

namespace {

uint32_t ceil_div(uint64_t a, uint64_t b) { return uint32_t((a + b - 1) / b); }

// Tuning knobs, from measurement (bench/RESULTS.md); VKPAGED_DECODE_TUNE overrides them for
// experiments, e.g. "lanes=4,workgroup=128,units=8,heads=4". 0 means "choose".
struct Tuning {
  uint32_t lanes = 0;            // lanes per dim row in the value phase
  uint32_t workgroup = 0;        // invocations per workgroup (128 or 256)
  uint32_t units = 4;            // split: workgroups wanted per compute unit
  uint32_t heads = 0;            // most query heads per workgroup (GQA groups are sliced)
  // 1: automatic picks the matrix kernel for GQA groups where it can run (on an H200 it beat
  // the scalar kernel on every GQA shape and lost on MHA, bench/RESULTS.md); 0: never.
  uint32_t matrix = 1;
  uint32_t subgroups = 0;        // matrix kernel: subgroups per workgroup
  uint32_t prefetch = 2;         // matrix kernel: value loads issued with the key loads (0 no, 1 yes, 2 by dtype)
  uint32_t qregs = 1;            // matrix kernel: query fragments kept in registers
  uint32_t pipeline = 2;         // matrix kernel: the next unit's loads issued before this unit's products (0 no, 1 yes, 2 by dtype)
  uint32_t order = 2;            // DecodeOrder::automatic: 0 grid, 1 longest first, 2 choose
  uint32_t share = 2;            // matrix kernel: outputs reuse the query's shared words (0 no, 1 yes, 2 choose)
};

Tuning tuning_from_env() {
  Tuning t;
  const char* env = std::getenv("VKPAGED_DECODE_TUNE");
  if (env == nullptr) return t;
  std::string_view rest(env);
  while (!rest.empty()) {
    const size_t comma = rest.find(',');
    const std::string_view item = rest.substr(0, comma);
    rest = comma == std::string_view::npos ? std::string_view() : rest.substr(comma + 1);
    const size_t eq = item.find('=');
    if (eq == std::string_view::npos) continue;
    const std::string_view key = item.substr(0, eq);
    const uint32_t value = uint32_t(std::strtoul(std::string(item.substr(eq + 1)).c_str(), nullptr, 10));
    if (key == "lanes") t.lanes = value;
    if (key == "workgroup") t.workgroup = value;
    if (key == "units") t.units = value;
    if (key == "heads") t.heads = value;
    if (key == "matrix") t.matrix = value;
    if (key == "subgroups") t.subgroups = value;
    if (key == "prefetch") t.prefetch = value;
    if (key == "qregs") t.qregs = value;
    if (key == "pipeline") t.pipeline = value;
    if (key == "order") t.order = value;
    if (key == "share") t.share = value;
  }
  return t;
}

const Tuning& tuning() {
  static const Tuning t = tuning_from_env();
  return t;
}

// The longest context the plan must cover: DecodeShape::max_context_len, else M * B.
uint32_t longest_context(const DecodeShape& s) {
  return s.max_context_len ? s.max_context_len : s.max_blocks_per_seq * s.block_size;
}

// Items decode_order.comp's one workgroup lists at most.
constexpr uint64_t kOrderCapacity = uint64_t(ORDER_WORKGROUP) * ORDER_ITEMS_PER_INVOCATION;

// Whether the plan asks for its items longest first (DecodeOrder).
bool wants_longest_first(const DecodeOptions& o) {
  return o.order == DecodeOrder::longest_first || (o.order == DecodeOrder::automatic && tuning().order == 1);
}

size_t shared_bytes(uint32_t wg, uint32_t heads, uint32_t d, uint32_t b) {
  return 4ull * (size_t(heads) * d + 2ull * heads * wg + wg / b);
}

// The workgroup shape: heads per workgroup (a GQA group or a slice of it), invocations, lanes
// per value row. A tile is one token per invocation.
void choose_variant(DecodePlanData& p, const DeviceInfo& dev) {
  const auto& s = p.shape;
  const Tuning& tune = tuning();
  const uint32_t group = s.num_heads / s.num_kv_heads;
  // Accumulator registers; 4 measured faster than 8 for a GQA group of 8 (bench/RESULTS.md).
  const uint32_t max_heads = tune.heads ? tune.heads : 4;
  p.groups_per_kv_head = ceil_div(group, max_heads);
  p.heads_per_workgroup = ceil_div(group, p.groups_per_kv_head);
  p.workgroup = std::min(tune.workgroup ? tune.workgroup : 256u, dev.max_workgroup_invocations);
  while (p.workgroup > 128 && shared_bytes(p.workgroup, p.heads_per_workgroup, s.head_size, s.block_size) > dev.max_shared_memory)
    p.workgroup /= 2;
  auto shared = [&] { return shared_bytes(p.workgroup, p.heads_per_workgroup, s.head_size, s.block_size); };
  while (p.heads_per_workgroup > 1 && shared() > dev.max_shared_memory) {
    ++p.groups_per_kv_head;
    p.heads_per_workgroup = ceil_div(group, p.groups_per_kv_head);
  }
  if (p.workgroup < s.block_size || 256 % p.workgroup != 0 || shared() > dev.max_shared_memory)
    throw Error(ErrorCode::unsupported,
                fmt::format("head_size {} with block_size {} needs more shared memory or invocations than device {} has",
                            s.head_size, s.block_size, dev.name));
  p.subgroup = dev.subgroup_arithmetic;

  // Value phase: lanes of a dim row; start at one lane per 16-byte load of a block row and
  // widen while more rows than dims would leave invocations idle. (More lanes, so that each
  // probability serves several dims, measured slower: more accumulators, lower occupancy.)
  const uint32_t x = cache_pack_factor(s.cache_dtype);
  const uint32_t vec = std::min(s.block_size, x);
  const uint32_t tile_loads = p.workgroup / vec;
  p.lanes_per_row = std::min(s.block_size / vec, tile_loads);
  while (p.workgroup / p.lanes_per_row > s.head_size && p.lanes_per_row * 2 <= tile_loads) p.lanes_per_row *= 2;
  if (tune.lanes && detail::is_power_of_two(tune.lanes) && tune.lanes <= tile_loads) p.lanes_per_row = tune.lanes;
}

// ---- the matrix kernel (shaders/common/decode_coopmat_kernel.glsl) ----

constexpr uint32_t kMatrixHeads = 8;   // heads of its value products
constexpr uint32_t kMatrixSubgroup = 32;
constexpr uint32_t kMatrixUnitTokens = 32;  // tokens a subgroup takes per step (UNIT in the shader)

// The matrix kernel's shared memory: the f16 query rows and each subgroup's outputs (in the
// same words when the plan shares them and the query's fragments go to registers), then each
// subgroup's max, sum and weight, and the output factor and query fix per head.
size_t matrix_shared_bytes(uint32_t subgroups, uint32_t d, bool share_query) {
  const size_t query = size_t(kMatrixHeads) * d * 2;
  const size_t outputs = size_t(subgroups) * kMatrixHeads * d * 4;
  const size_t shared_words = share_query && tuning().qregs != 0 ? std::max(query, outputs) : query + outputs;
  return shared_words + subgroups * kMatrixHeads * 3 * 4 + kMatrixHeads * 4 * 2;
}

// Why the matrix kernel cannot run this plan, or "" when it can.
std::string matrix_refusal(const DecodePlanData& p, Context& context) {
  const auto& impl = context.impl();
  const auto& s = p.shape;
  if (!impl.cooperative_matrix)
    return fmt::format("device {} has no VK_NV_cooperative_matrix enabled with 16x8x16 f16 products, f16 "
                       "storage and 32-wide subgroups",
                       impl.info.name);
  const bool fp8 = is_fp8_dtype(s.cache_dtype);
  const bool sixteen_bit_query = s.query_dtype == DType::f16 || s.query_dtype == DType::bf16;
  if (!sixteen_bit_query || s.cache_dtype == DType::f32)
    return fmt::format("query_dtype {} and cache_dtype {}: the matrix kernel takes an f16 or bf16 query with an f16, "
                       "bf16 or fp8 cache",
                       dtype_name(s.query_dtype), dtype_name(s.cache_dtype));
  // Each lane feeds 4 dims of a row per dim step from one 16-byte key chunk: 2 steps of an
  // f16 chunk, 4 of an fp8 one, and the 4 lanes of a row take 4 chunks side by side.
  const uint32_t dims_per_load = fp8 ? 64 : 32;
  if (s.head_size % dims_per_load != 0)
    return fmt::format("head_size: {} is not a multiple of {} (cache_dtype {})", s.head_size, dims_per_load,
                       dtype_name(s.cache_dtype));
  if (s.block_size % 8 != 0) return fmt::format("block_size: {} is not a multiple of 8", s.block_size);
  if (p.address) return "num_blocks: the caches are past maxStorageBufferRange (read by device address)";
  if (matrix_shared_bytes(1, s.head_size, false) > impl.info.max_shared_memory)
    return fmt::format("head_size: {} needs more shared memory than device {} has", s.head_size, impl.info.name);
  const std::string& layout = detail::matrix_fragment_mismatch(context);
  if (!layout.empty()) return fmt::format("device {}: {}", impl.info.name, layout);
  return "";
}

// Whether the matrix kernel issues a unit's value loads with its key loads. Measured on an H200
// (bench/RESULTS.md): E4M3 caches 13 % faster (batch64 204.6 -> 178.0 us), E5M2 and bf16 about
// 1 % faster, f16 0.5 % slower. The conversions between the loads and the products give the
// early values time to arrive.
bool matrix_early_values(const DecodeShape& s) {
  if (tuning().prefetch != 2) return tuning().prefetch != 0;
  return s.cache_dtype != DType::f16;
}

// Whether the matrix kernel issues the next unit's loads before this unit's products (two units
// in flight per subgroup, twice the load registers). Measured on an H200 (bench/RESULTS.md): fp8
// caches 6 to 11 % faster (E5M2 batch64 160.3 -> 142.6 us, E4M3 176.6 -> 165.2), f16 5 % slower,
// bf16 (255 registers) twice as slow.
bool matrix_pipeline(const DecodeShape& s) {
  if (tuning().pipeline != 2) return tuning().pipeline != 0;
  return is_fp8_dtype(s.cache_dtype);
}

// Whether the matrix kernel's outputs reuse the query's shared words (10496 -> 8448 bytes for 2
// subgroups at D = 128: 5 workgroups resident per H200 SM instead of 4). Measured on an H200
// (bench/RESULTS.md): faster where workgroups come and go in many waves or out of step (1024 x
// 256 tokens 297.5 -> 283.5 us, 512 x 512 280.4 -> 278.0, lengths that vary longest first 152.0
// -> 149.6), slower for uniform batches of 1024 to 2048 tokens, whose waves then leave a short
// last one (256 x 1024 267.2 -> 285.8), and for E4M3 caches (batch64 165.5 -> 178.7, with
// residency bound by their registers).
constexpr uint32_t kShareQueryTokens = 512;

bool matrix_share_query(const DecodePlanData& p) {
  if (tuning().share != 2) return tuning().share != 0;
  return p.shape.cache_dtype != DType::fp8_e4m3 &&
         (wants_longest_first(p.options) || longest_context(p.shape) <= kShareQueryTokens);
}

void choose_matrix_variant(DecodePlanData& p) {
  const uint32_t group = p.shape.num_heads / p.shape.num_kv_heads;
  p.matrix = true;
  p.early_values = matrix_early_values(p.shape);
  p.pipeline = matrix_pipeline(p.shape);
  p.share_query = matrix_share_query(p);
  p.groups_per_kv_head = ceil_div(group, kMatrixHeads);
  p.heads_per_workgroup = ceil_div(group, p.groups_per_kv_head);
  p.lanes_per_row = 0;
  p.subgroup = true;
}

// Workgroups of a one-pass grid, and how many the device wants: Tuning::units per compute unit.
uint64_t one_pass_workgroups(const DecodePlanData& p) {
  return uint64_t(p.shape.num_seqs) * p.shape.num_kv_heads * p.groups_per_kv_head;
}
uint64_t wanted_workgroups(const DeviceInfo& dev) { return uint64_t(tuning().units) * std::max(1u, dev.compute_units); }

// Whether a one-pass grid would fill less than half of the wanted workgroups: the batch is then
// too small to keep the device's memory busy without help.
bool small_batch(const DecodePlanData& p, const DeviceInfo& dev) {
  return one_pass_workgroups(p) * 2 < wanted_workgroups(dev);
}

// Whether the matrix kernel can run `subgroups` subgroups per workgroup on this device.
bool matrix_subgroups_fit(uint32_t subgroups, uint32_t head_size, const DeviceInfo& dev) {
  return matrix_shared_bytes(subgroups, head_size, false) <= dev.max_shared_memory &&
         subgroups * kMatrixSubgroup <= dev.max_workgroup_invocations;
}

// A small batch runs in one pass with more subgroups per workgroup (4 or 8; 0: none fits)
// when that gives the grid at least kMatrixWideSubgroupsPerComputeUnit subgroups per compute
// unit and each subgroup kMatrixWideUnits units of 32 tokens or more: no split, no reduce
// pass. Measured on an H200 (bench/RESULTS.md, suite `lengths` and the small standard shapes):
// 16 x 16384 tokens took 254.9 us in one pass with 8 subgroups (1024 in all) against 291.2
// split 5 x 3328 and 318.6 with 4 subgroups (512 in all); 32 x 8192 255.2 us with 4 subgroups
// against 271.4 split 3 x 2816 and 321.1 with 2; gqa8x (16 x 2048, groups of 8 heads: 8 units
// per subgroup) 44.7 us with 8 subgroups against 53.9 split 2 x 1024.
constexpr uint32_t kMatrixWideSubgroupsPerComputeUnit = 7;
constexpr uint32_t kMatrixWideUnits = 8;

uint32_t wide_one_pass_subgroups(const DecodePlanData& p, const DeviceInfo& dev, uint32_t max_len) {
  if (!p.matrix || tuning().units != Tuning{}.units) return 0;
  const uint64_t wanted = uint64_t(kMatrixWideSubgroupsPerComputeUnit) * std::max(1u, dev.compute_units);
  for (uint32_t subgroups : {4u, 8u}) {
    const bool enough = one_pass_workgroups(p) * subgroups >= wanted;
    const bool long_enough = max_len >= subgroups * kMatrixWideUnits * kMatrixUnitTokens;
    if (enough && long_enough && matrix_subgroups_fit(subgroups, p.shape.head_size, dev)) return subgroups;
  }
  return 0;
}

// A full batch longest first (lengths that vary) runs in one pass on 4 subgroups past this
// many tokens, so that its longest sequences, started first, finish sooner. Measured on an H200
// (bench/RESULTS.md): 64 sequences of 1 to 4096 tokens took 145.6 us on 4 subgroups, 157.5 on
// 2 and 153.2 on 8 (185 in grid order on 2); 256 of 1 to 1024, 157.5 on 2 and 174.0 on 4.
constexpr uint32_t kOrderedFourSubgroupsTokens = 2048;

// Subgroups per workgroup of the matrix kernel, once the split is known. Measured on an H200
// (bench/RESULTS.md): 2 won for large batches in one pass and with 512-token partitions, 4 with
// 1024-token partitions and for small batches in one pass; small batches that reach enough
// subgroups in one pass take what choose_split found (wide_one_pass_subgroups).
void choose_matrix_subgroups(DecodePlanData& p, const DeviceInfo& dev) {
  const bool long_ordered = wants_longest_first(p.options) && longest_context(p.shape) > kOrderedFourSubgroupsTokens;
  const bool four = p.split ? p.partition_tokens >= 1024 : small_batch(p, dev) || long_ordered;
  uint32_t subgroups = four ? 4 : 2;
  if (p.wide_subgroups != 0) subgroups = p.wide_subgroups;
  if (tuning().subgroups != 0) subgroups = tuning().subgroups;
  while (subgroups > 1 && !matrix_subgroups_fit(subgroups, p.shape.head_size, dev)) subgroups /= 2;
  p.workgroup = subgroups * kMatrixSubgroup;
}

// The split's scratch: each partition's unnormalised output, max and sum per (sequence, head),
// f32 (decode_reduce.comp).
uint64_t split_scratch_bytes(const DecodeShape& s, uint32_t partitions) {
  return 4ull * s.num_seqs * s.num_heads * partitions * (s.head_size + 2);
}

// The matrix kernel's longest automatic partition (choose_split).
constexpr uint32_t kMatrixLongestPartition = 8192;

// DecodeMerge::in_dispatch: the most partial outputs (partitions x heads x head size, f32) one
// workgroup merges. Its 2 to 8 subgroups load 8 partitions at a time, one memory latency per
// round. Measured on an H200 (bench/RESULTS.md), warm: merges of 2048 and 4096 floats beat the
// reduce pass (mid8 41.6 -> 39.2-39.9 us, d64 41.2 -> 40.0-40.1), 8192 by 1.2 us in 259 (4 x 64K,
// one call), and 16384 and 32768 lost to it (long1 41.9 -> 44.2, 1 x 128K 138.3 -> 142.4).
constexpr uint64_t kMergeInDispatchFloats = 4096;

// The scalar kernel splits full batches past this many tokens, into at most
// kLongContextParts partitions (choose_split).
constexpr uint32_t kLongContextTokens = 4096;
constexpr uint32_t kLongContextParts = 8;

void choose_split(DecodePlanData& p, const DeviceInfo& dev) {
  const auto& s = p.shape;
  const uint32_t max_len = longest_context(s);
  const uint64_t workgroups = one_pass_workgroups(p);
  uint32_t tokens = p.options.partition_tokens;
  if (p.options.split == SplitMode::single_pass || max_len == 0) {
    p.split = false;
  } else if (p.options.split == SplitMode::split) {
    p.split = true;
    if (tokens == 0) tokens = std::max<uint32_t>(256, ceil_div(ceil_div(max_len, 4), 256) * 256);
  } else if (tokens != 0) {
    p.split = tokens < max_len;
  } else {
    // Decode is bound by memory latency as much as bandwidth: split when the batch's
    // workgroups fill less than half of Tuning::units per compute unit, into partitions (a
    // multiple of 256 tokens) that bring the count up to about that many.
    const uint64_t want = wanted_workgroups(dev);
    const bool small = small_batch(p, dev);
    const uint32_t wide = small ? wide_one_pass_subgroups(p, dev, max_len) : 0;
    if (wide != 0) {
      // Enough subgroups for one pass on more of them per workgroup (wide_one_pass_subgroups).
      p.split = false;
      p.wide_subgroups = wide;
    } else if (small) {
      const uint32_t parts = ceil_div(want, std::max<uint64_t>(workgroups, 1));
      uint32_t per_part = std::max<uint32_t>(256, ceil_div(ceil_div(max_len, parts), 256) * 256);
      if (p.matrix && tuning().units == Tuning{}.units) {
        // The matrix kernel streams a partition faster than it starts one. Measured on an
        // H200 (bench/RESULTS.md): partitions shorter than 1024 tokens lose (and, since the
        // reduce pass takes one memory latency, 1024 beat one pass from 2048 tokens); 512
        // only below 4096 tokens when the batch leaves most compute units idle. Longer
        // contexts keep the count above: one 256K sequence took 299 us in 1024-token
        // partitions, 271 in 4096 and 267 in 8192, the longest measured.
        const bool tiny = workgroups * 4 < std::max(1u, dev.compute_units);
        per_part = max_len < 4096 && tiny ? 512 : std::clamp<uint32_t>(per_part, 1024, kMatrixLongestPartition);
      }
      p.split = per_part < max_len;
      if (p.split) tokens = per_part;
    } else if (!p.matrix && max_len > kLongContextTokens) {
      // A full batch, but each workgroup would walk more than 4K tokens alone: when the
      // lengths vary, the longest sequences' workgroups run on after the rest have finished.
      // Measured on an H200 (bench/RESULTS.md): mha32 with lengths spread from 1 to 8192 took
      // 572-588 us in one pass and 511 us in 1024-token partitions, the uniform mha32 954 us
      // split against 965 in one pass; batch64 (4096 tokens) in f32 and bf16 lost 3-5 % split.
      // At most kLongContextParts partitions, so that the scratch stays small.
      tokens = std::max<uint32_t>(1024, ceil_div(ceil_div(max_len, kLongContextParts), 256) * 256);
      p.split = split_scratch_bytes(s, ceil_div(max_len, tokens)) <= dev.max_storage_buffer_range;
    }
  }
  if (!p.split) {
    p.num_partitions = 1;
    p.partition_tokens = 0;
    p.scratch_bytes = 0;
    return;
  }
  p.partition_tokens = tokens;
  p.num_partitions = std::max(1u, ceil_div(max_len, tokens));
  p.scratch_bytes = split_scratch_bytes(s, p.num_partitions);
}

// Longest first, once the split is known: the list holds every (sequence, partition) item.
void choose_order(DecodePlanData& p) {
  if (!wants_longest_first(p.options)) return;
  const uint64_t items = uint64_t(p.shape.num_seqs) * p.num_partitions;
  if (items > kOrderCapacity)
    throw Error(ErrorCode::unsupported,
                fmt::format("order: longest_first lists at most {} items (sequences x partitions), and this plan has "
                            "{} x {} = {}",
                            kOrderCapacity, p.shape.num_seqs, p.num_partitions, items));
  p.ordered = true;
  p.order_bytes = 4 * items;
}

// Lengths above this are clamped (and flagged): M * B, or what the partitions cover when split.
uint32_t context_cap(const DecodePlanData& p) {
  const uint64_t cap = uint64_t(p.shape.max_blocks_per_seq) * p.shape.block_size;
  return uint32_t(p.split ? std::min<uint64_t>(cap, uint64_t(p.num_partitions) * p.partition_tokens) : cap);
}

// The push constants a plan fixes (shape, split, window, length cap), shared by the decode,
// reduce and order passes; the caller adds the views' offsets and the per-call values.
sh::DecodePush plan_push(const DecodePlanData& p) {
  sh::DecodePush push{};
  push.num_seqs = p.shape.num_seqs;
  push.num_heads = p.shape.num_heads;
  push.num_kv_heads = p.shape.num_kv_heads;
  push.num_blocks = p.shape.num_blocks;
  push.max_blocks_per_seq = p.shape.max_blocks_per_seq;
  push.partition_tokens = p.partition_tokens;
  push.num_partitions = p.num_partitions;
  push.sliding_window = p.options.sliding_window;
  push.context_cap = context_cap(p);
  return push;
}

uint32_t feature_bits(const DecodeShape& s, const DecodeOptions& o, bool split) {
  uint32_t f = 0;
  if (s.alibi) f |= DECODE_FEATURE_ALIBI;
  if (o.softcap > 0.0f) f |= DECODE_FEATURE_SOFTCAP;
  if (s.sinks) f |= DECODE_FEATURE_SINKS;
  if (o.sliding_window > 0) f |= DECODE_FEATURE_WINDOW;
  if (s.lse) f |= DECODE_FEATURE_LSE;
  if (split) f |= DECODE_FEATURE_SPLIT;
  return f;
}

}  // namespace

// ---- DecodePlan ----

DecodePlan DecodePlan::create(Context& context, const DecodeShape& shape, const DecodeOptions& options) {
  detail::validate_decode_shape(shape);
  detail::validate_decode_options(options, shape);
  auto& impl = context.impl();
  auto p = std::make_unique<DecodePlanData>();
  p->shape = shape;
  p->options = options;
  // A pool past maxStorageBufferRange cannot be one descriptor: read it by device address.
  const uint64_t pool_bytes = uint64_t(shape.num_blocks) * shape.num_kv_heads * shape.head_size * shape.block_size *
                              (is_fp8_dtype(shape.cache_dtype) ? 1 : dtype_size(shape.cache_dtype));
  p->address = pool_bytes + 256 > impl.info.max_storage_buffer_range;
  if (p->address && !impl.buffer_device_address)
    throw Error(ErrorCode::unsupported,
                fmt::format("num_blocks: a pool of {} blocks is {} bytes, past the device's maxStorageBufferRange of {} bytes, "
                            "and the context has no buffer device address to read it with",
                            shape.num_blocks, pool_bytes, impl.info.max_storage_buffer_range));
  const bool want_matrix = options.kernel == DecodeKernel::matrix ||
                           (options.kernel == DecodeKernel::automatic && tuning().matrix != 0 &&
                            shape.num_heads > shape.num_kv_heads);
  const std::string no_matrix = want_matrix ? matrix_refusal(*p, context) : "";
  if (options.kernel == DecodeKernel::matrix && !no_matrix.empty())
    throw Error(ErrorCode::unsupported, "kernel: matrix: " + no_matrix);
  const bool matrix = want_matrix && no_matrix.empty();
  if (options.timeline && !matrix)
    throw Error(ErrorCode::unsupported,
                "timeline: only the matrix kernel records one, and this plan runs the scalar kernel" +
                    (no_matrix.empty() ? std::string(" (kernel: scalar, or an MHA shape)") : " (" + no_matrix + ")"));
  if (options.timeline && !impl.decode_timeline)
    throw Error(ErrorCode::unsupported,
                fmt::format("timeline: device {} lacks VK_KHR_shader_clock's device clock, VK_NV_shader_sm_builtins or "
                            "buffer device addresses (DeviceInfo::decode_timeline)",
                            impl.info.name));
  if (matrix)
    choose_matrix_variant(*p);
  else
    choose_variant(*p, impl.info);
  choose_split(*p, impl.info);
  if (matrix) choose_matrix_subgroups(*p, impl.info);
  choose_order(*p);
  p->features = feature_bits(shape, options, p->split) | (p->ordered ? DECODE_FEATURE_ORDERED : 0u);
  // DecodeMerge::in_dispatch: the matrix kernel's split merges itself (split_merge.glsl) where
  // that merge is small enough to win.
  if (options.merge == DecodeMerge::in_dispatch && p->matrix && p->split &&
      uint64_t(p->num_partitions) * p->heads_per_workgroup * shape.head_size <= kMergeInDispatchFloats) {
    p->features |= DECODE_FEATURE_MERGE_IN_DISPATCH;
    p->merge_counter_bytes = 4ull * shape.num_seqs * shape.num_heads;
  }
  // The grid is (kv-head groups, S, partitions) and the scratch one descriptor: refuse what
  // no device launches or binds now, before anything is allocated or recorded. 65535 is the
  // maxComputeWorkGroupCount every device has.
  if (shape.num_seqs > 65535)
    throw Error(ErrorCode::unsupported,
                fmt::format("num_seqs: {} sequences exceed the 65535 workgroups a dispatch may have in y", shape.num_seqs));
  if (p->num_partitions > 65535 || p->scratch_bytes > impl.info.max_storage_buffer_range)
    throw Error(ErrorCode::unsupported,
                fmt::format("partition_tokens: {} partitions of {} tokens need {} bytes of scratch (at most 65535 "
                            "partitions within the device's maxStorageBufferRange of {} bytes)",
                            p->num_partitions, p->partition_tokens, p->scratch_bytes, impl.info.max_storage_buffer_range));

  std::array<uint32_t, DECODE_SC_COUNT> spec{};
  spec[DECODE_SC_WORKGROUP] = p->workgroup;
  spec[DECODE_SC_HEAD_SIZE] = shape.head_size;
  spec[DECODE_SC_BLOCK_SIZE] = shape.block_size;
  spec[DECODE_SC_HEADS_PER_WORKGROUP] = p->heads_per_workgroup;
  spec[DECODE_SC_QUERY_DTYPE] = uint32_t(shape.query_dtype);
  spec[DECODE_SC_CACHE_DTYPE] = uint32_t(shape.cache_dtype);
  spec[DECODE_SC_FEATURES] = p->features;
  spec[DECODE_SC_LANES_PER_ROW] = p->lanes_per_row;
  spec[DECODE_SC_MATRIX_PREFETCH] = p->early_values;
  spec[DECODE_SC_MATRIX_QUERY_REGISTERS] = tuning().qregs != 0;
  spec[DECODE_SC_MATRIX_PIPELINE] = p->pipeline;
  spec[DECODE_SC_MATRIX_SHARE_QUERY] = p->share_query;
  if (options.timeline)
    p->timeline_bytes = size_t(shape.num_kv_heads) * p->groups_per_kv_head * shape.num_seqs * p->num_partitions *
                        (p->workgroup / kMatrixSubgroup) * DECODE_TIMELINE_WORDS * 4;
  // E4M3 caches take the matrix kernel's module with their NaN search compiled in
  // (decode_coopmat_e4m3.comp); the other dtypes' module goes without it.
  const auto& matrix_shader =
      shape.cache_dtype == DType::fp8_e4m3 ? vk::shader_decode_coopmat_e4m3() : vk::shader_decode_coopmat();
  const auto& shader = options.timeline ? vk::shader_decode_coopmat_timeline()
                       : p->matrix      ? matrix_shader
                       : p->address ? (p->subgroup ? vk::shader_decode_address_subgroup() : vk::shader_decode_address())
                                  : (p->subgroup ? vk::shader_decode_subgroup() : vk::shader_decode());
  p->decode = &impl.pipeline(shader, spec, DECODE_BINDING_COUNT, sizeof(sh::DecodePush));
  if (p->split && p->merge_counter_bytes == 0) {
    std::array<uint32_t, REDUCE_SC_COUNT> rspec{};
    // Invocations side by side over the output words and the partitions (decode_reduce.comp).
    rspec[REDUCE_SC_WORKGROUP] = std::min(256u, impl.info.max_workgroup_invocations);
    rspec[REDUCE_SC_HEAD_SIZE] = shape.head_size;
    rspec[REDUCE_SC_QUERY_DTYPE] = uint32_t(shape.query_dtype);
    rspec[REDUCE_SC_FEATURES] = p->features;
    p->reduce = &impl.pipeline(vk::shader_decode_reduce(), rspec, REDUCE_BINDING_COUNT, sizeof(sh::DecodePush));
  }
  if (p->ordered) {
    std::array<uint32_t, ORDER_SC_COUNT> ospec{};
    ospec[ORDER_SC_FEATURES] = p->features;
    p->order = &impl.pipeline(vk::shader_decode_order(), ospec, ORDER_BINDING_COUNT, sizeof(sh::DecodePush));
  }
  return DecodePlan(std::move(p));
}

DecodePlan::DecodePlan(std::unique_ptr<DecodePlanData> data) : data_(std::move(data)) {}
DecodePlan::DecodePlan(const DecodePlan& o) : data_(std::make_unique<DecodePlanData>(*o.data_)) {}
DecodePlan& DecodePlan::operator=(const DecodePlan& o) {
  data_ = std::make_unique<DecodePlanData>(*o.data_);
  return *this;
}
DecodePlan::DecodePlan(DecodePlan&&) noexcept = default;
DecodePlan& DecodePlan::operator=(DecodePlan&&) noexcept = default;
DecodePlan::~DecodePlan() = default;
const DecodeShape& DecodePlan::shape() const noexcept { return data_->shape; }
const DecodeOptions& DecodePlan::options() const noexcept { return data_->options; }
bool DecodePlan::split() const noexcept { return data_->split; }
uint32_t DecodePlan::num_partitions() const noexcept { return data_->num_partitions; }
uint32_t DecodePlan::partition_tokens() const noexcept { return data_->partition_tokens; }
size_t DecodePlan::scratch_bytes() const noexcept { return data_->scratch_bytes; }
size_t DecodePlan::timeline_bytes() const noexcept { return data_->timeline_bytes; }
size_t DecodePlan::merge_counter_bytes() const noexcept { return data_->merge_counter_bytes; }
bool DecodePlan::longest_first() const noexcept { return data_->ordered; }
size_t DecodePlan::order_bytes() const noexcept { return data_->order_bytes; }

std::string DecodePlan::describe() const {
  const auto& p = *data_;
  std::string path = p.split ? fmt::format("split {} x {} tokens", p.num_partitions, p.partition_tokens) : "one pass";
  if (p.ordered) path += ", longest first";
  if (p.merge_counter_bytes) path += ", merged in the dispatch";
  if (p.matrix)
    return fmt::format("{}, matrix units, {} heads/wg, {} subgroups/wg{}{}{}", path, p.heads_per_workgroup,
                       p.workgroup / kMatrixSubgroup, p.early_values ? ", values with keys" : "",
                       p.pipeline ? ", next unit ahead" : "", p.share_query ? ", outputs over the query" : "");
  return fmt::format("{}, {} heads/wg, wg {}, {} lanes/row, {} reduce", path, p.heads_per_workgroup, p.workgroup,
                     p.lanes_per_row, p.subgroup ? "subgroup" : "shared") +
         (p.address ? ", caches by device address" : "");
}

// ---- recording ----

void record_decode(Context& context, VkCommandBuffer cmd, const DecodePlan& plan, const DecodeViews& v) {
  const auto& p = plan.data();
  const auto& s = p.shape;
  auto& impl = context.impl();
  using detail::check_view;
  const int64_t S = s.num_seqs, H = s.num_heads, Hkv = s.num_kv_heads, D = s.head_size, B = s.block_size;
  const int64_t x = cache_pack_factor(s.cache_dtype);
  const DType cache_elem = is_fp8_dtype(s.cache_dtype) ? DType::u8 : s.cache_dtype;
  check_view(impl, "query", v.query, {s.query_dtype}, Shape{S, H, D}, 4);
  check_view(impl, "key_cache", v.key_cache, {cache_elem, s.cache_dtype}, Shape{s.num_blocks, Hkv, D / x, B, x}, 16, !p.address);
  check_view(impl, "value_cache", v.value_cache, {cache_elem, s.cache_dtype}, Shape{s.num_blocks, Hkv, D, B}, 16, !p.address);
  check_view(impl, "block_tables", v.block_tables, {DType::i32, DType::u32}, Shape{S, int64_t(s.max_blocks_per_seq)}, 4);
  check_view(impl, "context_lens", v.context_lens, {DType::i32, DType::u32}, Shape{S}, 4);
  check_view(impl, "output", v.output, {s.query_dtype}, Shape{S, H, D}, 4);
  if (s.alibi) check_view(impl, "alibi_slopes", v.alibi_slopes, {DType::f32}, Shape{H}, 4);
  if (s.sinks) check_view(impl, "sinks", v.sinks, {DType::f32}, Shape{H}, 4);
  if (s.lse) check_view(impl, "lse", v.lse, {DType::f32}, Shape{S, H}, 4);
  if (p.split) detail::check_buffer(impl, "scratch", v.scratch, p.scratch_bytes, 4);
  if (p.ordered) detail::check_buffer(impl, "order", v.order, p.order_bytes, 4);
  if (!v.status.empty()) detail::check_buffer(impl, "status", v.status, 4, 4);
  if (p.timeline_bytes) detail::check_buffer(impl, "timeline", v.timeline, p.timeline_bytes, 4);
  if (p.merge_counter_bytes) detail::check_buffer(impl, "merge_counters", v.merge_counters, p.merge_counter_bytes, 4);
  if (s.num_seqs == 0) return;

  const auto options = p.options;
  const float scale = options.scale ? *options.scale : 1.0f / std::sqrt(float(s.head_size));
  std::array<detail::BoundView, DECODE_BINDING_COUNT> bound;
  bound[DECODE_BINDING_QUERY] = impl.bind_view(v.query.memory);
  bound[DECODE_BINDING_KEY_CACHE] = impl.bind_view(p.address ? BufferView{} : v.key_cache.memory);
  bound[DECODE_BINDING_VALUE_CACHE] = impl.bind_view(p.address ? BufferView{} : v.value_cache.memory);
  bound[DECODE_BINDING_BLOCK_TABLES] = impl.bind_view(v.block_tables.memory);
  bound[DECODE_BINDING_CONTEXT_LENS] = impl.bind_view(v.context_lens.memory);
  bound[DECODE_BINDING_OUTPUT] = impl.bind_view(v.output.memory);
  bound[DECODE_BINDING_ALIBI] = impl.bind_view(s.alibi ? v.alibi_slopes.memory : BufferView{});
  bound[DECODE_BINDING_SINKS] = impl.bind_view(s.sinks ? v.sinks.memory : BufferView{});
  bound[DECODE_BINDING_LSE] = impl.bind_view(s.lse ? v.lse.memory : BufferView{});
  bound[DECODE_BINDING_SCRATCH] = impl.bind_view(p.split ? v.scratch : BufferView{});
  bound[DECODE_BINDING_ORDER] = impl.bind_view(p.ordered ? v.order : BufferView{});
  bound[DECODE_BINDING_STATUS] = impl.bind_view(v.status);
  bound[DECODE_BINDING_MERGE_COUNTERS] = impl.bind_view(p.merge_counter_bytes ? v.merge_counters : BufferView{});

  sh::DecodePush push = plan_push(p);
  push.query_offset = bound[DECODE_BINDING_QUERY].word_offset;
  push.key_offset = bound[DECODE_BINDING_KEY_CACHE].word_offset;
  push.value_offset = bound[DECODE_BINDING_VALUE_CACHE].word_offset;
  push.block_tables_offset = bound[DECODE_BINDING_BLOCK_TABLES].word_offset;
  push.context_lens_offset = bound[DECODE_BINDING_CONTEXT_LENS].word_offset;
  push.output_offset = bound[DECODE_BINDING_OUTPUT].word_offset;
  push.alibi_offset = bound[DECODE_BINDING_ALIBI].word_offset;
  push.sinks_offset = bound[DECODE_BINDING_SINKS].word_offset;
  push.lse_offset = bound[DECODE_BINDING_LSE].word_offset;
  push.scratch_offset = bound[DECODE_BINDING_SCRATCH].word_offset;
  push.status_offset = bound[DECODE_BINDING_STATUS].word_offset;
  push.merge_counters_offset = bound[DECODE_BINDING_MERGE_COUNTERS].word_offset;
  push.scale = scale;
  push.softcap = options.softcap;
  // k_scale and v_scale scale fp8 caches only (docs/contract.md; the reference ignores them too).
  push.k_scale = is_fp8_dtype(s.cache_dtype) ? options.k_scale : 1.0f;
  push.v_scale = is_fp8_dtype(s.cache_dtype) ? options.v_scale : 1.0f;
  auto address_of = [&](const BufferView& view) {
    VkBufferDeviceAddressInfo info{VK_STRUCTURE_TYPE_BUFFER_DEVICE_ADDRESS_INFO};
    info.buffer = view.buffer;
    const uint64_t a = impl.d.vkGetBufferDeviceAddress(impl.device, &info) + view.offset;
    return sh::uvec2{uint32_t(a), uint32_t(a >> 32)};
  };
  if (p.address) {
    push.key_address = address_of(v.key_cache.memory);
    push.value_address = address_of(v.value_cache.memory);
  }
  if (p.timeline_bytes) push.key_address = address_of(v.timeline);  // the matrix kernel reads no cache by address

  const uint32_t groups_x = s.num_kv_heads * p.groups_per_kv_head;
  if (p.ordered) {
    push.order_offset = bound[DECODE_BINDING_ORDER].word_offset;
    impl.dispatch(cmd, *p.decode, bound, &push, groups_x, s.num_seqs * p.num_partitions, 1);
  } else {
    impl.dispatch(cmd, *p.decode, bound, &push, groups_x, s.num_seqs, p.num_partitions);
  }
  if (!p.split || p.merge_counter_bytes) return;  // one pass, or merged in the dispatch

  VkMemoryBarrier barrier{VK_STRUCTURE_TYPE_MEMORY_BARRIER};
  barrier.srcAccessMask = VK_ACCESS_SHADER_WRITE_BIT;
  barrier.dstAccessMask = VK_ACCESS_SHADER_READ_BIT;
  impl.d.vkCmdPipelineBarrier(cmd, VK_PIPELINE_STAGE_COMPUTE_SHADER_BIT, VK_PIPELINE_STAGE_COMPUTE_SHADER_BIT, 0, 1,
                              &barrier, 0, nullptr, 0, nullptr);
  std::array<detail::BoundView, REDUCE_BINDING_COUNT> rbound;
  rbound[REDUCE_BINDING_SCRATCH] = bound[DECODE_BINDING_SCRATCH];
  rbound[REDUCE_BINDING_CONTEXT_LENS] = bound[DECODE_BINDING_CONTEXT_LENS];
  rbound[REDUCE_BINDING_OUTPUT] = bound[DECODE_BINDING_OUTPUT];
  rbound[REDUCE_BINDING_SINKS] = bound[DECODE_BINDING_SINKS];
  rbound[REDUCE_BINDING_LSE] = bound[DECODE_BINDING_LSE];
  impl.dispatch(cmd, *p.reduce, rbound, &push, s.num_heads, s.num_seqs, 1);
}

void record_decode_order(Context& context, VkCommandBuffer cmd, const DecodePlan& plan, const TensorView& context_lens,
                         const BufferView& order) {
  const auto& p = plan.data();
  auto& impl = context.impl();
  if (!p.ordered)
    throw Error(ErrorCode::invalid_argument,
                "plan: record_decode_order needs a plan made with DecodeOrder::longest_first (plan.longest_first() is false)");
  detail::check_view(impl, "context_lens", context_lens, {DType::i32, DType::u32}, Shape{int64_t(p.shape.num_seqs)}, 4);
  detail::check_buffer(impl, "order", order, p.order_bytes, 4);
  if (p.shape.num_seqs == 0) return;
  std::array<detail::BoundView, ORDER_BINDING_COUNT> bound;
  bound[ORDER_BINDING_CONTEXT_LENS] = impl.bind_view(context_lens.memory);
  bound[ORDER_BINDING_LIST] = impl.bind_view(order);
  sh::DecodePush push = plan_push(p);
  push.context_lens_offset = bound[ORDER_BINDING_CONTEXT_LENS].word_offset;
  push.order_offset = bound[ORDER_BINDING_LIST].word_offset;
  impl.dispatch(cmd, *p.order, bound, &push, 1, 1, 1);
}

}  // namespace vkpaged
