// SPDX-License-Identifier: Apache-2.0
// FlashInfer's CSR page tables through the C API: the host inputs' kv_indptr, kv_indices,
// kv_last_page_len and max_blocks_per_seq (the convenience and the reference give the dense
// form's bytes), the shapes' csr_page_table, recording decode and attention with CSR views
// (bit for bit the C++ API's), the device status bit, and refusals that name the array.
#include <cstring>
#include <vector>

#include "c_api/c_api_test_helpers.hpp"
#include "support/attention_case.hpp"
#include "support/csr_tables.hpp"
#include "support/decode_case.hpp"
#include "vkpaged/reference.hpp"

namespace vkpaged::test {
namespace {

using namespace c_api_helpers;

constexpr uint32_t kB = 8;

bool same_bytes(const void* a, const void* b, size_t bytes) { return std::memcmp(a, b, bytes) == 0; }

// Decode inputs of lengths 0, 1, 7, 8 and 20 (last pages of 1, B - 1, B, 4 tokens).
DecodeInputs decode_inputs() {
  DecodeCase c;
  c.block_size = kB;
  c.lens = {0, 1, 7, 8, 20};
  std::mt19937 rng(70);
  return make_decode_inputs(c, rng);
}

class CApiCsrTest : public GpuTest {};

TEST_F(CApiCsrTest, InitLeavesTheDenseForm) {
  vkp_decode_inputs d;
  ASSERT_VKP_OK(vkp_decode_inputs_init(&d));
  EXPECT_EQ(d.kv_indptr.data, nullptr);
  EXPECT_EQ(d.kv_indptr.rank, 0);
  EXPECT_EQ(d.max_blocks_per_seq, 0u);
  vkp_decode_shape s;
  ASSERT_VKP_OK(vkp_decode_shape_init(&s));
  EXPECT_EQ(s.csr_page_table, VKP_FALSE);
  vkp_attention_shape a;
  ASSERT_VKP_OK(vkp_attention_shape_init(&a));
  EXPECT_EQ(a.csr_page_table, VKP_FALSE);
}

TEST_F(CApiCsrTest, DecodeConvenienceAndReferenceGiveTheDenseFormsBytes) {
  vkp_context* ctx = c_context();
  const DecodeInputs dense = decode_inputs();
  const DecodeInputs csr = with_csr(dense, kB);
  const vkp_decode_inputs cdense = c_decode_inputs(dense), ccsr = c_decode_inputs(csr);

  vkp_decode_shape shape;
  vkp_decode_shape_init(&shape);
  ASSERT_VKP_OK(vkp_decode_shape_of(&ccsr, VKP_FALSE, &shape));
  EXPECT_EQ(shape.csr_page_table, VKP_TRUE);
  EXPECT_EQ(shape.max_blocks_per_seq, csr.max_blocks_per_seq);
  EXPECT_EQ(shape.max_context_len, 20u);

  const size_t n = size_t(dense.query.numel());
  std::vector<uint16_t> want(n), got(n), ref(n), ref_dense(n);
  std::vector<float> want_lse(n), got_lse(n);
  ASSERT_VKP_OK(vkp_decode_attention(ctx, &cdense, nullptr, nullptr, want.data(), n * 2, want_lse.data(), n));
  ASSERT_VKP_OK(vkp_decode_attention(ctx, &ccsr, nullptr, nullptr, got.data(), n * 2, got_lse.data(), n));
  EXPECT_TRUE(same_bytes(got.data(), want.data(), n * 2));
  EXPECT_TRUE(same_bytes(got_lse.data(), want_lse.data(), 20 * sizeof(float)));  // S * H
  ASSERT_VKP_OK(vkp_reference_decode_attention(&ccsr, nullptr, nullptr, ref.data(), n * 2, nullptr, 0));
  ASSERT_VKP_OK(vkp_reference_decode_attention(&cdense, nullptr, nullptr, ref_dense.data(), n * 2, nullptr, 0));
  EXPECT_TRUE(same_bytes(ref.data(), ref_dense.data(), n * 2));
}

TEST_F(CApiCsrTest, AttentionConvenienceAndReferenceGiveTheDenseFormsBytes) {
  vkp_context* ctx = c_context();
  AttentionCase c;
  c.block_size = kB;
  c.layout = KvLayout::hnd;
  c.lens = {1, 8, 21};
  c.new_tokens = {1, 8, 3};
  std::mt19937 rng(71);
  const AttentionInputs dense = make_attention_inputs(c, rng);
  const AttentionInputs csr = with_csr(dense, kB);
  const vkp_attention_inputs cdense = c_attention_inputs(dense), ccsr = c_attention_inputs(csr);
  vkp_attention_shape shape;
  vkp_attention_shape_init(&shape);
  ASSERT_VKP_OK(vkp_attention_shape_of(&ccsr, nullptr, VKP_FALSE, &shape));
  EXPECT_EQ(shape.csr_page_table, VKP_TRUE);

  const size_t n = size_t(dense.query.numel());
  std::vector<uint16_t> want(n), got(n), ref(n), ref_dense(n);
  ASSERT_VKP_OK(vkp_batch_attention(ctx, &cdense, nullptr, nullptr, want.data(), n * 2, nullptr, 0));
  ASSERT_VKP_OK(vkp_batch_attention(ctx, &ccsr, nullptr, nullptr, got.data(), n * 2, nullptr, 0));
  EXPECT_TRUE(same_bytes(got.data(), want.data(), n * 2));
  ASSERT_VKP_OK(vkp_reference_batch_attention(&ccsr, nullptr, ref.data(), n * 2, nullptr, 0));
  ASSERT_VKP_OK(vkp_reference_batch_attention(&cdense, nullptr, ref_dense.data(), n * 2, nullptr, 0));
  EXPECT_TRUE(same_bytes(ref.data(), ref_dense.data(), n * 2));
}

TEST_F(CApiCsrTest, RecordDecodeWithCsrViewsIsTheCppApisDecode) {
  vkp_context* ctx = c_context();
  const DecodeInputs dense = decode_inputs();
  const CsrTables t = to_csr(dense.block_tables, dense.context_lens, kB);
  const vkp_decode_inputs cdense = c_decode_inputs(dense);
  vkp_decode_shape shape;
  vkp_decode_shape_init(&shape);
  ASSERT_VKP_OK(vkp_decode_shape_of(&cdense, VKP_FALSE, &shape));
  shape.csr_page_table = VKP_TRUE;
  vkp_decode_plan* raw = nullptr;
  ASSERT_VKP_OK(vkp_decode_plan_create(ctx, &shape, nullptr, &raw));
  const std::unique_ptr<vkp_decode_plan, decltype(&vkp_decode_plan_destroy)> plan(raw, &vkp_decode_plan_destroy);
  vkp_decode_plan_info info;
  vkp_decode_plan_info_init(&info);
  ASSERT_VKP_OK(vkp_decode_plan_info_get(raw, &info));
  EXPECT_GT(info.scratch_bytes, 0u);
  EXPECT_EQ(info.scratch_bytes, vkp_decode_plan_scratch_bytes(raw));
  vkp_decode_shape got_shape;
  vkp_decode_shape_init(&got_shape);
  ASSERT_VKP_OK(vkp_decode_plan_shape_get(raw, &got_shape));
  EXPECT_EQ(got_shape.csr_page_table, VKP_TRUE);

  const CTensor query = upload(ctx, dense.query), key = upload(ctx, dense.key_cache),
                value = upload(ctx, dense.value_cache);
  const CTensor indptr = upload(ctx, t.kv_indptr), indices = upload(ctx, t.kv_indices),
                last = upload(ctx, t.kv_last_page_len);
  const CTensor output = zeros(ctx, dense.query.dtype(), dense.query.shape());
  const CTensor scratch = zeros(ctx, DType::u8, Shape{int64_t(info.scratch_bytes)});
  const CTensor status = zeros(ctx, DType::u32, Shape{1});
  vkp_decode_views views;
  vkp_decode_views_init(&views);
  views.query = query.view;
  views.key_cache = key.view;
  views.value_cache = value.view;
  views.kv_indptr = indptr.view;
  views.kv_indices = indices.view;
  views.kv_last_page_len = last.view;
  views.output = output.view;
  views.scratch = scratch.view.memory;
  views.status = status.view.memory;
  EXPECT_VKP_OK(run(ctx, [&](VkCommandBuffer cmd) { return vkp_record_decode(ctx, cmd, raw, &views, nullptr); }));
  EXPECT_EQ(download(ctx, status).as<uint32_t>()[0], 0u);
  const DecodeResult want = decode_attention(shared_context(), dense);
  const HostTensor got = download(ctx, output);
  EXPECT_TRUE(same_bytes(got.data(), want.output.data(), got.bytes()));

  // Bad values on the device: flagged, as the C constant says.
  HostTensor bad = t.kv_last_page_len;
  bad.as<int32_t>()[1] = 0;  // a request with a page
  EXPECT_VKP_OK(vkp_upload(ctx, &last.view.memory, bad.data(), bad.bytes()));
  EXPECT_VKP_OK(run(ctx, [&](VkCommandBuffer cmd) { return vkp_record_decode(ctx, cmd, raw, &views, nullptr); }));
  EXPECT_EQ(download(ctx, status).as<uint32_t>()[0], VKP_STATUS_BAD_PAGE_TABLE);

  // Both forms at once: refused, naming the dense view.
  const CTensor tables = upload(ctx, dense.block_tables);
  views.block_tables = tables.view;
  expect_refused(run(ctx, [&](VkCommandBuffer cmd) { return vkp_record_decode(ctx, cmd, raw, &views, nullptr); }),
                 "block_tables: given together with kv_indptr");
}

TEST_F(CApiCsrTest, RecordAttentionWithCsrViewsIsTheCppApisAttention) {
  vkp_context* ctx = c_context();
  AttentionCase c;
  c.block_size = kB;
  c.lens = {7, 30};
  c.new_tokens = {7, 4};
  std::mt19937 rng(72);
  const AttentionInputs dense = make_attention_inputs(c, rng);
  const CsrTables t = to_csr(dense.block_tables, dense.context_lens, kB);
  const vkp_attention_inputs cdense = c_attention_inputs(dense);
  vkp_attention_shape shape;
  vkp_attention_shape_init(&shape);
  ASSERT_VKP_OK(vkp_attention_shape_of(&cdense, nullptr, VKP_FALSE, &shape));
  shape.csr_page_table = VKP_TRUE;
  const int32_t starts[] = {0, 7, 11};
  vkp_attention_plan* raw = nullptr;
  ASSERT_VKP_OK(vkp_attention_plan_create(ctx, &shape, starts, 3, nullptr, &raw));
  const std::unique_ptr<vkp_attention_plan, decltype(&vkp_attention_plan_destroy)> plan(raw,
                                                                                        &vkp_attention_plan_destroy);
  vkp_attention_plan_info info;
  vkp_attention_plan_info_init(&info);
  ASSERT_VKP_OK(vkp_attention_plan_info_get(raw, &info));
  EXPECT_GT(info.scratch_bytes, 0u);

  const CTensor query = upload(ctx, dense.query), key = upload(ctx, dense.key_cache),
                value = upload(ctx, dense.value_cache), d_starts = upload(ctx, dense.query_starts);
  const CTensor indptr = upload(ctx, t.kv_indptr), indices = upload(ctx, t.kv_indices),
                last = upload(ctx, t.kv_last_page_len);
  const CTensor output = zeros(ctx, dense.query.dtype(), dense.query.shape());
  const CTensor scratch = zeros(ctx, DType::u8, Shape{int64_t(info.scratch_bytes)});
  vkp_attention_views views;
  vkp_attention_views_init(&views);
  views.query = query.view;
  views.key_cache = key.view;
  views.value_cache = value.view;
  views.query_starts = d_starts.view;
  views.kv_indptr = indptr.view;
  views.kv_indices = indices.view;
  views.kv_last_page_len = last.view;
  views.output = output.view;
  views.scratch = scratch.view.memory;
  EXPECT_VKP_OK(run(ctx, [&](VkCommandBuffer cmd) { return vkp_record_attention(ctx, cmd, raw, &views, nullptr); }));
  const AttentionResult want = batch_attention(shared_context(), dense);
  const HostTensor got = download(ctx, output);
  EXPECT_TRUE(same_bytes(got.data(), want.output.data(), got.bytes()));
}

TEST_F(CApiCsrTest, RefusalsNameTheArrayAndTheValue) {
  vkp_context* ctx = c_context();
  DecodeInputs csr = with_csr(decode_inputs(), kB);
  csr.kv_indptr.as<int32_t>()[3] = 0;  // below kv_indptr[2] = 1
  vkp_decode_inputs in = c_decode_inputs(csr);
  std::vector<uint16_t> out(size_t(csr.query.numel()));
  expect_refused(vkp_reference_decode_attention(&in, nullptr, nullptr, out.data(), out.size() * 2, nullptr, 0),
                 "vkp_reference_decode_attention: kv_indptr[3]: 0 is less than kv_indptr[2] = 1");
  expect_refused(vkp_decode_attention(ctx, &in, nullptr, nullptr, out.data(), out.size() * 2, nullptr, 0),
                 "kv_indptr[3]: 0 is less than kv_indptr[2] = 1");
  vkp_decode_shape shape;
  vkp_decode_shape_init(&shape);
  expect_refused(vkp_decode_shape_of(&in, VKP_FALSE, &shape), "kv_indptr[3]");

  // A flag that is not 0 or 1.
  const DecodeInputs dense = decode_inputs();
  const vkp_decode_inputs cdense = c_decode_inputs(dense);
  ASSERT_VKP_OK(vkp_decode_shape_of(&cdense, VKP_FALSE, &shape));
  shape.csr_page_table = 2;
  vkp_decode_plan* plan = nullptr;
  expect_refused(vkp_decode_plan_create(ctx, &shape, nullptr, &plan), "shape.csr_page_table: 2 is not 0 or 1");
  EXPECT_EQ(plan, nullptr);

  // Both forms in the host inputs.
  vkp_decode_inputs both = c_decode_inputs(with_csr(dense, kB));
  both.block_tables = host_view(dense.block_tables);
  expect_refused(vkp_reference_decode_attention(&both, nullptr, nullptr, out.data(), out.size() * 2, nullptr, 0),
                 "block_tables: given together with kv_indptr");
}

}  // namespace
}  // namespace vkpaged::test
