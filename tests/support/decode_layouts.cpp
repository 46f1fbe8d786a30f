#include "support/decode_layouts.hpp"

#include <gtest/gtest.h>

#include <algorithm>
#include <cstring>
#include <vector>

#include "vk/context_impl.hpp"
#include "vkpaged/error.hpp"

namespace vkpaged::test {
namespace {

Shape shape_of_layout(KvLayout layout, int64_t n, int64_t hkv, int64_t d, int64_t b) {
  return layout == KvLayout::nhd ? Shape{n, b, hkv, d} : Shape{n, hkv, b, d};
}

// Index tensors as the device reads them: 32-bit words.
HostTensor as_int32(const HostTensor& t) {
  if (t.dtype() == DType::i32 || t.dtype() == DType::u32) return t;
  HostTensor out(DType::i32, t.shape());
  for (int64_t i = 0; i < t.numel(); ++i) out.as<int32_t>()[i] = int32_t(t.as<int64_t>()[i]);
  return out;
}

}  // namespace

LaidOutCaches relay_caches(const DecodeInputs& in, KvLayout layout) {
  if (layout == KvLayout::vllm) return {in.key_cache, in.value_cache};
  const Shape& k = in.key_cache.shape();  // [N, Hkv, D/x, B, x]
  const int64_t N = k[0], Hkv = k[1], D = k[2] * k[4], B = k[3];
  const KvBlockGeometry geometry{uint32_t(Hkv), uint32_t(D), uint32_t(B), uint32_t(k[4])};
  const size_t element = in.key_cache.bytes() / size_t(in.key_cache.numel());
  LaidOutCaches out{HostTensor(in.key_cache.dtype(), shape_of_layout(layout, N, Hkv, D, B)),
                    HostTensor(in.value_cache.dtype(), shape_of_layout(layout, N, Hkv, D, B))};
  const auto* key = static_cast<const uint8_t*>(in.key_cache.data());
  const auto* value = static_cast<const uint8_t*>(in.value_cache.data());
  auto* key_out = static_cast<uint8_t*>(out.key_cache.data());
  auto* value_out = static_cast<uint8_t*>(out.value_cache.data());
  const uint64_t block = geometry.block_elements();
  for (int64_t n = 0; n < N; ++n)
    for (uint32_t g = 0; g < Hkv; ++g)
      for (uint32_t d = 0; d < D; ++d)
        for (uint32_t o = 0; o < B; ++o) {
          const uint64_t base = uint64_t(n) * block;
          std::memcpy(key_out + (base + geometry.key_offset(layout, g, d, o)) * element,
                      key + (base + geometry.key_offset(KvLayout::vllm, g, d, o)) * element, element);
          std::memcpy(value_out + (base + geometry.value_offset(layout, g, d, o)) * element,
                      value + (base + geometry.value_offset(KvLayout::vllm, g, d, o)) * element, element);
        }
  return out;
}

DecodeShape shape_in_layout(const DecodeInputs& in, KvLayout layout, const DecodeParams& params, bool lse) {
  DecodeShape s = decode_shape_of(in, lse);
  s.softcap = params.softcap != 0.0f;
  s.kv_layout = layout;
  return s;
}

DecodeResult decode_in_layout(Context& ctx, const DecodeInputs& in, KvLayout layout, const DecodeOptions& options,
                              const DecodeParams& params, bool lse) {
  const DecodeShape shape = shape_in_layout(in, layout, params, lse);
  const DecodePlan plan = DecodePlan::create(ctx, shape, options);
  const LaidOutCaches caches = relay_caches(in, layout);
  std::vector<DeviceBuffer> keep;
  auto upload = [&](const HostTensor& t, DType dtype) {
    keep.push_back(ctx.create_buffer(std::max<size_t>(t.bytes(), 16)));
    ctx.upload(keep.back().view(), t.data(), t.bytes());
    return keep.back().tensor(dtype, t.shape());
  };
  auto buffer = [&](size_t bytes) {
    keep.push_back(ctx.create_buffer(std::max<size_t>(bytes, 16)));
    return keep.back().view(0, bytes);
  };
  auto output = [&](DType dtype, const Shape& shape, size_t bytes) {
    keep.push_back(ctx.create_buffer(std::max<size_t>(bytes, 16)));
    return keep.back().tensor(dtype, shape);
  };
  const DType stored = is_fp8_dtype(in.cache_dtype) ? DType::u8 : in.cache_dtype;
  DecodeViews v;
  v.query = upload(in.query, in.query.dtype());
  v.key_cache = upload(caches.key_cache, stored);
  v.value_cache = upload(caches.value_cache, stored);
  v.block_tables = upload(as_int32(in.block_tables), DType::i32);
  v.context_lens = upload(as_int32(in.context_lens), DType::i32);
  if (shape.alibi) v.alibi_slopes = upload(in.alibi_slopes, DType::f32);
  if (shape.sinks) v.sinks = upload(in.sinks, DType::f32);
  DecodeResult result;
  result.output = HostTensor(in.query.dtype(), in.query.shape());
  v.output = output(in.query.dtype(), in.query.shape(), result.output.bytes());
  if (lse) {
    result.lse = HostTensor(DType::f32, Shape{int64_t(shape.num_seqs), int64_t(shape.num_heads)});
    v.lse = output(DType::f32, result.lse.shape(), result.lse.bytes());
  }
  if (plan.scratch_bytes()) v.scratch = buffer(plan.scratch_bytes());
  if (plan.order_bytes()) v.order = buffer(plan.order_bytes());
  if (plan.merge_counter_bytes()) v.merge_counters = buffer(plan.merge_counter_bytes());
  v.status = buffer(4);
  const uint32_t zero = 0;
  ctx.upload(v.status, &zero, 4);
  ctx.run_and_wait([&](VkCommandBuffer cmd) {
    // Scratch as NaN words (an unwritten partition shows), counters zero (as DecodeViews asks).
    const auto& d = ctx.impl().d;
    if (!v.scratch.empty()) d.vkCmdFillBuffer(cmd, v.scratch.buffer, v.scratch.offset, v.scratch.size, 0xffffffffu);
    if (!v.merge_counters.empty())
      d.vkCmdFillBuffer(cmd, v.merge_counters.buffer, v.merge_counters.offset, v.merge_counters.size, 0u);
    if (plan.longest_first()) record_decode_order(ctx, cmd, plan, v.context_lens, v.order);
    record_compute_barrier(ctx, cmd);
    record_decode(ctx, cmd, plan, v, params);
  });
  uint32_t status = 1;
  ctx.download(v.status, &status, 4);
  EXPECT_EQ(status, 0u) << "the decode flagged validated inputs (" << plan.describe() << ")";
  if (!v.merge_counters.empty()) {
    std::vector<uint32_t> counters(v.merge_counters.size / 4, 1u);
    ctx.download(v.merge_counters, counters.data(), v.merge_counters.size);
    EXPECT_TRUE(std::all_of(counters.begin(), counters.end(), [](uint32_t c) { return c == 0; }))
        << "the merge counters were not left zero";
  }
  ctx.download(v.output.memory, result.output.data(), result.output.bytes());
  if (lse) ctx.download(v.lse.memory, result.lse.data(), result.lse.bytes());
  return result;
}

}  // namespace vkpaged::test
