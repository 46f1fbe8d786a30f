// SPDX-License-Identifier: Apache-2.0
// What the strided views refuse (docs/api.md, "Strided views"), each naming the view, the value
// and the requirement, before anything is recorded: a stride that does not keep rows on 4 bytes,
// D not contiguous, a negative stride, a head stride past what the shaders hold, an extent past
// the buffer, rows of a written view that overlap (a stride smaller than the row), views one
// call writes whose rows meet, strides on a view that takes none. And what they take: read-only
// rows that overlap, and written rows interleaved so that they never meet (the check is exact).
#include <gtest/gtest.h>

#include <cstring>
#include <functional>
#include <optional>
#include <random>
#include <string>
#include <vector>

#include "ops/cache_test_helpers.hpp"
#include "ops/row_overlap.hpp"
#include "support/decode_case.hpp"
#include "support/strided_views.hpp"
#include "vkpaged/cache_ops.hpp"
#include "vkpaged/decode.hpp"
#include "vkpaged/merge.hpp"
#include "vkpaged/reference.hpp"
#include "vkpaged/rotary.hpp"
#include "vkpaged/utilities.hpp"

namespace vkpaged::test {
namespace {

using namespace cache_helpers;

// A decode of S = 3 sequences, H = 4 heads of D = 32, f16, with every view in place.
class StridedDecodeRefusalTest : public GpuTest {
 protected:
  static constexpr int64_t S = 3, H = 4, Hkv = 2, D = 32;

  void SetUp() override {
    GpuTest::SetUp();
    c_.heads = H;
    c_.kv_heads = Hkv;
    c_.head_size = D;
    c_.lens = {5, 20, 9};
    std::mt19937 rng(1);
    in_ = make_decode_inputs(c_, rng);
    plan_.emplace(DecodePlan::create(ctx(), decode_shape_of(in_)));
    key_cache_ = upload(ctx(), in_.key_cache);
    value_cache_ = upload(ctx(), in_.value_cache);
    tables_ = upload(ctx(), in_.block_tables);
    lens_ = upload(ctx(), in_.context_lens);
    image_ = ctx().create_buffer(64 * 1024);
    views_.key_cache = key_cache_.view;
    views_.value_cache = value_cache_.view;
    views_.block_tables = tables_.view;
    views_.context_lens = lens_.view;
    views_.query = image_.tensor(DType::f16, Shape{S, H, D}, 0);
    views_.output = image_.tensor(DType::f16, Shape{S, H, D}, 16 * 1024);
  }

  // A view of the image buffer with strides, sized to its extent.
  TensorView strided(size_t offset, Strides strides, DType dtype = DType::f16, Shape shape = Shape{S, H, D}) const {
    return image_.strided_tensor(dtype, shape, strides, offset);
  }

  void record(const DecodeViews& v) {
    ctx().run_and_wait([&](VkCommandBuffer cmd) { record_decode(ctx(), cmd, *plan_, v); });
  }
  // The message of record_decode's refusal of the views edited by `edit`.
  std::string refusal(const std::function<void(DecodeViews&)>& edit) {
    DecodeViews v = views_;
    edit(v);
    std::string message;
    ctx().run_and_wait([&](VkCommandBuffer cmd) { message = error_of([&] { record_decode(ctx(), cmd, *plan_, v); }); });
    return message;
  }

  DecodeCase c_;
  DecodeInputs in_;
  std::optional<DecodePlan> plan_;
  DeviceTensor key_cache_, value_cache_, tables_, lens_;
  DeviceBuffer image_;
  DecodeViews views_;
};

TEST_F(StridedDecodeRefusalTest, StridesThatLeaveRowsOffWords) {
  EXPECT_EQ(refusal([&](DecodeViews& v) { v.query = strided(0, {H * D + 1}); }),
            "query: token stride 129 elements (258 bytes) does not keep rows 4-byte aligned (the kernels read and "
            "write whole 32-bit words)");
  EXPECT_EQ(refusal([&](DecodeViews& v) { v.output = strided(16 * 1024, {0, 33}); }),
            "output: head stride 33 elements (66 bytes) does not keep rows 4-byte aligned (the kernels read and write "
            "whole 32-bit words)");
  // A view's start: 4-byte aligned, as before.
  EXPECT_EQ(refusal([&](DecodeViews& v) { v.query = strided(2, {H * D + 2}); }),
            "query: offset 2 is not a multiple of 4 bytes");
}

TEST_F(StridedDecodeRefusalTest, StridesTheKernelsCannotTake) {
  EXPECT_EQ(refusal([&](DecodeViews& v) {
              v.query = strided(0, {});
              v.query.strides = {0, 0, 2};
            }),
            "query: element stride 2 is not 1: the D = 32 elements of a row must be contiguous");
  EXPECT_EQ(refusal([&](DecodeViews& v) {
              v.query = strided(0, {});
              v.query.strides = {-128};
            }),
            "query: token stride -128 is negative");
  EXPECT_EQ(refusal([&](DecodeViews& v) {
              v.output = strided(0, {});
              v.output.strides = {0, int64_t(1) << 27};
            }),
            "output: head stride 134217728 elements (268435456 bytes) is past the 268435456 bytes the shaders' head "
            "strides hold");
}

TEST_F(StridedDecodeRefusalTest, ExtentsPastTheBuffer) {
  // The last row of a fused projection's query ends 1280 bytes in: a view one element short.
  TensorView q = strided(0, {(H + 2 * Hkv) * D});
  EXPECT_EQ(q.memory.size, size_t(((S - 1) * (H + 2 * Hkv) + H) * D * 2));
  EXPECT_EQ(refusal([&](DecodeViews& v) {
              v.query = q;
              v.query.memory.size -= 2;
            }),
            "query: buffer view of 1278 bytes is too small: its last row (token 2, head 3) ends at byte 1280 (token "
            "stride 256, head stride 32 elements)");
  // DeviceBuffer::strided_tensor refuses an extent past the buffer, and negative strides.
  EXPECT_NE(error_of([&] { (void)image_.strided_tensor(DType::f16, Shape{S, H, D}, {30000}, 0); })
                .find("strided_tensor: f16 [3, 4, 32] with strides [30000, 0, 0] (120256 bytes from its first element "
                      "to its last) at offset 0 lies outside the buffer's 65536 bytes"),
            std::string::npos);
  EXPECT_EQ(error_of([&] { (void)image_.strided_tensor(DType::f16, Shape{S, H, D}, {0, -1}, 0); }),
            "strided_tensor: strides[1] is negative (-1)");
}

TEST_F(StridedDecodeRefusalTest, OutputRowsThatOverlap) {
  // A head stride smaller than the row, and a token stride that lands a token on its predecessor's heads.
  EXPECT_EQ(refusal([&](DecodeViews& v) { v.output = strided(16 * 1024, {0, 16}); }),
            "output: rows (token 0, head 0) and (token 0, head 1) overlap (token stride 128, head stride 16 "
            "elements, rows of D = 32): the operator writes them");
  EXPECT_EQ(refusal([&](DecodeViews& v) { v.output = strided(16 * 1024, {2 * D}); }),
            "output: rows (token 0, head 2) and (token 1, head 0) overlap (token stride 64, head stride 32 "
            "elements, rows of D = 32): the operator writes them");
  // The same strides on the query, which is only read, are taken.
  EXPECT_NO_THROW(record([&] {
    DecodeViews v = views_;
    v.query = strided(0, {0, 16});
    return v;
  }()));
}

// Rows interleaved (token stride 2 D, head stride 5 D over 3 tokens and 4 heads: 0, 2D, 4D, 5D,
// 7D, ...) never meet, though no ordering of the strides nests them: the output is the
// contiguous run's, bit for bit.
TEST_F(StridedDecodeRefusalTest, InterleavedRowsThatNeverMeetAreTaken) {
  ASSERT_FALSE(detail::overlapping_rows(S, H, D, 2 * D, 5 * D).has_value());
  const DeviceTensor query = upload(ctx(), in_.query);
  DecodeViews contiguous = views_, interleaved = views_;
  contiguous.query = interleaved.query = query.view;
  contiguous.output = image_.tensor(DType::f16, Shape{S, H, D}, 0);
  interleaved.output = strided(32 * 1024, {2 * D, 5 * D});
  record(contiguous);
  record(interleaved);
  HostTensor want(DType::f16, Shape{S, H, D});
  ctx().download(contiguous.output.memory, want.data(), want.bytes());
  std::vector<uint8_t> image(interleaved.output.memory.size);
  ctx().download(interleaved.output.memory, image.data(), image.size());
  for (int64_t t = 0; t < S; ++t)
    for (int64_t h = 0; h < H; ++h)
      EXPECT_EQ(std::memcmp(image.data() + (t * 2 * D + h * 5 * D) * 2, static_cast<const uint8_t*>(want.data()) +
                                                                             (t * H + h) * D * 2,
                            size_t(D) * 2),
                0)
          << "row (" << t << ", " << h << ")";
}

TEST_F(StridedDecodeRefusalTest, ViewsThatTakeNoStrides) {
  EXPECT_EQ(refusal([&](DecodeViews& v) { v.block_tables.strides = {in_.block_tables.shape()[1] + 1}; }),
            "block_tables: strides [" + std::to_string(in_.block_tables.shape()[1] + 1) +
                ", 0] are not a contiguous " + in_.block_tables.shape().str() +
                " view's; only the queries, new keys and values, and outputs take strides (docs/api.md, \"Strided "
                "views\")");
  // Strides equal to the row-major ones, or on dimensions of one element, are a contiguous view's.
  EXPECT_NO_THROW(record([&] {
    DecodeViews v = views_;
    v.context_lens.strides = {1};
    v.block_tables.strides = {in_.block_tables.shape()[1], 1};
    return v;
  }()));
}

class StridedWriteRefusalTest : public GpuTest {};

// Views one call writes (or writes and reads) whose rows meet in one buffer, each naming both.
TEST_F(StridedWriteRefusalTest, WrittenViewsWhoseRowsMeet) {
  constexpr int64_t T = 4, H = 4, Hkv = 2, D = 16;
  const DeviceBuffer image = ctx().create_buffer(16 * 1024);
  const FusedProjection f = fused_projection(T, H, Hkv, D, DType::f16, 0);
  auto view = [&](const Slice& s, int64_t heads) {
    return image.strided_tensor(DType::f16, Shape{T, heads, D}, {s.token_stride, s.head_stride}, s.offset);
  };
  const DeviceTensor positions = upload(ctx(), HostTensor(DType::i32, Shape{T}));
  const DeviceTensor cos_sin = upload(ctx(), rotary_cos_sin_cache(8, uint32_t(D)));
  auto record_rotary = [&](const TensorView& q, const TensorView& k) {
    ctx().run_and_wait([&](VkCommandBuffer cmd) {
      record_rotary_embedding(ctx(), cmd, {q, k, positions.view, cos_sin.view, {}, RotaryStyle::neox});
    });
  };
  auto rotary = [&](const TensorView& q, const TensorView& k) { return error_of([&] { record_rotary(q, k); }); };
  // k's rows moved one head to the left: its first head is q's last.
  Slice k = f.k;
  k.offset -= size_t(D) * 2;
  EXPECT_EQ(rotary(view(f.q, H), view(k, Hkv)),
            "key: row (token 0, head 0) overlaps query's row (token 0, head 3) in one buffer (both are rotated in "
            "place)");
  // A token stride other than q's over the same bytes, checked row by row: 8 elements fewer
  // brings token 1's keys into token 1's last query head; 4 more never meets the queries.
  k = f.k;
  k.token_stride -= 8;
  EXPECT_EQ(rotary(view(f.q, H), view(k, Hkv)),
            "key: row (token 1, head 0) overlaps query's row (token 1, head 3) in one buffer (both are rotated in "
            "place)");
  k.token_stride += 12;
  EXPECT_NO_THROW(record_rotary(view(f.q, H), view(k, Hkv)));

  // gather's two outputs, and merge's output over output_a other than as output_a's view itself.
  const HostTensor caches = random_tensor(DType::f16, key_cache_shape(DType::f16, 2, Hkv, D, 4), 1);
  const DeviceTensor key_cache = upload(ctx(), caches), value_cache = upload(ctx(), caches);
  const DeviceTensor tables = upload(ctx(), HostTensor(DType::i32, Shape{1, 1}));
  HostTensor starts(DType::i32, Shape{2});
  starts.as<int32_t>()[1] = int32_t(T);
  const DeviceTensor d_starts = upload(ctx(), starts);
  HostTensor value_cache_host(DType::f16, value_cache_shape(2, Hkv, D, 4));
  const DeviceTensor d_value_cache = upload(ctx(), value_cache_host);
  Slice second = f.k;
  second.offset += size_t(D) * 2;  // one head into key_out's
  EXPECT_EQ(error_of([&] {
              ctx().run_and_wait([&](VkCommandBuffer cmd) {
                record_gather(ctx(), cmd,
                              {key_cache.view, d_value_cache.view, tables.view, d_starts.view, view(f.k, Hkv),
                               view(second, Hkv), {}, KvLayout::vllm});
              });
            }),
            "value_out: row (token 0, head 0) overlaps key_out's row (token 0, head 1) in one buffer (both are "
            "written)");

  const DeviceTensor lse = upload(ctx(), HostTensor(DType::f32, Shape{T, H}));
  Slice shifted = f.q;
  shifted.offset += size_t(D) * 2;
  EXPECT_EQ(error_of([&] {
              ctx().run_and_wait([&](VkCommandBuffer cmd) {
                record_merge_attention(ctx(), cmd, {view(f.q, H), lse.view, image.tensor(DType::f16, Shape{T, H, D}, 8192),
                                                    lse.view, view(shifted, H), {}});
              });
            }),
            "output: row (token 0, head 0) overlaps output_a's row (token 0, head 1) in one buffer (output is written; "
            "it may be output_a's view itself)");
}

// reshape_and_cache_rotary: the keys are rotated in place, so the values may not share their rows.
TEST_F(StridedWriteRefusalTest, FusedRotaryValuesOverTheKeys) {
  constexpr int64_t T = 4, H = 2, Hkv = 2, D = 16, N = 2, B = 4;
  const DeviceBuffer image = ctx().create_buffer(16 * 1024);
  const FusedProjection f = fused_projection(T, H, Hkv, D, DType::f16, 0);
  auto view = [&](const Slice& s, int64_t heads) {
    return image.strided_tensor(DType::f16, Shape{T, heads, D}, {s.token_stride, s.head_stride}, s.offset);
  };
  const DeviceTensor slots = upload(ctx(), HostTensor(DType::i64, Shape{T}));
  const DeviceTensor key_cache = upload(ctx(), HostTensor(DType::f16, key_cache_shape(DType::f16, N, Hkv, D, B)));
  const DeviceTensor value_cache = upload(ctx(), HostTensor(DType::f16, value_cache_shape(N, Hkv, D, B)));
  const DeviceTensor positions = upload(ctx(), HostTensor(DType::i32, Shape{T}));
  const DeviceTensor cos_sin = upload(ctx(), rotary_cos_sin_cache(8, uint32_t(D)));
  Slice value = f.v;
  value.offset -= size_t(D) * 2;  // onto the keys' last head
  auto record = [&](const Slice& v) {
    return error_of([&] {
      ctx().run_and_wait([&](VkCommandBuffer cmd) {
        record_reshape_and_cache_rotary(
            ctx(), cmd, {view(f.k, Hkv), view(v, Hkv), slots.view, key_cache.view, value_cache.view, {}, KvLayout::vllm},
            {view(f.q, H), positions.view, cos_sin.view, RotaryStyle::neox});
      });
    });
  };
  EXPECT_EQ(record(value), "value: row (token 0, head 0) overlaps key's row (token 0, head 1) in one buffer (the keys "
                           "are rotated in place)");
  // reshape_and_cache alone only reads them: the same views are taken.
  EXPECT_NO_THROW(ctx().run_and_wait([&](VkCommandBuffer cmd) {
    record_reshape_and_cache(ctx(), cmd,
                             {view(f.k, Hkv), view(value, Hkv), slots.view, key_cache.view, value_cache.view, {},
                              KvLayout::vllm});
  }));
}

// The views no operator takes strides on, beside decode's (above): the caches, page tables,
// slots, positions and cos/sin tables of the cache operations and rotary, the pools of the block
// copies, and the tensors streamed whole (absmax, fill_random). Each refusal names the view and
// its strides before anything is recorded; the same views with their row-major strides spelled
// out are taken.
TEST_F(StridedWriteRefusalTest, ViewsThatTakeNoStridesInEveryOperator) {
  constexpr int64_t T = 4, H = 2, Hkv = 2, D = 16, N = 2, B = 4;
  const DeviceBuffer image = ctx().create_buffer(16 * 1024);
  const FusedProjection f = fused_projection(T, H, Hkv, D, DType::f16, 0);
  auto view = [&](const Slice& s, int64_t heads) {
    return image.strided_tensor(DType::f16, Shape{T, heads, D}, {s.token_stride, s.head_stride}, s.offset);
  };
  const Shape key_shape = key_cache_shape(DType::f16, N, Hkv, D, B), value_shape = value_cache_shape(N, Hkv, D, B);
  const DeviceTensor key_cache = upload(ctx(), HostTensor(DType::f16, key_shape));
  const DeviceTensor value_cache = upload(ctx(), HostTensor(DType::f16, value_shape));
  HostTensor slot_values(DType::i64, Shape{T});
  for (int64_t t = 0; t < T; ++t) slot_values.as<int64_t>()[t] = t;
  const DeviceTensor slots = upload(ctx(), slot_values);
  const DeviceTensor positions = upload(ctx(), HostTensor(DType::i32, Shape{T}));
  const DeviceTensor cos_sin = upload(ctx(), rotary_cos_sin_cache(8, uint32_t(D)));
  const DeviceTensor tables = upload(ctx(), HostTensor(DType::i32, Shape{2, 1}));
  HostTensor starts(DType::i32, Shape{3});
  starts.as<int32_t>()[1] = 2;
  starts.as<int32_t>()[2] = int32_t(T);
  const DeviceTensor d_starts = upload(ctx(), starts);
  const DeviceBuffer amax = ctx().create_buffer(16);

  auto refusal = [&](const std::function<void(VkCommandBuffer)>& record) {
    std::string message;
    ctx().run_and_wait([&](VkCommandBuffer cmd) { message = error_of([&] { record(cmd); }); });
    return message;
  };
  auto not_contiguous = [](const std::string& name, const std::string& strides, const Shape& shape) {
    return name + ": strides [" + strides + "] are not a contiguous " + shape.str() +
           " view's; only the queries, new keys and values, and outputs take strides (docs/api.md, \"Strided views\")";
  };
  // A view with its dimension 0 `stride` elements apart (the row-major stride is smaller).
  auto with_stride0 = [](TensorView t, int64_t stride) {
    t.strides[0] = stride;
    return t;
  };

  // reshape_and_cache (and its rotary form, which checks the same views): the slots and the caches.
  const ReshapeAndCacheViews write{view(f.k, Hkv), view(f.v, Hkv), slots.view, key_cache.view, value_cache.view, {},
                                   KvLayout::vllm};
  auto reshape = [&](const ReshapeAndCacheViews& v) {
    return refusal([&](VkCommandBuffer cmd) { record_reshape_and_cache(ctx(), cmd, v); });
  };
  ReshapeAndCacheViews bad = write;
  bad.slot_mapping = with_stride0(slots.view, 2);
  EXPECT_EQ(reshape(bad), not_contiguous("slot_mapping", "2", Shape{T}));
  bad = write;
  bad.key_cache = with_stride0(key_cache.view, 2 * key_shape.numel() / N);
  EXPECT_EQ(reshape(bad), not_contiguous("key_cache", std::to_string(2 * key_shape.numel() / N) + ", 0, 0, 0, 0", key_shape));
  bad = write;
  bad.value_cache.strides = {0, 0, 0, 2};  // B elements 2 apart
  EXPECT_EQ(reshape(bad), not_contiguous("value_cache", "0, 0, 0, 2", value_shape));

  // Rotary, alone and fused: the positions and the cos/sin table.
  RotaryViews rotary{view(f.q, H), view(f.k, Hkv), positions.view, cos_sin.view, {}, RotaryStyle::neox};
  rotary.positions = with_stride0(positions.view, 2);
  EXPECT_EQ(refusal([&](VkCommandBuffer cmd) { record_rotary_embedding(ctx(), cmd, rotary); }),
            not_contiguous("positions", "2", Shape{T}));
  rotary.positions = positions.view;
  rotary.cos_sin_cache.strides = {2 * D};
  EXPECT_EQ(refusal([&](VkCommandBuffer cmd) { record_rotary_embedding(ctx(), cmd, rotary); }),
            not_contiguous("cos_sin_cache", std::to_string(2 * D) + ", 0", cos_sin.view.shape));
  RotaryInputs fused{view(f.q, H), with_stride0(positions.view, 3), cos_sin.view, RotaryStyle::neox};
  EXPECT_EQ(refusal([&](VkCommandBuffer cmd) { record_reshape_and_cache_rotary(ctx(), cmd, write, fused); }),
            not_contiguous("positions", "3", Shape{T}));

  // gather: the caches and the page tables (its outputs take strides).
  const GatherViews gather{key_cache.view, value_cache.view, tables.view, d_starts.view, view(f.k, Hkv), view(f.v, Hkv),
                           {}, KvLayout::vllm};
  GatherViews bad_gather = gather;
  bad_gather.block_tables.strides = {2};
  EXPECT_EQ(refusal([&](VkCommandBuffer cmd) { record_gather(ctx(), cmd, bad_gather); }),
            not_contiguous("block_tables", "2, 0", Shape{2, 1}));
  bad_gather = gather;
  bad_gather.seq_starts = with_stride0(d_starts.view, 2);
  EXPECT_EQ(refusal([&](VkCommandBuffer cmd) { record_gather(ctx(), cmd, bad_gather); }),
            not_contiguous("seq_starts", "2", Shape{3}));
  bad_gather = gather;
  bad_gather.value_cache.strides = {0, 2 * D * B};  // Hkv = 2 heads 2 heads apart
  EXPECT_EQ(refusal([&](VkCommandBuffer cmd) { record_gather(ctx(), cmd, bad_gather); }),
            not_contiguous("value_cache", "0, " + std::to_string(2 * D * B) + ", 0, 0", value_shape));

  // copy_blocks and swap_blocks move whole blocks of pools laid out as their shapes say.
  const LayerCacheViews layer{with_stride0(key_cache.view, 2 * key_shape.numel() / N), value_cache.view, KvLayout::vllm};
  const BlockCopy pair{0, 1};
  EXPECT_EQ(refusal([&](VkCommandBuffer cmd) {
              record_copy_blocks(ctx(), cmd, Span<const LayerCacheViews>(&layer, 1), Span<const BlockCopy>(&pair, 1));
            }),
            not_contiguous("layers[0].key_cache", std::to_string(2 * key_shape.numel() / N) + ", 0, 0, 0, 0", key_shape));

  // Streamed whole: absmax and fill_random.
  const TensorView rows = with_stride0(image.tensor(DType::f16, Shape{T, D}), 2 * D);
  EXPECT_EQ(refusal([&](VkCommandBuffer cmd) { record_absmax(ctx(), cmd, rows, amax.view(0, 4)); }),
            not_contiguous("x", std::to_string(2 * D) + ", 0", Shape{T, D}));
  EXPECT_EQ(refusal([&](VkCommandBuffer cmd) { record_fill_random(ctx(), cmd, rows, 1); }),
            not_contiguous("fill_random", std::to_string(2 * D) + ", 0", Shape{T, D}));

  // Their row-major strides spelled out are a contiguous view's: taken.
  ReshapeAndCacheViews spelled = write;
  spelled.slot_mapping.strides = {1};
  spelled.key_cache.strides = {key_shape.numel() / N, key_shape[2] * key_shape[3] * key_shape[4]};
  EXPECT_NO_THROW(ctx().run_and_wait([&](VkCommandBuffer cmd) { record_reshape_and_cache(ctx(), cmd, spelled); }));
  GatherViews spelled_gather = gather;
  spelled_gather.block_tables.strides = {1, 1};  // [2, 1]: the row-major strides
  EXPECT_NO_THROW(ctx().run_and_wait([&](VkCommandBuffer cmd) { record_gather(ctx(), cmd, spelled_gather); }));
}

// The exact overlap check on its own: distinct rows, interleavings, strides of zero extent.
TEST(StridedRowsGeometry, OverlapIsFoundExactly) {
  EXPECT_FALSE(detail::overlapping_rows(3, 4, 32, 128, 32).has_value());  // contiguous
  EXPECT_FALSE(detail::overlapping_rows(3, 4, 32, 32, 96).has_value());   // head-major [H, T, D]
  EXPECT_FALSE(detail::overlapping_rows(3, 2, 8, 16, 24).has_value());    // 0, 16, 32 and 24, 40, 56
  const auto tight = detail::overlapping_rows(3, 2, 8, 16, 20);           // 20 - 16 < 8
  ASSERT_TRUE(tight.has_value());
  EXPECT_EQ(tight->t1 * 16 + tight->h1 * 20 - tight->t0 * 16 - tight->h0 * 20, 4);
  EXPECT_FALSE(detail::overlapping_rows(1, 1, 8, 0, 0).has_value());  // one row
  EXPECT_TRUE(detail::overlapping_rows(5, 1, 8, 7, 0).has_value());   // tokens 7 apart, rows of 8
  EXPECT_FALSE(detail::overlapping_rows(5, 1, 8, 8, 0).has_value());
}

}  // namespace
}  // namespace vkpaged::test
