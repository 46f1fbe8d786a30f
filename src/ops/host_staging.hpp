// SPDX-License-Identifier: Apache-2.0
#pragma once
// The host-tensor conveniences' staging (decode_attention, batch_attention): device buffers made
// for one call and kept until it returns.
#include <vector>

#include "vkpaged/context.hpp"
#include "vkpaged/tensor.hpp"

namespace vkpaged::detail {

// An index tensor as the GPU reads it, 32-bit words; i64 values must have been range-checked
// (decode_shape_of, attention_shape_of). `name` names it in errors.
HostTensor index_words(const HostTensor& t, const char* name);

// A buffer holding `t`, read as `dtype` and kept in `keep`. Whole 16-byte multiples: a u8
// tensor's last word is read whole.
TensorView upload_kept(Context& ctx, std::vector<DeviceBuffer>& keep, const HostTensor& t, DType dtype);

// A buffer for an output of `dtype` and `shape`, kept in `keep`.
TensorView output_kept(Context& ctx, std::vector<DeviceBuffer>& keep, DType dtype, const Shape& shape);

// The page tables of host inputs (checked by decode_shape_of or attention_shape_of) uploaded in
// their own form, as 32-bit words: block_tables and context_lens, or the CSR form's three.
template <typename Views, typename Inputs>
void upload_page_tables(Context& ctx, std::vector<DeviceBuffer>& keep, const Inputs& in, Views& views) {
  const bool csr = !in.kv_indptr.empty();
  auto up = [&](const HostTensor& t, const char* name) { return upload_kept(ctx, keep, index_words(t, name), DType::i32); };
  if (!csr) views.block_tables = up(in.block_tables, "block_tables");
  if (!csr) views.context_lens = up(in.context_lens, "context_lens");
  if (csr) views.kv_indptr = up(in.kv_indptr, "kv_indptr");
  if (csr) views.kv_indices = up(in.kv_indices, "kv_indices");
  if (csr) views.kv_last_page_len = up(in.kv_last_page_len, "kv_last_page_len");
}

// A scratch-like device buffer of `bytes`, kept in `keep`; empty when `bytes` is 0.
BufferView buffer_kept(Context& ctx, std::vector<DeviceBuffer>& keep, size_t bytes);

// A status word, zeroed, kept in `keep`.
BufferView status_kept(Context& ctx, std::vector<DeviceBuffer>& keep);

// ALiBi slopes and sinks, when the shape has them, as [H] f32.
template <typename Views, typename Inputs, typename Shape_>
void stage_per_head(Context& ctx, std::vector<DeviceBuffer>& keep, const Inputs& in, const Shape_& shape, Views& v) {
  if (shape.alibi) v.alibi_slopes = upload_kept(ctx, keep, in.alibi_slopes, DType::f32);
  if (shape.sinks) v.sinks = upload_kept(ctx, keep, in.sinks, DType::f32);
}

// The output buffer of `output_shape` in `dtype` and, with want_lse, the LSE [lse_rows, heads] f32;
// the result's host tensors sized to match.
template <typename Views, typename Result>
void stage_outputs(Context& ctx, std::vector<DeviceBuffer>& keep, DType dtype, const Shape& output_shape, bool want_lse,
                   int64_t lse_rows, int64_t heads, Views& v, Result& result) {
  result.output = HostTensor(dtype, output_shape);
  v.output = output_kept(ctx, keep, dtype, output_shape);
  if (want_lse) {
    result.lse = HostTensor(DType::f32, Shape{lse_rows, heads});
    v.lse = output_kept(ctx, keep, DType::f32, result.lse.shape());
  }
}

// After the call: an internal error naming `op` where the shaders set a status bit, which the
// host's checks of the inputs should have made impossible.
void check_status_clear(Context& ctx, const BufferView& status, const char* op);

// The output and, when asked for, the LSE of a call, downloaded into the result's host tensors.
template <typename Views, typename Result>
void download_outputs(Context& ctx, const Views& v, Result& result, bool want_lse) {
  ctx.download(v.output.memory, result.output.data(), result.output.bytes());
  if (want_lse) ctx.download(v.lse.memory, result.lse.data(), result.lse.bytes());
}

// The inputs decode and attention share (query, caches, page tables, ALiBi slopes, sinks), and
// the output and LSE buffers of `lse_rows` rows; the result's host tensors sized to match.
template <typename Views, typename Inputs, typename Shape_, typename Result>
void stage_shared_inputs(Context& ctx, std::vector<DeviceBuffer>& keep, const Inputs& in, const Shape_& shape,
                         bool want_lse, int64_t lse_rows, Views& v, Result& result) {
  const DType cache_elem = is_fp8_dtype(in.cache_dtype) ? DType::u8 : in.cache_dtype;
  v.query = upload_kept(ctx, keep, in.query, in.query.dtype());
  v.key_cache = upload_kept(ctx, keep, in.key_cache, cache_elem);
  v.value_cache = upload_kept(ctx, keep, in.value_cache, cache_elem);
  upload_page_tables(ctx, keep, in, v);
  stage_per_head(ctx, keep, in, shape, v);
  stage_outputs(ctx, keep, in.query.dtype(), in.query.shape(), want_lse, lse_rows, int64_t(shape.num_heads), v, result);
}

// The request inputs of attention and MLA past the page tables: query_starts as 32-bit words and,
// with a tree mask, the mask in whole words (AttentionViews::tree_mask).
template <typename Views, typename Inputs>
void stage_query_starts(Context& ctx, std::vector<DeviceBuffer>& keep, const Inputs& in, bool tree_mask, Views& v) {
  v.query_starts = upload_kept(ctx, keep, index_words(in.query_starts, "query_starts"), DType::i32);
  if (tree_mask) {
    v.tree_mask = upload_kept(ctx, keep, in.tree_mask, DType::u8);
    v.tree_mask.memory.size = (v.tree_mask.memory.size + 3) / 4 * 4;
  }
}

}  // namespace vkpaged::detail
