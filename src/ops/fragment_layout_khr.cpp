// SPDX-License-Identifier: Apache-2.0
// Host side of shaders/fragment_layout_*_khr.comp and shaders/matrix_product_16x16x16_khr.comp:
// the KHR fragments' layout, probed once per context, and a single KHR product for checks.
#include "ops/fragment_layout_khr.hpp"

#include <fmt/format.h>
#include <fmt/ranges.h>

#include <algorithm>
#include <array>
#include <cstring>
#include <memory>
#include <mutex>

#include "common/fragment_layout_khr.h"
#include "embedded_shaders.hpp"
#include "ops/decode_planner.hpp"
#include "ops/fragment_layout.hpp"
#include "vk/cooperative_matrix_khr.hpp"
#include "vk/context_impl.hpp"
#include "vk/matrix_features.hpp"
#include "vkpaged/error.hpp"

namespace vkpaged::detail {
namespace {

// Why the KHR shaders cannot run in this context, "" when they can.
std::string khr_unavailable(const ContextImpl& impl, const vk::ShaderRegistration& shader) {
  if (std::string missing = missing_khr_matrix_features(impl); !missing.empty()) return missing;
  if (shader.words == 0)
    return fmt::format("vkpaged was built without a GLSL compiler that knows GL_KHR_cooperative_matrix "
                       "(shaders/{}.comp is left out)",
                       shader.name);
  if (impl.max_subgroup_size == 0 || impl.max_subgroup_size > KHR_FRAGMENT_LANES)
    return fmt::format("device {}: subgroups of up to {} invocations, the probes take {} at most", impl.info.name,
                       impl.max_subgroup_size, KHR_FRAGMENT_LANES);
  return "";
}

// Records `record`, then makes the shader's writes visible to the host, submits and waits.
void run_for_host(Context& context, const std::function<void(VkCommandBuffer)>& record) {
  auto& impl = context.impl();
  context.run_and_wait([&](VkCommandBuffer cmd) {
    record(cmd);
    VkMemoryBarrier barrier{VK_STRUCTURE_TYPE_MEMORY_BARRIER};
    barrier.srcAccessMask = VK_ACCESS_SHADER_WRITE_BIT;
    barrier.dstAccessMask = VK_ACCESS_HOST_READ_BIT;
    impl.d.vkCmdPipelineBarrier(cmd, VK_PIPELINE_STAGE_COMPUTE_SHADER_BIT, VK_PIPELINE_STAGE_HOST_BIT, 0, 1, &barrier,
                                0, nullptr, 0, nullptr);
  });
}

KhrFragment read_fragment(const std::vector<uint32_t>& words, uint32_t f, const char* operand, uint32_t rows,
                          uint32_t columns, uint32_t lanes) {
  KhrFragment fragment;
  fragment.name = fmt::format("{} [{} x {}]", operand, rows, columns);
  fragment.rows = rows;
  fragment.columns = columns;
  fragment.components = std::min(words[1 + f], KHR_FRAGMENT_SLOTS);
  fragment.codes.resize(size_t(lanes) * fragment.components);
  for (uint32_t lane = 0; lane < lanes; ++lane)
    for (uint32_t i = 0; i < fragment.components; ++i)
      fragment.codes[size_t(lane) * fragment.components + i] =
          words[KHR_FRAGMENT_HEADER + (f * KHR_FRAGMENT_LANES + lane) * KHR_FRAGMENT_SLOTS + i];
  return fragment;
}

// "" when each element of the matrix is held by exactly one component of one lane.
std::string irregularity(const KhrFragment& f, uint32_t lanes, uint32_t reported_components) {
  const uint32_t elements = f.rows * f.columns;
  if (reported_components > KHR_FRAGMENT_SLOTS)
    return fmt::format("{}: {} components per lane, more than the probe's {}", f.name, reported_components,
                       KHR_FRAGMENT_SLOTS);
  if (size_t(f.components) * lanes != elements)
    return fmt::format("{}: {} components in each of {} lanes for {} elements", f.name, f.components, lanes, elements);
  std::vector<uint32_t> held(elements, 0);
  for (uint32_t code : f.codes) {
    if (code >= elements) return fmt::format("{}: a component holds code {}, outside the matrix", f.name, code);
    ++held[code];
  }
  const auto twice = std::find_if(held.begin(), held.end(), [](uint32_t n) { return n != 1; });
  if (twice != held.end())
    return fmt::format("{}: element {} is held {} times", f.name, twice - held.begin(), *twice);
  return "";
}

bool matches_nv_kernel(const KhrFragmentShape& s, uint32_t lanes) {
  if (lanes != 32 || s.a.components != 8 || s.b.components != 4 || s.accumulator.components != 4) return false;
  for (uint32_t lane = 0; lane < 32; ++lane) {
    for (uint32_t i = 0; i < 8; ++i)
      if (s.a.code(lane, i) != nv_fragment_code_a(lane, i)) return false;
    for (uint32_t i = 0; i < 4; ++i)
      if (s.b.code(lane, i) != nv_fragment_code_b(lane, i) || s.accumulator.code(lane, i) != nv_fragment_code_b(lane, i))
        return false;
  }
  return true;
}

KhrFragmentShape probe_shape(Context& context, const vk::ShaderRegistration& shader, uint32_t m, uint32_t n,
                             uint32_t k, uint32_t& lanes) {
  auto& impl = context.impl();
  KhrFragmentShape s;
  s.m = m;
  s.n = n;
  s.k = k;
  if (!impl.capabilities.lists_f16_product(m, n, k)) {
    s.not_probed = fmt::format("device {} does not list the {}x{}x{} product with f16 A and B and f32 accumulators "
                               "at subgroup scope",
                               impl.info.name, m, n, k);
    return s;
  }
  DeviceBuffer out = context.create_buffer(size_t(KHR_FRAGMENT_WORDS) * 4, MemoryKind::host_visible);
  std::memset(out.mapped(), 0xff, out.size());
  const std::array<uint32_t, 1> spec{impl.max_subgroup_size};
  const auto& pipeline = impl.pipeline(shader, spec, 1, 0);
  const std::array<BoundView, 1> bound{impl.bind_view(out.view())};
  run_for_host(context, [&](VkCommandBuffer cmd) { impl.dispatch(cmd, pipeline, bound, nullptr, 1, 1, 1); });
  std::vector<uint32_t> words(KHR_FRAGMENT_WORDS);
  std::memcpy(words.data(), out.mapped(), words.size() * 4);
  lanes = words[0];
  if (lanes == 0 || lanes > KHR_FRAGMENT_LANES) {
    s.irregular = fmt::format("the probe reports a subgroup of {} invocations", lanes);
    lanes = 0;
    return s;
  }
  s.probed = true;
  s.a = read_fragment(words, 0, "A", m, k, lanes);
  s.b = read_fragment(words, 1, "B", k, n, lanes);
  s.accumulator = read_fragment(words, 2, "accumulator", m, n, lanes);
  std::vector<std::string> problems;
  for (uint32_t f = 0; f < 3; ++f) {
    const KhrFragment& fragment = f == 0 ? s.a : f == 1 ? s.b : s.accumulator;
    if (std::string p = irregularity(fragment, lanes, words[1 + f]); !p.empty()) problems.push_back(p);
  }
  s.irregular = fmt::format("{}", fmt::join(problems, "; "));
  s.matches_nv_kernel = m == 16 && n == 8 && k == 16 && s.irregular.empty() && matches_nv_kernel(s, lanes);
  return s;
}

// The context's probed layout, kept beside the operator (vk/operator_state.hpp).
struct KhrFragmentLayoutState {
  std::mutex mutex;
  std::shared_ptr<const KhrFragmentLayout> layout;
};

}  // namespace

std::string khr_matrix_fragment_mismatch(Context& context) { return khr_layout_mismatch(khr_fragment_layout(context)); }

std::string khr_layout_mismatch(const KhrFragmentLayout& layout) {
  if (!layout.unavailable.empty()) return layout.unavailable;
  const KhrFragmentShape& s = layout.shape_16x8x16;
  if (!s.probed) return s.not_probed.empty() ? s.irregular : s.not_probed;
  if (!s.irregular.empty()) return s.irregular;
  if (s.matches_nv_kernel) return "";
  if (layout.lanes != 32 || s.a.components != 8 || s.b.components != 4 || s.accumulator.components != 4)
    return fmt::format("subgroups of {} with {}, {} and {} components per lane, where the matrix kernel writes 32 "
                       "lanes of 8, 4 and 4",
                       layout.lanes, s.a.components, s.b.components, s.accumulator.components);
  for (const KhrFragment* f : {&s.a, &s.b, &s.accumulator})
    for (uint32_t lane = 0; lane < 32; ++lane)
      for (uint32_t i = 0; i < f->components; ++i) {
        const uint32_t want = f == &s.a ? nv_fragment_code_a(lane, i) : nv_fragment_code_b(lane, i);
        if (f->code(lane, i) != want)
          return fmt::format("fragment {}: lane {} component {} holds element code {} (row * columns + column), the "
                             "matrix kernel writes {} there",
                             f->name, lane, i, f->code(lane, i), want);
      }
  return "";
}

const KhrFragmentLayout& khr_fragment_layout(Context& context) {
  auto& impl = context.impl();
  auto& state = impl.operator_states.get<KhrFragmentLayoutState>();
  std::lock_guard lock(state.mutex);
  if (state.layout) return *state.layout;
  auto layout = std::make_shared<KhrFragmentLayout>();
  layout->unavailable = khr_unavailable(impl, vk::shader_fragment_layout_16x8x16_khr());
  if (layout->unavailable.empty()) {
    uint32_t lanes_16x8x16 = 0, lanes_16x16x16 = 0;
    layout->shape_16x8x16 = probe_shape(context, vk::shader_fragment_layout_16x8x16_khr(), 16, 8, 16, lanes_16x8x16);
    layout->shape_16x16x16 =
        probe_shape(context, vk::shader_fragment_layout_16x16x16_khr(), 16, 16, 16, lanes_16x16x16);
    layout->lanes = std::max(lanes_16x8x16, lanes_16x16x16);
  }
  state.layout = layout;
  return *layout;
}

std::vector<float> khr_matrix_product_16x16x16(Context& context, std::span<const uint16_t> a,
                                               std::span<const uint16_t> b, std::span<const float> c) {
  constexpr size_t kElements = 16 * 16;
  if (a.size() != kElements || b.size() != kElements || c.size() != kElements)
    throw Error(ErrorCode::invalid_argument,
                fmt::format("a, b, c: {}, {} and {} elements, not 256 each", a.size(), b.size(), c.size()));
  auto& impl = context.impl();
  const auto& shader = vk::shader_matrix_product_16x16x16_khr();
  if (std::string why = khr_unavailable(impl, shader); !why.empty()) throw Error(ErrorCode::unsupported, why);
  if (!impl.capabilities.lists_f16_product(16, 16, 16))
    throw Error(ErrorCode::unsupported,
                fmt::format("device {} does not list the 16x16x16 product with f16 A and B and f32 accumulators",
                            impl.info.name));
  DeviceBuffer in_a = context.create_buffer(kElements * 2, MemoryKind::host_visible);
  DeviceBuffer in_b = context.create_buffer(kElements * 2, MemoryKind::host_visible);
  DeviceBuffer in_c = context.create_buffer(kElements * 4, MemoryKind::host_visible);
  DeviceBuffer out = context.create_buffer(kElements * 4, MemoryKind::host_visible);
  std::memcpy(in_a.mapped(), a.data(), kElements * 2);
  std::memcpy(in_b.mapped(), b.data(), kElements * 2);
  std::memcpy(in_c.mapped(), c.data(), kElements * 4);
  const std::array<uint32_t, 1> spec{impl.max_subgroup_size};
  const auto& pipeline = impl.pipeline(shader, spec, 4, 0);
  const std::array<BoundView, 4> bound{impl.bind_view(in_a.view()), impl.bind_view(in_b.view()),
                                       impl.bind_view(in_c.view()), impl.bind_view(out.view())};
  run_for_host(context, [&](VkCommandBuffer cmd) { impl.dispatch(cmd, pipeline, bound, nullptr, 1, 1, 1); });
  std::vector<float> d(kElements);
  std::memcpy(d.data(), out.mapped(), kElements * 4);
  return d;
}

}  // namespace vkpaged::detail
