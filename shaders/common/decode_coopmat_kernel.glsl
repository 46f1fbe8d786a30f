// SPDX-License-Identifier: Apache-2.0
// Paged decode attention on matrix units, for f16 or bf16 queries and an f16, bf16 or fp8
// cache: the same contract and outputs as decode_kernel.glsl, run when a plan asks for the
// matrix kernel on a device whose fragment layout the context verified (decode.cpp,
// src/ops/fragment_layout*.cpp). The products take f16 operands, so bf16 elements are
// converted in registers (below, "bf16 range").
// Two extensions, one source: VK_NV_cooperative_matrix (the matrix* modules of shaders/decode_variants.def, glslc) and the
// cross-vendor VK_KHR_cooperative_matrix (the *_khr modules, VKP_KHR 1, compiled by the
// KHR compiler, docs/toolchain.md). The matrix types and the two calls that differ are the
// macros MatA, MatB, MatC, MAT_MUL_ADD and MAT_LOAD_COLUMNS, so the NV modules' SPIR-V is what
// it was before the KHR twins existed (NVIDIA's driver compiles the kernel differently after
// small changes to it). Both run only where the 16x8x16 fragments have the layout below: NV's
// checked by fragment_layout.comp, KHR's by fragment_layout_16x8x16_khr.comp.
//
// Why: with a GQA group the scalar kernel spends more issue slots on the group's products than
// the memory system needs to stream the cache (bench/RESULTS.md). Here the products run on the
// matrix units, and the cache goes straight from 16-byte loads into the fragments' registers:
// no shared memory in the loop, no barriers.
//
// A workgroup takes one sequence, GROUP (<= 8) query heads of one kv head and one partition;
// each subgroup walks its own units of 32 tokens (units sub, sub + SUBGROUPS, ...) with its own
// online softmax, and the subgroups merge at the end. Per unit, as two tiles of 16 tokens,
// with 16x8x16 products (fp8 bytes become f16 in registers: E4M3 reads as value / 256, a
// factor folded into the scales):
//   scores  S^T[16 tokens x 8 heads] = K[16 tokens x 16 dims] Q^T[16 dims x 8 heads] over D/16
//           dim steps (heads past GROUP are zero columns);
//   softmax on S^T's accumulator fragment in registers;
//   values  O^T[16 dims x 8 heads] += V^T[16 dims x 16 tokens] P^T[16 tokens x 8 heads] over
//           D/16 dim tiles; P^T's fragment is S^T's, rounded to f16.
// Fragment layout (checked on the device before this shader is used, fragment_layout.cpp),
// with lane = 4 g + q: the A operand [16 x 16] holds, in this order, (g, 2q) (g, 2q+1)
// (g, 2q+8) (g, 2q+9) (g+8, 2q) (g+8, 2q+1) (g+8, 2q+8) (g+8, 2q+9); the B operand and the
// accumulator [16 x 8] hold (g, 2q) (g, 2q+1) (g+8, 2q) (g+8, 2q+1). So an accumulator is a B
// operand as it stands, and the A operands are written straight from 16-byte cache loads,
// because a product sums over k in any order:
//   keys:   over 2 (f16) or 4 (fp8) dim steps, row r's slots hold the dims of one 16-byte key
//           chunk (chunk 4 (step / steps per chunk) + q); the query sits in shared memory in
//           the same dim order;
//   values: over the unit's 2 tiles, lane (g, q) holds tokens 8q..8q+7 of dim rows g and
//           g + 8, which the [D][B] value layout stores as 16 bytes (8 for fp8). (64-token fp8
//           units, 16 bytes per row, measured slower on an H200.) The tiles' token rows
//           follow: row g + 8h of tile i is token 8 (g / 2) + 4i + 2h + g % 2 (fp8: 8 (g / 2)
//           + 4i + 2 (g % 2) + h, key_row_offset).
// Token-major layouts (KvLayout nhd and hnd: a token's D dims are contiguous; VKP_TOKEN_MAJOR 1,
// the matrix_token_major* modules, KV_LAYOUT a specialization constant; the vllm
// modules are compiled without this code): a key chunk is the same 16 bytes of a token, at
// another address. A 16-byte value load holds 8 dims of one token, where the fragments want a
// token pair per register, so the value products' M rows (dims) are permuted instead: lane
// (g, q) holds, of each of its 8 tokens (value_group + t), dims 64 j + 8 g .. 64 j + 8 g + 7 as
// one load per 64 dims (16 bytes, fp8 8), and row g (g + 8) of dim tile d = 4 j + e is the low
// (high) half of the token's f16 pair e (fp8: word e / 2's pair e % 2), i.e. dim
// 64 j + 8 g + 2 e (+ 1) (fp8: 64 j + 8 g + 4 (e / 2) + e % 2 (+ 2)). A register of the A
// operand (two tokens of one row) is then two tokens' halves (a byte permute), the loads stay
// whole 32-byte sectors across each row's 8 lanes, and the outputs are written to their dims
// (value_dim). Head sizes are multiples of 64.
// Head slices (VKP_HEAD_SLICES 1, the matrix_slices* modules, SLICES a
// specialization constant; the other modules are compiled without this code): a GQA group of
// more than 8 heads (up to 8 SLICES) runs in one workgroup instead of one workgroup per 8 heads,
// each of which read every key and value. Subgroup sub takes the 8 heads of slice sub % SLICES
// (its own query fragments, columns, softmax states and outputs) and walks the units of walker
// sub / SLICES, so the SLICES subgroups of a walker load the same cache words at about the same
// time and the SM's L1 serves all but the first; each head merges its own walkers' states.
// (Planned only where DecodeTuning::slices asks, until measured.)
// fp8 pairs: a 4-byte word gives bytes 0 and 2 to one f16 pair and bytes 1 and 3 to the other
// (a shift and two masks; pairing neighbours took byte moves and 18 to 28 % longer on an
// H200), so with fp8 a key pair holds dims 4u + {0, 2} and {1, 3}, and the tokens' rows follow
// that order.
// The running max is lazy: the accumulators are rescaled only when a head's tile max passes
// its reference by more than RESCALE_SLACK (e^8 still fits f16 probabilities easily).
// Query range: each head's bf16 query row (scale folded in) is multiplied by a power of two
// that brings its largest element into [2^14, 2^15), and its scores by the inverse (a power of
// two loses nothing), so no bf16 query overflows or underflows f16. (An f16 query is stored
// as it comes, times the scale, as before: measured 1 to 4 % faster on an H200.)
// bf16 range: a unit's bf16 keys (and, separately, values) become f16 as they are, exact for
// magnitudes in [2^-17, 65280]. The unit is done again from the raw bits, scaled by the power
// of two that brings its largest finite element into [2^14, 2^15), with the products scaled
// back in f32, where an element reaches 65536 (Inf in f16: keys show it as Inf or NaN scores,
// values by their largest magnitude), or where a sample of 4 elements per lane has none that
// reaches RANGE_LOW (small ones would lose bits in f16's subnormals), or (keys only) where the
// unit has masked tokens, whose keys are not masked and must not decide. Either way an
// element's error is at most 2^-17 of the unit's largest one.
// fp8 NaN: E4M3's NaN becomes a finite f16 on the cheap conversion, so every raw key and value
// word is probed (2 integer operations per 4 bytes, where fixing every pair took 5 per 2) into
// one word per lane, tested once after the loop. Where a lane of the subgroup found one (rare),
// the subgroup reads its units again to find where (nan_outputs): a NaN key of a token in
// [lo, hi) makes every output of the group NaN, a NaN value of such a token its dim's outputs,
// as the exact conversion would. (A vote per unit measured 2 % slower on an H200.) This code is
// compiled in where VKP_E4M3_NAN is 1: the E4M3 modules (matrix*_e4m3*) and the
// timeline's. Dead in the shared module, it still changed the driver's compile of the bf16
// kernel there (2 % slower on an H200), so that module goes without it and never runs E4M3.
// Non-finite inputs (contract, Decode step 9; common/non_finite.glsl): a NaN or infinite query
// or key element (f16, bf16, E5M2) makes its token's scores non-finite in the columns it
// reaches (a key: every column, Inf * 0 being NaN; a query: its head's). Each lane tests the
// raw scores of its attended tokens into one flag per column (before the soft cap, whose tanh
// would make an infinity finite), acted on once after the loop: a flagged column's running sum
// becomes NaN, as the E4M3 search does, and a head with a NaN sum in any subgroup is poisoned:
// NaN outputs and LSE (a split partition stores NaN as its max and sum). A non-finite value
// element reaches its dim's accumulators through the products (0 * Inf is NaN too), and the
// outputs turn any non-finite element into NaN.
#extension GL_GOOGLE_include_directive : require
#if VKP_TIMELINE && (VKP_KHR || VKP_TOKEN_MAJOR || VKP_HEAD_SLICES)
#error "the timeline is recorded by the NV module of the vllm layout only (module matrix_timeline)"
#endif
#if VKP_KHR
#extension GL_KHR_cooperative_matrix : require
#else
#extension GL_NV_cooperative_matrix : require
#endif
#extension GL_KHR_memory_scope_semantics : require
#extension GL_EXT_shader_explicit_arithmetic_types_float16 : require
#extension GL_EXT_shader_16bit_storage : require
#extension GL_KHR_shader_subgroup_basic : require
#extension GL_KHR_shader_subgroup_shuffle : require
#extension GL_KHR_shader_subgroup_vote : require
#extension GL_EXT_control_flow_attributes : require
#if VKP_TIMELINE
// The matrix_timeline module: each subgroup writes when it passed a few points (below).
#extension GL_EXT_shader_realtime_clock : require
#extension GL_NV_shader_sm_builtins : require
#extension GL_EXT_buffer_reference : require
#extension GL_EXT_buffer_reference_uvec2 : require
#endif

#include "common/shader_interface.h"
#include "common/dtype.glsl"
#include "common/non_finite.glsl"
#if VKP_TOKEN_MAJOR
#include "common/kv_layout.glsl"
#endif

layout(local_size_x_id = DECODE_SC_WORKGROUP) in;
layout(constant_id = DECODE_SC_HEAD_SIZE) const uint D = 128u;
layout(constant_id = DECODE_SC_BLOCK_SIZE) const uint B = 16u;
layout(constant_id = DECODE_SC_HEADS_PER_WORKGROUP) const uint GROUP = 8u;
layout(constant_id = DECODE_SC_QUERY_DTYPE) const uint QUERY_DTYPE = DT_F16;  // f16 or bf16 (also the output's)
layout(constant_id = DECODE_SC_CACHE_DTYPE) const uint CACHE_DTYPE = DT_F16;  // f16, bf16, fp8_e4m3 or fp8_e5m2
layout(constant_id = DECODE_SC_FEATURES) const uint FEATURES = 0u;
// Tuning: issue the unit's value loads with its key loads (more in flight, more registers;
// the host takes it for bf16 and fp8 caches, whose conversions give the loads time: measured
// faster there, slower for f16), and keep the query's fragments in registers (else reload them
// from shared memory per unit).
layout(constant_id = DECODE_SC_MATRIX_PREFETCH) const bool EARLY_VALUES = false;
layout(constant_id = DECODE_SC_MATRIX_QUERY_REGISTERS) const bool QUERY_REGISTERS = true;
// Issue the next unit's key loads (and values, with EARLY_VALUES) before this unit's products,
// so that two units' loads are in flight per subgroup (twice the load registers: the host takes
// it for fp8 caches, measured faster there and slower for f16 and bf16).
layout(constant_id = DECODE_SC_MATRIX_PIPELINE) const bool PIPELINE = false;
// With the query's fragments in registers, let the subgroups' outputs reuse the query's shared
// words (a barrier parts them): a smaller workgroup, more of them resident per SM (the host
// takes it where that measured faster: lengths that vary, and short contexts).
layout(constant_id = DECODE_SC_MATRIX_SHARE_QUERY) const bool SHARE_QUERY = false;
#if VKP_TOKEN_MAJOR
// The caches' layout: KV_LAYOUT_NHD or KV_LAYOUT_HND (token-major; header).
layout(constant_id = DECODE_SC_KV_LAYOUT) const uint KV_LAYOUT = KV_LAYOUT_NHD;
#endif

const uint WG = gl_WorkGroupSize.x;
const uint SUBGROUP = 32u;                 // the host picks this shader only for 32-wide subgroups
const uint SUBGROUPS = WG / SUBGROUP;
const uint UNIT = 32u;                     // tokens per unit
const uint HEADS = 8u;                     // N of the products; heads >= GROUP are zero
#if VKP_HEAD_SLICES
// Head slices (header): subgroup sub takes the 8 heads of slice sub % SLICES of the workgroup's
// GROUP (up to 8 SLICES) and walks the units of walker sub / SLICES (walker, walker + WALKERS,
// ...), so the SLICES subgroups of a walker read the same cache words at about the same time.
layout(constant_id = DECODE_SC_MATRIX_HEAD_SLICES) const uint SLICES = 1u;
const uint WALKERS = SUBGROUPS / SLICES;
const uint QUERY_HEADS = HEADS * SLICES;   // query rows staged: the workgroup's heads
#define UNIT_WALKER(subgroup) ((subgroup) / SLICES)
#define SLICE_HEAD(column) (HEADS * (sub % SLICES) + (column))          // a column's head in the workgroup
#define SLICE_QUERY(element) (HEADS * (D / 2u) * (sub % SLICES) + (element))  // its query rows' words
#define STATE_INDEX(s, h) ((s) * SLICES + (h) / HEADS) * HEADS + (h) % HEADS  // walker s's state of head h
#define MERGE_SUBGROUPS WALKERS
#else
// One slice: every subgroup takes the workgroup's heads (the spellings below are the same
// code as before head slices existed, for the modules compiled without them).
#define WALKERS SUBGROUPS
#define QUERY_HEADS HEADS
#define UNIT_WALKER(subgroup) subgroup
#define SLICE_HEAD(column) column
#define SLICE_QUERY(element) element
#define STATE_INDEX(s, h) s * HEADS + h
#define MERGE_SUBGROUPS SUBGROUPS
#endif
const bool FP8 = CACHE_DTYPE == DT_FP8_E4M3 || CACHE_DTYPE == DT_FP8_E5M2;
const bool BF16 = CACHE_DTYPE == DT_BF16;   // converted to f16 in registers (bf16 range, above)
const bool E4M3 = CACHE_DTYPE == DT_FP8_E4M3;  // its NaN is found on the raw bytes where VKP_E4M3_NAN (fp8 NaN, above)
const bool SCALED_QUERY = QUERY_DTYPE == DT_BF16;  // query range, above
const uint CHUNK_DIMS = FP8 ? 16u : 8u;    // dims of a 16-byte key chunk (the cache's x)
const uint STEPS_PER_CHUNK = CHUNK_DIMS / 4u;  // dim steps one chunk feeds (4 dims of a row each)
const uint DIM_STEPS = D / 16u;            // k steps of the score products
const uint KEY_LOADS = DIM_STEPS / STEPS_PER_CHUNK;  // 16-byte key loads per key row of a unit
const float SCORE_FIX = CACHE_DTYPE == DT_FP8_E4M3 ? 256.0 : 1.0;  // E4M3 reads as value / 256 (dtype.glsl)
const uint DIM_TILES = D / 16u;            // m tiles of the value products
const uint NO_BLOCK = 0xffffffffu;
const float RESCALE_SLACK = 8.0;
const float BF16_OVERFLOW = 65536.0;       // the smallest bf16 magnitude f16 cannot hold
const float RANGE_LOW = 1.0 / 256.0;       // a unit whose largest element is below this is rescaled
#include "common/attention_features.glsl"  // ALIBI, SOFTCAP, SINKS, WINDOW, WRITE_LSE, SPLIT
const bool ORDERED = (FEATURES & FEATURE_ORDERED) != 0u;
const bool MERGE_HERE = SPLIT && (FEATURES & FEATURE_MERGE_IN_DISPATCH) != 0u;  // split_merge.glsl
#define NEG_INF uintBitsToFloat(0xff800000u)
#define POS_INF uintBitsToFloat(0x7f800000u)
#define QUIET_NAN uintBitsToFloat(0x7fc00000u)

// The logits transform (attention_logits.glsl, which reads the key range's block, whose request
// search reads query_start_at: a decode request is one query token, request s's token s).
#ifndef VKP_DECODE_QUERY_START_AT
#define VKP_DECODE_QUERY_START_AT
uint query_start_at(uint s) { return s; }
#endif
#include "common/attention_range.glsl"
#include "common/softmax_state.glsl"
#include "common/attention_logits.glsl"

// The 16x8x16 product's fragments: A [16 x 16] and B [16 x 8] f16, the accumulator [16 x 8]
// f32; MAT_LOAD_COLUMNS loads a column-major matrix (element offset and stride in units of the
// array's type, in both extensions).
#if VKP_KHR
#define MatA coopmat<float16_t, gl_ScopeSubgroup, 16, 16, gl_MatrixUseA>
#define MatB coopmat<float16_t, gl_ScopeSubgroup, 16, 8, gl_MatrixUseB>
#define MatC coopmat<float, gl_ScopeSubgroup, 16, 8, gl_MatrixUseAccumulator>
#define MAT_MUL_ADD coopMatMulAdd
#define MAT_LOAD_COLUMNS(m, buf, element, stride) coopMatLoad(m, buf, element, stride, gl_CooperativeMatrixLayoutColumnMajor)
#else
#define MatA fcoopmatNV<16, gl_ScopeSubgroup, 16, 16>
#define MatB fcoopmatNV<16, gl_ScopeSubgroup, 16, 8>
#define MatC fcoopmatNV<32, gl_ScopeSubgroup, 16, 8>
#define MAT_MUL_ADD coopMatMulAddNV
#define MAT_LOAD_COLUMNS(m, buf, element, stride) coopMatLoadNV(m, buf, element, stride, true)
#endif

layout(push_constant) uniform PushBlock { DecodePush pc; };

#if VKP_TIMELINE
// The timeline's record of a subgroup, DECODE_TIMELINE_WORDS words from the address in
// pc.key_address (this kernel reads no cache by address), slots DECODE_TIMELINE_* (shader_interface.h).
layout(buffer_reference, std430, buffer_reference_align = 4) writeonly buffer TimelineWords { uint w[]; };

// A device-wide clock in nanoseconds, low and high word.
uvec2 timeline_now() { return clockRealtime2x32EXT(); }

void timeline_write(uvec2 start, uvec2 staged, uvec2 first_unit, uvec2 loop_done, uint units) {
  if (gl_SubgroupInvocationID != 0u) return;
  const uvec2 end = timeline_now();
  const uint wg = gl_WorkGroupID.x + gl_NumWorkGroups.x * (gl_WorkGroupID.y + gl_NumWorkGroups.y * gl_WorkGroupID.z);
  const uint at = (wg * (gl_WorkGroupSize.x / 32u) + gl_SubgroupID) * DECODE_TIMELINE_WORDS;
  TimelineWords t = TimelineWords(pc.key_address);
  t.w[at + DECODE_TIMELINE_SM] = gl_SMIDNV;
  t.w[at + DECODE_TIMELINE_WORKGROUP] = wg;
  t.w[at + DECODE_TIMELINE_SUBGROUP] = gl_SubgroupID;
  t.w[at + DECODE_TIMELINE_UNITS] = units;
  const uvec2 stamps[5] = {start, staged, first_unit, loop_done, end};
  [[unroll]] for (uint i = 0u; i < 5u; ++i) {
    t.w[at + DECODE_TIMELINE_STAMPS + 2u * i] = stamps[i].x;
    t.w[at + DECODE_TIMELINE_STAMPS + 2u * i + 1u] = stamps[i].y;
  }
}
#endif

layout(set = 0, binding = DECODE_BINDING_KEY_CACHE) readonly buffer KeyCache { uvec4 key16[]; };
layout(set = 0, binding = DECODE_BINDING_VALUE_CACHE) readonly buffer ValueCache { uvec4 value16[]; };
layout(set = 0, binding = DECODE_BINDING_VALUE_CACHE) readonly buffer ValueCache8 { uvec2 value8[]; };
#define VKP_BINDING(name) DECODE_BINDING_##name
#include "common/attention_bindings.glsl"
#include "common/decode_order.glsl"
#include "common/split_merge.glsl"  // declares the scratch
// The key range (attention_range.glsl). A decode request is one query token: request s's is
// token s (its request search, which decode does not call, reads this).
#ifndef VKP_DECODE_QUERY_START_AT
#define VKP_DECODE_QUERY_START_AT
uint query_start_at(uint s) { return s; }
#endif
#include "common/attention_range.glsl"

// The query as f16 pairs (QUERY_WORDS words at 0: [head][dim step * 16 + k], in the keys' dim
// order), and each subgroup's unnormalised output ([subgroup][head][d] from OUT_BASE), in the
// same words with SHARE_QUERY.
const bool SHARED_WORDS = SHARE_QUERY && QUERY_REGISTERS;
const uint QUERY_WORDS = QUERY_HEADS * D / 2u;
const uint OUT_WORDS = SUBGROUPS * HEADS * D;
const uint OUT_BASE = SHARED_WORDS ? 0u : QUERY_WORDS;
const uint WORK_WORDS = SHARED_WORDS ? (OUT_WORDS > QUERY_WORDS ? OUT_WORDS : QUERY_WORDS) : QUERY_WORDS + OUT_WORDS;
shared float s_work[WORK_WORDS];
shared float s_max[SUBGROUPS * HEADS];
shared float s_sum[SUBGROUPS * HEADS];
shared float s_weight[SUBGROUPS * HEADS];    // merge weight of each subgroup's state
shared float s_factor[QUERY_HEADS];          // output factor per head
shared float s_query_fix[QUERY_HEADS];       // per head: the inverse of its query's power of two
shared uint s_row_largest[QUERY_HEADS];      // bf16 query: each row's largest magnitude, as float bits

// The epilogue (attention_epilogue.glsl: the sinks, the LSE and the output packing; its merge
// weights from softmax_state.glsl).
#include "common/softmax_state.glsl"
#include "common/convert.glsl"
#include "common/attention_epilogue.glsl"

// The cache dim that slot k of dim step `step` holds (see the header): the lane (g, q) that
// holds k reads chunk 4 (step / STEPS_PER_CHUNK) + q, and 4 dims of it per step.
uint key_dim(uint step, uint k) {
  const uint q = (k % 8u) / 2u;
  const uint chunk = 4u * (step / STEPS_PER_CHUNK) + q;
  const uint in_word = FP8 ? (k >= 8u ? 1u : 0u) + 2u * (k % 2u) : (k >= 8u ? 2u : 0u) + k % 2u;  // fp8 pairs
  return chunk * CHUNK_DIMS + 4u * (step % STEPS_PER_CHUNK) + in_word;
}

// Query word `p` of the staged rows ([head][dim step * 16 + k]): its two elements, in the keys'
// dim order (key_dim); zeros for heads past `heads`.
vec2 query_pair(uint p, uint seq, uint head0, uint heads) {
  const uint i = 2u * p;
  const uint h = i / D;
  if (h >= heads) return vec2(0.0);
  const uint row = row_word(pc.query_rows, seq, head0 + h);  // the row's first word (a strided view)
  return vec2(VKP_LOAD_ELEMENT(query_words, row, key_dim((i % D) / 16u, i % 16u), QUERY_DTYPE),
              VKP_LOAD_ELEMENT(query_words, row, key_dim(((i + 1u) % D) / 16u, (i + 1u) % 16u), QUERY_DTYPE));
}

// The token (from the lane's key group) of row g + 8h of tile i, r = 2i + h: the accumulator's
// rows are P^T's, so they follow the value pairs' token order (fp8 pairs, above).
uint key_row_offset(uint g, uint r) {
  const uint i = r / 2u, h = r % 2u;
  return FP8 ? 4u * i + 2u * (g % 2u) + h : 4u * i + 2u * h + g % 2u;
}

// fp8: two bytes in the high byte of each 16-bit half (0xBB00AA00), as f16 bits: E5M2 is the
// top byte of an f16 already; E4M3 keeps its sign and moves its magnitude down one bit (value
// / 256), which leaves its NaN (S.1111.111) a finite 1.875 (fp8 NaN, above).
uint fp8_high_bytes_to_f16(uint v) {
  if (CACHE_DTYPE == DT_FP8_E5M2) return v;
  return ((v >> 1) & 0x3f803f80u) | (v & 0x80008000u);
}

// The bytes (tokens t..t+3) of an fp8 word that lie in [lo, hi).
uint fp8_keep_mask(uint t, uint lo, uint hi) {
  uint keep = 0u;
  [[unroll]] for (uint k = 0u; k < 4u; ++k)
    if (t + k >= lo && t + k < hi) keep |= 0xffu << (8u * k);
  return keep;
}

// The two f16 pairs (slots 2q, 2q + 1 and 2q + 8, 2q + 9) that sub-step `u` takes from a lane's
// 16 bytes: f16 words 2u and 2u + 1; fp8 word u, bytes 0 and 2, then 1 and 3 (fp8 pairs).
uvec2 pairs_of(uvec4 w, uint u) {
  if (!FP8) return uvec2(w[2u * u], w[2u * u + 1u]);
  const uint x = w[u];
  return uvec2(fp8_high_bytes_to_f16((x << 8) & 0xff00ff00u), fp8_high_bytes_to_f16(x & 0xff00ff00u));
}

// Two bf16 (a 32-bit word) as two f16, multiplied by `factor` (a power of two) on the way.
uint bf16_pair_to_f16(uint w, float factor) {
  return packHalf2x16(vec2(uintBitsToFloat(w << 16), uintBitsToFloat(w & 0xffff0000u)) * factor);
}

// Whether any of the four bf16 in `a` and `b` reaches RANGE_LOW. A unit is checked on such a
// sample per lane: its largest element is at least the sample's (a unit whose sample falls
// short is rescaled, which is exact too).
bool reaches_range_low(uint a, uint b) {
  // A word read as f32 is its high bf16 with extra mantissa bits: >= 2^-8 exactly when it is.
  return max(max(abs(uintBitsToFloat(a)), abs(uintBitsToFloat(a << 16))),
             max(abs(uintBitsToFloat(b)), abs(uintBitsToFloat(b << 16)))) >= RANGE_LOW;
}

// The larger finite bf16 magnitude (as bits) of the two in `w`; Inf and NaN count as 0.
uint bf16_finite_magnitude(uint w) {
  const uint lo = w & 0x7fffu, hi = (w >> 16) & 0x7fffu;
  return max(lo < 0x7f80u ? lo : 0u, hi < 0x7f80u ? hi : 0u);
}

// The largest of a value over the subgroup (shuffles: no subgroup arithmetic needed).
float subgroup_max(float v) {
  [[unroll]] for (uint x = 1u; x < SUBGROUP; x *= 2u) v = max(v, subgroupShuffleXor(v, x));
  return v;
}
uint subgroup_max(uint v) {
  [[unroll]] for (uint x = 1u; x < SUBGROUP; x *= 2u) v = max(v, subgroupShuffleXor(v, x));
  return v;
}

// The power of two (exponent) that brings a largest magnitude `m` (f32) into [2^14, 2^15);
// 0 for 0, Inf and NaN.
int range_shift(float m) {
  if (m == 0.0 || isinf(m) || isnan(m)) return 0;
  const int e = int((floatBitsToUint(m) >> 23) & 0xffu) - 127;
  return clamp(e - 14, -100, 100);
}

// range_shift of the largest of the subgroup's `largest_bits` (finite bf16 magnitudes as bits).
int subgroup_bf16_range_shift(uint largest_bits) {
  return range_shift(uintBitsToFloat(subgroup_max(largest_bits) << 16));
}

// The A operand of a lane from the f16 pairs of its rows g (`upper`) and g + 8 (`lower`), in
// the fragment order of the header.
MatA a_fragment(uvec2 upper, uvec2 lower) {
  const f16vec2 a01 = unpackFloat2x16(upper.x);
  const f16vec2 a23 = unpackFloat2x16(upper.y);
  const f16vec2 a45 = unpackFloat2x16(lower.x);
  const f16vec2 a67 = unpackFloat2x16(lower.y);
  MatA a;
  a[0] = a01.x;
  a[1] = a01.y;
  a[2] = a23.x;
  a[3] = a23.y;
  a[4] = a45.x;
  a[5] = a45.y;
  a[6] = a67.x;
  a[7] = a67.y;
  return a;
}

// The A operand of dim step sub-step `u` from the 16-byte key loads of rows g (`upper`) and
// g + 8 (`lower`); bf16 elements are multiplied by `factor`.
MatA key_fragment(uvec4 upper, uvec4 lower, uint u, float factor) {
  uvec2 a = pairs_of(upper, u);
  uvec2 b = pairs_of(lower, u);
  if (BF16) {
    a = uvec2(bf16_pair_to_f16(a.x, factor), bf16_pair_to_f16(a.y, factor));
    b = uvec2(bf16_pair_to_f16(b.x, factor), bf16_pair_to_f16(b.y, factor));
  }
  return a_fragment(a, b);
}

// Keeps the f16 halves of `w` whose tokens t, t + 1 lie in [lo, hi); zeroes the others.
uint mask_pair(uint w, uint t, uint lo, uint hi) {
  const uint keep_lo = t >= lo && t < hi ? 0x0000ffffu : 0u;
  const uint keep_hi = t + 1u >= lo && t + 1u < hi ? 0xffff0000u : 0u;
  return w & (keep_lo | keep_hi);
}

#if VKP_TOKEN_MAJOR
const uint VALUE_LOADS = D / 64u;  // value loads per token and lane (token-major, header)

// From one token to the next in a block, in units of `dims` dims (kv_layout.glsl's offsets are
// linear in the dim for nhd and hnd, so such a unit counts as one element).
uint token_stride(uint dims) { return (KV_LAYOUT == KV_LAYOUT_NHD ? pc.num_kv_heads : 1u) * (D / dims); }

// Key load `index` = r * KEY_LOADS + c of a unit (row g + 8 (r % 2) of tile r / 2, chunk
// 4c + q) from `base`: 16 bytes; zeros without a block.
uvec4 load_key_chunk(uint base, uint block, uint index, uint g, uint q) {
  if (block == NO_BLOCK) return uvec4(0u);
  const uint r = index / KEY_LOADS, c = index % KEY_LOADS;
  return key16[base + key_row_offset(g, r) * token_stride(CHUNK_DIMS) + 4u * c + q];
}

// Value slot r = `row` / 8 of a lane g = `row` % 8 (the vllm modules' row index, so that the
// callers read the same): token r / VALUE_LOADS of the lane's 8 at `base`, its dims
// 64 (r % VALUE_LOADS) + 8 g .. + 7: 16 bytes, or 8 (fp8, in .xy); zeros without a block.
uvec4 load_value_row(uint base, uint block, uint row) {
  if (block == NO_BLOCK) return uvec4(0u);
  const uint r = row / 8u, at = base + (r / VALUE_LOADS) * token_stride(8u) + 8u * (r % VALUE_LOADS) + row % 8u;
  return FP8 ? uvec4(value8[at], 0u, 0u) : value16[at];
}
#else
// Key load `index` = r * KEY_LOADS + c of a unit (row g + 8 (r % 2) of tile r / 2, chunk
// 4c + q) from `base`: 16 bytes; zeros without a block.
uvec4 load_key_chunk(uint base, uint block, uint index, uint g, uint q) {
  if (block == NO_BLOCK) return uvec4(0u);
  const uint r = index / KEY_LOADS, c = index % KEY_LOADS;
  return key16[base + (4u * c + q) * B + key_row_offset(g, r)];
}

// Value row `row` (a dim) of a unit's 8 tokens at `base`: 16 bytes, or 8 (fp8, in .xy); zeros
// without a block.
uvec4 load_value_row(uint base, uint block, uint row) {
  if (block == NO_BLOCK) return uvec4(0u);
  return FP8 ? uvec4(value8[base + row * (B / 8u)], 0u, 0u) : value16[base + row * (B / 8u)];
}
#endif

// A 16-bit value row of tokens t0..t0+7 with the slots outside [lo, hi) zeroed.
uvec4 mask_row(uvec4 w, uint t0, uint lo, uint hi) {
  return uvec4(mask_pair(w.x, t0, lo, hi), mask_pair(w.y, t0 + 2u, lo, hi), mask_pair(w.z, t0 + 4u, lo, hi),
               mask_pair(w.w, t0 + 6u, lo, hi));
}

// The table entry of `token`'s block, or NO_BLOCK past `end`. Checked where it is used.
uint table_entry(uint table, uint token, uint end) {
  return token < end ? block_tables[table + token / B] : NO_BLOCK;
}

// Where a lane's key loads (uvec4 index; load_key_chunk adds the chunk and row) and value rows
// (uvec4 index, uvec2 for fp8; load_value_row adds the row) of kv head `kv_head` start in
// `block`, for its tokens from `first_token` (8 of them, in one block).
#if VKP_TOKEN_MAJOR
// Token-major: counted in key chunks (CHUNK_DIMS dims) and in 8-dim value loads, from the
// block's start (Hkv D B elements) and the first token's place in it (kv_layout.glsl).
uint key_base_of(uint block, uint kv_head, uint first_token) {
  const uint chunks = D / CHUNK_DIMS;
  return pc.key_offset / 4u + block * (pc.num_kv_heads * chunks * B) +
         kv_key_offset(KV_LAYOUT, pc.num_kv_heads, chunks, B, 1u, kv_head, 0u, first_token % B);
}
uint value_base_of(uint block, uint kv_head, uint first_token) {
  const uint start = FP8 ? pc.value_offset / 2u : pc.value_offset / 4u;  // uvec2 or uvec4 units
  return start + block * (pc.num_kv_heads * (D / 8u) * B) +
         kv_value_offset(KV_LAYOUT, pc.num_kv_heads, D / 8u, B, 1u, kv_head, 0u, first_token % B);
}

// Token-major values (header): the f16 pair of dim tile d (rows g and g + 8) in a token's slot
// `w` (its load d / 4): f16 word d % 4; fp8 word (d % 4) / 2, bytes 0 and 2 then 1 and 3.
uint value_pair(uvec4 w, uint d) {
  const uint e = d % 4u;
  if (!FP8) return w[e];
  return pairs_of(w, e / 2u)[e % 2u];
}

// The lane's token (of its 8) in k slot s (2q, 2q + 1, 2q + 8, 2q + 9) of tile i: the order of
// P^T's rows (key_row_offset), 4 i + 0, 1, 2, 3 (fp8: 4 i + 0, 2, 1, 3).
uint value_token(uint i, uint s) { return 4u * i + (FP8 ? 2u * (s % 2u) + s / 2u : s); }

// The A operand of dim tile d from the slots of the tokens in its k slots 2q, 2q + 1, 2q + 8,
// 2q + 9 (value_token): rows g and g + 8 as f16 pairs of two tokens each, a byte permute per
// register. (The slots come one by one: a spec-constant-sized array as a parameter trips
// glslc's optimizer.)
MatA value_fragment(uvec4 w0, uvec4 w1, uvec4 w2, uvec4 w3, uint d) {
  const uint p0 = value_pair(w0, d), p1 = value_pair(w1, d), p2 = value_pair(w2, d), p3 = value_pair(w3, d);
  return a_fragment(uvec2((p0 & 0xffffu) | (p1 << 16), (p2 & 0xffffu) | (p3 << 16)),
                    uvec2((p0 >> 16) | (p1 & 0xffff0000u), (p2 >> 16) | (p3 & 0xffff0000u)));
}
#define VALUE_FRAGMENT(values, d, i)                                                                              \
  value_fragment(values[value_token(i, 0u) * VALUE_LOADS + (d) / 4u], values[value_token(i, 1u) * VALUE_LOADS + (d) / 4u], \
                 values[value_token(i, 2u) * VALUE_LOADS + (d) / 4u], values[value_token(i, 3u) * VALUE_LOADS + (d) / 4u], d)

// The dim that row g + 8 h of dim tile d holds (header).
uint value_dim(uint d, uint g, uint h) {
  const uint e = d % 4u;
  return 64u * (d / 4u) + 8u * g + (FP8 ? 4u * (e / 2u) + e % 2u + 2u * h : 2u * e + h);
}

// Value slot r of the lane's tokens from t0, zero where its token lies outside [lo, hi).
uvec4 mask_value_slot(uvec4 w, uint r, uint t0, uint lo, uint hi) {
  const uint t = t0 + r / VALUE_LOADS;
  return t >= lo && t < hi ? w : uvec4(0u);
}
#else
uint key_base_of(uint block, uint kv_head, uint first_token) {
  return pc.key_offset / 4u + (block * pc.num_kv_heads + kv_head) * (D / CHUNK_DIMS) * B + first_token % B;
}
uint value_base_of(uint block, uint kv_head, uint first_token) {
  const uint start = FP8 ? pc.value_offset / 2u : pc.value_offset / 4u;  // uvec2 or uvec4 units
  return start + (block * pc.num_kv_heads + kv_head) * D * (B / 8u) + (first_token % B) / 8u;
}
#endif

// The blocks of this lane's key and value tokens of the unit at `tok0` from their table
// entries: NO_BLOCK where its tokens lie outside [lo, hi) or the id is bad. A bad id is flagged
// by the lanes whose 8 tokens lie in [lo, hi), and not followed. (The flag is fire-and-forget:
// no lane waits on it.)
uvec2 unit_blocks(uint tok0, uint key_entry, uint value_entry, uint key_group, uint value_group, uint lo, uint hi) {
  const bool keys_used = tok0 + key_group < hi && tok0 + key_group + 8u > lo;
  if (keys_used && key_entry >= pc.num_blocks) atomicOr(status[pc.status_offset], STATUS_BAD_BLOCK_ID);
  return uvec2(keys_used && key_entry < pc.num_blocks ? key_entry : NO_BLOCK,
               tok0 + value_group < hi && value_entry < pc.num_blocks ? value_entry : NO_BLOCK);
}

#if VKP_E4M3_NAN
// E4M3 NaN probe: some bit 7 of a byte of the result is set exactly where `w` holds a NaN
// (S.1111.111). Adding 1 to every byte flips a byte's bit 7 only where a carry reaches it: from
// its own magnitude 0x7f, or from the byte below, which carries out only as 0xff (a NaN itself).
// So the lowest flipped byte is a NaN, and without one nothing flips. An add and an exclusive or
// per word, which merges with the OR of the probes of several words before the bits are tested.
const uint NAN_PROBE_BITS = 0x80808080u;
const uint NAN_ROW_WORDS = (D / 8u + 31u) / 32u;  // nan_outputs' words of one bit per 8 dims
uint nan_probe(uint w) { return (w + 0x01010101u) ^ w; }

// fp8 NaN, found (rarely) after the loop: the subgroup's units again, from memory. A NaN key of
// a token in [lo, hi) makes that token's logit NaN in every head, so every output of the group
// (the columns' scores count as non-finite: the heads are poisoned, their LSE NaN too); a NaN value of such a token makes
// its dim's outputs NaN. NaN stays NaN through the rest of the loop's arithmetic, so setting it
// after the loop gives what setting it in the unit would.
void nan_outputs(inout MatC acc[DIM_TILES], inout bool scores_finite[2], uint table, uint kv_head, uint lo, uint hi, uint end_unit) {
  const uint lane = gl_SubgroupInvocationID;
  const uint g = lane / 4u, q = lane % 4u;
  const uint key_group = 8u * (g / 2u), value_group = 8u * q;
  bool nan_key = false;
  // Bit 2 d + h of the words: row g + 8 h of dim tile d has a NaN among this lane's tokens in
  // [lo, hi) (on vllm, dim 8 (2 d + h) + g; D / 8 bits, D <= 512).
  uint nan_rows[NAN_ROW_WORDS];
  [[unroll]] for (uint x = 0u; x < NAN_ROW_WORDS; ++x) nan_rows[x] = 0u;
  for (uint u = lo / UNIT + UNIT_WALKER(gl_SubgroupID); u < end_unit; u += WALKERS) {
    const uint tok0 = u * UNIT;
    const uvec2 blocks = unit_blocks(tok0, table_entry(table, tok0 + key_group, hi), table_entry(table, tok0 + value_group, hi),
                                     key_group, value_group, lo, hi);
    const uint key_base = key_base_of(blocks.x, kv_head, tok0 + key_group);
    [[unroll]] for (uint r = 0u; r < 4u; ++r) {
      uint row_probe = 0u;
      [[unroll]] for (uint c = 0u; c < KEY_LOADS; ++c) {
        const uvec4 w = load_key_chunk(key_base, blocks.x, r * KEY_LOADS + c, g, q);
        [[unroll]] for (uint k = 0u; k < 4u; ++k) row_probe |= nan_probe(w[k]);
      }
      const uint t = tok0 + key_group + key_row_offset(g, r);
      nan_key = nan_key || ((row_probe & NAN_PROBE_BITS) != 0u && t >= lo && t < hi);
    }
    const uint value_base = value_base_of(blocks.y, kv_head, tok0 + value_group);
    const uint value_t0 = blocks.y == NO_BLOCK ? 0xfffffff0u : tok0 + value_group;
#if VKP_TOKEN_MAJOR
    // A word holds 4 dims of one token, where the probe may also flag the byte above a NaN:
    // each byte is tested on its own (rows 2 d + h of the header's value layout).
    [[unroll]] for (uint r = 0u; r < 2u * DIM_TILES; ++r) {
      const uint t = value_t0 + r / VALUE_LOADS;
      if (t < lo || t >= hi) continue;
      const uvec2 w = load_value_row(value_base, blocks.y, 8u * r + g).xy;
      [[unroll]] for (uint b = 0u; b < 8u; ++b) {
        const uint row = 2u * (4u * (r % VALUE_LOADS) + 2u * (b / 4u) + b % 2u) + (b % 4u) / 2u;
        if (((w[b / 4u] >> (8u * (b % 4u))) & 0x7fu) == 0x7fu) nan_rows[row / 32u] |= 1u << (row % 32u);
      }
    }
#else
    const uvec2 keep = uvec2(fp8_keep_mask(value_t0, lo, hi), fp8_keep_mask(value_t0 + 4u, lo, hi));
    [[unroll]] for (uint r = 0u; r < 2u * DIM_TILES; ++r) {
      const uvec2 w = load_value_row(value_base, blocks.y, 8u * r + g).xy & keep;
      if (((nan_probe(w.x) | nan_probe(w.y)) & NAN_PROBE_BITS) != 0u) nan_rows[r / 32u] |= 1u << (r % 32u);
    }
#endif
  }
  if (subgroupAny(nan_key)) {
    [[unroll]] for (uint j = 0u; j < 2u; ++j) scores_finite[j] = false;  // a NaN key: the heads are poisoned
    [[unroll]] for (uint d = 0u; d < DIM_TILES; ++d) acc[d] = MatC(QUIET_NAN);
  }
  // The row's other tokens: lanes q = 0..3 of this g.
  [[unroll]] for (uint x = 0u; x < NAN_ROW_WORDS; ++x) {
    nan_rows[x] |= subgroupShuffleXor(nan_rows[x], 1u);
    nan_rows[x] |= subgroupShuffleXor(nan_rows[x], 2u);
  }
  [[unroll]] for (uint d = 0u; d < DIM_TILES; ++d)
    [[unroll]] for (uint e = 0u; e < 4u; ++e) {
      const uint row = 2u * d + e / 2u;
      if (((nan_rows[row / 32u] >> (row % 32u)) & 1u) != 0u) acc[d][e] = QUIET_NAN;
    }
}
#endif

void main() {
#if VKP_TIMELINE
  const uvec2 t_start = timeline_now();
#endif
  const uint tid = gl_LocalInvocationID.x;
  const uint sub = gl_SubgroupID;
  const uint lane = gl_SubgroupInvocationID;
  const uint g = lane / 4u;
  const uint q = lane % 4u;
  const uvec2 item = decode_item(ORDERED);
  const uint seq = item.x;
  const uint part = item.y;
  if (ORDERED && seq >= pc.num_seqs) return;  // a bad list (flagged)
  const uint heads_per_kv = pc.num_heads / pc.num_kv_heads;
  const uint groups_per_kv = (heads_per_kv + GROUP - 1u) / GROUP;
  const uint kv_head = gl_WorkGroupID.x / groups_per_kv;
  const uint first_in_kv = (gl_WorkGroupID.x % groups_per_kv) * GROUP;
  const uint head0 = kv_head * heads_per_kv + first_in_kv;
  const uint heads = min(GROUP, heads_per_kv - first_in_kv);

  // The context length, the first unit's block ids and the queries are all requested before
  // any of them is used, so that a workgroup waits for one memory latency before its first
  // cache loads, not three. The first block ids are read before the length is known: any
  // entry of the table row is safe to read, and tokens past the length are masked.
  uint len = context_lens[pc.context_lens_offset + seq];
  const uint table = pc.block_tables_offset + seq * pc.max_blocks_per_seq;
  const uint key_group = 8u * (g / 2u);       // this lane's key (and score) tokens: key_group + 0..7
  const uint value_group = 8u * q;            // this lane's value tokens: value_group + 0..7
  const uint first_unit = (SPLIT ? part * pc.partition_tokens : 0u) / UNIT + UNIT_WALKER(sub);
  uint next_key_entry = table_entry(table, first_unit * UNIT + key_group, pc.max_blocks_per_seq * B);
  uint next_value_entry = table_entry(table, first_unit * UNIT + value_group, pc.max_blocks_per_seq * B);

  // Queries (scale and k_scale folded in) in the keys' dim order as f16 pairs; rows past the
  // group zero. Every invocation requests its pairs of every row at once (one memory latency
  // per workgroup). A bf16 query's rows are scaled into f16's range (query range, above): the
  // rows' largest magnitudes meet in shared memory (as float bits, which order like the
  // magnitudes), then the pairs are read again (cached) and scaled.
  const float qscale = pc.scale * pc.k_scale;
  if (SCALED_QUERY) {
    if (tid < QUERY_HEADS) s_row_largest[tid] = 0u;
    barrier();
    for (uint p = tid; p < QUERY_WORDS; p += WG) {
      const vec2 v = query_pair(p, seq, head0, heads) * qscale;
      atomicMax(s_row_largest[2u * p / D], floatBitsToUint(max(abs(v.x), abs(v.y))));
    }
    barrier();
    for (uint p = tid; p < QUERY_WORDS; p += WG) {
      const int shift = range_shift(uintBitsToFloat(s_row_largest[2u * p / D]));
      s_work[p] = uintBitsToFloat(packHalf2x16(ldexp(query_pair(p, seq, head0, heads) * qscale, ivec2(-shift))));
    }
    if (tid < QUERY_HEADS) s_query_fix[tid] = ldexp(1.0, range_shift(uintBitsToFloat(s_row_largest[tid])));
  } else {
    for (uint p = tid; p < QUERY_WORDS; p += WG) s_work[p] = uintBitsToFloat(packHalf2x16(query_pair(p, seq, head0, heads) * qscale));
  }

  if (len > pc.context_cap) {
    if (tid == 0u && gl_WorkGroupID.x == 0u && part == 0u) atomicOr(status[pc.status_offset], STATUS_BAD_CONTEXT_LEN);
    len = pc.context_cap;
  }
  // The keys the query at position len - 1 attends (attention_range.glsl: the window's), the
  // sequence's partitions that hold them, and this partition's part of them.
  const KeyRange row_range = row_key_range(int(len) - 1, len, 1u, WINDOW ? pc.sliding_window : 0u, false);
  const uvec2 parts = MERGE_HERE ? key_range_partitions(row_range, pc.partition_tokens, pc.num_partitions) : uvec2(0u);
  const KeyRange range =
      SPLIT ? clip_key_range(row_range, part * pc.partition_tokens, (part + 1u) * pc.partition_tokens) : row_range;
  const uint lo = range.lo, hi = range.hi;
  if (SPLIT) {
    if (lo >= hi) {  // the whole workgroup; the merge skips partitions outside [window start, len)
      if (MERGE_HERE && len == 0u && part == 0u) split_merge(seq, head0, heads, parts);  // no partition: zeros
#if VKP_TIMELINE
      timeline_write(t_start, t_start, t_start, t_start, 0u);
#endif
      return;
    }
  }
  if (WINDOW && lo / UNIT + UNIT_WALKER(sub) != first_unit) {  // the window starts further in
    next_key_entry = table_entry(table, (lo / UNIT + UNIT_WALKER(sub)) * UNIT + key_group, hi);
    next_value_entry = table_entry(table, (lo / UNIT + UNIT_WALKER(sub)) * UNIT + value_group, hi);
  }
  barrier();
  MatB query[QUERY_REGISTERS ? DIM_STEPS : 1u];  // Q^T [16 dims x 8 heads] per dim step
  if (QUERY_REGISTERS)
    [[unroll]] for (uint s = 0u; s < DIM_STEPS; ++s) MAT_LOAD_COLUMNS(query[s], s_work, SLICE_QUERY(s * 8u), D / 2u);
  if (SHARED_WORDS) barrier();  // the outputs overwrite the query's words

#if VKP_TIMELINE
  const uvec2 t_staged = timeline_now();
  uvec2 t_first_unit = t_staged;
  uint units_done = 0u;
#endif
  MatC acc[DIM_TILES];  // O^T: dims 16 j + (g | g + 8), heads 2q, 2q + 1
  [[unroll]] for (uint j = 0u; j < DIM_TILES; ++j) acc[j] = MatC(0.0);

  // Softmax state of heads 2q and 2q + 1 (this lane's columns of S^T); sums over this lane's tokens.
  float running_max[2] = {NEG_INF, NEG_INF};
  float running_sum[2] = {0.0, 0.0};
  bool scores_finite[2] = {true, true};  // step 9: every attended score of the column was finite
  float slope[2];
  [[unroll]] for (uint j = 0u; j < 2u; ++j) slope[j] = ALIBI && SLICE_HEAD(2u * q + j) < heads ? alibi_slopes[pc.alibi_offset + head0 + SLICE_HEAD(2u * q + j)] : 0.0;
  float score_fix[2];  // SCORE_FIX and the query range's factor of heads 2q, 2q + 1
  [[unroll]] for (uint j = 0u; j < 2u; ++j) score_fix[j] = SCALED_QUERY ? SCORE_FIX * s_query_fix[SLICE_HEAD(2u * q + j)] : SCORE_FIX;

  const uint end_unit = (hi + UNIT - 1u) / UNIT;
  // PIPELINE: the next unit's blocks and cache words, loaded a unit ahead (see keys and values
  // below for their layout).
  uvec4 keys_ahead[PIPELINE ? 4u * KEY_LOADS : 1u];
  uvec4 values_ahead[PIPELINE && EARLY_VALUES ? 2u * DIM_TILES : 1u];
  uvec2 blocks_ahead = uvec2(NO_BLOCK);
  // Unit tok's loads into the registers above, and the table entries a unit after it; its
  // cache words' first indices are the locals key_base_name and value_base_name. A macro, so
  // that the tuned modules' SPIR-V stays as it was (cmake/ShaderCompilers.cmake).
#define LOAD_UNIT_AHEAD(tok, key_base_name, value_base_name)                                                    \
  blocks_ahead = unit_blocks(tok, next_key_entry, next_value_entry, key_group, value_group, lo, hi);           \
  next_key_entry = table_entry(table, tok + WALKERS * UNIT + key_group, hi);                                  \
  next_value_entry = table_entry(table, tok + WALKERS * UNIT + value_group, hi);                              \
  const uint key_base_name = key_base_of(blocks_ahead.x, kv_head, tok + key_group);                           \
  [[unroll]] for (uint r = 0u; r < 4u * KEY_LOADS; ++r)                                                       \
    keys_ahead[r] = load_key_chunk(key_base_name, blocks_ahead.x, r, g, q);                                   \
  const uint value_base_name = value_base_of(blocks_ahead.y, kv_head, tok + value_group);                     \
  if (EARLY_VALUES)                                                                                           \
    [[unroll]] for (uint r = 0u; r < 2u * DIM_TILES; ++r)                                                     \
      values_ahead[r] = load_value_row(value_base_name, blocks_ahead.y, 8u * r + g);
  if (PIPELINE) {
    const uint tok0 = (lo / UNIT + UNIT_WALKER(sub)) * UNIT;
    LOAD_UNIT_AHEAD(tok0, key_base, value_base)
  }
#if VKP_E4M3_NAN
  uint nan_seen = 0u;  // E4M3: the NaN probes of every raw key and value word this subgroup read
#endif
  // Table entries are read one unit ahead (two with PIPELINE), so that a unit's cache loads do
  // not wait on them.
  for (uint u = lo / UNIT + UNIT_WALKER(sub); u < end_unit; u += WALKERS) {
    const uint tok0 = u * UNIT;
    // Keys: tile i, row g + 8h is token key_group + key_row_offset(g, 2i + h); load c is its chunk 4c + q.
    uvec4 keys[4u * KEY_LOADS];  // [tile][h][c]
    // Values: dim rows 8r + g (r even: 16 j + g; odd: 16 j + g + 8), tokens value_group..+7:
    // 16 bytes (f16) or 8 (fp8, in .xy).
    uvec4 values[2u * DIM_TILES];
    uint key_block, value_block, key_base, value_base;
    if (PIPELINE) {
      key_block = blocks_ahead.x;
      value_block = blocks_ahead.y;
      [[unroll]] for (uint r = 0u; r < 4u * KEY_LOADS; ++r) keys[r] = keys_ahead[r];
      if (EARLY_VALUES)
        [[unroll]] for (uint r = 0u; r < 2u * DIM_TILES; ++r) values[r] = values_ahead[r];
      const uint tok1 = tok0 + WALKERS * UNIT;  // the next unit's loads
      LOAD_UNIT_AHEAD(tok1, key_base1, value_base1)
      key_base = key_base_of(key_block, kv_head, tok0 + key_group);
      value_base = value_base_of(value_block, kv_head, tok0 + value_group);
    } else {
      const uint key_entry = next_key_entry;
      const uint value_entry = next_value_entry;
      next_key_entry = table_entry(table, tok0 + WALKERS * UNIT + key_group, hi);
      next_value_entry = table_entry(table, tok0 + WALKERS * UNIT + value_group, hi);
      const uvec2 blocks = unit_blocks(tok0, key_entry, value_entry, key_group, value_group, lo, hi);
      key_block = blocks.x;
      value_block = blocks.y;
      key_base = key_base_of(key_block, kv_head, tok0 + key_group);
      [[unroll]] for (uint r = 0u; r < 4u * KEY_LOADS; ++r) keys[r] = load_key_chunk(key_base, key_block, r, g, q);
      value_base = value_base_of(value_block, kv_head, tok0 + value_group);
      if (EARLY_VALUES)
        [[unroll]] for (uint r = 0u; r < 2u * DIM_TILES; ++r) values[r] = load_value_row(value_base, value_block, 8u * r + g);
    }

    // Whether every token of the unit is in [lo, hi) and has a block (nothing to mask).
    const bool full = tok0 >= lo && tok0 + UNIT <= hi && subgroupAll(key_block != NO_BLOCK);

    // ---- scores ----
    // The unit's scores from `keys`, scaled by key_scale (a macro, as LOAD_UNIT_AHEAD).
#define UNIT_SCORES(key_scale)                                                                                  \
    [[unroll]] for (uint i = 0u; i < 2u; ++i) {                                                                \
      scores[i] = MatC(0.0);                                                                                   \
      [[unroll]] for (uint s = 0u; s < DIM_STEPS; ++s) {                                                       \
        MatB qb;                                                                                               \
        if (QUERY_REGISTERS) qb = query[s];                                                                    \
        else MAT_LOAD_COLUMNS(qb, s_work, SLICE_QUERY(s * 8u), D / 2u);                                        \
        const MatA a = key_fragment(keys[(2u * i) * KEY_LOADS + s / STEPS_PER_CHUNK],                          \
                                    keys[(2u * i + 1u) * KEY_LOADS + s / STEPS_PER_CHUNK], s % STEPS_PER_CHUNK, \
                                    key_scale);                                                                \
        scores[i] = MAT_MUL_ADD(a, qb, scores[i]);                                                             \
      }                                                                                                        \
    }
    MatC scores[2];
    UNIT_SCORES(1.0)
#if VKP_E4M3_NAN
    if (E4M3)  // probed after the products; tested once, after the loop (fp8 NaN, above)
      [[unroll]] for (uint r = 0u; r < 4u * KEY_LOADS; ++r)
        [[unroll]] for (uint k = 0u; k < 4u; ++k) nan_seen |= nan_probe(keys[r][k]);
#endif
    float key_fix = 1.0;  // bf16: the inverse of the unit's key scale (bf16 range)
    bool redo_keys = false;
    if (BF16) {
      // A key past f16 is Inf after the conversion, and an Inf key makes its token's scores Inf
      // or NaN in every head (zero query columns included). A unit with masked tokens is always
      // redone: their keys (not masked, only their logits) must not decide the range.
      bool finite = true;
      [[unroll]] for (uint i = 0u; i < 2u; ++i)
        [[unroll]] for (uint e = 0u; e < 4u; ++e) finite = finite && abs(scores[i][e]) < POS_INF;
      redo_keys = !full || subgroupAny(!finite) || !subgroupAny(reaches_range_low(keys[0].x, keys[0].y));
    }
    if (redo_keys) {
      // The raw keys again from memory (rare), so that they need not stay in registers
      // through the first products.
      [[unroll]] for (uint r = 0u; r < 4u * KEY_LOADS; ++r) keys[r] = load_key_chunk(key_base, key_block, r, g, q);
      uint largest_bits = 0u;  // over the keys of tokens in [lo, hi)
      [[unroll]] for (uint r = 0u; r < 4u; ++r) {
        const uint t = tok0 + key_group + key_row_offset(g, r);
        if (t >= lo && t < hi && key_block != NO_BLOCK)
          [[unroll]] for (uint c = 0u; c < KEY_LOADS; ++c)
            [[unroll]] for (uint k = 0u; k < 4u; ++k) largest_bits = max(largest_bits, bf16_finite_magnitude(keys[r * KEY_LOADS + c][k]));
      }
      const int shift = subgroup_bf16_range_shift(largest_bits);
      key_fix = ldexp(1.0, shift);
      UNIT_SCORES(ldexp(1.0, -shift))
    }

    // ---- softmax: component e of tile i is head 2q + e % 2, token key_group + key_row_offset(g, 2i + e / 2) ----
    float logit[8];  // [i][e]
    float tile_max[2] = {NEG_INF, NEG_INF};
    [[unroll]] for (uint i = 0u; i < 2u; ++i)
      [[unroll]] for (uint e = 0u; e < 4u; ++e) {
        const uint j = e % 2u;
        const uint t = tok0 + key_group + key_row_offset(g, 2u * i + e / 2u);
        const bool masked = !full && (t < lo || t >= hi || key_block == NO_BLOCK);
        if (!masked) scores_finite[j] = scores_finite[j] && !non_finite(scores[i][e]);  // before the soft cap
        float l = scores[i][e] * score_fix[j];
        if (BF16) l *= key_fix;
        // Soft cap and ALiBi for the query at position len - 1 (attention_logits.glsl; its NaN
        // for a non-finite score only adds to the column's flag above).
        l = attention_logit(l, int(len) - 1, t, pc.softcap, slope[j]);
        if (masked) l = NEG_INF;
        if (SLICE_HEAD(2u * q + j) >= heads) l = NEG_INF;
        logit[4u * i + e] = l;
        tile_max[j] = max(tile_max[j], l);
      }
    // Each lane checks its own logits against the reference first (one vote); the columns'
    // maxima (shuffles over the 8 lanes g of a column) are taken only when some lane passes it.
    bool grow = false;
    [[unroll]] for (uint j = 0u; j < 2u; ++j) grow = grow || tile_max[j] > running_max[j] + RESCALE_SLACK;  // also true for the first valid unit
    if (subgroupAny(grow)) {
      float alpha[2];
      [[unroll]] for (uint j = 0u; j < 2u; ++j) {
        [[unroll]] for (uint x = 4u; x < SUBGROUP; x *= 2u) tile_max[j] = max(tile_max[j], subgroupShuffleXor(tile_max[j], x));
        const float new_max = max(running_max[j], tile_max[j]);
        alpha[j] = running_max[j] == NEG_INF ? 0.0 : exp(running_max[j] - new_max);
        running_sum[j] *= alpha[j];
        running_max[j] = new_max;
      }
      [[unroll]] for (uint d = 0u; d < DIM_TILES; ++d)
        [[unroll]] for (uint e = 0u; e < 4u; ++e) acc[d][e] *= alpha[e % 2u];
    }
    MatB probs[2];  // P^T, laid out as S^T
    [[unroll]] for (uint i = 0u; i < 2u; ++i)
      [[unroll]] for (uint e = 0u; e < 4u; ++e) {
        const float l = logit[4u * i + e];
        const float16_t p = float16_t(l == NEG_INF ? 0.0 : exp(l - running_max[e % 2u]));
        running_sum[e % 2u] += float(p);
        probs[i][e] = p;
      }

    // ---- values ----
    if (!EARLY_VALUES)
      [[unroll]] for (uint r = 0u; r < 2u * DIM_TILES; ++r) values[r] = load_value_row(value_base, value_block, 8u * r + g);
    // Slots outside [lo, hi) are zeroed: they may hold anything, even NaN, and 0 * NaN is NaN.
    const uint value_t0 = value_block == NO_BLOCK ? 0xfffffff0u : tok0 + value_group;
#if VKP_TOKEN_MAJOR
    if (!full)  // a slot is one token's
      [[unroll]] for (uint r = 0u; r < 2u * DIM_TILES; ++r) values[r] = mask_value_slot(values[r], r, value_t0, lo, hi);
#else
    if (FP8 && !full) {  // on the raw bytes (the pairs are not neighbouring tokens)
      const uvec2 keep = uvec2(fp8_keep_mask(value_t0, lo, hi), fp8_keep_mask(value_t0 + 4u, lo, hi));
      [[unroll]] for (uint r = 0u; r < 2u * DIM_TILES; ++r) values[r].xy &= keep;
    }
#endif
    bool values_scaled = false;
    if (BF16) {  // masked and converted here, so the range is known before any product
      float largest = 0.0;  // of the elements as f32 (NaN may or may not count: either way right)
      bool sample_reaches_low = false;
      [[unroll]] for (uint r = 0u; r < 2u * DIM_TILES; ++r) {
#if !VKP_TOKEN_MAJOR
        if (!full) values[r] = mask_row(values[r], value_t0, lo, hi);
#endif
        if (r == 0u) sample_reaches_low = reaches_range_low(values[0].x, values[0].y);
        [[unroll]] for (uint k = 0u; k < 4u; ++k) {
          const vec2 v = vec2(uintBitsToFloat(values[r][k] << 16), uintBitsToFloat(values[r][k] & 0xffff0000u));
          largest = max(largest, max(abs(v.x), abs(v.y)));
          values[r][k] = packHalf2x16(v);
        }
      }
      values_scaled = subgroupAny(!(largest < BF16_OVERFLOW)) || !subgroupAny(sample_reaches_low);
    }
#if VKP_TOKEN_MAJOR
    if (values_scaled) {
      // The unit again from the raw bits, scaled (bf16 range).
      [[unroll]] for (uint r = 0u; r < 2u * DIM_TILES; ++r)
        values[r] = mask_value_slot(load_value_row(value_base, value_block, 8u * r + g), r, value_t0, lo, hi);
      uint largest_bits = 0u;
      [[unroll]] for (uint r = 0u; r < 2u * DIM_TILES; ++r)
        [[unroll]] for (uint k = 0u; k < 4u; ++k) largest_bits = max(largest_bits, bf16_finite_magnitude(values[r][k]));
      const int shift = subgroup_bf16_range_shift(largest_bits);
      [[unroll]] for (uint r = 0u; r < 2u * DIM_TILES; ++r)
        [[unroll]] for (uint k = 0u; k < 4u; ++k) values[r][k] = bf16_pair_to_f16(values[r][k], ldexp(1.0, -shift));
      [[unroll]] for (uint d = 0u; d < DIM_TILES; ++d) {
        MatC part = MatC(0.0);
        [[unroll]] for (uint i = 0u; i < 2u; ++i) part = MAT_MUL_ADD(VALUE_FRAGMENT(values, d, i), probs[i], part);
        [[unroll]] for (uint e = 0u; e < 4u; ++e) acc[d][e] += part[e] * ldexp(1.0, shift);
      }
    } else {
      [[unroll]] for (uint i = 0u; i < 2u; ++i)
        [[unroll]] for (uint d = 0u; d < DIM_TILES; ++d) acc[d] = MAT_MUL_ADD(VALUE_FRAGMENT(values, d, i), probs[i], acc[d]);
    }
#else
    if (values_scaled) {
      // The unit again from the raw bits, scaled (bf16 range), one dim tile at a time.
      uint largest_bits = 0u;
      [[unroll]] for (uint r = 0u; r < 2u * DIM_TILES; ++r) {
        const uvec4 w = mask_row(load_value_row(value_base, value_block, 8u * r + g), value_t0, lo, hi);
        [[unroll]] for (uint k = 0u; k < 4u; ++k) largest_bits = max(largest_bits, bf16_finite_magnitude(w[k]));
      }
      const int shift = subgroup_bf16_range_shift(largest_bits);
      [[unroll]] for (uint d = 0u; d < DIM_TILES; ++d) {
        uvec4 rows[2];
        [[unroll]] for (uint h = 0u; h < 2u; ++h) {
          rows[h] = mask_row(load_value_row(value_base, value_block, 8u * (2u * d + h) + g), value_t0, lo, hi);
          [[unroll]] for (uint k = 0u; k < 4u; ++k) rows[h][k] = bf16_pair_to_f16(rows[h][k], ldexp(1.0, -shift));
        }
        MatC part = MatC(0.0);
        [[unroll]] for (uint i = 0u; i < 2u; ++i)
          part = MAT_MUL_ADD(a_fragment(pairs_of(rows[0], i), pairs_of(rows[1], i)), probs[i], part);
        [[unroll]] for (uint e = 0u; e < 4u; ++e) acc[d][e] += part[e] * ldexp(1.0, shift);
      }
    } else {
      [[unroll]] for (uint i = 0u; i < 2u; ++i)
        [[unroll]] for (uint d = 0u; d < DIM_TILES; ++d) {
          // Tokens 8q + 4i + {0, 1} and {2, 3} (fp8: {0, 2} and {1, 3}) of dims 16 d + g and 16 d + g + 8.
          uvec2 upper = pairs_of(values[2u * d], i);
          uvec2 lower = pairs_of(values[2u * d + 1u], i);
          if (!full && !BF16 && !FP8) {
            const uint t = value_t0 + 4u * i;
            upper = uvec2(mask_pair(upper.x, t, lo, hi), mask_pair(upper.y, t + 2u, lo, hi));
            lower = uvec2(mask_pair(lower.x, t, lo, hi), mask_pair(lower.y, t + 2u, lo, hi));
          }
          acc[d] = MAT_MUL_ADD(a_fragment(upper, lower), probs[i], acc[d]);
        }
    }
#endif
#if VKP_E4M3_NAN
    if (E4M3)
      [[unroll]] for (uint r = 0u; r < 2u * DIM_TILES; ++r) nan_seen |= nan_probe(values[r].x) | nan_probe(values[r].y);
#endif
#if VKP_TIMELINE
    if (units_done == 0u) t_first_unit = timeline_now();
    ++units_done;
#endif
  }
#if VKP_TIMELINE
  const uvec2 t_loop_done = timeline_now();
#endif
#if VKP_E4M3_NAN
  if (E4M3 && subgroupAny((nan_seen & NAN_PROBE_BITS) != 0u)) nan_outputs(acc, scores_finite, table, kv_head, lo, hi, end_unit);
#endif
  // ---- merge the subgroups' states ----
  // Each subgroup's state of a head as the row state stores it: a column that saw a non-finite
  // score (step 9) on any of its lanes is poisoned, its max NaN (softmax_state.glsl's rule).
  [[unroll]] for (uint j = 0u; j < 2u; ++j) {
    bool poisoned = !scores_finite[j];
    [[unroll]] for (uint x = 4u; x < SUBGROUP; x *= 2u) {
      running_sum[j] += subgroupShuffleXor(running_sum[j], x);
      // Every lane shuffles: as the right operand of ||, only the lanes not yet poisoned would,
      // and a shuffle reads nothing defined from a lane that skipped it.
      const bool other_poisoned = subgroupShuffleXor(poisoned, x);
      poisoned = poisoned || other_poisoned;
    }
    if (g == 0u) {
      s_max[sub * HEADS + 2u * q + j] = row_state_max(running_max[j], poisoned);
      s_sum[sub * HEADS + 2u * q + j] = running_sum[j];
    }
  }
  [[unroll]] for (uint j = 0u; j < DIM_TILES; ++j)
    [[unroll]] for (uint e = 0u; e < 4u; ++e) {
      const uint h = 2u * q + e % 2u;
#if VKP_TOKEN_MAJOR
      const uint d = value_dim(j, g, e / 2u);
#else
      const uint d = 16u * j + g + (e >= 2u ? 8u : 0u);
#endif
      s_work[OUT_BASE + (sub * HEADS + h) * D + d] = acc[j][e];
    }
  barrier();

  const float out_scale = pc.v_scale * fp8_scale_fix(CACHE_DTYPE);
  if (tid < heads) {
    const uint h = tid;
    // The subgroups' states merged as a row state takes its shares' maxima: a poisoned one (max
    // NaN) poisons the head, and stays out of the max.
    float m = NEG_INF;
    bool poisoned = false;
    for (uint s = 0u; s < MERGE_SUBGROUPS; ++s) tile_max_add(m, poisoned, s_max[STATE_INDEX(s, h)]);
    float den = 0.0;
    for (uint s = 0u; s < MERGE_SUBGROUPS; ++s) {
      const float w = softmax_rescale(s_max[STATE_INDEX(s, h)], m);  // the subgroup's state under the max
      s_weight[STATE_INDEX(s, h)] = w;
      den += w * s_sum[STATE_INDEX(s, h)];
    }
    m = row_state_max(m, poisoned);
    if (SPLIT) {
      const uint ml = pc.scratch_offset + split_state_word(seq * pc.num_heads + head0 + h, part, pc.num_seqs * pc.num_heads,
                                                           pc.num_partitions, D);
      scratch[ml] = m;  // the merges make a NaN max's head NaN
      scratch[ml + 1u] = den;
      s_factor[h] = out_scale;
    } else {
      // Single pass: the sinks, the output factor and the LSE (attention_epilogue.glsl).
      const RowFinish f = finish_row(m, den, SINKS, SINKS ? sinks[pc.sinks_offset + head0 + h] : 0.0);
      s_factor[h] = f.factor * out_scale;
      if (WRITE_LSE) lse[pc.lse_offset + seq * pc.num_heads + head0 + h] = f.lse;
    }
  }
  barrier();

  // The subgroups' outputs, weighted, two dims per invocation, to the output (or scratch).
  for (uint i = tid; i < heads * D / 2u; i += WG) {
    const uint h = i / (D / 2u);
    const uint d = 2u * (i % (D / 2u));
    vec2 o = vec2(0.0);
    for (uint s = 0u; s < MERGE_SUBGROUPS; ++s)
      o += s_weight[STATE_INDEX(s, h)] *
           vec2(s_work[OUT_BASE + (STATE_INDEX(s, h)) * D + d], s_work[OUT_BASE + (STATE_INDEX(s, h)) * D + d + 1u]);
    if (SPLIT) {
      // scratch: partial outputs [S][H][P][D] (unnormalised), as the merge reads them
      o *= s_factor[h];
      const uint sums = pc.scratch_offset + split_sums_word(seq * pc.num_heads + head0 + h, part, pc.num_partitions, D);
      scratch[sums + d] = o.x;
      scratch[sums + d + 1u] = o.y;
    } else {
      // NaN where a non-finite value was attended; packed as the query's dtype (attention_epilogue.glsl).
      output_words[row_word(pc.output_rows, seq, head0 + h) + d / 2u] =
          pack_output(finish_output(o.x, s_factor[h]), finish_output(o.y, s_factor[h]), QUERY_DTYPE);
    }
  }
  if (MERGE_HERE) split_arrive(seq, head0, heads, parts);
#if VKP_TIMELINE
  timeline_write(t_start, t_staged, t_first_unit, t_loop_done, units_done);
#endif
}
