// SPDX-License-Identifier: Apache-2.0
// MLA attention on the device (mla_attention, record_mla_attention) against the CPU reference
// (reference::mla_attention): every cache dtype in both cache forms, f32/f16/bf16 queries,
// decode, chunks after a cached prefix, speculative tokens with tree masks, window, soft cap,
// ALiBi, sinks, LSE, split and one pass, ragged lengths around the block size over shuffled
// block tables (slots past each length hold NaN), CSR page tables, DeepSeek's widths, pools past
// maxStorageBufferRange, on each kernel (the portable one, and the tensor-core one where the
// device has it); then the refusals.
// Shapes stay small but for one 128-head case: lavapipe runs the shaders on the CPU.
#include <gtest/gtest.h>

#include <cmath>
#include <limits>
#include <random>
#include <string>

#include "ops/attention_host_run.hpp"
#include "ops/attention_validation.hpp"
#include "support/attention_case.hpp"
#include "support/csr_tables.hpp"
#include "support/decode_case.hpp"
#include "support/expect_error.hpp"
#include "support/mla_case.hpp"
#include "support/mla_kernels.hpp"
#include "support/pool_window.hpp"
#include "support/test_context.hpp"
#include "vkpaged/mla_attention.hpp"
#include "vkpaged/reference.hpp"

namespace vkpaged::test {
namespace {

constexpr DType kCacheDtypes[] = {DType::f32, DType::f16, DType::bf16, DType::fp8_e4m3, DType::fp8_e5m2};

// Every test runs on each MLA kernel (support/mla_kernels.hpp): the matrix kernel skips where
// the device lacks it, and skips the cases it refuses (f32 queries or caches).
class MlaAttentionTest : public MlaKernelTest {};

// The element of the one pool `in.mla_cache` ([N, B, Dk]) holding entry d of request
// `request`'s position t, through its block table.
size_t cache_entry(const MlaInputs& in, int64_t request, int64_t t, int64_t d) {
  const int64_t B = in.mla_cache.shape()[1], Dk = in.mla_cache.shape()[2], M = in.block_tables.shape()[1];
  const int64_t block = in.block_tables.get(size_t(request * M + t / B));
  return size_t((block * B + t % B) * Dk + d);
}

// One token per request, lengths 1, B - 1, B, B + 1 and longer, every cache dtype in both forms,
// a small odd head count; one pass, and split in the two-pool form.
TEST_P(MlaAttentionTest, DecodeEveryCacheDtypeBothForms) {
  for (DType cache : kCacheDtypes) {
    for (MlaCacheForm form : {MlaCacheForm::one_pool, MlaCacheForm::two_pools}) {
      MlaCase c;
      c.value_head_size = 64;
      c.rope_head_size = 16;
      c.form = form;
      c.attention.heads = 3;
      c.attention.block_size = 8;
      c.attention.lens = {1, 7, 8, 9, 300};
      c.attention.new_tokens = {1, 1, 1, 1, 1};
      c.attention.cache_dtype = cache;
      c.attention.query_dtype = cache == DType::f32 ? DType::f32 : cache == DType::bf16 ? DType::bf16 : DType::f16;
      const uint32_t seed = uint32_t(cache) * 2 + uint32_t(form);
      check(c, default_params(c.attention), form == MlaCacheForm::one_pool ? single_pass() : split_by(256), seed);
    }
  }
}

// fp8 rows that are not whole 16-byte chunks (the matrix kernel then stages 8-byte ones): Dk 40
// in one pool (40 bytes), Dv 40 beside R 8 in two (40 and 8 bytes), both fp8 formats, decode and
// a chunk, lengths around the block's edge.
TEST_P(MlaAttentionTest, Fp8RowsOfEightByteChunks) {
  for (DType cache : {DType::fp8_e4m3, DType::fp8_e5m2}) {
    for (MlaCacheForm form : {MlaCacheForm::one_pool, MlaCacheForm::two_pools}) {
      MlaCase c;
      c.value_head_size = form == MlaCacheForm::one_pool ? 32 : 40;
      c.rope_head_size = 8;
      c.form = form;
      c.attention.heads = 4;
      c.attention.block_size = 8;
      c.attention.lens = {1, 7, 8, 9, 45};
      c.attention.new_tokens = {1, 1, 1, 1, 5};
      c.attention.cache_dtype = cache;
      c.attention.query_dtype = DType::f16;
      check(c, default_params(c.attention), form == MlaCacheForm::one_pool ? single_pass() : split_by(256),
            90 + uint32_t(cache) * 2 + uint32_t(form));
    }
  }
}

// Chunks after cached prefixes of 0, 1, B - 1, B and B + 1 positions, chunks crossing block
// edges, each query dtype.
TEST_P(MlaAttentionTest, ChunksAfterACachedPrefix) {
  for (DType query : {DType::f32, DType::f16, DType::bf16}) {
    MlaCase c;
    c.value_head_size = 32;
    c.rope_head_size = 8;
    c.form = query == DType::f16 ? MlaCacheForm::two_pools : MlaCacheForm::one_pool;
    c.attention.heads = 4;
    c.attention.block_size = 8;
    c.attention.new_tokens = {3, 8, 9, 13, 5};
    c.attention.lens = {0 + 3, 1 + 8, 7 + 9, 8 + 13, 9 + 5};
    c.attention.query_dtype = query;
    c.attention.cache_dtype = query == DType::bf16 ? DType::bf16 : DType::f16;
    check(c, default_params(c.attention), options(), uint32_t(query) + 10);
  }
}

// Speculative verification: draft trees and random masks (tokens that hide themselves), with
// and without a window that cuts into the new tokens, both forms, split and one pass.
TEST_P(MlaAttentionTest, SpeculativeTokensWithTreeMasks) {
  for (TreeMask mask : {TreeMask::tree, TreeMask::random}) {
    for (uint32_t window : {0u, 5u}) {
      MlaCase c;
      c.value_head_size = 48;
      c.rope_head_size = 16;
      c.form = window ? MlaCacheForm::two_pools : MlaCacheForm::one_pool;
      c.attention.heads = 5;
      c.attention.lens = {6, 41, 300};
      c.attention.new_tokens = {6, 4, 7};
      c.attention.tree_mask = mask;
      c.attention.sliding_window = window;
      const uint32_t seed = 20 + uint32_t(mask) * 2 + (window ? 1 : 0);
      check(c, default_params(c.attention), single_pass(), seed);
      check(c, default_params(c.attention), split_by(256), seed);
    }
  }
}

// Window, soft cap, ALiBi and sinks in every combination, with LSE, on a mixed step (decode,
// a chunk, a whole prompt), one pass and split; fp8 E4M3 with its scales for half of them.
TEST_P(MlaAttentionTest, WindowSoftcapAlibiSinksWithLse) {
  for (uint32_t bits = 0; bits < 16; ++bits) {
    MlaCase c;
    c.value_head_size = 32;
    c.rope_head_size = 16;
    c.form = bits & 1 ? MlaCacheForm::two_pools : MlaCacheForm::one_pool;
    c.attention.heads = 3;
    c.attention.lens = {290, 20, 17};
    c.attention.new_tokens = {1, 6, 17};
    c.attention.sliding_window = bits & 1 ? 9 : 0;
    c.attention.alibi = bits & 4;
    c.attention.sinks = bits & 8;
    c.attention.cache_dtype = bits & 8 ? DType::fp8_e4m3 : DType::f16;
    AttentionParams p = default_params(c.attention);
    p.scale = 0.2f;  // the caller's scale
    p.softcap = bits & 2 ? 2.5f : 0.0f;
    check(c, p, bits & 1 ? split_by(256) : single_pass(), 40 + bits);
  }
}

// A long context split into several partitions (automatic and forced) and in one pass: all three
// match the reference, so the merge of Dv-wide partial sums is the one-pass result.
TEST_P(MlaAttentionTest, SplitMatchesOnePassOnLongContexts) {
  MlaCase c;
  c.value_head_size = 64;
  c.rope_head_size = 16;
  c.attention.heads = 4;
  c.attention.block_size = 16;
  c.attention.lens = {1000, 513, 3};
  c.attention.new_tokens = {2, 1, 3};
  for (const MlaOptions& o : {single_pass(), split_by(256), options()}) check(c, default_params(c.attention), o, 60);
}

// DeepSeek's widths (Dk 576 = 512 + 64): 16 heads in both forms and fp8 E4M3 with scales, and
// one case of 128 heads.
TEST_P(MlaAttentionTest, DeepSeekWidths) {
  for (MlaCacheForm form : {MlaCacheForm::one_pool, MlaCacheForm::two_pools}) {
    MlaCase c;
    c.value_head_size = 512;
    c.rope_head_size = 64;
    c.form = form;
    c.attention.heads = 16;
    c.attention.block_size = 16;
    c.attention.lens = {33, 5};
    c.attention.new_tokens = {1, 2};
    c.attention.query_dtype = DType::bf16;
    c.attention.cache_dtype = form == MlaCacheForm::one_pool ? DType::bf16 : DType::fp8_e4m3;
    check(c, default_params(c.attention), options(), 70 + uint32_t(form));
  }
  MlaCase c;
  c.value_head_size = 512;
  c.rope_head_size = 64;
  c.attention.heads = 128;
  c.attention.block_size = 16;
  c.attention.lens = {17};
  c.attention.new_tokens = {1};
  check(c, default_params(c.attention), options(), 72);
}

// One workgroup walking a long key span at DeepSeek's widths: 4096 positions in one pass, f32
// and bf16. Mesa 22.3's lavapipe ends every loop of a shader invocation once all of them
// together have run 65535 iterations (gallivm's shared loop limiter); the kernel once looped
// about 190 times per key tile and returned wrong rows past about 2800 positions there.
TEST_P(MlaAttentionTest, LongKeySpanInOneWorkgroup) {
  for (DType dtype : {DType::f32, DType::bf16}) {
    MlaCase c;
    c.value_head_size = 512;
    c.rope_head_size = 64;
    c.attention.heads = 8;
    c.attention.block_size = 64;
    c.attention.lens = {4096};
    c.attention.new_tokens = {1};
    c.attention.query_dtype = dtype;
    c.attention.cache_dtype = dtype;
    check(c, default_params(c.attention), single_pass(), 75 + uint32_t(dtype));
  }
}

// FlashInfer's CSR page tables in place of the dense ones, one pass and split.
TEST_P(MlaAttentionTest, CsrPageTables) {
  MlaCase c;
  c.value_head_size = 32;
  c.rope_head_size = 8;
  c.attention.heads = 2;
  c.attention.block_size = 8;
  c.attention.lens = {1, 9, 270};
  c.attention.new_tokens = {1, 4, 2};
  std::mt19937 rng(80);
  const MlaDraw draw = make_mla_inputs(c, rng);
  const AttentionInputs csr_attention = with_csr(draw.attention, c.attention.block_size);
  MlaInputs csr = draw.mla;
  csr.block_tables = HostTensor();
  csr.context_lens = HostTensor();
  csr.kv_indptr = csr_attention.kv_indptr;
  csr.kv_indices = csr_attention.kv_indices;
  csr.kv_last_page_len = csr_attention.kv_last_page_len;
  csr.max_blocks_per_seq = csr_attention.max_blocks_per_seq;
  for (const MlaOptions& o : {single_pass(), split_by(256)}) check_inputs(csr, c, default_params(c.attention), o);
}

// A NaN in the rotary part of an attended row poisons its logits: NaN outputs and LSE exactly
// where the reference has them, in both forms.
TEST_P(MlaAttentionTest, NanInTheRotaryPartPoisonsTheRow) {
  for (MlaCacheForm form : {MlaCacheForm::one_pool, MlaCacheForm::two_pools}) {
    MlaCase c;
    c.value_head_size = 32;
    c.rope_head_size = 8;
    c.attention.heads = 2;
    // f32 on the portable kernel, f16 (the matrix kernel's) on both
    c.attention.cache_dtype = form == MlaCacheForm::one_pool ? DType::f32 : DType::f16;
    c.attention.query_dtype = c.attention.cache_dtype;
    c.attention.lens = {12, 20};
    c.attention.new_tokens = {1, 3};
    std::mt19937 rng(90);
    MlaInputs in = make_mla_inputs(c, rng).mla;
    // Position 4 of request 1, entry Dv + 3 (rotary).
    in.mla_cache.set(cache_entry(in, 1, 4, 32 + 3), std::nan(""));
    in = with_cache_form(in, form);
    c.form = form;
    const AttentionResult want = reference::mla_attention(in, default_params(c.attention), true);
    ASSERT_TRUE(std::isnan(want.lse.get(size_t(1 * 2)))) << "the poisoned row must be NaN in the reference";
    check_inputs(in, c, default_params(c.attention), single_pass());
  }
}

// bf16 rows whose rotary parts jump in magnitude by up to 2^48 from one run of 64 positions to
// the next (a run holds whole key tiles of any device's plan), the queries' rotary parts zero so
// that the logits and outputs stay moderate: the matrix kernel scales each tile into f16's range
// by its own power of two, which it takes from the tile's own loads before it stores them.
// Scaled by a neighbour's, a tile's 2^24 entries pass f16's range (Inf, and Inf times the zero
// query entry is NaN), and its values may lose their precision. Both forms, one pass and split.
TEST_P(MlaAttentionTest, Bf16TilesFarApartInRangeEachKeepTheirOwn) {
  for (MlaCacheForm form : {MlaCacheForm::one_pool, MlaCacheForm::two_pools}) {
    MlaCase c;
    c.value_head_size = 32;
    c.rope_head_size = 8;
    c.attention.heads = 2;
    c.attention.block_size = 16;
    c.attention.query_dtype = c.attention.cache_dtype = DType::bf16;
    c.attention.lens = {300, 130};
    c.attention.new_tokens = {1, 2};
    std::mt19937 rng(95);
    MlaInputs in = make_mla_inputs(c, rng).mla;
    const int64_t Dv = 32, Dk = 40;
    for (int64_t i = 0; i < in.query.numel(); ++i)
      if (i % Dk >= Dv) in.query.set(size_t(i), 0.0);
    const int exponents[] = {24, -24, 20, 0, -20};
    for (size_t r = 0; r < c.attention.lens.size(); ++r)
      for (int64_t t = 0; t < int64_t(c.attention.lens[r]); ++t) {
        const double factor = std::ldexp(1.0, exponents[(t / 64 + int64_t(r)) % 5]);
        for (int64_t d = Dv; d < Dk; ++d) {
          const size_t e = cache_entry(in, int64_t(r), t, d);
          in.mla_cache.set(e, in.mla_cache.get(e) * factor);
        }
      }
    in = with_cache_form(in, form);
    c.form = form;
    for (const MlaOptions& o : {single_pass(), split_by(256)}) check_inputs(in, c, default_params(c.attention), o);
  }
}

// bf16 rows with a NaN value entry that only some rows attend (request 1's new tokens at 17, 18
// and 19; the entry at 18, which the token at 17 does not see) and a NaN in a rotary entry
// (request 0): the matrix kernel flags a tile holding either while it converts the tile to f16,
// and does that tile's P V element by element with hidden positions skipped, so that the NaN
// value reaches only the rows that attend it, and the rotary NaN poisons its request's rows.
TEST_P(MlaAttentionTest, Bf16NanEntriesReachOnlyTheRowsThatAttendThem) {
  for (MlaCacheForm form : {MlaCacheForm::one_pool, MlaCacheForm::two_pools}) {
    MlaCase c;
    c.value_head_size = 32;
    c.rope_head_size = 8;
    c.attention.heads = 2;
    c.attention.query_dtype = c.attention.cache_dtype = DType::bf16;
    c.attention.lens = {12, 20};
    c.attention.new_tokens = {1, 3};
    std::mt19937 rng(97);
    MlaInputs in = make_mla_inputs(c, rng).mla;
    const int64_t Dv = 32;
    in.mla_cache.set(cache_entry(in, 1, 18, 5), std::nan(""));
    in.mla_cache.set(cache_entry(in, 0, 4, Dv + 3), std::nan(""));
    in = with_cache_form(in, form);
    c.form = form;
    const AttentionResult want = reference::mla_attention(in, default_params(c.attention), true);
    ASSERT_TRUE(std::isnan(want.lse.get(0))) << "request 0's rows must be NaN in the reference";
    ASSERT_FALSE(std::isnan(want.lse.get(size_t(1 * 2)))) << "the value NaN must not poison a row's state";
    for (const MlaOptions& o : {single_pass(), split_by(256)}) check_inputs(in, c, default_params(c.attention), o);
  }
}

// Pools past maxStorageBufferRange (128 MiB on lavapipe) are read through device addresses: the
// case's blocks sit at the end of pools just past the range, in both forms (two pools: ckv is
// past the range, kpe is not and is read by address all the same), decode and a chunk, one pass
// and split, bf16 and fp8 caches.
TEST_P(MlaAttentionTest, PoolsPastTheStorageBufferRange) {
  const DeviceInfo& dev = ctx().device_info();
  if (const std::string why = past_range_skip_reason(dev); !why.empty()) GTEST_SKIP() << why;
  for (MlaCacheForm form : {MlaCacheForm::one_pool, MlaCacheForm::two_pools}) {
    const bool one = form == MlaCacheForm::one_pool;
    MlaCase c;
    c.value_head_size = 64;
    c.rope_head_size = 16;
    c.form = form;
    c.attention.heads = 4;
    c.attention.block_size = 16;
    c.attention.lens = {300, 17, 9};
    c.attention.new_tokens = {1, 9, 1};
    c.attention.cache_dtype = one ? DType::bf16 : DType::fp8_e4m3;
    c.attention.query_dtype = one ? DType::bf16 : DType::f16;
    std::mt19937 rng(40 + uint32_t(form));
    const MlaInputs in = make_mla_inputs(c, rng).mla;
    const AttentionParams params = default_params(c.attention);
    const std::vector<const HostTensor*> pools =
        one ? std::vector<const HostTensor*>{&in.mla_cache} : std::vector<const HostTensor*>{&in.ckv_cache, &in.kpe_cache};
    const int64_t small = pools[0]->shape()[0];
    uint64_t widest = 0;
    for (const HostTensor* pool : pools) widest = std::max<uint64_t>(widest, pool->bytes() / uint64_t(small));
    const int64_t big = int64_t(dev.max_storage_buffer_range / widest) + 8;
    const int64_t first = big - small;  // the case's block b is the pools' block first + b
    MlaInputs shifted = in;
    for (int64_t i = 0; i < shifted.block_tables.numel(); ++i) shifted.block_tables.as<int32_t>()[i] += int32_t(first);
    MlaShape shape = mla_shape_of(in, params, true);
    shape.attention.num_blocks = uint32_t(big);
    const AttentionResult want = reference::mla_attention(in, params, true);
    for (const MlaOptions& o : {single_pass(), split_by(256)}) {
      const MlaPlan plan = MlaPlan::create(ctx(), shape, detail::host_query_starts(in.query_starts), o);
      ASSERT_NE(plan.describe().find("by device address"), std::string::npos) << plan.describe();
      EXPECT_EQ(plan.kernel(), kernel()) << plan.describe();
      std::vector<DeviceBuffer> keep;
      auto large_pool = [&](const HostTensor& t) {
        const uint64_t block_bytes = t.bytes() / uint64_t(small);
        keep.push_back(ctx().create_buffer(size_t(big) * block_bytes));
        ctx().upload(keep.back().view(size_t(first) * block_bytes, t.bytes()), t.data(), t.bytes());
        return keep.back().tensor(t.dtype(), Shape{big, t.shape()[1], t.shape()[2]});
      };
      MlaViews v;
      if (one) {
        v.mla_cache = large_pool(in.mla_cache);
      } else {
        v.ckv_cache = large_pool(in.ckv_cache);
        v.kpe_cache = large_pool(in.kpe_cache);
      }
      v.query = detail::upload_kept(ctx(), keep, in.query, in.query.dtype());
      detail::upload_page_tables(ctx(), keep, shifted, v);
      detail::stage_query_starts(ctx(), keep, in, shape.attention.tree_mask, v);
      const int64_t T = in.query.shape()[0], H = in.query.shape()[1];
      AttentionResult got;
      detail::stage_outputs(ctx(), keep, in.query.dtype(), Shape{T, H, int64_t(c.value_head_size)}, true, T, H, v, got);
      detail::run_staged_attention(ctx(), keep, plan.scratch_bytes(), v, true, "mla_attention", got,
                                   [&](VkCommandBuffer cmd) { record_mla_attention(ctx(), cmd, plan, v, params); });
      expect_attention_near(got, want, tolerance(c.attention.query_dtype, c.attention.cache_dtype), true,
                            plan.describe());
    }
  }
}

INSTANTIATE_TEST_SUITE_P(Kernels, MlaAttentionTest, ::testing::ValuesIn(kMlaKernels), attention_kernel_param_name);

// ---- refusals: each names the argument and the value ----

class MlaAttentionRefusalTest : public GpuTest {};

MlaOptions split_by(uint32_t partition_tokens) {
  MlaOptions o;
  o.split = SplitMode::split;
  o.partition_tokens = partition_tokens;
  return o;
}

MlaShape small_shape() {
  MlaShape m;
  AttentionShape& s = m.attention;
  s.num_requests = 1;
  s.num_query_tokens = 1;
  s.num_heads = 4;
  s.num_kv_heads = 1;
  s.head_size = 40;
  s.block_size = 8;
  s.num_blocks = 4;
  s.max_blocks_per_seq = 4;
  s.kv_layout = KvLayout::nhd;
  m.value_head_size = 32;
  return m;
}

TEST_F(MlaAttentionRefusalTest, RefusesShapesTheKernelCannotRun) {
  const int32_t starts[] = {0, 1};
  auto plan = [&](const MlaShape& m, const MlaOptions& o = {}) { MlaPlan::create(ctx(), m, starts, o); };
  MlaShape m = small_shape();
  m.attention.head_size = 44;
  m.value_head_size = 32;
  expect_refused([&] { plan(m); }, "head_size: Dk = 44 is not a multiple of 8");
  m = small_shape();
  m.attention.head_size = 584;
  expect_refused([&] { plan(m); }, "head_size: Dk = 584");
  m = small_shape();
  m.value_head_size = 36;
  expect_refused([&] { plan(m); }, "value_head_size: Dv = 36");
  m = small_shape();
  m.attention.head_size = 576;
  m.value_head_size = 520;
  expect_refused([&] { plan(m); }, "value_head_size: Dv = 520");
  m = small_shape();
  m.value_head_size = 40;
  m.cache_form = MlaCacheForm::two_pools;
  expect_refused([&] { plan(m); }, "kpe_cache: R = Dk - Dv = 0");
  m = small_shape();
  m.attention.num_kv_heads = 2;
  m.attention.num_heads = 4;
  expect_refused([&] { plan(m); }, "num_kv_heads: 2");
  m = small_shape();
  m.attention.kv_layout = KvLayout::vllm;
  expect_refused([&] { plan(m); }, "kv_layout: 0");
  expect_refused([&] { plan(small_shape(), split_by(100)); }, "partition_tokens: 100");
  MlaOptions decode;
  decode.kernel = AttentionKernel::decode;
  expect_refused([&] { plan(small_shape(), decode); }, "kernel: 1 (MLA runs on automatic (0), scalar (2) or matrix (3)");
  // f32 queries: the matrix kernel refuses them on every device (a device without it says so first).
  MlaOptions matrix;
  matrix.kernel = AttentionKernel::matrix;
  m = small_shape();
  m.attention.query_dtype = DType::f32;
  expect_refused([&] { plan(m, matrix); }, "kernel: matrix: ", ErrorCode::unsupported);
  const int32_t bad_starts[] = {0, 2};
  expect_refused([&] { MlaPlan::create(ctx(), small_shape(), bad_starts); }, "query_starts[1]: 2 is not T");
}

TEST_F(MlaAttentionRefusalTest, RefusesViewsThatDoNotFitThePlan) {
  const int32_t starts[] = {0, 1};
  const MlaShape m = small_shape();
  MlaOptions one_pass;
  one_pass.split = SplitMode::single_pass;
  const MlaPlan plan = MlaPlan::create(ctx(), m, starts, one_pass);
  DeviceBuffer buffer = ctx().create_buffer(1 << 16);
  auto view = [&](DType dtype, Shape shape) { return TensorView{buffer.view(), dtype, shape}; };
  MlaViews v;
  v.query = view(DType::f16, Shape{1, 4, 40});
  v.mla_cache = view(DType::f16, Shape{4, 8, 40});
  v.block_tables = view(DType::i32, Shape{1, 4});
  v.context_lens = view(DType::i32, Shape{1});
  v.query_starts = view(DType::i32, Shape{2});
  v.output = view(DType::f16, Shape{1, 4, 40});  // Dk wide: the output is Dv wide
  auto record = [&] { ctx().run_and_wait([&](VkCommandBuffer cmd) { record_mla_attention(ctx(), cmd, plan, v); }); };
  expect_refused(record, "output");
  v.output = view(DType::f16, Shape{1, 4, 32});
  v.kpe_cache = view(DType::f16, Shape{4, 8, 8});
  expect_refused(record, "ckv_cache: given to a plan of the one-pool form");
  v.kpe_cache = TensorView{};
  v.mla_cache = view(DType::f16, Shape{4, 8, 32});
  expect_refused(record, "mla_cache");
  v.mla_cache = view(DType::f16, Shape{4, 8, 40});
  AttentionParams p;
  p.softcap = 2.0f;
  expect_refused([&] { ctx().run_and_wait([&](VkCommandBuffer cmd) { record_mla_attention(ctx(), cmd, plan, v, p); }); },
                 "softcap: 2");
}

}  // namespace
}  // namespace vkpaged::test
