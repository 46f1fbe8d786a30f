// SPDX-License-Identifier: Apache-2.0
// Host side of shaders/merge_states.comp.
#include <fmt/format.h>

#include <algorithm>
#include <array>

#include "common/shader_interface.h"
#include "embedded_shaders.hpp"
#include "ops/merge_validation.hpp"
#include "ops/strided_rows.hpp"
#include "ops/view_checks.hpp"
#include "vkpaged/error.hpp"
#include "vkpaged/merge.hpp"

namespace vkpaged {

void record_merge_attention(Context& context, VkCommandBuffer cmd, const MergeViews& v) {
  auto& impl = context.impl();
  const Shape& s = v.output_a.shape;
  if (s.rank() != 3)
    throw Error(ErrorCode::invalid_argument, fmt::format("output_a: shape {} is not [S, H, D]", s.str()));
  const DType dt = v.output_a.dtype;
  if (!is_float_dtype(dt)) throw Error(ErrorCode::invalid_argument, fmt::format("output_a: dtype {} is not f32, f16 or bf16", dtype_name(dt)));
  const int64_t D = s[2];
  if (D % 2 != 0 || D == 0) throw Error(ErrorCode::invalid_argument, fmt::format("output_a: head size {} is not even", D));
  const Shape lse_shape{s[0], s[1]};
  const detail::RowsView a = detail::check_rows_view(impl, "output_a", v.output_a, {dt}, s, false);
  detail::check_view(impl, "lse_a", v.lse_a, {DType::f32}, lse_shape, 4);
  const detail::RowsView b = detail::check_rows_view(impl, "output_b", v.output_b, {dt}, s, false);
  detail::check_view(impl, "lse_b", v.lse_b, {DType::f32}, lse_shape, 4);
  const detail::RowsView out = detail::check_rows_view(impl, "output", v.output, {dt}, s, true);
  // Each element is read before it is written only within one row: output may be output_a's or
  // output_b's view itself, and must otherwise keep off their rows.
  if (!detail::same_rows(out, a))
    detail::check_disjoint_rows("output_a", a, "output", out, "output is written; it may be output_a's view itself");
  if (!detail::same_rows(out, b))
    detail::check_disjoint_rows("output_b", b, "output", out, "output is written; it may be output_b's view itself");
  if (!v.lse.empty()) detail::check_view(impl, "lse", v.lse, {DType::f32}, lse_shape, 4);
  if (s.numel() == 0) return;
  // 65535 is the maxComputeWorkGroupCount every device has: heads are x, sequences y in chunks.
  if (s[1] > 65535)
    throw Error(ErrorCode::unsupported,
                fmt::format("output_a: {} heads exceed the 65535 workgroups a dispatch may have in x", s[1]));

  const std::array<uint32_t, MERGE_SC_COUNT> spec{uint32_t(D), uint32_t(dt), v.lse.empty() ? 0u : 1u};
  const auto& pipeline = impl.pipeline(vk::shader_merge_states(), spec, 6, sizeof(shader::MergePush));
  const std::array<detail::BoundView, 6> bound{impl.bind_view(v.output_a.memory), impl.bind_view(v.lse_a.memory),
                                               impl.bind_view(v.output_b.memory), impl.bind_view(v.lse_b.memory),
                                               impl.bind_view(v.output.memory), impl.bind_view(v.lse.memory)};
  shader::MergePush push{};
  push.num_heads = uint32_t(s[1]);
  push.output_a_rows = detail::rows_push(a, bound[0]);
  push.lse_a_offset = bound[1].word_offset;
  push.output_b_rows = detail::rows_push(b, bound[2]);
  push.lse_b_offset = bound[3].word_offset;
  push.output_rows = detail::rows_push(out, bound[4]);
  push.lse_offset = bound[5].word_offset;
  for (int64_t first = 0; first < s[0]; first += 65535) {
    push.first_seq = uint32_t(first);
    impl.dispatch(cmd, pipeline, bound, &push, uint32_t(s[1]), uint32_t(std::min<int64_t>(65535, s[0] - first)), 1);
  }
}

DecodeResult merge_attention(Context& ctx, const DecodeResult& a, const DecodeResult& b) {
  detail::check_merge_input(a.output, a.lse, "a");
  detail::check_merge_input(b.output, b.lse, "b");
  if (!(a.output.shape() == b.output.shape()) || a.output.dtype() != b.output.dtype())
    throw Error(ErrorCode::invalid_argument, fmt::format("b.output: shape {} {} does not match a's {} {}", b.output.shape().str(),
                                                         dtype_name(b.output.dtype()), a.output.shape().str(), dtype_name(a.output.dtype())));
  std::vector<DeviceBuffer> keep;
  auto upload = [&](const HostTensor& t) {
    keep.push_back(ctx.create_buffer(std::max<size_t>(t.bytes(), 16)));
    ctx.upload(keep.back().view(), t.data(), t.bytes());
    return keep.back().tensor(t.dtype(), t.shape());
  };
  MergeViews v;
  v.output_a = upload(a.output);
  v.lse_a = upload(a.lse);
  v.output_b = upload(b.output);
  v.lse_b = upload(b.lse);
  DecodeResult r{HostTensor(a.output.dtype(), a.output.shape()), HostTensor(DType::f32, a.lse.shape())};
  v.output = upload(r.output);
  v.lse = upload(r.lse);
  ctx.run_and_wait([&](VkCommandBuffer cmd) { record_merge_attention(ctx, cmd, v); });
  ctx.download(v.output.memory, r.output.data(), r.output.bytes());
  ctx.download(v.lse.memory, r.lse.data(), r.lse.bytes());
  return r;
}

}  // namespace vkpaged
