// SPDX-License-Identifier: Apache-2.0
// The contract's bad-input answers on the host side, without a device: decode_shape_of (the
// checks every decode entry point shares) and the CPU references of decode and the cache
// operations. Each refusal is vkpaged::Error(invalid_argument) naming the argument and the
// value, and a refused call writes nothing. These run in vkpaged_host_tests too, under ASan
// and UBSan (scripts/sanitize.sh); the GPU paths' refusals are in tests/ops/.
#include <gtest/gtest.h>

#include <cmath>
#include <cstring>
#include <functional>
#include <limits>
#include <random>
#include <string>
#include <vector>

#include "support/decode_case.hpp"
#include "vkpaged/error.hpp"
#include "vkpaged/reference.hpp"

namespace vkpaged::test {
namespace {

// Runs `call`, expecting vkpaged::Error(invalid_argument) whose message contains `needle`.
void expect_invalid(const std::function<void()>& call, const std::string& needle) {
  try {
    call();
    ADD_FAILURE() << "accepted; expected a refusal naming \"" << needle << "\"";
  } catch (const Error& e) {
    EXPECT_EQ(e.code(), ErrorCode::invalid_argument) << e.what();
    EXPECT_NE(std::string(e.what()).find(needle), std::string::npos) << "message: " << e.what();
  }
}

// Both host entry points of decode refuse the same inputs with the same message.
void expect_decode_refused(const DecodeInputs& in, const std::string& needle) {
  expect_invalid([&] { reference::decode_attention(in); }, needle);
  expect_invalid([&] { decode_shape_of(in); }, needle);
}
// Options and per-call params are checked by the reference (and DecodePlan::create, and
// record_decode), not by decode_shape_of.
void expect_options_refused(const DecodeInputs& in, const DecodeOptions& options, const std::string& needle,
                            const DecodeParams& params = {}) {
  EXPECT_NO_THROW(decode_shape_of(in));
  expect_invalid([&] { reference::decode_attention(in, options, params); }, needle);
}
void expect_params_refused(const DecodeInputs& in, const DecodeParams& params, const std::string& needle) {
  expect_options_refused(in, DecodeOptions{}, needle, params);
}

class DecodeRefusals : public ::testing::Test {
 protected:
  DecodeInputs good() {
    std::mt19937 rng(7);
    return make_decode_inputs(DecodeCase{}, rng);  // S = 2, H = 4, Hkv = 2, D = 64, B = 16, f16
  }
};

TEST_F(DecodeRefusals, GoodInputsPass) {
  const DecodeInputs in = good();
  const DecodeShape s = decode_shape_of(in);
  EXPECT_EQ(s.num_seqs, 2u);
  EXPECT_EQ(s.max_context_len, 17u);
  const DecodeResult r = reference::decode_attention(in);
  for (int64_t i = 0; i < r.output.numel(); ++i) ASSERT_TRUE(std::isfinite(r.output.get(size_t(i)))) << i;
}

TEST_F(DecodeRefusals, HeadsNotAMultipleOfKvHeads) {
  DecodeCase odd;
  odd.heads = 3;
  std::mt19937 rng(1);
  expect_decode_refused(make_decode_inputs(odd, rng), "num_heads: 3 is not a multiple of num_kv_heads 2");
}

TEST_F(DecodeRefusals, UnsupportedHeadAndBlockSizes) {
  for (uint32_t d : {24u, 60u, 264u, 1024u}) {
    DecodeCase c;
    c.head_size = d;
    c.query_dtype = c.cache_dtype = DType::f32;  // x = 4 divides every size tried
    std::mt19937 rng(d);
    expect_decode_refused(make_decode_inputs(c, rng), "head_size: " + std::to_string(d) + " is not supported");
  }
  for (uint32_t b : {3u, 24u, 256u}) {
    DecodeCase c;
    c.block_size = b;
    std::mt19937 rng(b);
    expect_decode_refused(make_decode_inputs(c, rng), "block_size: " + std::to_string(b));
  }
}

TEST_F(DecodeRefusals, HeadSizeNotAMultipleOfXForFp8) {
  DecodeCase c;
  c.head_size = 72;
  c.cache_dtype = DType::fp8_e4m3;
  std::mt19937 rng(2);
  expect_decode_refused(make_decode_inputs(c, rng), "D = 72 is not a multiple of x = 16");
}

TEST_F(DecodeRefusals, BlockIdsAndContextLengthsOutOfRange) {
  DecodeInputs in = good();
  in.block_tables.as<int32_t>()[0] = 1000;
  expect_decode_refused(in, "block_tables[0][0]: block id 1000");
  in = good();
  in.block_tables.as<int32_t>()[0] = -1;
  expect_decode_refused(in, "block_tables[0][0]: block id -1");
  in = good();
  in.context_lens.as<int32_t>()[1] = 100000;
  expect_decode_refused(in, "context_lens[1]: 100000");
  in = good();
  in.context_lens.as<int32_t>()[0] = -1;
  expect_decode_refused(in, "context_lens[0]: -1");
  // u32 tables: a value past 2^31 is an id >= N, not a negative one.
  in = good();
  HostTensor tables(DType::u32, in.block_tables.shape());
  std::memcpy(tables.data(), in.block_tables.data(), tables.bytes());
  tables.as<uint32_t>()[0] = 0x80000000u;
  in.block_tables = tables;
  expect_decode_refused(in, "block id 2147483648");
  // i64 lengths are range-checked before any narrowing.
  in = good();
  HostTensor lens(DType::i64, in.context_lens.shape());
  lens.as<int64_t>()[0] = int64_t(1) << 40;
  in.context_lens = lens;
  expect_decode_refused(in, "context_lens[0]: 1099511627776");
}

TEST_F(DecodeRefusals, ShapesAndDtypesThatDisagree) {
  DecodeInputs in = good();
  in.query = HostTensor(DType::f16, Shape{2, 4, 32});
  expect_decode_refused(in, "does not match the query's head size D = 32");
  in = good();
  in.query = HostTensor(DType::f16, Shape{2, 4});
  expect_decode_refused(in, "query: shape [2, 4] is not [S, H, D]");
  in = good();
  in.query = HostTensor(DType::i32, in.query.shape());
  expect_decode_refused(in, "query: dtype i32");
  in = good();
  in.value_cache = HostTensor(DType::f16, Shape{1, 2, 64, 16});
  expect_decode_refused(in, "value_cache: shape [1, 2, 64, 16]");
  in = good();
  in.key_cache = HostTensor(DType::f32, in.key_cache.shape());
  expect_decode_refused(in, "key_cache: dtype f32");
  in = good();
  in.cache_dtype = DType::i32;
  expect_decode_refused(in, "key_cache: dtype f16 does not hold a i32 cache");
  in = good();
  in.block_tables = HostTensor(DType::i32, Shape{3, 2});
  expect_decode_refused(in, "block_tables: 3 rows");
  in = good();
  in.block_tables = HostTensor(DType::f32, in.block_tables.shape());
  expect_decode_refused(in, "block_tables: dtype f32");
  in = good();
  in.context_lens = HostTensor(DType::i32, Shape{1});
  expect_decode_refused(in, "context_lens: 1 entries");
  in = good();
  in.sinks = HostTensor(DType::f32, Shape{3});
  expect_decode_refused(in, "sinks: shape [3]");
  in = good();
  in.alibi_slopes = HostTensor(DType::f16, Shape{4});
  expect_decode_refused(in, "alibi_slopes: dtype f16");
}

TEST_F(DecodeRefusals, OptionsOutOfRange) {
  const DecodeInputs in = good();
  DecodeParams p;
  p.softcap = -1.0f;
  expect_params_refused(in, p, "softcap: -1");
  p = {};
  p.softcap = std::numeric_limits<float>::infinity();
  expect_params_refused(in, p, "softcap: inf");
  p = {};
  p.scale = std::numeric_limits<float>::quiet_NaN();
  expect_params_refused(in, p, "scale: nan");
  p = {};
  p.k_scale = 0.0f;
  expect_params_refused(in, p, "k_scale: 0");
  p = {};
  p.v_scale = std::numeric_limits<float>::infinity();
  expect_params_refused(in, p, "v_scale: inf");
  DecodeOptions o;
  o.partition_tokens = 100;
  expect_options_refused(in, o, "partition_tokens: 100");
  o = {};
  o.partition_tokens = 256;
  o.split = SplitMode::single_pass;
  expect_options_refused(in, o, "partition_tokens: given with split = single_pass");
}

// ---- cache operations ----

HostTensor filled(DType t, Shape shape, float start) {
  HostTensor h(t, shape);
  for (int64_t i = 0; i < h.numel(); ++i) h.set(size_t(i), start + float(i % 97) / 128.0f);
  return h;
}

struct Pools {
  HostTensor key, value;
};
// N = 4 blocks, Hkv = 1, D = 16, B = 4 (x = 8 for f16).
Pools pools(DType t = DType::f16) {
  const int64_t x = cache_pack_factor(t);
  return {filled(t, Shape{4, 1, 16 / x, 4, x}, 0.5f), filled(t, Shape{4, 1, 16, 4}, -0.5f)};
}

bool same_bytes(const HostTensor& a, const HostTensor& b) {
  return a.bytes() == b.bytes() && std::memcmp(a.data(), b.data(), a.bytes()) == 0;
}

TEST(CacheOpRefusals, ReshapeAndCacheRefusesBeforeWritingAnything) {
  const Pools before = pools();
  Pools p = pools();
  const HostTensor key = filled(DType::f16, Shape{3, 1, 16}, 2.0f), value = filled(DType::f16, Shape{3, 1, 16}, 3.0f);
  HostTensor slots(DType::i64, Shape{3});
  slots.as<int64_t>()[0] = 0;
  slots.as<int64_t>()[1] = -1;  // padding
  slots.as<int64_t>()[2] = 16;  // N * B = 16
  expect_invalid([&] { reference::reshape_and_cache(key, value, slots, p.key, p.value); }, "slot_mapping[2]: slot 16");
  EXPECT_TRUE(same_bytes(p.key, before.key) && same_bytes(p.value, before.value)) << "a refused call wrote the cache";

  slots.as<int64_t>()[2] = 15;
  HostTensor f32_slots(DType::f32, Shape{3});
  expect_invalid([&] { reference::reshape_and_cache(key, value, f32_slots, p.key, p.value); }, "slot_mapping: dtype f32");
  const HostTensor wide = filled(DType::f16, Shape{3, 2, 16}, 0.0f);
  expect_invalid([&] { reference::reshape_and_cache(wide, wide, slots, p.key, p.value); }, "key: shape [3, 2, 16]");
  const HostTensor f32_value = filled(DType::f32, Shape{3, 1, 16}, 0.0f);
  expect_invalid([&] { reference::reshape_and_cache(key, f32_value, slots, p.key, p.value); }, "value: dtype f32");
  HostTensor odd_value(DType::f16, Shape{4, 1, 16, 8});
  expect_invalid([&] { reference::reshape_and_cache(key, value, slots, p.key, odd_value); }, "key_cache: shape");
  EXPECT_TRUE(same_bytes(p.key, before.key) && same_bytes(p.value, before.value)) << "a refused call wrote the cache";

  // fp8 scales: finite and > 0, and a reciprocal that does not overflow.
  Pools f8 = pools(DType::fp8_e4m3);
  for (float bad : {0.0f, -1.0f, std::numeric_limits<float>::quiet_NaN(), std::numeric_limits<float>::infinity()})
    expect_invalid([&] { reference::reshape_and_cache(key, value, slots, f8.key, f8.value, {.k_scale = bad}); },
                   "k_scale");
  expect_invalid([&] { reference::reshape_and_cache(key, value, slots, f8.key, f8.value, {.v_scale = 1e-45f}); },
                 "v_scale: 1e-45 is too small");
}

TEST(CacheOpRefusals, CopyAndSwapRefuseBadPairsBeforeCopying) {
  const Pools before = pools();
  Pools p = pools();
  auto copy = [&](std::vector<BlockCopy> pairs) { reference::copy_blocks(p.key, p.value, pairs); };
  expect_invalid([&] { copy({{0, 1}, {4, 2}}); }, "pairs[1].src: block id 4");
  expect_invalid([&] { copy({{0, 1}, {2, -1}}); }, "pairs[1].dst: block id -1");
  expect_invalid([&] { copy({{0, 1}, {2, 1}}); }, "pairs[1].dst: block 1 is already the destination of pairs[0]");
  expect_invalid([&] { copy({{0, 1}, {1, 2}}); }, "pairs[1].src: block 1 is also the destination of pairs[0]");
  EXPECT_TRUE(same_bytes(p.key, before.key) && same_bytes(p.value, before.value)) << "a refused call wrote the cache";
  copy({{3, 3}});  // src == dst: a no-op
  EXPECT_TRUE(same_bytes(p.key, before.key));

  Pools host = pools();
  HostTensor other_key(DType::f16, Shape{4, 1, 2, 8, 8}), other_value(DType::f16, Shape{4, 1, 16, 8});
  const std::vector<BlockCopy> one{{0, 0}};
  expect_invalid([&] { reference::swap_blocks(p.key, p.value, other_key, other_value, one); }, "has blocks unlike src's");
  expect_invalid([&] { reference::swap_blocks(p.key, p.value, host.key, host.value, std::vector<BlockCopy>{{0, 9}}); },
                 "pairs[0].dst: block id 9");
}

TEST(CacheOpRefusals, GatherRefusesHostKnownBadIndices) {
  const Pools p = pools();
  HostTensor tables(DType::i32, Shape{1, 2}), starts(DType::i32, Shape{2});
  starts.as<int32_t>()[1] = 9;  // M * B = 8
  expect_invalid([&] { reference::gather(p.key, p.value, tables, starts, DType::f16); }, "seq_starts[1]");
  starts.as<int32_t>()[1] = 8;
  tables.as<int32_t>()[1] = 4;  // N = 4
  expect_invalid([&] { reference::gather(p.key, p.value, tables, starts, DType::f16); }, "block_tables[0][1]: block id 4");
  tables.as<int32_t>()[1] = 1;
  HostTensor i64_starts(DType::i64, Shape{2});
  expect_invalid([&] { reference::gather(p.key, p.value, tables, i64_starts, DType::f16); }, "seq_starts: dtype i64");
  expect_invalid([&] { reference::gather(p.key, p.value, tables, starts, DType::u8); }, "key_out: dtype u8");
  EXPECT_EQ(reference::gather(p.key, p.value, tables, starts, DType::f32).key.shape(), (Shape{8, 1, 16}));
}

TEST(CacheOpRefusals, ShapesAreRefusedNotMisread) {
  EXPECT_THROW(Shape({1, 2, 3, 4, 5, 6}), Error);
  EXPECT_THROW(Shape({2, -1}), Error);
  Pools p = pools();
  HostTensor empty_heads(DType::f16, Shape{4, 0, 2, 4, 8}), empty_value(DType::f16, Shape{4, 0, 16, 4});
  expect_invalid([&] { reference::copy_blocks(empty_heads, empty_value, std::vector<BlockCopy>{}); }, "Hkv");
  HostTensor no_blocks_k(DType::f16, Shape{4, 1, 2, 0, 8}), no_blocks_v(DType::f16, Shape{4, 1, 16, 0});
  expect_invalid([&] { reference::copy_blocks(no_blocks_k, no_blocks_v, std::vector<BlockCopy>{}); }, "block size B");
  expect_invalid([&] { reference::absmax(HostTensor(DType::i32, Shape{4})); }, "x: dtype i32");
}

}  // namespace
}  // namespace vkpaged::test
