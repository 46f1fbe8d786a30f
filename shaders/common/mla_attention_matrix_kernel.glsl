// SPDX-License-Identifier: Apache-2.0
// Multi-head latent attention over the paged MLA cache on matrix units (VK_KHR_cooperative_matrix):
// the contract and the outputs of the portable kernel (common/mla_attention_kernel.glsl), for f16
// and bf16 queries over f16, bf16 and fp8 caches in both cache forms, every request form and
// feature. As FlashMLA, the M dimension of the products is the (query token, head) rows of one
// request, since every head reads the same cached rows:
//   S [rows x TK] = Q [rows x DK] K [TK x DK]^T,   O [rows x DV] += P [rows x TK] K [TK x DV],
// the value being the key row's first DV entries, so one staged copy of each cached row serves
// both products.
//
// A workgroup takes one request, a tile of TQ of its new tokens and GROUP of the H query heads:
// ROWS = TQ * GROUP rows (row r is token r / GROUP, head r % GROUP), in ROW_BLOCKS blocks of M
// rows. Its work comes in UNITS = ROW_BLOCKS x VALUE_PARTS units, one per subgroup (subgroup u
// < UNITS takes unit u; any further subgroups only stage): unit (b, v) keeps the f32
// accumulators of row block b's output columns [v DVP, (v + 1) DVP), DVP = DV / VALUE_PARTS
// rounded up to N, and computes a share of block b's scores. Every phase ends in a workgroup
// barrier (no subgroup barriers: Mesa's llvmpipe runs those as workgroup barriers). Per key tile
// of TK positions from the tile's key range (attention_range.glsl):
//   staging:  the positions' rows (DK entries: the one pool's row, or ckv's then kpe's; their
//             blocks read from the block table during the tile before) read in 16-byte chunks
//             (8-byte where a pool's rows are not whole 16-byte chunks)
//             and written to shared memory as f16, [TK][DS]:
//             fp8 converted (E4M3 as value / 256, folded into the scales), a bf16 tile scaled by
//             a power of two into f16's range (common/matrix_f16_elements.glsl): its largest
//             magnitude is raised from the loaded chunks, and after a barrier each invocation
//             converts its own chunks in registers as it stores them. Positions past the key
//             range are zeros, never read;
//   scores:   block b's S [M x TK] in N-column blocks, each unit of the block taking columns
//             and, where the block has more units than column blocks, a slice of the DK dims
//             (the slices' partial sums land side by side and are added in the softmax);
//   softmax:  WG / ROWS invocations per row turn its S into logits (attention_logits.glsl),
//             move the row's running max and sum on (softmax_state.glsl), write P as f16 (-0
//             where the row does not attend) and the row's rescale factor into an [ROWS x N]
//             factor matrix;
//   values:   each unit loads its block's factors as an accumulator and rescales its O
//             component by component (KHR defines * between matrices of one type that way),
//             then O += P V with V read from the staged rows.
// Non-finite values: a non-finite value entry must reach only the rows that attend it, but a
// hidden position's P = 0 times Inf is NaN in a product: staging flags a tile that holds one,
// and that tile's P V is done element by element with hidden positions skipped.
// Split (FEATURE_SPLIT): workgroup z takes partition z of the key positions and writes its rows'
// value sums (DV wide) with their max and sum to the scratch for partition_merge.comp.
// Included by mla_attention_matrix_khr.comp (VKP_ADDRESS 0: the pools bound as storage buffers)
// and mla_attention_matrix_address_khr.comp (VKP_ADDRESS 1: pools past maxStorageBufferRange, by
// device address; common/mla_pools.glsl is where the two differ).
#extension GL_GOOGLE_include_directive : require
#extension GL_KHR_cooperative_matrix : require
#extension GL_KHR_memory_scope_semantics : require
#extension GL_EXT_shader_explicit_arithmetic_types_float16 : require
#extension GL_KHR_shader_subgroup_basic : require
#extension GL_KHR_shader_subgroup_arithmetic : require
#extension GL_KHR_shader_subgroup_shuffle : require
#extension GL_EXT_control_flow_attributes : require
#include "common/address_extensions.glsl"

#include "common/mla_interface.h"
#include "common/dtype.glsl"
#include "common/convert.glsl"
#include "common/strided_rows.glsl"

layout(local_size_x_id = MLA_ATTN_SC_WORKGROUP) in;
layout(constant_id = MLA_ATTN_SC_KEY_HEAD_SIZE) const uint DK = 576u;
layout(constant_id = MLA_ATTN_SC_VALUE_HEAD_SIZE) const uint DV = 512u;
layout(constant_id = MLA_ATTN_SC_BLOCK_SIZE) const uint B = 16u;
layout(constant_id = MLA_ATTN_SC_ROWS) const uint ROWS = 16u;
layout(constant_id = MLA_ATTN_SC_HEADS_PER_WORKGROUP) const uint GROUP = 16u;
layout(constant_id = MLA_MATRIX_SC_VALUE_PARTS) const uint VALUE_PARTS = 4u;
layout(constant_id = MLA_ATTN_SC_KEY_TILE) const uint TK = 16u;  // a multiple of 8, N and K
layout(constant_id = MLA_ATTN_SC_QUERY_DTYPE) const uint QUERY_DTYPE = DT_F16;  // f16 or bf16 (also the output's)
layout(constant_id = MLA_ATTN_SC_CACHE_DTYPE) const uint CACHE_DTYPE = DT_F16;  // f16, bf16, fp8_e4m3, fp8_e5m2
layout(constant_id = MLA_ATTN_SC_FEATURES) const uint FEATURES = 0u;
layout(constant_id = MLA_ATTN_SC_TWO_POOLS) const uint TWO_POOLS = 0u;
layout(constant_id = MLA_MATRIX_SC_MATRIX_M) const uint MM = 16u;
layout(constant_id = MLA_MATRIX_SC_MATRIX_N) const uint NN = 16u;  // 8 or 16
layout(constant_id = MLA_MATRIX_SC_MATRIX_K) const uint KK = 16u;  // 8 or 16

#include "common/attention_features.glsl"  // ALIBI, SOFTCAP, SINKS, WINDOW, WRITE_LSE, SPLIT
const bool TREE_MASK = (FEATURES & FEATURE_TREE_MASK) != 0u;

#include "common/cache_element.glsl"
const bool BF16_CACHE = CACHE_DTYPE == DT_BF16;
const bool BF16_QUERY = QUERY_DTYPE == DT_BF16;
const uint WG = gl_WorkGroupSize.x;
const uint TQ = ROWS / GROUP;                  // query tokens per tile
// bf16 tiles of a split step or of one query token load their rows a tile ahead (in flight
// during the tile before's products and softmax) and their blocks two tiles ahead; other tiles
// load their rows at their start. Measured on an H100: ahead, split and one-token (decode) steps
// ran faster; tiles of two query tokens (16-head prefill) and fp8 tiles ran slower
// (bench/experiments/mla-tile-phases.md). One operator per constant: glslang compiles a compound
// && / || of specialization constants into a branch and a phi, invalid SPIR-V at global scope.
const bool ONE_TOKEN_TILES = TQ == 1u;
const bool AHEAD_STEP = SPLIT || ONE_TOKEN_TILES;
const bool ROWS_AHEAD = BF16_CACHE && AHEAD_STEP;
const uint ROW_BLOCKS = ROWS / MM;
const uint UNITS = ROW_BLOCKS * VALUE_PARTS;   // subgroups that compute
const uint LANES = WG / ROWS;                  // softmax: invocations per row (the planner keeps WG = LANES x ROWS)
const uint DKPAD = (DK + 15u) / 16u * 16u;     // dims in the products: zeros past DK
const uint DVP = ((DV + VALUE_PARTS - 1u) / VALUE_PARTS + NN - 1u) / NN * NN;  // output columns per unit
const uint V_BLOCKS = DVP / NN;                // accumulators per unit
const uint N_BLOCKS = TK / NN;                 // column blocks of S
const uint S_PARTS = VALUE_PARTS > N_BLOCKS ? VALUE_PARTS / N_BLOCKS : 1u;  // DK slices of S
const uint K_STEPS = DKPAD / KK;
const uint ROW_WORDS = DK / PER_WORD;          // cache words of a row
const uint VALUE_WORDS = DV / PER_WORD;        // ... of its value (two pools: of its ckv row)
const uint ROPE_WORDS = ROW_WORDS - VALUE_WORDS;
const uint PAD_WORDS = DKPAD / PER_WORD;       // ... and of the staged row, zeros past ROW_WORDS
// Cache words per staged chunk: 16-byte loads where every pool's rows are whole 16-byte chunks,
// else 8-byte ones (rows are multiples of 8 elements: 8 bytes at least).
// (Integer arithmetic: glslang turns && and || of specialization constants into invalid SPIR-V.)
const uint CW = (ROW_WORDS | TWO_POOLS * VALUE_WORDS) % 4u == 0u ? 4u : 2u;
const uint NO_BLOCK = 0xffffffffu;
// Shared strides, padded by 16 bytes so that the rows of a fragment fall in different banks.
const uint DS = DKPAD + 8u;  // f16 per query and key row
const uint TS = TK + 8u;     // f16 per P row
const uint SS = TK + 4u;     // f32 per S row

// The queries stay in registers: each unit keeps the A fragments of its block's rows over its
// slice of the dims (Q_FRAGS of them), loaded once, so that shared memory holds only what changes
// from tile to tile and more rows share each staged row.
const uint Q_FRAGS = (K_STEPS + S_PARTS - 1u) / S_PARTS;
const uint QUERY_PAIRS = DKPAD / 2u;  // 32-bit words of a query row as staged (zeros past DK)
const uint QUERY_LOADS = (ROWS * QUERY_PAIRS + WG - 1u) / WG;  // query words per invocation

// Shared memory in 16-byte words (8 f16 or 4 f32); src/ops/mla_matrix_planner.cpp sizes the same:
// the staged rows [TK][DS], the scores [S_PARTS][ROWS][SS] (f32) which once read make room for
// each unit's [MM][NN] f32 way out (the element-by-element P V's sums, the outputs), P [ROWS][TS]
// and the factors [ROWS][NN] (f32). Before the first tile, one row block's queries [MM][DS] pass
// through its front on their way into registers.
const uint S_WORDS = S_PARTS * ROWS * SS / 4u;
const uint W_WORDS = UNITS * MM * NN / 4u;
const uint K_BASE = 0u;
const uint S_BASE = K_BASE + TK * DS / 8u;
const uint W_BASE = S_BASE;
const uint P_BASE = S_BASE + (S_WORDS > W_WORDS ? S_WORDS : W_WORDS);
const uint F_BASE = P_BASE + ROWS * TS / 8u;
const uint TILE_WORDS = F_BASE + ROWS * NN / 4u;
const uint Q_WORDS = MM * DS / 8u;  // one row block's queries
const uint MEM_WORDS = TILE_WORDS > Q_WORDS ? TILE_WORDS : Q_WORDS;
shared uvec4 s_mem[MEM_WORDS];

shared uint s_key_block[2][TK];   // per tile parity: the physical block of each position (NO_BLOCK: none)
shared float s_row_slope[ROWS];   // ALiBi slope of each row's head
shared float s_row_factor[ROWS];  // at the end: the rows' output factors
shared float s_row_max[ROWS];
shared float s_row_sum[ROWS];
// One word per invocation: the tree mask's partial sums (once, before the first tile), then the
// softmax lanes' partial maxima and sums as float bits (one array, not two: the 16-head layout
// keeps two workgroups within the shared memory one may take).
shared uint s_lane_words[WG];
shared uint s_mask_base;          // tree mask: the request's first byte
shared uint s_value_bad[2];       // per tile parity: a staged value entry is not finite
shared uint s_largest[2];         // bf16: largest finite magnitude (f32 bits) of the queries (of a tile's rows that hold Inf or NaN)
shared uint s_magnitude;          // bf16: the tile's largest magnitude as 15 bits, Inf and NaN included

#define A_MAT coopmat<float16_t, gl_ScopeSubgroup, MM, KK, gl_MatrixUseA>
#define B_MAT coopmat<float16_t, gl_ScopeSubgroup, KK, NN, gl_MatrixUseB>
#define C_MAT coopmat<float, gl_ScopeSubgroup, MM, NN, gl_MatrixUseAccumulator>

layout(push_constant) uniform PushBlock { AttentionPush pc; };

layout(set = 0, binding = ATTN_BINDING_QUERY) readonly buffer Query { uint query_words[]; };
// The pools, read in chunks of CW words (16 or 8 bytes; the views are 16-byte aligned, checked):
// cache_chunk(block, offset, j).
#include "common/mla_pools.glsl"
layout(set = 0, binding = ATTN_BINDING_BLOCK_TABLES) readonly buffer BlockTables { uint block_tables[]; };
layout(set = 0, binding = ATTN_BINDING_CONTEXT_LENS) readonly buffer ContextLens { uint context_lens[]; };
layout(set = 0, binding = ATTN_BINDING_QUERY_STARTS) readonly buffer QueryStarts { uint query_starts[]; };
layout(set = 0, binding = ATTN_BINDING_OUTPUT) writeonly buffer Output { uint output_words[]; };
layout(set = 0, binding = ATTN_BINDING_ALIBI) readonly buffer Alibi { float alibi_slopes[]; };
layout(set = 0, binding = ATTN_BINDING_SINKS) readonly buffer Sinks { float sinks[]; };
layout(set = 0, binding = ATTN_BINDING_LSE) writeonly buffer Lse { float lse[]; };
layout(set = 0, binding = ATTN_BINDING_SCRATCH) writeonly buffer Scratch { float scratch[]; };
layout(set = 0, binding = ATTN_BINDING_STATUS) buffer Status { uint status[]; };
layout(set = 0, binding = ATTN_BINDING_TREE_MASK) readonly buffer TreeMask { uint tree_mask_words[]; };

uint query_start_at(uint s) { return query_starts[pc.query_starts_offset + s]; }

#include "common/softmax_state.glsl"
#include "common/attention_range.glsl"
#include "common/matrix_f16_elements.glsl"

#include "common/attention_rows.glsl"  // g_*, row_valid, row_index, query_row_word, output_row_word

#define VKP_MASK_PARTIALS s_lane_words
#include "common/attention_tree_mask.glsl"
#include "common/attention_tile.glsl"
#include "common/attention_logits.glsl"
#include "common/attention_epilogue.glsl"

// 32-bit word w of the shared memory (a pair of f16, or one f32).
uint shared_word(uint w) { return s_mem[w / 4u][w % 4u]; }
void set_shared_word(uint w, uint x) { s_mem[w / 4u][w % 4u] = x; }
// f32 element i of the region from 16-byte word `base`.
float shared_float(uint base, uint i) { return uintBitsToFloat(shared_word(4u * base + i)); }
void set_shared_float(uint base, uint i, float x) { set_shared_word(4u * base + i, floatBitsToUint(x)); }
// f16 element i (as bits) of the region from 16-byte word `base`.
uint shared_half(uint base, uint i) { return (shared_word(4u * base + i / 2u) >> (16u * (i % 2u))) & 0xffffu; }

// An 8-byte cache chunk written to shared memory as f16 from 32-bit word `word` (fp8: a whole
// 16-byte word); store_chunk's 8-byte counterpart.
bool store_half_chunk(uint word, uvec2 raw) {
  if (FP8) {
    const uvec4 h = uvec4(fp8_word_to_f16(raw.x), fp8_word_to_f16(raw.y));
    s_mem[word / 4u] = h;
    return fp8_chunk_not_finite(uvec4(raw, 0u, 0u));
  }
  set_shared_word(word, raw.x);
  set_shared_word(word + 1u, raw.y);
  return f16_chunk_not_finite(uvec4(raw, 0u, 0u));
}

// Staging in two steps: load_rows reads this invocation's chunks of the tile's rows into
// registers, every load before any store (the loads do not depend on one another, so they can
// all be in flight at once; a loop that stores each chunk before the next load waits out each
// load in turn); store_rows writes them into [TK][DS] as f16, a bf16 cache's converted there
// and then (times `factor`, the tile's power of two, known only once every invocation has
// raised the tile's largest magnitude from its loaded chunks: a barrier between the steps).
const uint PAD_CHUNKS = PAD_WORDS / CW;
const uint ROW_CHUNKS = ROW_WORDS / CW;
const uint STAGE_CHUNKS = TK * PAD_CHUNKS;
const uint STAGE_LOADS = (STAGE_CHUNKS + WG - 1u) / WG;  // chunks per invocation and tile
void load_rows(uint tile, uint parity, out uvec4 raw[STAGE_LOADS]) {
  [[unroll]] for (uint k = 0u; k < STAGE_LOADS; ++k) {
    const uint i = gl_LocalInvocationID.x + k * WG;
    raw[k] = uvec4(0u);
    if (i < STAGE_CHUNKS) {
      const uint c = i / PAD_CHUNKS;
      const uint j = i % PAD_CHUNKS;
      const uint block = s_key_block[parity][c];
      if (j < ROW_CHUNKS && block != NO_BLOCK) raw[k] = cache_chunk(block, (tile + c) % B, j);
    }
  }
}
// The largest finite magnitude (f32 bits) of this invocation's loaded bf16 chunks.
uint raw_largest(uvec4 raw[STAGE_LOADS]) {
  uint largest = 0u;
  [[unroll]] for (uint k = 0u; k < STAGE_LOADS; ++k) largest = max(largest, bf16_chunk_largest(raw[k]));
  return largest;
}
// The largest magnitude of this invocation's loaded bf16 chunks as 15 bits, Inf and NaN included
// (0x7f80 and up): a few operations a word where raw_largest takes a dozen, since a tile holds
// Inf or NaN seldom; such a tile then takes raw_largest too.
uint raw_magnitude(uvec4 raw[STAGE_LOADS]) {
  uvec4 m = uvec4(0u);
  [[unroll]] for (uint k = 0u; k < STAGE_LOADS; ++k) m = max(m, raw[k] & 0x7fff7fffu);
  const uint pairs = max(max(m.x, m.y), max(m.z, m.w));
  return max(pairs & 0xffffu, pairs >> 16);
}
// The first cache word, in its row, of staged chunk i (of STAGE_CHUNKS).
uint staged_chunk_row_word(uint i) { return (i % PAD_CHUNKS) * CW; }
// Writes staged chunk i into [TK][DS] (16- or 8-byte chunks; fp8 converted) and returns
// store_chunk's non-finite test of it.
bool store_staged_chunk(uint i, uvec4 chunk) {
  const uint first = 4u * K_BASE + (i / PAD_CHUNKS) * (DS / 2u);   // 32-bit word of the row's first pair (16-byte aligned)
  const uint word = first + (FP8 ? 2u : 1u) * staged_chunk_row_word(i);  // ... of the chunk's first f16 pair
  return CW == 4u ? store_chunk(word / 4u, chunk) : store_half_chunk(word, chunk.xy);
}
// A bf16 tile without Inf or NaN (whose largest magnitude is finite) into [TK][DS] as f16 times
// `factor`: no special values to carry over, nothing to flag (the chunks' test goes unused).
void store_finite_bf16_rows(uvec4 raw[STAGE_LOADS], float factor) {
  [[unroll]] for (uint k = 0u; k < STAGE_LOADS; ++k) {
    const uint i = gl_LocalInvocationID.x + k * WG;
    if (i < STAGE_CHUNKS) store_staged_chunk(i, finite_bf16_chunk_to_f16(raw[k], factor));
  }
}
// Returns whether a staged entry is not finite: f16 and fp8 one of a row's values (its first DV),
// bf16 any entry of the row (as the pass over the staged tile that this replaces flagged).
bool store_rows(uvec4 raw[STAGE_LOADS], float factor) {
  bool bad = false;
  [[unroll]] for (uint k = 0u; k < STAGE_LOADS; ++k) {
    const uint i = gl_LocalInvocationID.x + k * WG;
    if (i >= STAGE_CHUNKS) continue;
    const bool chunk_bad = store_staged_chunk(i, BF16_CACHE ? bf16_chunk_to_f16(raw[k], factor) : raw[k]);
    if (BF16_CACHE) bad = bad || chunk_bad;
    else if (staged_chunk_row_word(i) < VALUE_WORDS) bad = bad || chunk_bad;
  }
  return bad;
}

// The physical blocks of the TK positions from `tile` into s_key_block[parity], from the request's
// block table at word `table` (positions from `hi` on and bad block ids: NO_BLOCK, the latter
// flagged).
void read_tile_blocks(uint table, uint hi, uint tile, uint parity) {
  for (uint c = gl_LocalInvocationID.x; c < TK; c += WG) {  // the workgroup may hold fewer invocations than positions
    const uint t = tile + c;
    uint b = NO_BLOCK;
    if (t < hi) {
      b = block_tables[table + t / B];
      if (b >= pc.num_blocks) {
        atomicOr(status[pc.status_offset], STATUS_BAD_BLOCK_ID);
        b = NO_BLOCK;
      }
    }
    s_key_block[parity][c] = b;
  }
}

void main() {
  const uint tid = gl_LocalInvocationID.x;
  const HeadGroup hg = head_group(gl_WorkGroupID.x, pc.num_heads, 1u, GROUP);
  g_head0 = hg.head0;
  g_heads = hg.heads;
  const uint part = gl_WorkGroupID.z;
  const bool reporter = tid == 0u && gl_WorkGroupID.x == 0u && part == 0u;  // flags each request's values once

  // ---- the request and the tile (uniform: every invocation reads the same words) ----
  AttentionTile tile;
  if (!attention_tile(gl_WorkGroupID.y, part, tid, reporter, tile)) return;
  const uint request = tile.request;
  const uint len = tile.len;
  const uint window = tile.window;
  const int first_p = tile.first_p;
  const uint first_new = tile.first_new;
  const KeyRange span = tile.span;

  if (tid == 0u) {
    s_largest[0] = 0u;
    s_largest[1] = 0u;
    s_magnitude = 0u;
    s_value_bad[0] = 0u;
    s_value_bad[1] = 0u;
  }
  if (tid < ROWS) s_row_slope[tid] = ALIBI && row_valid(tid) ? alibi_slopes[pc.alibi_offset + g_head0 + tid % GROUP] : 0.0;
  if (TREE_MASK) find_mask_base(request, tid);
  barrier();

  // ---- the rows' queries: every load of this invocation's words first (in flight together),
  // then (bf16) the rows' largest magnitude, then into registers as f16 a row block at a time
  // through the front of shared memory ----
  uint query_raw[QUERY_LOADS];
  [[unroll]] for (uint k = 0u; k < QUERY_LOADS; ++k) {
    const uint i = tid + k * WG;
    const uint r = i / QUERY_PAIRS;
    const uint w = i % QUERY_PAIRS;
    query_raw[k] = 0u;
    if (i < ROWS * QUERY_PAIRS && row_valid(r) && w < DK / 2u) query_raw[k] = query_words[query_row_word(r) + w];
  }
  if (BF16_QUERY) {
    uint largest = 0u;
    [[unroll]] for (uint k = 0u; k < QUERY_LOADS; ++k) largest = max(largest, bf16_largest(query_raw[k]));
    RAISE_SHARED_LARGEST(s_largest[0], largest);
    barrier();
  }
  const int query_shift = BF16_QUERY ? range_shift(s_largest[0]) : 0;
  const float query_factor = exp2(float(query_shift));

  // The unit of this subgroup: row block `block`, value part `vpart`, and its share of S: the
  // dims [k_lo KK, k_hi KK) of the column blocks it takes.
  const uint unit = gl_SubgroupID;
  const bool computes = unit < UNITS;
  const uint block = unit / VALUE_PARTS;
  const uint vpart = unit % VALUE_PARTS;
  const uint s_part_index = VALUE_PARTS > N_BLOCKS ? vpart / N_BLOCKS : 0u;
  const uint k_lo = s_part_index * K_STEPS / S_PARTS;
  const uint k_hi = (s_part_index + 1u) * K_STEPS / S_PARTS;

  A_MAT qa[Q_FRAGS];
  [[unroll]] for (uint f = 0u; f < Q_FRAGS; ++f) qa[f] = A_MAT(0.0);
  for (uint b = 0u; b < ROW_BLOCKS; ++b) {
    [[unroll]] for (uint k = 0u; k < QUERY_LOADS; ++k) {
      const uint i = tid + k * WG;
      const uint r = i / QUERY_PAIRS;
      if (i >= ROWS * QUERY_PAIRS || r / MM != b) continue;
      const uint word = BF16_QUERY ? bf16_pair_to_f16(query_raw[k], query_factor) : query_raw[k];
      set_shared_word((r % MM) * (DS / 2u) + i % QUERY_PAIRS, word);
    }
    barrier();
    if (computes && block == b) {
      [[unroll]] for (uint f = 0u; f < Q_FRAGS; ++f)
        if (k_lo + f < k_hi) coopMatLoad(qa[f], s_mem, (k_lo + f) * KK / 8u, DS / 8u, gl_CooperativeMatrixLayoutRowMajor);
    }
    barrier();  // the next block's queries, or the first tile, overwrite these
  }
  // Softmax: this invocation's row, its running max and its share of the row's sum. Rows are
  // numbered by subgroup, so that a row's LANES invocations (a power of two) are one subgroup's
  // where the subgroup holds that many, and exchange their tile maxima by shuffles.
  const uint softmax_index = gl_SubgroupID * gl_SubgroupSize + gl_SubgroupInvocationID;
  const uint my_row = softmax_index / LANES;
  const uint lane = softmax_index % LANES;
  float row_max = VKP_NEG_INF;
  float row_sum = 0.0;
  bool row_poisoned = false;
  const int my_p = first_p + int(my_row / GROUP);
  const KeyRange my_range = row_key_range(my_p, len, g_new_tokens, window, TREE_MASK);
  const bool my_valid = my_row < ROWS && row_valid(my_row);

  // Logits = scores * the scale, an fp8 cache's k_scale and decode factor, and the bf16 powers
  // of two undone (score_factors: kept apart until each tile's are known).
  int scale_exponent;
  const float scale_mantissa = frexp(pc.scale * (FP8 ? pc.k_scale * fp8_scale_fix(CACHE_DTYPE) : 1.0), scale_exponent);
  const float out_scale = FP8 ? pc.v_scale * fp8_scale_fix(CACHE_DTYPE) : 1.0;
  C_MAT o[V_BLOCKS];
  [[unroll]] for (uint j = 0u; j < V_BLOCKS; ++j) o[j] = C_MAT(0.0);

  const uint table = pc.block_tables_offset + request * pc.max_blocks_per_seq;
  uint parity = 0u;
  read_tile_blocks(table, span.hi, span.lo, 0u);
  if (ROWS_AHEAD && span.lo + TK < span.hi) read_tile_blocks(table, span.hi, span.lo + TK, 1u);
  barrier();
  uvec4 raw[STAGE_LOADS];
  if (ROWS_AHEAD && span.lo < span.hi) load_rows(span.lo, 0u, raw);
  for (uint tile = span.lo; tile < span.hi; tile += TK) {
    // ---- staging: the tile's rows (its blocks were read during the tile before; ROWS_AHEAD:
    // the rows too); bf16: the tile's largest magnitude raised first, the rows stored converted
    // after its barrier ----
    if (!ROWS_AHEAD) load_rows(tile, parity, raw);
    if (BF16_CACHE) {
      RAISE_SHARED_LARGEST(s_magnitude, raw_magnitude(raw));
    } else if (store_rows(raw, 1.0)) {
      atomicOr(s_value_bad[parity], 1u);
    }
    barrier();
    // The next tile's blocks, in flight during this tile's products and softmax (the other
    // parity's were last read before this barrier).
    if (!ROWS_AHEAD && tile + TK < span.hi) read_tile_blocks(table, span.hi, tile + TK, parity ^ 1u);
    int key_shift = 0;  // the bf16 tile's power of two
    if (BF16_CACHE) {
      // The tile's power of two from its largest magnitude; where that is Inf or NaN (the same
      // for every invocation), from its largest finite one, raised in a pass of its own.
      const uint magnitude = s_magnitude;
      if (magnitude < 0x7f80u) {
        key_shift = range_shift(magnitude << 16);
        store_finite_bf16_rows(raw, exp2(float(key_shift)));
      } else {
        RAISE_SHARED_LARGEST(s_largest[1], raw_largest(raw));
        barrier();
        key_shift = range_shift(s_largest[1]);
        if (store_rows(raw, exp2(float(key_shift)))) atomicOr(s_value_bad[parity], 1u);
      }
      barrier();
      if (tid == 0u) {  // read by all before the barrier; raised again after the tile's end
        s_magnitude = 0u;
        s_largest[1] = 0u;
      }
    }
    // The other parity's flag was last read before the previous tile's end.
    if (tid == 0u) s_value_bad[parity ^ 1u] = 0u;
    if (ROWS_AHEAD) {
      // This tile's rows are stored (raw is free): the next tile's rows (their blocks, the other
      // parity, read during the tile before), then the blocks of the tile after it into this
      // tile's parity, whose last reader, this tile's loads, the tile before's barriers ordered.
      if (tile + TK < span.hi) load_rows(tile + TK, parity ^ 1u, raw);
      if (tile + 2u * TK < span.hi) read_tile_blocks(table, span.hi, tile + 2u * TK, parity);
    }

    // ---- scores: this unit's column blocks of its row block (over its slice of the dims) ----
    if (computes) {
      for (uint n = VALUE_PARTS > N_BLOCKS ? vpart % N_BLOCKS : vpart; n < N_BLOCKS; n += VALUE_PARTS) {
        C_MAT scores = C_MAT(0.0);
        [[unroll]] for (uint f = 0u; f < Q_FRAGS; ++f) {  // constant indices keep qa in registers
          if (k_lo + f >= k_hi) continue;
          B_MAT kb;  // K^T [KK dims x NN positions]: column c is staged row c
          coopMatLoad(kb, s_mem, K_BASE + (n * NN * DS + (k_lo + f) * KK) / 8u, DS / 8u,
                      gl_CooperativeMatrixLayoutColumnMajor);
          scores = coopMatMulAdd(qa[f], kb, scores);
        }
        coopMatStore(scores, s_mem, S_BASE + ((s_part_index * ROWS + block * MM) * SS + n * NN) / 4u, SS / 4u,
                     gl_CooperativeMatrixLayoutRowMajor);
      }
    }
    barrier();

    // ---- softmax: logits, the tile's max per row, P, the rows' factors ----
    const vec2 factors = score_factors(scale_mantissa, scale_exponent - query_shift - key_shift);
    float tile_max = VKP_NEG_INF;
    bool tile_poisoned = false;
    for (uint q = lane; q < TK / 2u; q += LANES) {
      vec2 logits = vec2(VKP_NEG_INF);
      for (uint h = 0u; h < 2u; ++h) {
        const uint c = 2u * q + h;
        const uint t = tile + c;
        if (!my_valid || t >= span.hi || !attention_visible(my_range, t, first_new, my_row)) continue;
        float score = 0.0;
        for (uint s = 0u; s < S_PARTS; ++s) score += shared_float(S_BASE, (s * ROWS + my_row) * SS + c);
        logits[h] = attention_logit(score * factors.x * factors.y, my_p, t, pc.softcap, s_row_slope[my_row]);
        tile_max_add(tile_max, tile_poisoned, logits[h]);
      }
      set_shared_float(S_BASE, my_row * SS + 2u * q, logits.x);  // own entries of slice 0: the logits
      set_shared_float(S_BASE, my_row * SS + 2u * q + 1u, logits.y);
    }
    if (LANES <= gl_SubgroupSize) {  // the row's lanes are one subgroup's: a butterfly, no barrier
      for (uint x = 1u; x < LANES; x <<= 1u)
        tile_max_add(tile_max, tile_poisoned, subgroupShuffleXor(row_state_max(tile_max, tile_poisoned), x));
    } else {  // they span subgroups (a device that runs smaller ones than it lists): through shared memory
      s_lane_words[softmax_index] = floatBitsToUint(row_state_max(tile_max, tile_poisoned));
      barrier();
      tile_max = VKP_NEG_INF;
      tile_poisoned = false;
      for (uint i = 0u; i < LANES; ++i) tile_max_add(tile_max, tile_poisoned, uintBitsToFloat(s_lane_words[my_row * LANES + i]));
    }
    row_poisoned = row_poisoned || tile_poisoned;
    const float alpha = row_state_rescale(row_max, tile_max);
    float tile_sum = 0.0;
    for (uint q = lane; q < TK / 2u; q += LANES) {
      const vec2 x = vec2(shared_float(S_BASE, my_row * SS + 2u * q), shared_float(S_BASE, my_row * SS + 2u * q + 1u));
      const bvec2 hidden = bvec2(x.x == VKP_NEG_INF || nan_bits(x.x), x.y == VKP_NEG_INF || nan_bits(x.y));
      const vec2 pr = vec2(hidden.x ? 0.0 : exp(x.x - row_max), hidden.y ? 0.0 : exp(x.y - row_max));
      tile_sum += pr.x + pr.y;
      // P in f16 pairs; -0 marks a position the row does not attend.
      set_shared_word(4u * P_BASE + (my_row * TS + 2u * q) / 2u,
                      packHalf2x16(pr) | (hidden.x ? 0x8000u : 0u) | (hidden.y ? 0x80000000u : 0u));
    }
    row_sum = row_sum * alpha + tile_sum;
    for (uint c = lane; c < NN; c += LANES) set_shared_float(F_BASE, my_row * NN + c, alpha);
    barrier();

    // ---- values: O = O * factors + P V over this unit's columns ----
    const float value_factor = exp2(float(-key_shift));  // the bf16 tile's power of two, undone
    const bool values_bad = s_value_bad[parity] != 0u;
    const uint column0 = vpart * DVP;
    if (computes) {
      C_MAT row_factors;
      coopMatLoad(row_factors, s_mem, F_BASE + block * MM * NN / 4u, NN / 4u, gl_CooperativeMatrixLayoutRowMajor);
      [[unroll]] for (uint j = 0u; j < V_BLOCKS; ++j) o[j] = o[j] * row_factors;
      if (!values_bad) {
        A_MAT pa[TK / KK];
        [[unroll]] for (uint k = 0u; k < TK / KK; ++k)
          coopMatLoad(pa[k], s_mem, P_BASE + (block * MM * TS + k * KK) / 8u, TS / 8u, gl_CooperativeMatrixLayoutRowMajor);
        [[unroll]] for (uint j = 0u; j < V_BLOCKS; ++j) {
          C_MAT sum = C_MAT(0.0);
          [[unroll]] for (uint k = 0u; k < TK / KK; ++k) {
            B_MAT vb;  // V [KK positions x NN dims]: the staged rows' columns
            coopMatLoad(vb, s_mem, K_BASE + (k * KK * DS + column0 + j * NN) / 8u, DS / 8u,
                        gl_CooperativeMatrixLayoutRowMajor);
            if (BF16_CACHE) sum = coopMatMulAdd(pa[k], vb, sum);
            else o[j] = coopMatMulAdd(pa[k], vb, o[j]);
          }
          if (BF16_CACHE) o[j] = o[j] + sum * value_factor;
        }
      }
    }
    if (values_bad) {
      // A non-finite value entry in the tile: element by element, hidden positions skipped, the
      // sums through the unit's way out into an accumulator.
      const uint w_base = W_BASE + unit * MM * NN / 4u;
      [[unroll]] for (uint j = 0u; j < V_BLOCKS; ++j) {
        if (computes) {
          for (uint e = gl_SubgroupInvocationID; e < MM * NN; e += gl_SubgroupSize) {
            const uint r = block * MM + e / NN;
            const uint d = column0 + j * NN + e % NN;
            float acc = 0.0;
            for (uint c = 0u; c < TK; ++c) {
              const uint bits = shared_half(P_BASE, r * TS + c);
              if ((bits & 0x8000u) != 0u) continue;  // not attended
              acc += unpackHalf2x16(bits).x * unpackHalf2x16(shared_half(K_BASE, c * DS + d)).x;
            }
            set_shared_float(w_base, e, acc);
          }
        }
        barrier();
        if (computes) {
          C_MAT sum;
          coopMatLoad(sum, s_mem, w_base, NN / 4u, gl_CooperativeMatrixLayoutRowMajor);
          o[j] = o[j] + sum * value_factor;
        }
        barrier();
      }
    }
    // The next tile's staging overwrites the rows, S, P and the factors. A bf16 tile writes
    // shared memory only after its first barrier, which orders those writes after this tile's
    // reads: a ROWS_AHEAD tile ends without one (its next loads are in flight already).
    if (!ROWS_AHEAD) barrier();
    parity ^= 1u;
  }

  // ---- the rows' states: sums over their lanes ----
  s_lane_words[softmax_index] = floatBitsToUint(row_sum);
  barrier();
  if (lane == 0u) {
    float total = 0.0;
    for (uint i = 0u; i < LANES; ++i) total += uintBitsToFloat(s_lane_words[my_row * LANES + i]);
    s_row_sum[my_row] = total;
    s_row_max[my_row] = row_state_max(row_max, row_poisoned);
  }
  barrier();
  if (tid < ROWS && row_valid(tid)) {
    if (SPLIT) {
      // scratch, in floats: value sums [T][H][P][DV], then (max, sum) pairs [T][H][P][2]
      const uint ml =
          pc.scratch_offset + split_state_word(row_index(tid), part, pc.num_tokens * pc.num_heads, pc.num_partitions, DV);
      scratch[ml] = s_row_max[tid];
      scratch[ml + 1u] = s_row_sum[tid];
      s_row_factor[tid] = out_scale;
    } else {
      const float z = SINKS ? sinks[pc.sinks_offset + g_head0 + tid % GROUP] : 0.0;
      const RowFinish f = finish_row(s_row_max[tid], s_row_sum[tid], SINKS, z);
      s_row_factor[tid] = f.factor * out_scale;
      if (WRITE_LSE) lse[pc.lse_offset + row_index(tid)] = f.lse;
    }
  }
  barrier();

  // ---- the outputs (or the split's value sums) through each unit's way out ----
  const uint w_base = W_BASE + unit * MM * NN / 4u;
  [[unroll]] for (uint j = 0u; j < V_BLOCKS; ++j) {
    if (computes) coopMatStore(o[j], s_mem, w_base, NN / 4u, gl_CooperativeMatrixLayoutRowMajor);
    barrier();
    if (computes) {
      for (uint e = 2u * gl_SubgroupInvocationID; e < MM * NN; e += 2u * gl_SubgroupSize) {  // pairs (d, d + 1)
        const uint row = block * MM + e / NN;
        const uint d = vpart * DVP + j * NN + e % NN;
        if (!row_valid(row) || d >= DV) continue;
        const float f = s_row_factor[row];
        const float a = shared_float(w_base, e);
        const float b = shared_float(w_base, e + 1u);
        if (SPLIT) {
          const uint base = pc.scratch_offset + split_sums_word(row_index(row), part, pc.num_partitions, DV) + d;
          scratch[base] = a * f;
          scratch[base + 1u] = b * f;
        } else {
          output_words[output_row_word(row) + d / 2u] = pack_output(finish_output(a, f), finish_output(b, f), QUERY_DTYPE);
        }
      }
    }
    barrier();
  }
}
