// SPDX-License-Identifier: Apache-2.0
// FlashInfer's CSR page tables on the device (shaders/csr_page_table.comp): through one plan the
// CSR form gives the dense form's outputs bit for bit, in decode and multi-query attention, on
// every cache layout, one pass and split, with ragged edges (requests without pages, of one
// page, last pages of 1, B - 1 and B tokens, shuffled block ids, S = 1 and S > 1), and within
// the contract's tolerance of the CPU reference; the host conveniences take the form; values
// in device memory that break the contract are flagged and clamped (never a read or write
// outside a buffer: the validation layer watches); views that do not fit are refused.
#include <gtest/gtest.h>

#include <algorithm>
#include <climits>
#include <cstring>
#include <functional>
#include <random>
#include <vector>

#include "support/attention_case.hpp"
#include "support/csr_tables.hpp"
#include "support/decode_case.hpp"
#include "support/expect_error.hpp"
#include "support/test_context.hpp"
#include "vkpaged/reference.hpp"

namespace vkpaged::test {
namespace {

constexpr uint32_t kB = 8;

bool bytes_equal(const HostTensor& a, const HostTensor& b) {
  return a.shape() == b.shape() && a.dtype() == b.dtype() && a.bytes() == b.bytes() &&
         std::equal(static_cast<const char*>(a.data()), static_cast<const char*>(a.data()) + a.bytes(),
                    static_cast<const char*>(b.data()));
}

// Device buffers for one test, kept until it ends.
class Buffers {
 public:
  explicit Buffers(Context& ctx) : ctx_(ctx) {}
  TensorView upload(const HostTensor& t, DType dtype) {
    keep_.push_back(ctx_.create_buffer(std::max<size_t>((t.bytes() + 15) / 16 * 16, 16)));
    if (t.bytes() > 0) ctx_.upload(keep_.back().view(), t.data(), t.bytes());
    return keep_.back().tensor(dtype, t.shape());
  }
  TensorView upload(const HostTensor& t) { return upload(t, t.dtype()); }
  TensorView output(DType dtype, const Shape& shape) {
    keep_.push_back(ctx_.create_buffer(std::max<size_t>(size_t(shape.numel()) * dtype_size(dtype), 16)));
    return keep_.back().tensor(dtype, shape);
  }
  BufferView buffer(size_t bytes) {
    keep_.push_back(ctx_.create_buffer(std::max<size_t>(bytes, 16)));
    return keep_.back().view(0, bytes);
  }
  HostTensor download(const TensorView& v) {
    HostTensor t(v.dtype, v.shape);
    ctx_.download(v.memory, t.data(), t.bytes());
    return t;
  }
  uint32_t status(const BufferView& v) {
    uint32_t s = 0;
    ctx_.download(v, &s, 4);
    return s;
  }
  void zero(const BufferView& v) {
    const uint32_t zero = 0;
    ctx_.upload(v, &zero, 4);
  }

 private:
  Context& ctx_;
  std::vector<DeviceBuffer> keep_;
};

// One call's page tables on the device, in either form.
template <typename Views>
void set_tables(Buffers& b, Views& v, const HostTensor& block_tables, const HostTensor& context_lens) {
  v.block_tables = b.upload(block_tables);
  v.context_lens = b.upload(context_lens);
}
template <typename Views>
void set_tables(Buffers& b, Views& v, const CsrTables& t) {
  v.kv_indptr = b.upload(t.kv_indptr);
  v.kv_indices = b.upload(t.kv_indices);
  v.kv_last_page_len = b.upload(t.kv_last_page_len);
}

struct Outputs {
  HostTensor output;
  HostTensor lse;
  uint32_t status = 0;
};

// A decode case with the lengths given, in `layout`, f16.
DecodeInputs decode_inputs(std::vector<uint32_t> lens, KvLayout layout, uint32_t seed) {
  DecodeCase c;
  c.block_size = kB;
  c.lens = std::move(lens);
  std::mt19937 rng(seed);
  return with_layout(make_decode_inputs(c, rng), layout);
}

// Decode views of `in` but for the page tables, which the caller sets.
DecodeViews decode_views(Buffers& b, const DecodePlan& plan, const DecodeInputs& in) {
  const DType cache = is_fp8_dtype(in.cache_dtype) ? DType::u8 : in.cache_dtype;
  DecodeViews v;
  v.query = b.upload(in.query);
  v.key_cache = b.upload(in.key_cache, cache);
  v.value_cache = b.upload(in.value_cache, cache);
  v.output = b.output(in.query.dtype(), in.query.shape());
  v.lse = b.output(DType::f32, Shape{in.query.shape()[0], in.query.shape()[1]});
  if (plan.scratch_bytes() > 0) v.scratch = b.buffer(plan.scratch_bytes());
  v.status = b.buffer(4);
  return v;
}

class CsrPageTableTest : public GpuTest {
 protected:
  Outputs run_decode(Buffers& b, const DecodePlan& plan, const DecodeViews& v) {
    b.zero(v.status);
    ctx().run_and_wait([&](VkCommandBuffer cmd) { record_decode(ctx(), cmd, plan, v); });
    return {b.download(v.output), b.download(v.lse), b.status(v.status)};
  }
  Outputs run_attention(Buffers& b, const AttentionPlan& plan, const AttentionViews& v) {
    b.zero(v.status);
    ctx().run_and_wait([&](VkCommandBuffer cmd) { record_attention(ctx(), cmd, plan, v); });
    return {b.download(v.output), b.download(v.lse), b.status(v.status)};
  }
};

TEST_F(CsrPageTableTest, DecodeEqualsTheDenseFormBitForBitThroughOnePlan) {
  // Requests without pages, one page (last pages of 1, B - 1, B), several, a long one that splits;
  // S = 1; and a batch without any page (kv_indices empty).
  const std::vector<std::vector<uint32_t>> batches = {{0, 1, 7, 8, 9, 0, 300}, {17}, {0, 0}};
  for (KvLayout layout : {KvLayout::vllm, KvLayout::nhd, KvLayout::hnd})
    for (size_t i = 0; i < batches.size(); ++i)
      for (SplitMode split : {SplitMode::single_pass, SplitMode::split}) {
        const DecodeInputs dense = decode_inputs(batches[i], layout, uint32_t(20 + i));
        const DecodeInputs csr = with_csr(dense, kB);
        DecodeShape shape = decode_shape_of(dense, true);
        shape.csr_page_table = true;
        DecodeOptions o;
        o.split = split;
        o.sliding_window = i == 0 ? 200 : 0;
        if (split == SplitMode::split) o.partition_tokens = 256;
        const DecodePlan plan = DecodePlan::create(ctx(), shape, o);
        const std::string label = std::string(kv_layout_name(layout)) + " batch " + std::to_string(i) + " " +
                                  plan.describe();
        EXPECT_GT(plan.scratch_bytes(), 0u) << label;
        if (split == SplitMode::split && i == 0) EXPECT_GT(plan.num_partitions(), 1u) << label;

        Buffers b(ctx());
        DecodeViews v = decode_views(b, plan, dense);
        set_tables(b, v, dense.block_tables, dense.context_lens);
        const Outputs want = run_decode(b, plan, v);
        DecodeViews w = v;
        w.block_tables = w.context_lens = TensorView{};
        set_tables(b, w, to_csr(dense.block_tables, dense.context_lens, kB));
        w.output = b.output(dense.query.dtype(), dense.query.shape());
        w.lse = b.output(DType::f32, v.lse.shape);
        const Outputs got = run_decode(b, plan, w);

        EXPECT_EQ(want.status, 0u) << label;
        EXPECT_EQ(got.status, 0u) << label;
        EXPECT_TRUE(bytes_equal(got.output, want.output)) << label;
        EXPECT_TRUE(bytes_equal(got.lse, want.lse)) << label;
        const DecodeResult ref = reference::decode_attention(csr, o, {}, true);
        EXPECT_LE(max_abs_diff(got.output, ref.output), tolerance(DType::f16, DType::f16)) << label;
      }
}

TEST_F(CsrPageTableTest, AttentionEqualsTheDenseFormBitForBitThroughOnePlan) {
  struct Batch {
    std::vector<uint32_t> lens, new_tokens;
    AttentionKernel kernel;
  };
  // Chunks, a draft and decode rows on the attention kernel; single tokens (S = 1 and S > 1,
  // one with a long context) on the decode kernels.
  const std::vector<Batch> batches = {{{1, 7, 8, 9, 300}, {1, 3, 8, 2, 5}, AttentionKernel::scalar},
                                      {{20}, {6}, AttentionKernel::scalar},
                                      {{1, 7, 8, 300}, {1, 1, 1, 1}, AttentionKernel::decode},
                                      {{9}, {1}, AttentionKernel::decode}};
  for (KvLayout layout : {KvLayout::vllm, KvLayout::nhd, KvLayout::hnd})
    for (size_t i = 0; i < batches.size(); ++i)
      for (SplitMode split : {SplitMode::single_pass, SplitMode::split}) {
        AttentionCase c;
        c.block_size = kB;
        c.layout = layout;
        c.lens = batches[i].lens;
        c.new_tokens = batches[i].new_tokens;
        std::mt19937 rng(uint32_t(30 + i));
        const AttentionInputs dense = make_attention_inputs(c, rng);
        AttentionShape shape = attention_shape_of(dense, {}, true);
        shape.csr_page_table = true;
        AttentionOptions o;
        o.kernel = batches[i].kernel;
        o.split = split;
        if (split == SplitMode::split) o.partition_tokens = 256;
        std::vector<int32_t> starts(dense.query_starts.as<int32_t>(),
                                    dense.query_starts.as<int32_t>() + dense.query_starts.numel());
        const AttentionPlan plan = AttentionPlan::create(ctx(), shape, starts, o);
        ASSERT_EQ(plan.kernel(), batches[i].kernel);
        const std::string label = c.str() + " " + plan.describe();
        if (split == SplitMode::split && (i == 0 || i == 2)) EXPECT_GT(plan.num_partitions(), 1u) << label;

        Buffers b(ctx());
        const DType cache = is_fp8_dtype(dense.cache_dtype) ? DType::u8 : dense.cache_dtype;
        AttentionViews v;
        v.query = b.upload(dense.query);
        v.key_cache = b.upload(dense.key_cache, cache);
        v.value_cache = b.upload(dense.value_cache, cache);
        v.query_starts = b.upload(dense.query_starts);
        v.output = b.output(dense.query.dtype(), dense.query.shape());
        v.lse = b.output(DType::f32, Shape{dense.query.shape()[0], dense.query.shape()[1]});
        v.scratch = b.buffer(plan.scratch_bytes());
        v.status = b.buffer(4);
        AttentionViews w = v;
        set_tables(b, v, dense.block_tables, dense.context_lens);
        const Outputs want = run_attention(b, plan, v);
        set_tables(b, w, to_csr(dense.block_tables, dense.context_lens, kB));
        w.output = b.output(dense.query.dtype(), dense.query.shape());
        w.lse = b.output(DType::f32, v.lse.shape);
        const Outputs got = run_attention(b, plan, w);

        EXPECT_EQ(want.status, 0u) << label;
        EXPECT_EQ(got.status, 0u) << label;
        EXPECT_TRUE(bytes_equal(got.output, want.output)) << label;
        EXPECT_TRUE(bytes_equal(got.lse, want.lse)) << label;
        const AttentionResult ref = reference::batch_attention(with_csr(dense, kB), {}, true);
        expect_attention_near({got.output, got.lse}, ref, tolerance(DType::f16, DType::f16), true, label);
      }
}

TEST_F(CsrPageTableTest, TheHostConveniencesTakeTheCsrForm) {
  const DecodeInputs dense = decode_inputs({0, 1, 7, 8, 300}, KvLayout::hnd, 40);
  const DecodeInputs csr = with_csr(dense, kB);
  for (DecodeOrder order : {DecodeOrder::grid, DecodeOrder::longest_first}) {
    DecodeOptions o;
    o.order = order;
    o.split = SplitMode::split;  // several items per request, for the order to list
    o.partition_tokens = 256;
    const DecodeResult want = decode_attention(ctx(), dense, o, {}, true);
    const DecodeResult got = decode_attention(ctx(), csr, o, {}, true);
    EXPECT_TRUE(bytes_equal(got.output, want.output)) << int(order);
    EXPECT_TRUE(bytes_equal(got.lse, want.lse)) << int(order);
    EXPECT_LE(max_abs_diff(got.output, reference::decode_attention(csr, o).output), tolerance(DType::f16, DType::f16));
  }

  AttentionCase c;
  c.block_size = kB;
  c.layout = KvLayout::nhd;
  c.lens = {1, 16, 40};
  c.new_tokens = {1, 9, 4};
  c.tree_mask = TreeMask::tree;
  std::mt19937 rng(41);
  const AttentionInputs attention = make_attention_inputs(c, rng);
  const AttentionResult want = batch_attention(ctx(), attention, {}, {}, true);
  const AttentionResult got = batch_attention(ctx(), with_csr(attention, kB), {}, {}, true);
  EXPECT_TRUE(bytes_equal(got.output, want.output));
  EXPECT_TRUE(bytes_equal(got.lse, want.lse));
}

// Decode of lengths 0, 9 and 24 (0, 2 and 3 pages): kv_indptr {0, 0, 2, 5},
// kv_last_page_len {0, 1, 8}, through a CSR plan of M = 3.
class CsrDeviceValues : public CsrPageTableTest {
 protected:
  void SetUp() override {
    CsrPageTableTest::SetUp();
    in_ = decode_inputs({0, 9, 24}, KvLayout::vllm, 50);
    tables_ = to_csr(in_.block_tables, in_.context_lens, kB);
  }
  DecodeShape shape(uint32_t max_blocks_per_seq) const {
    DecodeShape s = decode_shape_of(in_, true);
    s.csr_page_table = true;
    s.max_blocks_per_seq = max_blocks_per_seq;
    s.max_context_len = 0;  // M * B
    return s;
  }
  // The status word after a decode of the tables as `change` leaves them.
  uint32_t status_of(const std::function<void(CsrTables&)>& change, uint32_t max_blocks_per_seq = 3) {
    const DecodePlan plan = DecodePlan::create(ctx(), shape(max_blocks_per_seq));
    Buffers b(ctx());
    DecodeViews v = decode_views(b, plan, in_);
    CsrTables t = tables_;
    change(t);
    set_tables(b, v, t);
    return run_decode(b, plan, v).status;
  }
  static int32_t& at(HostTensor& t, int64_t i) { return t.as<int32_t>()[i]; }

  DecodeInputs in_;
  CsrTables tables_;
};

TEST_F(CsrDeviceValues, GoodTablesRaiseNothing) { EXPECT_EQ(status_of([](CsrTables&) {}), 0u); }

TEST_F(CsrDeviceValues, BadIndptrIsFlagged) {
  EXPECT_EQ(status_of([](CsrTables& t) { at(t.kv_indptr, 0) = 1; }), kStatusBadPageTable);
  EXPECT_EQ(status_of([](CsrTables& t) { at(t.kv_indptr, 2) = 1; at(t.kv_indptr, 1) = 2; }), kStatusBadPageTable);
  EXPECT_EQ(status_of([](CsrTables& t) { at(t.kv_indptr, 3) = 100; }), kStatusBadPageTable);
  EXPECT_EQ(status_of([](CsrTables& t) { at(t.kv_indptr, 1) = -3; }), kStatusBadPageTable);
  EXPECT_EQ(status_of([](CsrTables& t) { at(t.kv_indptr, 2) = INT32_MAX; at(t.kv_indptr, 3) = INT32_MIN; }),
            kStatusBadPageTable);
}

TEST_F(CsrDeviceValues, BadLastPageLengthsAreFlagged) {
  EXPECT_EQ(status_of([](CsrTables& t) { at(t.kv_last_page_len, 1) = 0; }), kStatusBadPageTable);
  EXPECT_EQ(status_of([](CsrTables& t) { at(t.kv_last_page_len, 2) = int32_t(kB) + 1; }), kStatusBadPageTable);
  EXPECT_EQ(status_of([](CsrTables& t) { at(t.kv_last_page_len, 0) = 3; }), kStatusBadPageTable);
  EXPECT_EQ(status_of([](CsrTables& t) { at(t.kv_last_page_len, 2) = -1; }), kStatusBadPageTable);
}

TEST_F(CsrDeviceValues, MorePagesThanTheTableHoldsAreFlagged) {
  // Request 2's 3 pages in a table of 2 columns.
  EXPECT_EQ(status_of([](CsrTables&) {}, 2), kStatusBadPageTable);
}

TEST_F(CsrDeviceValues, BlockIdsOutsideTheCacheAreTheKernelsToFlag) {
  const int32_t N = int32_t(in_.key_cache.shape()[0]);
  EXPECT_EQ(status_of([&](CsrTables& t) { at(t.kv_indices, 3) = N; }), kStatusBadBlockId);
  EXPECT_EQ(status_of([](CsrTables& t) { at(t.kv_indices, 0) = -1; }), kStatusBadBlockId);
}

TEST_F(CsrDeviceValues, TheAttentionKernelsFlagThemToo) {
  AttentionCase c;
  c.block_size = kB;
  c.lens = {9, 24};
  c.new_tokens = {2, 3};
  std::mt19937 rng(51);
  const AttentionInputs dense = make_attention_inputs(c, rng);
  AttentionShape shape = attention_shape_of(dense, {}, true);
  shape.csr_page_table = true;
  const std::vector<int32_t> starts{0, 2, 5};
  AttentionOptions o;
  o.kernel = AttentionKernel::scalar;
  const AttentionPlan plan = AttentionPlan::create(ctx(), shape, starts, o);
  Buffers b(ctx());
  AttentionViews v;
  v.query = b.upload(dense.query);
  v.key_cache = b.upload(dense.key_cache);
  v.value_cache = b.upload(dense.value_cache);
  v.query_starts = b.upload(dense.query_starts);
  v.output = b.output(dense.query.dtype(), dense.query.shape());
  v.lse = b.output(DType::f32, Shape{5, int64_t(c.heads)});
  v.scratch = b.buffer(plan.scratch_bytes());
  v.status = b.buffer(4);
  CsrTables t = to_csr(dense.block_tables, dense.context_lens, kB);
  set_tables(b, v, t);
  EXPECT_EQ(run_attention(b, plan, v).status, 0u);
  t.kv_indptr.as<int32_t>()[1] = 7;  // past kv_indices (5 entries)
  set_tables(b, v, t);
  EXPECT_EQ(run_attention(b, plan, v).status & kStatusBadPageTable, kStatusBadPageTable);
}

TEST_F(CsrPageTableTest, RecordRefusesViewsThatDoNotFit) {
  const DecodeInputs in = decode_inputs({1, 9, 24}, KvLayout::vllm, 60);  // a page each, for the attention
  const CsrTables t = to_csr(in.block_tables, in.context_lens, kB);
  DecodeShape shape = decode_shape_of(in);
  const DecodePlan dense_plan = DecodePlan::create(ctx(), shape);
  EXPECT_EQ(dense_plan.scratch_bytes(), 0u);
  shape.csr_page_table = true;
  const DecodePlan plan = DecodePlan::create(ctx(), shape);
  EXPECT_GT(plan.scratch_bytes(), 0u);  // one pass, yet the expansion needs room

  Buffers b(ctx());
  DecodeViews v = decode_views(b, plan, in);
  set_tables(b, v, t);
  auto record = [&](const DecodePlan& p, const DecodeViews& views) {
    ctx().run_and_wait([&](VkCommandBuffer cmd) { record_decode(ctx(), cmd, p, views); });
  };
  expect_refused([&] { record(dense_plan, v); }, "kv_indptr: CSR page tables need a plan made with shape.csr_page_table");
  DecodeViews both = v;
  set_tables(b, both, in.block_tables, in.context_lens);
  expect_refused([&] { record(plan, both); }, "block_tables: given together with kv_indptr");
  DecodeViews partial = v;
  partial.kv_last_page_len = TensorView{};
  expect_refused([&] { record(plan, partial); }, "kv_last_page_len: absent, but kv_indptr is given");
  DecodeViews short_indptr = v;
  short_indptr.kv_indptr.shape = Shape{3};
  expect_refused([&] { record(plan, short_indptr); }, "kv_indptr: shape [3] does not match the plan's [4]");
  DecodeViews flat = v;
  flat.kv_indices.shape = Shape{1, 5};
  expect_refused([&] { record(plan, flat); }, "kv_indices: shape [1, 5] is not [nnz]");
  DecodeViews no_scratch = v;
  no_scratch.scratch = BufferView{};
  expect_refused([&] { record(plan, no_scratch); }, "scratch: no buffer given");
  DecodeViews small = v;
  small.scratch.size = plan.scratch_bytes() - 4;
  expect_refused([&] { record(plan, small); }, "scratch: buffer view of");
  // A CSR plan takes the dense form too (its scratch stays unread).
  DecodeViews dense = v;
  dense.kv_indptr = dense.kv_indices = dense.kv_last_page_len = TensorView{};
  set_tables(b, dense, in.block_tables, in.context_lens);
  EXPECT_NO_THROW(record(plan, dense));

  // The attention's decode plan and its own views refuse alike.
  AttentionShape as = attention_shape_of(single_token_batch(in, 0));
  const std::vector<int32_t> starts{0, 1, 2, 3};
  const AttentionPlan attention_plan = AttentionPlan::create(ctx(), as, starts);
  AttentionViews av;
  av.query = v.query;
  av.key_cache = v.key_cache;
  av.value_cache = v.value_cache;
  av.query_starts = b.upload(single_token_batch(in, 0).query_starts);
  av.output = v.output;
  set_tables(b, av, t);
  expect_refused([&] { ctx().run_and_wait([&](VkCommandBuffer cmd) { record_attention(ctx(), cmd, attention_plan, av); }); },
                 "kv_indptr: CSR page tables need a plan made with shape.csr_page_table");
}

}  // namespace
}  // namespace vkpaged::test
